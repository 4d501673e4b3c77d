"""egg-query: find the prior turns relevant to a request, across `.egg` stores.

Candidates are recorded turns (see records.py). egg-query ranks them lexically itself
(BM25 of the whole text and of its best line, with a floor on how much of the query a
turn must cover) and asks a search provider for the semantic side; hybrid fuses the
two by `search/rank.fuse`, the same rule egg-index applies. A provider that fails is ignored
for that query: the answer is then lexical. Each query line gets exactly one hits
line, in input order.
"""

from __future__ import annotations

import os
import sys
from typing import IO

from eggshell.graph.store import EggError, Store
from eggshell.search.rank import DEFAULT_ANCHOR_K, DEFAULT_TOP_K, MODES, Settings
from eggshell.search.searcher import DEFAULT_MIN_COVERAGE, Searcher, hits_message, semantic_depth
from eggshell.search.provider import STARTUP_S
from eggshell.stages import common as stage

PROG = "egg-query"


def step_of(searcher: Searcher, top_k: int, min_coverage: float) -> stage.Step:
    """egg-query's step: a query message in, its hits message out."""

    def step(obj) -> list[dict]:
        out = hits_message(searcher, obj, top_k, min_coverage)
        if out is None:
            raise stage.Refused('expected {"query":{"text":...}}')
        return [out]

    return step


def run(searcher: Searcher, lines: IO[str], out: IO[str], top_k: int, min_coverage: float, name: str = "<stdin>") -> int:
    return stage.loop(PROG, step_of(searcher, top_k, min_coverage), lines, out, name, refusal=lambda why: {"hits": [], "error": why})


def main(argv: list[str]) -> int:
    p = stage.parser(
        PROG,
        "Rank the recorded turns of .egg stores against each query line on stdin.",
        epilog="""input line:   {"query":{"text":"..."}}
output line:  {"query":{...},"hits":[{"id","key","rank","score","session","turn","store","semantic"}]}
("semantic": the built-in model's cosine when it reaches the threshold, else null; null
for every hit of a provider of your own, whose scale is its own)
A malformed line is answered with {"hits":[],"error":...} so replies stay in step.

example:
  echo '{"query":{"text":"where is late_fee computed"}}' | egg-query --egg .eggs/work.egg | egg-extract --egg .eggs/work.egg

exit status: 0 ok; 1 some lines were malformed; 2 usage or store error (a --egg file
that does not exist is one: a typo must not read as "nothing relevant"; no line is read).""",
    )
    p.add_argument("--egg", action="append", required=True, metavar="PATH", help="a .egg store to search (repeatable; it must exist)")
    p.add_argument("--mode", choices=MODES, help="ranking mode (default: `mode` in the config, else hybrid)")
    p.add_argument("--top-k", type=stage.positive_int,
                   help="most hits per query (default: `top_k` in the config, else %d)" % DEFAULT_TOP_K)
    p.add_argument("--min-coverage", type=stage.fraction,
                   help="least idf-weighted share of the query some turn must hold for any hit "
                        "(default: `min_coverage` in the config, else %s)" % DEFAULT_MIN_COVERAGE)
    p.add_argument("--anchor-k", type=int, default=DEFAULT_ANCHOR_K, help="anchor matches pinned first (default %(default)s)")
    p.add_argument("--in-process", action="store_true",
                   help="run the built-in provider in this process instead of an egg-index child (as the hooks do)")
    p.add_argument("--no-trace", action="store_true", help="do not append to $EGGSHELL_DATA_ROOT/semantic/matcher-trace.jsonl")
    a = p.parse_args(argv)
    if stage.missing_stores(PROG, a.egg, "nothing was searched"):
        return 2
    from eggshell import config as _config
    from eggshell.search import matcher
    from eggshell.paths import from_env

    paths = from_env()
    close = lambda: None  # noqa: E731
    try:
        cfg = _config.load(paths, os.getcwd())
        if a.mode:
            from dataclasses import replace

            cfg = replace(cfg, mode=a.mode)
        top_k = a.top_k or cfg.top_k
        log = lambda m: stage.warn(PROG, m)  # noqa: E731
        semantic, close = matcher.choose(cfg, paths.data_root, paths.bin_dir, semantic_depth(top_k), log, prefer_in_process=a.in_process,
                                        startup_s=STARTUP_S)  # a batch: the child's start is not a query's
        trace = None if a.no_trace else os.path.join(paths.data_root, "semantic", "matcher-trace.jsonl")
        searcher = Searcher((Store.open(path) for path in a.egg), semantic=semantic, trace=trace,
                            settings=Settings.from_config(cfg, anchor_k=a.anchor_k))
        bad = run(searcher, sys.stdin, sys.stdout, top_k, cfg.min_coverage if a.min_coverage is None else a.min_coverage)
    except (EggError, OSError, _config.ConfigError) as e:
        stage.warn(PROG, str(e))
        return 2
    finally:
        close()
    return 1 if bad else 0
