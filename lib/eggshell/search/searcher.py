"""The Searcher: the prior turns relevant to a request, across `.egg` stores.

Candidates are recorded turns (graph/records.py). It ranks them lexically itself (BM25 of
the whole text and of its best line, with a floor on how much of the query a turn must
cover) and asks a semantic side (search/matcher.py) for the rest; hybrid fuses the two by
`rank.fuse`, the rule the local provider applies too. A semantic side that fails is
ignored for that query: the answer is then lexical. egg-query and the hook both use it.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from typing import Callable, Iterable, NamedTuple

from eggshell.config import DEFAULT_MIN_COVERAGE
from eggshell.graph.records import LiveViews, TurnView, searchable_text, tool_inputs
from eggshell.graph.store import Store
from eggshell.graph.tombstones import Unchanged
from eggshell.log import warn
from eggshell.search.rank import (B, BM25, DEFAULT_ANCHOR_K, DEFAULT_TOP_K, K1, MODES, LEXICAL_DEPTH, PASSAGE_DEPTH, Coded, Passages, Settings, Vocabulary,
                                  anchor_ranking, lexical_index, line_terms)
from eggshell.search.terms import terms

# The semantic side: (query, candidates [{"id","text"}], how many) -> SemanticList, or
# Dropped when the provider failed (the query then goes on lexically, and says why).
Semantic = Callable[[str, list[dict], int], "SemanticList | Dropped | None"]


DROPPED_NOTE = "this query is answered lexically"  # ends each drop's line in hook.log: `egg doctor` counts them


class Dropped(NamedTuple):
    """The semantic side failed for this query: why, in words (a deadline, a crash, a reply
    that is not the protocol's). Never silent: egg-query's message and the trace carry it."""

    why: str




class SemanticList(NamedTuple):
    """A semantic ranking: (index, score) best first, and the least score that counts.

    `cosine`: the scores are the built-in model's cosines, so a handoff can hold them to its
    own floor (handoff.nominate); another provider's scale is its own."""

    ranked: list[tuple[int, float]]
    floor: float
    cosine: bool = False
    calibration: object = None  # background.Calibration of the query (cosine scores only)
    opening: dict[int, float] | None = None  # the built-in model's cosine of each ranked record's opening windows


def semantic_depth(top_k: int) -> int:
    """How deep a semantic list to fuse: deeper than the answer, so fusion has room."""
    return max(4 * top_k, 20)


@dataclass(frozen=True, slots=True)
class Hit:
    id: str
    key: str
    rank: int
    score: float
    session: str
    turn: str
    store: str
    # The built-in model's cosine for this turn when it reported one (for the turns of its
    # depth, below the threshold too), else None (lexical mode, or a provider of the user's
    # own): fused scores are normalized per query, so only this, judged against the query's
    # calibration, says how related the turn is (reuse/relevance.py).
    semantic: float | None = None
    # Why the turn is a candidate: "ranked" (fusion selected it: a hit), or, in a message's
    # "candidates" (turns the relevance decision weighs that are not in the ranking), "nearest"
    # (the model put it among the nearest though fusion left it out: a short chat question
    # scores under the threshold against its own topic) or "latest" (the last turn these
    # stores recorded: a new chat often goes on from it). Their rank is 0.
    via: str = "ranked"
    latest: bool = False  # the last turn these stores recorded (Searcher.latest), however it came


class Searcher:
    """An index over the turns of some stores; rebuilt only when a store grew."""

    # Entered around the long parts that read only the stores' graphs and this searcher (the
    # rebuild, the ranking): the warm manager lets its tool worker answer meanwhile (manager.py).
    unlocked = contextlib.nullcontext
    log: Callable[[str], None] = staticmethod(lambda msg: None)  # the warm manager's log: where a full rebuild is noted

    def __init__(self, stores: Iterable[Store], mode: str = "lexical", semantic: Semantic | None = None,
                 anchor_k: int = DEFAULT_ANCHOR_K, trace: str | None = None, model: str | None = None,
                 k1: float = K1, b: float = B, *, settings: Settings | None = None):
        """`settings` (rank.Settings, e.g. Settings.from_config) says how to rank; without it,
        the built-in rule with the mode, anchors, model and BM25 parameters given."""
        settings = settings or Settings(mode=mode, anchor_k=anchor_k, model=model, k1=k1, b=b)
        if settings.mode not in MODES:
            raise ValueError("mode must be one of %s" % ", ".join(MODES))
        self.stores = list(stores)
        self.settings = settings
        self.mode, self.anchor_k, self.model, self.k1, self.b = settings.mode, settings.anchor_k, settings.model, settings.k1, settings.b
        self.semantic = semantic
        self.dropped: str | None = None  # why the last search answered lexically though it asked for more
        self.calibration = None  # background.Calibration of the last query (the built-in model only)
        self.others: list[Hit] = []  # the last query's candidates that are not in its ranking (Hit.via)
        self.trace = trace  # a sidecar file: one line per query with every ranking and timing
        self._stamp: tuple | None = None
        self.views: list[TurnView] = []
        self.by_id: dict[str, TurnView] = {}
        self.candidates: list[dict] = []
        self._bm25: BM25 | None = None
        self._work: BM25 | None = None  # BM25 of each turn's tool inputs (records.tool_inputs), for long queries
        self._passages: Passages | None = None
        self._terms: dict[str, Coded] = {}  # text -> its line terms (in the Passages' vocabulary), for the next rebuild
        self._fixed: list[TurnView] | None = None
        self._live: list[LiveViews] = []  # each store's turns as last read (records.LiveViews)
        self._unchanged = Unchanged([s.path for s in self.stores])  # marked before each read of the stores
        self._index: dict[str, int] = {}  # turn id -> its document in the indexes
        self._latest: tuple | None = None  # (stamp, index of the latest turn)

    @classmethod
    def over(cls, views: Iterable[TurnView], settings: Settings, semantic: Semantic | None = None) -> "Searcher":
        """A searcher whose candidates are these turns, not a store's: the evaluation ranks its
        sets through here, so what it measures is the ranking the hook and egg-query run."""
        s = cls([], settings=settings, semantic=semantic)
        s._fixed = list(views)
        return s

    @property
    def turns(self) -> int:
        """How many turns the search weighs (relevance.lift): its documents, removed ones included."""
        return len(self.views)

    def refresh(self) -> None:
        """Bring the indexes current with the stores (what a search does first)."""
        self._refresh()

    def _refresh(self) -> None:
        if self._fixed is not None:
            if self._stamp is None:
                self._rebuild(("fixed",))
            return
        self._unchanged.mark()  # before reading: a tombstone appended after it closes write_gate
        for s in self.stores:
            s.refresh()
        stamp = tuple(s.stamp() for s in self.stores)  # a replaced or deleted file, or a tombstone, changes it
        if stamp == self._stamp:
            return
        with self.unlocked():
            if not self._grow(stamp):
                import time

                started, again = time.monotonic(), self._stamp is not None
                self._rebuild(stamp)
                took = time.monotonic() - started
                if again and took >= 1.0:  # not a first build: a replaced file, a tombstone, or a cause to remove
                    self.log("search indexes rebuilt over %d turns in %.1f s" % (len(self.views), took))

    def _grow(self, stamp: tuple) -> bool:
        """Bring the indexes current from the turns committed since, without rebuilding them; False
        when only a rebuild can (the first time, a replaced file, a tombstone, a duplicate across stores).

        A turn committed while open and then sealed (or settled again, longer) changes its view:
        the old document leaves the indexes and the new one is added at the end, so BM25's
        statistics are those of the live turns, as a rebuild would make them. At 10,000 turns a
        rebuild took 10 to 18 s of the manager's worker for every such turn.
        """
        if self._bm25 is None or self._work is None or self._passages is None or len(self._live) != len(self.stores):
            return False
        if any(lv.stale(s.graph) for lv, s in zip(self._live, self.stores)):
            return False
        changes = [c for lv in self._live for c in lv.update()]
        by_id, index = dict(self.by_id), dict(self._index)
        gone: list[tuple[int, TurnView]] = []
        added: list[TurnView] = []
        for view, prior in changes:
            if prior is not None:
                if by_id.get(prior.id) is not prior:
                    return False  # held through another store: only a rebuild knows which one serves it now
                gone.append((index.pop(prior.id), prior))
                del by_id[prior.id]
            if view.id in by_id:
                return False  # the same turn in two stores: a rebuild keeps the first store's
            by_id[view.id] = view
            added.append(view)
        items = [{"id": v.id, "text": searchable_text(v)} for v in added]
        passages, vocab = self._passages, self._passages.vocab
        per_doc = [self._terms.get(c["text"]) or vocab.code(line_terms(c["text"], terms)) for c in items]
        candidates = list(self.candidates)
        for i, prior in gone:
            self._terms.pop(candidates[i]["text"], None)
            self._bm25.remove(i, vocab.flat(passages.remove(i)))
            self._work.remove(i, terms(tool_inputs(prior)))
            candidates[i] = {"id": candidates[i]["id"], "text": ""}  # a blank text: the semantic side scores it never
        self._terms.update((c["text"], d) for c, d in zip(items, per_doc))
        self._bm25.extend([vocab.flat(d) for d in per_doc])
        self._work.extend([terms(tool_inputs(v)) for v in added])
        passages.extend([c["text"] for c in items], per_doc)
        base = len(self.views)
        index.update((v.id, base + k) for k, v in enumerate(added))
        self.views = self.views + added
        self.by_id, self._index = by_id, index
        self.candidates = candidates + items
        self._stamp = stamp
        return True

    def _rebuild(self, stamp: tuple) -> None:
        views: dict[str, TurnView] = {}
        if self._fixed is not None:
            self._live = []
            source = self._fixed
        else:
            self._live = [LiveViews(s.graph) for s in self.stores]
            source = (v for lv in self._live for v in lv.current())
        for v in source:
            views.setdefault(v.id, v)
        self.views = list(views.values())
        self.by_id = views
        self._index = {v.id: i for i, v in enumerate(self.views)}
        self.candidates = [{"id": v.id, "text": searchable_text(v)} for v in self.views]
        texts = [c["text"] for c in self.candidates]
        # Tokenizing is half of a rebuild: a long-lived searcher keeps each text's terms,
        # so a store that grew by one turn only tokenizes that turn.
        # The vocabulary goes on from the last index: the kept texts' terms are coded in it.
        vocab = self._passages.vocab if self._passages is not None else Vocabulary()
        old, self._terms = self._terms, {}
        per_doc = []
        for t in texts:
            got = old.get(t)
            if got is None:
                got = vocab.code(line_terms(t, terms))
            self._terms[t] = got
            per_doc.append(got)
        self._bm25, self._passages = lexical_index(texts, terms, self.k1, self.b, per_doc, vocab)
        self._work = BM25([terms(tool_inputs(v)) for v in self.views], self.k1, self.b)
        self._stamp = stamp

    def write_gate(self) -> Callable[[], bool] | None:
        """Open while the candidates as last read are all live: no store gained a tombstone since
        (graph/tombstones.Unchanged); what embeds them passes it on, so a turn forgotten meanwhile is
        not cached. None for fixed views (the evaluation): nothing to forget there."""
        return None if self._fixed is not None else self._unchanged.open

    def search(self, text: str, top_k: int = DEFAULT_TOP_K, min_coverage: float = DEFAULT_MIN_COVERAGE) -> list[Hit]:
        import time

        t0 = time.perf_counter()
        self._refresh()
        provider = getattr(self.semantic, "provider", None)  # the built-in model in this process
        if provider is not None:
            provider.write_gate = self.write_gate()
        assert self._bm25 is not None
        t1 = time.perf_counter()
        with self.unlocked():
            return self._rank(text, top_k, min_coverage, t0, t1)

    def _rank(self, text: str, top_k: int, min_coverage: float, t0: float, t1: float) -> list[Hit]:
        import time

        q = terms(text)
        n = len(self.views)
        lexical = [(s.index, s.score) for s in self._bm25.search(q, LEXICAL_DEPTH, min_coverage)]
        passages = self._passages.best(q, [i for i, _ in lexical[:PASSAGE_DEPTH]])
        anchors = [(s.index, s.score) for s in anchor_ranking(self._bm25, q, self.anchor_k)]
        long = self.settings.weights_for(len(q))[3] > 0  # a pasted issue or log: what each turn ran counts too
        work = [(s.index, s.score) for s in self._work.search(q, LEXICAL_DEPTH)] if (long and self._work is not None) else []
        t2 = time.perf_counter()
        semantic: list[tuple[int, float]] = []
        opening: list[tuple[int, float]] = []
        floor = 0.0
        cosines: dict[int, float] = {}
        mode = self.mode
        self.dropped = None
        self.calibration = None
        self.others = []
        if mode != "lexical":
            got = self.semantic(text, self.candidates, semantic_depth(top_k)) if (self.semantic and n) else None
            if got is None or isinstance(got, Dropped):
                mode = "lexical"  # no provider, or it failed: answer lexically
                if self.semantic and n:
                    self.dropped = got.why if isinstance(got, Dropped) else "the semantic side gave no answer"
            else:
                floor = got.floor
                seen: set[int] = set()
                for i, v in got.ranked:
                    if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n and i not in seen and i not in self._bm25.removed:
                        seen.add(i)
                        semantic.append((i, float(v)))
                if got.cosine:
                    cosines = dict(semantic)  # every cosine reported; fusion counts those at the floor or above
                    semantic = [(i, v) for i, v in semantic if v >= floor]
                    self.calibration = got.calibration
                    if got.opening:
                        opening = [(i, float(got.opening[i])) for i, _ in semantic if i in got.opening]
        t3 = time.perf_counter()
        selected, fused = self.settings.fuse(mode, top_k, lexical, semantic, anchors, n, passages, floor=floor, work=work, opening=opening,
                                             query_terms=len(q))
        score = dict(fused)
        hits = []
        latest = self.latest()
        for rank, i in enumerate(selected, 1):
            v = self.views[i]
            sem = cosines.get(i)
            hits.append(Hit(v.id, v.key, rank, round(score.get(i, 0.0), 6), v.session, v.turn, v.store,
                            None if sem is None else round(sem, 6), latest=i == latest))
        self.others = []
        for i, via in self._candidates(selected, cosines, latest):
            v = self.views[i]
            sem = cosines.get(i)
            self.others.append(Hit(v.id, v.key, 0, 0.0, v.session, v.turn, v.store, None if sem is None else round(sem, 6), via, i == latest))
        t4 = time.perf_counter()
        if self.trace:
            ms = lambda a, b: round((b - a) * 1000, 3)  # noqa: E731
            from eggshell.search.local import append_trace, trace_rankings

            append_trace(self.trace, {
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "mode": self.mode, "answered_as": mode, "semantic_dropped": self.dropped, "model": self.model,
                **trace_rankings(lambda i: self.views[i].id, n, lexical=lexical, passages=passages, anchors=anchors,
                                 work=work, semantic=semantic, fused=fused),
                "selected": selected,
                "timings_ms": {"load": ms(t0, t1), "lexical": ms(t1, t2), "semantic": ms(t2, t3), "fuse": ms(t3, t4), "total": ms(t0, t4)},
            }, lambda m: warn("egg-query", m))
        return hits


    def _candidates(self, selected: list[int], cosines: dict[int, float], latest: int | None) -> list[tuple[int, str]]:
        """Turns fusion did not select that the relevance decision should still weigh: the
        NEAREST nearest by the model's cosine, and the latest turn recorded (by time, then by
        its place in the stores), each once."""
        out: list[tuple[int, str]] = []
        taken = set(selected)
        for i, _ in sorted(cosines.items(), key=lambda x: (-x[1], x[0])):
            if len(out) >= NEAREST:
                break
            if i not in taken and i not in self._bm25.removed:
                out.append((i, "nearest"))
                taken.add(i)
        if latest is not None and latest not in taken:
            out.append((latest, "latest"))
        return out

    def latest(self) -> int | None:
        """The index of the last turn these stores recorded: the latest time, then the latest
        place (the last store read, the last line): turns saved in one second tie on time."""
        if self._latest is not None and self._latest[0] == self._stamp:
            return self._latest[1]  # once per state of the stores: a scan of 100,000 views is 30 ms
        best, key = None, None
        removed = self._bm25.removed if self._bm25 is not None else set()
        for i, v in enumerate(self.views):
            if i in removed:
                continue
            k = (v.time or "", i)
            if key is None or k > key:
                best, key = i, k
        self._latest = (self._stamp, best)
        return best


NEAREST = 2  # turns nearest by cosine that fusion left out, weighed by the relevance decision


def query_text(obj: object) -> str | None:
    if isinstance(obj, dict):
        q = obj.get("query")
        if isinstance(q, dict) and isinstance(q.get("text"), str):
            return q["text"]
        if isinstance(q, str):
            return q
    return None


def hits_message(searcher: Searcher, message: object, top_k: int, min_coverage: float) -> dict | None:
    """egg-query's step on one message, which the prompt hook composes too: the query and its
    hits, each a plain dict as the pipe carries it; None when the message asks nothing."""
    text = query_text(message)
    if text is None:
        return None
    hits = searcher.search(text, top_k, min_coverage)
    out = {"query": message["query"], "hits": [asdict(h) for h in hits], "turns": searcher.turns}
    if searcher.others:  # turns outside the ranking the relevance decision weighs too; of all, it hands over top_k at most
        out["candidates"] = [asdict(h) for h in searcher.others]
        out["top_k"] = top_k
    if searcher.calibration is not None:  # what the model gives this query against unrelated turns
        out["calibration"] = searcher.calibration.as_list()
    if searcher.dropped is not None:  # hybrid asked, lexical answered: the message says so and why
        out["semantic_dropped"] = searcher.dropped
    return out
