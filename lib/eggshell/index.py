"""egg-index: the search provider, speaking the NDJSON provider protocol.

    {"index":[{"id":...,"text":...}]}                  queued; never answered, not even on error
    {"query":{"id":...,"text":...},"candidates":[...]}  answered by exactly one {"related":[i,...]}

`related` holds indices into `candidates`: unique, in range, at most --top-k, best first.
Any error in a query line is answered with {"related":[]} and explained on stderr, so a
caller reading one reply per query never falls out of step. EOF ends it with exit 0.

This version ranks lexically (BM25 over the candidates' text). The Retrieval issue adds
the embedding model, semantic and hybrid modes, and the shared vector cache.
"""

from __future__ import annotations

import sys
from typing import IO, Any

from . import stage
from .rank import BM25
from .terms import terms

PROG = "egg-index"
DEFAULT_TOP_K = 8


def _items(x: Any) -> list[dict] | None:
    if not isinstance(x, list) or not all(isinstance(i, dict) and isinstance(i.get("text"), str) for i in x):
        return None
    return x


def related(query: str, candidates: list[dict], top_k: int = DEFAULT_TOP_K) -> list[int]:
    """Indices of the candidates that match the query, best first."""
    bm = BM25([terms(c["text"]) for c in candidates])
    return [s.index for s in bm.search(terms(query), top_k)]


def run(lines: IO[str], out: IO[str], top_k: int, name: str = "<stdin>") -> int:
    queued: list[dict] = []  # texts to embed; kept for the semantic modes
    for n, obj in stage.read_ndjson(lines, name):
        if isinstance(obj, dict) and "index" in obj and "query" not in obj:
            items = _items(obj["index"])
            if items is None:
                stage.warn(PROG, '%s:%d: "index" must be a list of {"id":...,"text":...}; ignored' % (name, n))
            else:
                queued.extend(items)
            continue
        q = obj.get("query") if isinstance(obj, dict) else None
        cands = _items(obj.get("candidates")) if isinstance(obj, dict) else None
        if isinstance(obj, stage.InputError) or not isinstance(q, dict) or not isinstance(q.get("text"), str) or cands is None:
            why = str(obj) if isinstance(obj, stage.InputError) else '%s:%d: expected {"query":{"text":...},"candidates":[{"id":...,"text":...},...]}' % (name, n)
            stage.warn(PROG, why + '; answered {"related":[]}')
            stage.write({"related": []}, out)
            continue
        stage.write({"related": related(q["text"], cands, top_k)}, out)
    return 0


def main(argv: list[str]) -> int:
    p = stage.parser(PROG, "Rank candidates against queries (the Eggshell search-provider protocol).", epilog=__doc__.split("\n\n")[1])
    p.add_argument("--mode", choices=["lexical"], default="lexical", help="ranking mode (only lexical in this version)")
    p.add_argument("--top-k", type=stage.positive_int, default=DEFAULT_TOP_K, help="most indices per reply (default %(default)s)")
    a = p.parse_args(argv)
    return run(sys.stdin, sys.stdout, a.top_k)
