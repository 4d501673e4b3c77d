"""egg-extract: the reuse engine as a filter: hits in, a handoff within a budget out.

Reads hits lines (as egg-query writes them), hands the hit turns (and their tool calls
that share terms with the request) to the reuse engine as retrieval nominations, runs
intrinsic matching of the request against every stored Work, and writes one
`{"handoff":{"text","keys","omitted","deny","covered"}}` line per input line. A query
may also be a proposed tool call, `{"query":{"tool":{"name":...,"input":...}}}`: then
`deny` says whether completed prior work covers it (what the PreToolUse hook enforces).
No match, or nothing that fits, gives an empty text. The stage keeps no chat state: it
answers as for a new chat.
"""

from __future__ import annotations

import math
import os
import sys
from typing import IO

from . import stage
from .handoff import DEFAULT_BUDGET, PlanHandoff
from .query import Searcher, query_text
from .store import EggError, Store

PROG = "egg-extract"


def extract(searcher: Searcher, request: str, hits: list[tuple[str, float | None]], budget: int = DEFAULT_BUDGET,
            tool: dict | None = None, standing=None) -> PlanHandoff:
    """The handoff for hits already ranked (the in-process form of egg-extract, and the hook's).

    `hits`: (turn id, its semantic score or None) best first, as egg-query's lines carry them.

    `standing` (standing.Judge) says how each prior outcome stands now; by default its
    recorded inputs are checked in the project of the current directory and its origin in
    this user's trust ledger (`judge_here`); only the user's own unions count (trust.own_unions).
    """
    from . import trust
    from .engine import handoff, workspace
    from .handoff import nominate
    from .intrinsic import canonical_tool_work
    from .paths import from_env
    from .records import command_of

    searcher._refresh()
    ledger = trust.load(from_env().data_root)
    ws = trust.own_unions(workspace(s.graph for s in searcher.stores), ledger)
    if tool is not None:
        work = canonical_tool_work(tool["name"], tool.get("input"))
        return handoff(ws, work, command_of(work), budget=budget, enforce=True, standing=standing or judge_here(os.getcwd(), ws, ledger))
    retrieved = nominate(request, [(searcher.by_id[i], s) for i, s in dict(hits).items() if i in searcher.by_id])
    return handoff(ws, request, request, retrieved=retrieved, budget=budget, standing=standing or judge_here(None, ws, ledger))


def judge_here(cwd: str | None, ws, ledger):
    """The hook's judges for a call run in `cwd` (None: a request), in the project of the current
    directory: inputs unchanged (freshness) and the user's own (trust), as on the hook path."""
    from . import trust
    from .freshness import reuse_judge
    from .paths import find_project, from_env
    from .standing import judges

    fresh = reuse_judge(find_project(os.getcwd()), cwd, None, from_env().state_dir)
    return judges(fresh, trust.judge(ws.graphs, ledger))


def as_record(h: PlanHandoff) -> dict:
    return {"handoff": {"text": h.text, "keys": list(h.keys), "omitted": list(h.omitted), "deny": h.deny, "covered": list(h.covered)}}


def _tool(obj) -> dict | None:
    q = obj.get("query") if isinstance(obj, dict) else None
    t = q.get("tool") if isinstance(q, dict) else None
    return t if isinstance(t, dict) and isinstance(t.get("name"), str) and t["name"] else None


def _score(v) -> bool:
    """A hit's `semantic` is absent, null or a finite number."""
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))


def run(searcher: Searcher | None, lines: IO[str], out: IO[str], budget: int, name: str = "<stdin>") -> int:
    """Answer each line; `searcher` None: each line's own hits name the stores it reads
    (egg-query writes each hit's `store`), opened once per set of stores."""
    bad = 0
    searchers: dict[tuple[str, ...], Searcher] = {}

    def searcher_for(hits: list) -> Searcher:
        if searcher is not None:
            return searcher
        paths = tuple(dict.fromkeys(h["store"] for h in hits if isinstance(h.get("store"), str) and h["store"]))
        if paths not in searchers:
            searchers[paths] = Searcher(Store.open(p) for p in paths)
        return searchers[paths]

    for n, obj in stage.read_ndjson(lines, name):
        tool = _tool(obj)
        hits = obj.get("hits", [] if tool else None) if isinstance(obj, dict) else None
        request = query_text(obj) if isinstance(obj, dict) else None
        if not isinstance(hits, list) or (request is None and tool is None) or not all(isinstance(h, dict) and isinstance(h.get("id"), str)
                                                                                       and _score(h.get("semantic")) for h in hits):
            msg = str(obj) if isinstance(obj, stage.InputError) else (
                '%s:%d: expected {"query":{"text":...},"hits":[{"id":...},...]} or {"query":{"tool":{"name":...,"input":...}}}' % (name, n))
        elif tool is not None and searcher is None:
            msg = "%s:%d: a proposed call is matched against every stored call: name the stores with --egg" % (name, n)
        else:
            msg = None
        if msg is not None:  # answered in step: an empty handoff, and why
            stage.warn(PROG, msg)
            stage.write({"handoff": {"text": "", "keys": [], "omitted": [], "deny": False, "covered": []}, "error": msg}, out)
            bad += 1
            continue
        stage.write(as_record(extract(searcher_for(hits), request or "", [(h["id"], h.get("semantic")) for h in hits], budget, tool)), out)
    return bad


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

Without --egg, each line's hits name the stores it reads (egg-query writes each hit's
"store"); a proposed call, which has no hits, needs --egg.

example:
  echo '{"query":{"text":"where is late_fee computed"}}' | egg-query --egg .eggs/work.egg | egg-extract

exit status: 0 ok; 1 some lines were malformed; 2 usage or store error.""",
    )
    p.add_argument("--egg", action="append", metavar="PATH",
                   help="a .egg store to read (repeatable; default: the stores the hits name)")
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="most characters of handoff text (default %(default)s)")
    a = p.parse_args(argv)
    if a.budget < 200:
        p.error("--budget must be at least 200 characters")
    try:
        searcher = Searcher(Store.open(path) for path in a.egg) if a.egg else None
        bad = run(searcher, sys.stdin, sys.stdout, a.budget)
    except (EggError, OSError) as e:
        stage.warn(PROG, str(e))
        return 2
    return 1 if bad else 0
