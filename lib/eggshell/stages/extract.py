"""egg-extract: the reuse engine as a filter: hits in, a handoff within a budget out.

Reads hits lines (as egg-query writes them), hands the hit turns (and their tool calls
that share terms with the request) to the reuse engine as retrieval nominations, runs
intrinsic matching of the request against every stored Work, and writes one
`{"handoff":{"text","keys","omitted","deny","covered"}}` line per input line. A query
may also be a proposed tool call, `{"query":{"tool":{"name":...,"input":...}}}`: then
`deny` says whether completed prior work covers it (what the PreToolUse hook enforces).
No match, or nothing that fits, gives an empty text. The stage writes no chat state; a
query naming a chat is answered with what that chat was given before (reuse/engine.inquiry_from_hits).
"""

from __future__ import annotations

import math
import sys
from typing import IO

from eggshell.stages import common as stage
from eggshell.reuse.engine import as_record, extract
from eggshell.reuse.render import DEFAULT_BUDGET
from eggshell.search.searcher import Searcher, query_text
from eggshell.graph.store import EggError, Store

PROG = "egg-extract"


def _tool(obj) -> dict | None:
    q = obj.get("query") if isinstance(obj, dict) else None
    t = q.get("tool") if isinstance(q, dict) else None
    return t if isinstance(t, dict) and isinstance(t.get("name"), str) and t["name"] else None


def _score(v) -> bool:
    """A hit's `semantic` is absent, null or a finite number."""
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))


EMPTY = {"text": "", "keys": [], "omitted": [], "deny": False, "covered": []}


def step_of(searcher: Searcher | None, budget: int) -> stage.Step:
    """egg-extract's step: a hits message in, its handoff message out.

    `searcher` None: each message's own hits name the stores it reads (egg-query writes
    each hit's `store`), opened once per set of stores.
    """
    searchers: dict[tuple[str, ...], Searcher] = {}

    def searcher_for(hits: list) -> Searcher:
        if searcher is not None:
            return searcher
        paths = tuple(dict.fromkeys(h["store"] for h in hits if isinstance(h.get("store"), str) and h["store"]))
        if paths not in searchers:
            searchers[paths] = Searcher(Store.open(p) for p in paths)
        return searchers[paths]

    def step(obj) -> list[dict]:
        tool = _tool(obj)
        hits = obj.get("hits", [] if tool else None) if isinstance(obj, dict) else None
        request = query_text(obj) if isinstance(obj, dict) else None
        if not isinstance(hits, list) or (request is None and tool is None) or not all(isinstance(h, dict) and isinstance(h.get("id"), str)
                                                                                       and _score(h.get("semantic")) for h in hits):
            raise stage.Refused('expected {"query":{"text":...},"hits":[{"id":...},...]} or {"query":{"tool":{"name":...,"input":...}}}')
        if tool is not None and searcher is None:
            raise stage.Refused("a proposed call is matched against every stored call: name the stores with --egg")
        return [as_record(extract(searcher_for(hits), obj, budget))]

    return step


def run(searcher: Searcher | None, lines: IO[str], out: IO[str], budget: int, name: str = "<stdin>") -> int:
    """Answer each line (a bad one with an empty handoff and why)."""
    return stage.loop(PROG, step_of(searcher, budget), lines, out, name, refusal=lambda why: {"handoff": dict(EMPTY), "error": why})


def main(argv: list[str]) -> int:
    p = stage.parser(
        PROG,
        "Hand prior work over: run the reuse engine on each request (or proposed tool call) and render it within a budget.",
        epilog="""input line:   {"query":{"text":...},"hits":[{"id":CONTENT_ID,"semantic":SCORE,...},...]}   (egg-query's output)
              {"query":{"tool":{"name":"Bash","input":{"command":"rg -n foo src"}}}}   (a proposed call)
output line:  {"handoff":{"text":TEXT,"keys":[KEY,...],"omitted":[KEY,...],"deny":BOOL,"covered":[FRAGMENT,...]}}
A hit is handed over if its "semantic" score is a number (the search provider counted it as
related) or, when that is null or absent, if its text shares an identifier or path with the
request or enough of its words.

A query may name the chat asking, {"query":{"text":...,"chat":SESSION}} (egg-query passes its
query through): the handoff is then the one the prompt hook gives that chat, byte for byte,
holding back what the data root's chat state says the chat was given already.

Without --egg, each line's hits name the stores it reads (egg-query writes each hit's
"store"); a proposed call, which has no hits, needs --egg.

example:
  echo '{"query":{"text":"where is late_fee computed"}}' | egg-query --egg .eggs/work.egg | egg-extract

exit status: 0 ok; 1 some lines were malformed; 2 usage or store error (a --egg store that does not exist included).""",
    )
    p.add_argument("--egg", action="append", metavar="PATH",
                   help="a .egg store to read (repeatable; default: the stores the hits name)")
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="most characters of handoff text (default %(default)s)")
    a = p.parse_args(argv)
    if a.budget < 200:
        p.error("--budget must be at least 200 characters")
    if a.egg and stage.missing_stores(PROG, a.egg, "nothing was read"):
        return 2
    try:
        searcher = Searcher(Store.open(path) for path in a.egg) if a.egg else None
        bad = run(searcher, sys.stdin, sys.stdout, a.budget)
    except (EggError, OSError) as e:
        stage.warn(PROG, str(e))
        return 2
    return 1 if bad else 0
