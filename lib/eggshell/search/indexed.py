"""Lexical search from the stores' on-disk indexes (search/turnindex.py), reading only what it hands over.

What a cold hook uses on a store too big to read within its budget (issue 30): the same lexical
ranking as the Searcher's (whole-text BM25 with the coverage gate, the best line, anchors, the
tool inputs of long queries, fused by rank.Settings.fuse), computed from statistics kept on disk
for the stores of one read set together, as one index over all of them would hold. Only the
turns it scores by their lines or hands over are read from the stores (through the commit
index): a few dozen, whatever the stores' size.

It answers as search.searcher.Searcher does for the prompt path (`search`, `turns`, `by_id`,
`others`), and `graphs` gives the parts of the stores its turns are made of, from which the
reuse engine builds its workspace (engine.workspace).
"""

from __future__ import annotations

import time
from typing import Callable

from eggshell.graph.records import TurnView, searchable_text
from eggshell.search.postings import DiskBM25
from eggshell.search.rank import LEXICAL_DEPTH, PASSAGE_DEPTH, Settings, anchor_ranking, best_lines, line_terms, query_weights, score_query
from eggshell.search.searcher import Hit
from eggshell.search.terms import terms
from eggshell.search.turnindex import TurnIndex


class Together:
    """Several DiskBM25 indexes ranked as one: document i of part p is number base[p] + i, and the
    statistics (documents, lengths, document frequencies) are the sums, so scores are those of
    one index over every part's documents."""

    def __init__(self, parts: list[DiskBM25]):
        import numpy as np

        self.parts = parts
        lens = [p.lens() for p in parts]
        self.base = [0]
        for x in lens[:-1]:
            self.base.append(self.base[-1] + len(x))
        self.n = sum(p.n for p in parts)
        self.size = sum(len(x) for x in lens)
        total = float(sum(int(x.sum()) for x in lens))
        avgdl = total / self.n if self.n else 0.0
        k1, b = parts[0].k1 if parts else 0.0, parts[0].b if parts else 0.0
        self.k1 = k1
        all_lens = np.concatenate(lens).astype(np.float64) if lens else np.zeros(0)
        self.norm = k1 * (1 - b + b * all_lens / (avgdl or 1.0))

    def df(self, term: str) -> int:
        return sum(p.df(term) for p in self.parts)

    def pairs(self, term: str):
        import numpy as np

        out = []
        for base, p in zip(self.base, self.parts):
            a = p.pairs(term)
            if len(a):
                a = a.copy()
                a[0::2] += base
                out.append(a)
        return np.concatenate(out) if out else np.zeros(0, dtype=np.uint32)

    def search(self, query: list[str], top_k: int = 10, min_coverage: float = 0.0):
        if not self.n:
            return []
        return score_query(query, top_k, min_coverage, self.n, self.df, self.pairs, self.norm, self.k1)


class IndexedSearcher:
    """A Searcher for the prompt path over (store, TurnIndex) pairs brought up to date by the caller."""

    def __init__(self, pairs: list[tuple[object, TurnIndex]], settings: Settings, trace: str | None = None,
                 log: Callable[[str], None] = lambda m: None):
        self.pairs = pairs
        self.settings = settings
        self.mode = "lexical"
        self.trace = trace
        self.log = log
        self.dropped: str | None = None
        self.calibration = None
        self.others: list[Hit] = []
        self.by_id: dict[str, TurnView] = {}
        self._loaded: dict[int, tuple[TurnView, object] | None] = {}  # number -> (view, its Graph)
        self._kept: list[int] = []  # the numbers the last search handed over or weighed
        self.text = Together([ix.text for _, ix in pairs])
        self.work = Together([ix.work for _, ix in pairs])
        self.base = self.text.base

    @property
    def turns(self) -> int:
        """How many turns the search weighs (relevance.lift): the live ones, as a Searcher built now counts."""
        return self.text.n

    def refresh(self) -> None:
        """Nothing to do: the caller brought the indexes up to date before making this."""

    def _where(self, i: int) -> tuple[int, int]:
        p = max(k for k, b in enumerate(self.base) if b <= i)
        return p, i - self.base[p]

    def view(self, i: int) -> TurnView | None:
        got = self._loaded.get(i, False)
        if got is False:
            p, d = self._where(i)
            store, ix = self.pairs[p]
            got = self._loaded[i] = ix.view(store, d)
        return None if got is None else got[0]

    def graphs(self) -> list:
        """The parts of the stores the turns handed over (or weighed) are made of: what the
        reuse engine builds its workspace from."""
        return [self._loaded[i][1] for i in self._kept if self._loaded.get(i)]

    def latest(self) -> int | None:
        best = None
        for k, (_, ix) in enumerate(self.pairs):
            got = ix.latest()
            if got is not None:
                key = (got[0], self.base[k] + got[1])
                if best is None or key > best:
                    best = key
        return None if best is None else best[1]

    def _passages(self, q: list[str], docs: list[int]) -> list[tuple[int, float]]:
        ixs = [ix for _, ix in self.pairs]
        stats = [ix.line_stats() for ix in ixs]
        n, total = sum(s[0] for s in stats), sum(s[1] for s in stats)
        weights = query_weights(q)
        ldf = {t: sum(ix.ldf(t) for ix in ixs) for t in weights}
        weighted = [(t, w) for t, w in weights.items() if ldf[t]]
        if not weighted:
            return []
        lines = []
        for i in docs:
            v = self.view(i)
            if v is not None:
                lines.append((i, line_terms(searchable_text(v), terms)))
        k1, b = self.text.k1, self.pairs[0][1].text.b
        return best_lines(weighted, ldf.__getitem__, n, (total / n) if n else 0.0, lines, k1, b)

    def search(self, text: str, top_k: int = 10, min_coverage: float = 0.0) -> list[Hit]:
        t0 = time.perf_counter()
        q = terms(text)
        lexical = [(s.index, s.score) for s in self.text.search(q, LEXICAL_DEPTH, min_coverage)]
        passages = self._passages(q, [i for i, _ in lexical[:PASSAGE_DEPTH]])
        anchors = [(s.index, s.score) for s in anchor_ranking(self.text, q, self.settings.anchor_k)]
        long = self.settings.weights_for(len(q))[3] > 0
        work = [(s.index, s.score) for s in self.work.search(q, LEXICAL_DEPTH)] if long else []
        t1 = time.perf_counter()
        selected, fused = self.settings.fuse("lexical", top_k, lexical, [], anchors, self.text.size, passages, floor=0.0, work=work,
                                             opening=[], query_terms=len(q))
        score = dict(fused)
        latest = self.latest()
        hits, self.others, self._kept = [], [], []
        for rank, i in enumerate(selected, 1):
            v = self.view(i)
            if v is None:
                continue
            self._kept.append(i)
            self.by_id[v.id] = v
            hits.append(Hit(v.id, v.key, rank, round(score.get(i, 0.0), 6), v.session, v.turn, v.store, None, latest=i == latest))
        if latest is not None and latest not in selected:
            v = self.view(latest)
            if v is not None:
                self._kept.append(latest)
                self.by_id[v.id] = v
                self.others.append(Hit(v.id, v.key, 0, 0.0, v.session, v.turn, v.store, None, "latest", True))
        t2 = time.perf_counter()
        if self.trace:
            from eggshell.log import warn
            from eggshell.search.local import append_trace, trace_rankings

            ms = lambda a, b: round((b - a) * 1000, 3)  # noqa: E731
            ids = {i: v[0].id for i, v in self._loaded.items() if v}
            append_trace(self.trace, {
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "mode": self.settings.mode, "answered_as": "lexical", "source": "index",
                "semantic_dropped": None if self.settings.mode == "lexical" else "answered from the on-disk index, lexically",
                "model": self.settings.model,
                **trace_rankings(lambda i: ids.get(i, "#%d" % i), self.text.size, lexical=lexical, passages=passages, anchors=anchors,
                                 work=work, fused=fused),
                "selected": selected,
                "timings_ms": {"rank": ms(t0, t1), "read": ms(t1, t2), "total": ms(t0, t2)},
            }, lambda m: warn("egg-hook", m))
        return hits
