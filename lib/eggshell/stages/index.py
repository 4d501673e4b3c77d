"""egg-index: the search provider, speaking the NDJSON provider protocol.

    {"index":[{"id":...,"text":...}]}                  queued for embedding; never answered, not even on error
                                                       (items naming "store", "turn", "roots" are written only while
                                                       no tombstone hides them: graph/tombstones.Gate)
    {"query":{"id":...,"text":...},"candidates":[...]}  answered by exactly one {"related":[i,...]}

`related` holds indices into `candidates`: unique, in range, at most --top-k, best first.
Any error in a query line is answered with {"related":[]} and explained on stderr, so a
caller reading one reply per query never falls out of step. EOF ends it with exit 0.

Modes: lexical (BM25 of the whole text plus BM25 of its best line; never loads the model),
semantic (cosine of the best window, at or above --threshold), hybrid (the default): by
default a weighted sum of the normalized scores, 0.6 whole-text BM25 + 0.1 best line +
0.3 cosine; `--fusion rrf` gives reciprocal rank fusion (k 60) of the lexical and semantic
rankings instead, as the reference does. With --anchor-k N (default 0) the best N matches
of the query's identifier-like terms are pinned first in every mode. Ids are opaque:
caching and ranking depend on the texts only. If the model fails, the lexical answer
still comes back and the encoder is restarted on the next request.

A reply may carry "scores", parallel to "related": the score each index was ranked by
(the cosine in semantic mode). egg-query fuses by them; a provider that leaves them out
is fused by rank.
"""

from __future__ import annotations

import sys
from typing import IO

from eggshell.search.local import Provider, _items, append_trace
from eggshell.search.rank import B, DEFAULT_ANCHOR_K, DEFAULT_THRESHOLD, DEFAULT_TOP_K, FUSIONS, K1, MODES, Settings
from eggshell.stages import common as stage

PROG = "egg-index"


def step_of(provider: Provider, trace: str | None = None) -> stage.Step:
    """egg-index's step: an index message is queued (no reply); a query gets its `related`."""

    def step(obj) -> list[dict]:
        if isinstance(obj, dict) and "index" in obj and "query" not in obj:
            items = _items(obj["index"])
            if items is None:
                raise stage.Refused('"index" must be a list of {"id":...,"text":...}; ignored', bad=False)
            provider.index(items)
            return []
        q = obj.get("query") if isinstance(obj, dict) else None
        cands = _items(obj.get("candidates")) if isinstance(obj, dict) else None
        if not isinstance(q, dict) or not isinstance(q.get("text"), str) or cands is None:
            raise stage.Refused('expected {"query":{"text":...},"candidates":[{"id":...,"text":...},...]}')
        try:
            r = provider.rank(q["text"], [c["text"] for c in cands])
        except Exception as e:  # never leave a query unanswered
            raise stage.Refused("%s: %s" % (type(e).__name__, e)) from None
        if trace:
            append_trace(trace, provider.trace_record(r, cands), provider.log)
        score = dict(r.fused)
        reply = {"related": r.selected, "scores": [score.get(i, 0.0) for i in r.selected]}  # full precision: egg-query must fuse exactly as in-process
        if r.calibration is not None:
            reply["calibration"] = r.calibration.as_list()  # the prompt's cosines with unrelated turns: [mean, sd]
        opening = dict(r.opening)
        if opening and all(i in opening for i in r.selected):  # each record's opening-window cosine: a long query's fusion blends it in
            reply["opening"] = [opening[i] for i in r.selected]
        return [reply]

    return step


def run(provider: Provider, lines: IO[str], out: IO[str], trace: str | None = None, name: str = "<stdin>") -> int:
    """Answer every query line (a bad one with {"related":[]}); 0: a provider never fails its caller."""
    stage.loop(PROG, step_of(provider, trace), lines, out, name, refusal=lambda why: {"related": []}, note='; answered {"related":[]}')
    return 0


def main(argv: list[str]) -> int:
    from eggshell.paths import from_env

    p = stage.parser(PROG, "Rank candidates against queries (the Eggshell search-provider protocol).", epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--mode", choices=MODES, default="hybrid", help="ranking mode (default %(default)s)")
    p.add_argument("--top-k", type=stage.positive_int, default=DEFAULT_TOP_K, help="most indices per reply (default %(default)s)")
    p.add_argument("--anchor-k", type=int, default=DEFAULT_ANCHOR_K, help="anchor matches pinned first (default %(default)s)")
    p.add_argument("--fusion", choices=FUSIONS, default="score",
                   help="hybrid rule: score (weighted normalized scores) or rrf (reciprocal rank fusion, k 60) (default %(default)s)")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="least cosine for a semantic match (default %(default)s)")
    p.add_argument("--model", help="embedding model (default: the offline all-MiniLM-L6-v2)")
    p.add_argument("--cache", metavar="DIR", help="vector cache (default: $EGGSHELL_DATA_ROOT/semantic/vectors)")
    p.add_argument("--k1", type=float, default=K1, help="BM25 k1 (default %(default)s)")
    p.add_argument("--b", type=float, default=B, help="BM25 b (default %(default)s)")
    p.add_argument("--trace", metavar="FILE", help="append one JSON line per query with every ranking, scores and timings")
    a = p.parse_args(argv)
    if a.anchor_k < 0:
        p.error("--anchor-k must be 0 or more")
    if not -1.0 <= a.threshold <= 1.0:
        p.error("--threshold must be a cosine from -1 to 1")
    if a.k1 < 0 or not 0 <= a.b <= 1:
        p.error("--k1 must be 0 or more and --b from 0 to 1")
    settings = Settings(a.mode, a.top_k, a.anchor_k, a.threshold, a.model, a.cache, k1=a.k1, b=a.b, fusion=a.fusion)
    provider = Provider(settings, from_env().data_root)
    return run(provider, sys.stdin, sys.stdout, a.trace)
