"""egg-query: find the prior turns relevant to a request, across `.egg` stores.

Candidates are recorded turns (see records.py); ranking is lexical BM25 in this
version. Each query line gets exactly one hits line, in input order.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import IO, Iterable

from . import stage
from .rank import BM25
from .records import TurnView, searchable_text, turn_views
from .store import EggError, Store
from .terms import terms

PROG = "egg-query"
DEFAULT_TOP_K = 8
DEFAULT_MIN_COVERAGE = 0.2


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

    def __init__(self, stores: Iterable[Store]):
        self.stores = list(stores)
        self._stamp: tuple | None = None
        self.views: list[TurnView] = []
        self.by_id: dict[str, TurnView] = {}
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
        self._bm25 = BM25([terms(searchable_text(v)) for v in self.views])
        self._stamp = stamp

    def search(self, text: str, top_k: int = DEFAULT_TOP_K, min_coverage: float = DEFAULT_MIN_COVERAGE) -> list[Hit]:
        self._refresh()
        assert self._bm25 is not None
        ranked = self._bm25.search(terms(text), top_k, min_coverage)
        hits = []
        for rank, sc in enumerate(ranked, 1):
            v = self.views[sc.index]
            hits.append(Hit(v.id, v.key, rank, round(sc.score, 6), v.session, v.turn, v.store))
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
