"""The built-in search provider: BM25 and the embedding model's cosine, fused by `rank.fuse`.

egg-index serves it over the NDJSON provider protocol; the hook path and `egg index` use
it in-process. A provider of one's own replaces it by speaking the same protocol
(docs/architecture.md, the provider protocol).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from eggshell.log import warn
from eggshell.search.rank import BM25, LEXICAL_DEPTH, PASSAGE_DEPTH, Passages, Ranked, Settings, anchor_ranking, lexical_index
from eggshell.search.terms import terms


def _items(x: Any) -> list[dict] | None:
    if not isinstance(x, list) or not all(isinstance(i, dict) and isinstance(i.get("text"), str) for i in x):
        return None
    return x


class Provider:
    """The ranking behind egg-index, usable in-process (the hook path) or as a filter."""

    def __init__(self, settings: Settings, data_root: str | None = None, log: Callable[[str], None] | None = None):
        self.settings = settings
        self.data_root = data_root
        self.log = log or (lambda m: warn("egg-index", m))
        self._semantic = None
        self._bm25: BM25 | None = None
        self._passages: Passages | None = None
        self._bm25_texts: list[str] | None = None
        self.query_embed_limit: int | None = None  # None: semantic.QUERY_EMBED_LIMIT
        self.query_embed_first = None  # semantic.SemanticIndex.query_embed_first (a warm manager's just-saved turns)
        self.threads: int | None = None  # the model's threads (None: onnxruntime's default, every core)
        # Set by a searcher before it ranks (Searcher.search): candidates are cached only while it
        # is open, i.e. no store they came from gained a tombstone since (graph/tombstones.Unchanged).
        self.write_gate: Callable[[], bool] | None = None

    @property
    def uses_model(self) -> bool:
        return self.settings.mode != "lexical"

    def embedded(self, texts: list[str]) -> int | None:
        """How many of these texts are ranked by all their windows, as far as this provider has
        looked them up (None: it has not ranked with the model yet, and loads nothing to say)."""
        return None if self._semantic is None else self._semantic.complete(texts)

    def _index(self):
        if self._semantic is None:
            from eggshell.search.embed import Encoder
            from eggshell.search.semantic import SemanticIndex

            s = self.settings
            enc = Encoder(s.model, model_dir=s.model_dir, threads=self.threads) if s.model else Encoder(model_dir=s.model_dir, threads=self.threads)
            root = s.cache_dir or os.path.join(self.data_root or ".", "semantic", "vectors")
            self._semantic = SemanticIndex(enc, root, self.log)
            if self.query_embed_limit is not None:
                self._semantic.query_embed_limit = self.query_embed_limit
            self._semantic.query_embed_first = self.query_embed_first
        return self._semantic

    @property
    def last_embedded(self) -> int:
        """Windows the last `index` (or query) embedded."""
        return self._semantic.embedded if self._semantic is not None else 0

    @property
    def model_id(self) -> str | None:
        return self._semantic.encoder.model_id if self._semantic is not None else None

    def index(self, items: list[dict], progress=None) -> int:
        """Embed and cache the texts' windows now, so a later query only embeds itself.

        Items that name their store and turn (records.index_items) are embedded only while
        no tombstone hides them: checked first, and again right before each write
        (graph/tombstones.Gate), so a turn forgotten meanwhile leaves nothing in the cache."""
        if not self.uses_model or not items:
            return 0
        from eggshell.graph.tombstones import Gate, item_of

        named = [x for x in map(item_of, items) if x is not None]
        gate = Gate(named).open if named else None
        if gate is not None and not gate():
            return 0
        try:
            return len(self._index().ensure([i["text"] for i in items], progress, gate=gate))
        except Exception as e:
            self._failed("index", e)
            return 0

    @staticmethod
    def _calibration(idx):
        """What this prompt scores against the background turns (search/background.py): from the
        vectors shipped for the default model, else from those cached for this one; nothing is
        embedded here. None when no vectors are at hand."""
        from eggshell.search.background import calibrate, shipped_scores, texts

        qv = idx.query_vectors
        if qv is None:
            return None
        got = shipped_scores(idx.encoder.model_id, qv)
        if got is None:
            got = idx.cached_scores(qv, list(texts()))
        return calibrate(float(v) for v in got)

    def index_background(self, progress=None) -> int:
        """Embed the background turns (search/background.py) the cache lacks, for a model none are
        shipped for, so that its prompts are calibrated; how many there are (0: nothing to do)."""
        if not self.uses_model:
            return 0
        from eggshell.search.background import shipped, texts

        try:
            if shipped(self._index().encoder.model_id) is not None:
                return 0
            return len(self._index().ensure(list(texts()), progress))
        except Exception as e:
            self._failed("index", e)
            return 0

    def _failed(self, what: str, e: Exception) -> None:
        self.log("%s: the embedding model failed (%s: %s); answering lexically, the encoder restarts on the next request" % (what, type(e).__name__, e))
        self._semantic = None

    def rank(self, query: str, texts: list[str]) -> Ranked:
        s = self.settings
        t0 = time.perf_counter()
        if s.mode == "semantic" and s.anchor_k == 0:
            lexical, passages, anchors = [], [], []  # nothing lexical can change this answer: skip the work
        else:
            lexical, passages, anchors = self._lexical(query, texts)
        t1 = time.perf_counter()
        semantic: list[tuple[int, float]] = []
        opening: list[tuple[int, float]] = []
        error = None
        calibration = None
        if self.uses_model and texts:
            try:
                idx = self._index()
                sc, first = idx.window_scores(query, texts, self.write_gate)
                calibration = self._calibration(idx)
                semantic = best_first(sc, s.threshold)
            except Exception as e:
                error = "%s: %s" % (type(e).__name__, e)
                self._failed("query", e)
        t2 = time.perf_counter()
        mode = s.mode if error is None else "lexical"
        n_terms = len(terms(query)) if mode != "semantic" else 0  # the weights and the opening blend are fusion's alone
        if semantic and mode == "hybrid" and n_terms > s.long_query:  # fusion blends every record's opening in
            opening = [(j, float(first[j])) for j, _ in semantic]
        selected, fused = s.fuse(mode, s.top_k, lexical, semantic, anchors, len(texts), passages, opening=opening,
                                 query_terms=n_terms)
        if semantic and not opening:  # only the selected records' openings: a Searcher asking this one blends those
            opening = [(i, float(first[i])) for i in selected if first[i] > NO_OPENING]
        t3 = time.perf_counter()
        ms = lambda a, b: round((b - a) * 1000, 3)  # noqa: E731
        return Ranked(selected, lexical, passages, anchors, semantic, opening, fused, {"lexical": ms(t0, t1), "semantic": ms(t1, t2), "fuse": ms(t2, t3), "total": ms(t0, t3)},
                      error, calibration if error is None else None)

    def _lexical(self, query: str, texts: list[str]):
        """BM25, best-line and anchor rankings; the indexes are kept while the candidates stay the same (a warm provider)."""
        s = self.settings
        if self._bm25_texts != texts:
            self._bm25, self._passages = lexical_index(list(texts), terms, s.k1, s.b)
            self._bm25_texts = list(texts)
        q = terms(query)
        lex = [(x.index, x.score) for x in self._bm25.search(q, LEXICAL_DEPTH)]
        lines = self._passages.best(q, [i for i, _ in lex[:PASSAGE_DEPTH]])
        anc = [(x.index, x.score) for x in anchor_ranking(self._bm25, q, max(s.anchor_k, 0) and len(texts))]
        return lex, lines, anc

    def trace_record(self, r: Ranked, candidates: list[dict]) -> dict:
        return {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "mode": self.settings.mode,
            "model": self.model_id if self.uses_model else None,
            **trace_rankings(lambda i: candidates[i].get("id"), len(candidates), lexical=r.lexical, passages=r.passages,
                             anchors=r.anchors, semantic=r.semantic, fused=r.fused),
            "selected": r.selected,
            "timings_ms": r.timings_ms,
            "error": r.error,
        }


TRACE_DEPTH = 50  # entries of each ranking a trace line keeps: the top is what explains an answer


def trace_rankings(id_of: Callable[[int], object], count: int, **rankings: list[tuple[int, float]]) -> dict:
    """The trace's rankings, each cut to its first TRACE_DEPTH entries, and the ids of the candidates they name.

    A line listing every candidate grows with the store: at 100,000 turns it was megabytes
    per prompt, written on the hook's path. The top of each list is what a reader needs.
    """
    out: dict = {"candidate_count": count}
    named: dict[int, None] = {}
    for name, xs in rankings.items():
        out[name] = [[i, round(v, 6)] for i, v in xs[:TRACE_DEPTH]]
        named.update((i, None) for i, _ in xs[:TRACE_DEPTH])
    out["candidate_ids"] = {str(i): id_of(i) for i in sorted(named) if isinstance(i, int) and 0 <= i < count}
    return out


def append_trace(path: str, record: dict, log: Callable[[str], None]) -> None:
    """One line per query; best effort (a trace failure never fails the query)."""
    import ujson

    try:
        from eggshell.log import append_whole
        from eggshell.paths import private_dir

        private_dir(os.path.dirname(os.path.abspath(path)))
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            append_whole(fd, (ujson.dumps(record, ensure_ascii=False, escape_forward_slashes=False) + "\n").encode("utf-8"), path, sync=False)
        finally:
            os.close(fd)
    except OSError as e:
        log("cannot write the trace %s: %s" % (path, e))


NO_OPENING = float("-inf")  # a blank text's: it has no window


def best_first(scores, threshold: float) -> list[tuple[int, float]]:
    """(index, score) of the scores at or above threshold, best first, ties by index: with numpy,
    since the relevance decision has every candidate reported (100,000 at the largest store)."""
    import numpy as np

    idx = np.flatnonzero(scores >= threshold)
    vals = scores[idx]
    order = np.lexsort((idx, -vals))
    return list(zip(idx[order].tolist(), vals[order].astype(np.float64).tolist()))
