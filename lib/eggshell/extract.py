"""egg-extract: turn egg-query's hits into a handoff text within a budget.

Reads hits lines (as egg-query writes them), looks the hit ids up in the stores, and
writes one `{"handoff":{"text":...,"keys":[...],"omitted":[...]}}` line per input
line. No hits, or nothing that fits, gives an empty text.
"""

from __future__ import annotations

import sys
from typing import IO

from . import stage
from .handoff import DEFAULT_BUDGET, Handoff, render
from .query import Searcher, query_text
from .store import EggError, Store

PROG = "egg-extract"


def extract(searcher: Searcher, request: str, hit_ids: list[str], budget: int = DEFAULT_BUDGET) -> Handoff:
    """The handoff for hits already ranked (the in-process form of egg-extract)."""
    searcher._refresh()
    views = [searcher.by_id[i] for i in dict.fromkeys(hit_ids) if i in searcher.by_id]
    return render(request, views, budget)


def as_record(h: Handoff) -> dict:
    return {"handoff": {"text": h.text, "keys": list(h.keys), "omitted": list(h.omitted)}}


def run(searcher: Searcher, lines: IO[str], out: IO[str], budget: int, name: str = "<stdin>") -> int:
    bad = 0
    for n, obj in stage.read_ndjson(lines, name):
        hits = obj.get("hits") if isinstance(obj, dict) else None
        request = query_text(obj) if isinstance(obj, dict) else None
        if not isinstance(hits, list) or request is None or not all(isinstance(h, dict) and isinstance(h.get("id"), str) for h in hits):
            msg = str(obj) if isinstance(obj, stage.InputError) else '%s:%d: expected {"query":{"text":...},"hits":[{"id":...},...]}' % (name, n)
            stage.warn(PROG, msg)
            stage.write({"handoff": {"text": "", "keys": [], "omitted": []}, "error": msg}, out)
            bad += 1
            continue
        stage.write(as_record(extract(searcher, request, [h["id"] for h in hits], budget)), out)
    return bad


def main(argv: list[str]) -> int:
    p = stage.parser(
        PROG,
        "Render egg-query hits as a handoff: prior requests, outcomes and tool evidence, within a budget.",
        epilog="""input line:   {"query":{"text":...},"hits":[{"id":CONTENT_ID,...},...]}   (egg-query's output)
output line:  {"handoff":{"text":TEXT,"keys":[KEY,...],"omitted":[KEY,...]}}

example:
  echo '{"query":{"text":"where is late_fee computed"}}' | egg-query --egg .eggs/work.egg | egg-extract --egg .eggs/work.egg

exit status: 0 ok; 1 some lines were malformed; 2 usage or store error.""",
    )
    p.add_argument("--egg", action="append", required=True, metavar="PATH", help="a .egg store the hits come from (repeatable)")
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="most characters of handoff text (default %(default)s)")
    a = p.parse_args(argv)
    if a.budget < 200:
        p.error("--budget must be at least 200 characters")
    try:
        searcher = Searcher(Store.open(path) for path in a.egg)
        bad = run(searcher, sys.stdin, sys.stdout, a.budget)
    except (EggError, OSError) as e:
        stage.warn(PROG, str(e))
        return 2
    return 1 if bad else 0
