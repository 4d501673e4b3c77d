"""egg-query: find the prior turns relevant to a request, across `.egg` stores.

Candidates are recorded turns (see records.py). egg-query ranks them lexically itself
(BM25, with a floor on how much of the query a turn must cover) and asks a search
provider for the semantic side; hybrid fuses the two by reciprocal rank fusion, and
the best matches of identifier-like query terms are pinned first. A provider that
fails is ignored for that query: the answer is then lexical. Each query line gets
exactly one hits line, in input order.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import IO, Callable, Iterable

from . import stage
from .rank import BM25, anchor_ranking
from .records import TurnView, searchable_text, turn_views
from .store import EggError, Store
from .terms import terms

PROG = "egg-query"
DEFAULT_TOP_K = 8
DEFAULT_MIN_COVERAGE = 0.2
DEFAULT_ANCHOR_K = 2
MODES = ("lexical", "semantic", "hybrid")

# The semantic side: (query, candidates [{"id","text"}], how many) -> indices best first,
# or None when the provider failed (the query then goes on lexically).
Semantic = Callable[[str, list[dict], int], "list[int] | None"]


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


class Searcher:
    """An index over the turns of some stores; rebuilt only when a store grew."""

    def __init__(self, stores: Iterable[Store], mode: str = "lexical", semantic: Semantic | None = None, anchor_k: int = DEFAULT_ANCHOR_K):
        if mode not in MODES:
            raise ValueError("mode must be one of %s" % ", ".join(MODES))
        self.stores = list(stores)
        self.mode = mode
        self.semantic = semantic
        self.anchor_k = anchor_k
        self._stamp: tuple | None = None
        self.views: list[TurnView] = []
        self.by_id: dict[str, TurnView] = {}
        self.candidates: list[dict] = []
        self._bm25: BM25 | None = None

    def _refresh(self) -> None:
        for s in self.stores:
            s.refresh()
        stamp = tuple((s.path, len(s.graph.commits)) for s in self.stores)
        if stamp == self._stamp:
            return
        views: dict[str, TurnView] = {}
        for s in self.stores:
            for v in turn_views(s.graph):
                views.setdefault(v.id, v)
        self.views = list(views.values())
        self.by_id = views
        self.candidates = [{"id": v.id, "text": searchable_text(v)} for v in self.views]
        self._bm25 = BM25([terms(c["text"]) for c in self.candidates])
        self._stamp = stamp

    def search(self, text: str, top_k: int = DEFAULT_TOP_K, min_coverage: float = DEFAULT_MIN_COVERAGE) -> list[Hit]:
        from .index import fuse

        self._refresh()
        assert self._bm25 is not None
        q = terms(text)
        n = len(self.views)
        lexical = [(s.index, s.score) for s in self._bm25.search(q, n, min_coverage)]
        anchors = [(s.index, s.score) for s in anchor_ranking(self._bm25, q, self.anchor_k)]
        semantic: list[tuple[int, float]] = []
        mode = self.mode
        if mode != "lexical":
            related = self.semantic(text, self.candidates, semantic_depth(top_k)) if (self.semantic and n) else None
            if related is None:
                mode = "lexical"  # no provider, or it failed: answer lexically
            else:
                seen: set[int] = set()
                for i in related:
                    if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n and i not in seen:
                        seen.add(i)
                        semantic.append((i, 1.0 / (len(semantic) + 1)))
        selected, hybrid = fuse(mode, top_k, self.anchor_k, lexical, semantic, anchors, n)
        score = dict({"lexical": lexical, "semantic": semantic, "hybrid": hybrid}[mode])
        hits = []
        for rank, i in enumerate(selected, 1):
            v = self.views[i]
            hits.append(Hit(v.id, v.key, rank, round(score.get(i, 0.0), 6), v.session, v.turn, v.store))
        return hits


def query_text(obj: object) -> str | None:
    if isinstance(obj, dict):
        q = obj.get("query")
        if isinstance(q, dict) and isinstance(q.get("text"), str):
            return q["text"]
        if isinstance(q, str):
            return q
    return None


def run(searcher: Searcher, lines: IO[str], out: IO[str], top_k: int, min_coverage: float, name: str = "<stdin>") -> int:
    bad = 0
    for n, obj in stage.read_ndjson(lines, name):
        text = None if isinstance(obj, stage.InputError) else query_text(obj)
        if text is None:
            msg = str(obj) if isinstance(obj, stage.InputError) else '%s:%d: expected {"query":{"text":...}}' % (name, n)
            stage.warn(PROG, msg)
            stage.write({"hits": [], "error": msg}, out)
            bad += 1
            continue
        hits = searcher.search(text, top_k, min_coverage)
        stage.write({"query": obj["query"], "hits": [asdict(h) for h in hits]}, out)
    return bad


def main(argv: list[str]) -> int:
    p = stage.parser(
        PROG,
        "Rank the recorded turns of .egg stores against each query line on stdin.",
        epilog="""input line:   {"query":{"text":"..."}}
output line:  {"query":{...},"hits":[{"id","key","rank","score","session","turn","store"}]}
A malformed line is answered with {"hits":[],"error":...} so replies stay in step.

example:
  echo '{"query":{"text":"where is late_fee computed"}}' | egg-query --egg .eggs/work.egg | egg-extract --egg .eggs/work.egg

exit status: 0 ok; 1 some lines were malformed; 2 usage or store error.""",
    )
    p.add_argument("--egg", action="append", required=True, metavar="PATH", help="a .egg store to search (repeatable)")
    p.add_argument("--mode", choices=["lexical"], default="lexical", help="ranking mode (only lexical in this version)")
    p.add_argument("--top-k", type=stage.positive_int, default=DEFAULT_TOP_K, help="most hits per query (default %(default)s)")
    p.add_argument("--min-coverage", type=stage.fraction, default=DEFAULT_MIN_COVERAGE,
                   help="least idf-weighted share of the query a hit must hold (default %(default)s)")
    a = p.parse_args(argv)
    try:
        searcher = Searcher(Store.open(path) for path in a.egg)
        bad = run(searcher, sys.stdin, sys.stdout, a.top_k, a.min_coverage)
    except (EggError, OSError) as e:
        stage.warn(PROG, str(e))
        return 2
    return 1 if bad else 0
