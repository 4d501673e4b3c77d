"""egg-save: commit turn records to a `.egg` store and announce what became searchable.

Reads turn records (see turns.py) one per line, commits each, and for every turn that
added something writes a provider index message, so `egg-save ... | egg-index`
embeds new records at save time. A replayed turn adds nothing and prints nothing.
"""

from __future__ import annotations

import sys
from typing import IO

from eggshell.graph.commitindex import AppendStore
from eggshell.graph.save import save_turn
from eggshell.graph.store import EggError, Store
from eggshell.graph.turns import TurnError
from eggshell.stages import common as stage

PROG = "egg-save"


def step_of(store: Store, root: str | None = None) -> stage.Step:
    """egg-save's step: one turn record in, its provider index message out (none for a replay)."""

    def step(record) -> list[dict]:
        try:
            saved = save_turn(store, record, root)
        except TurnError as e:
            raise stage.Refused(str(e)) from None
        return [{"index": saved.index}] if saved.index else []

    return step


def run(store: Store, lines: IO[str], out: IO[str], root: str | None = None, name: str = "<stdin>") -> int:
    """Save every record; returns the number of bad lines (each reported on stderr)."""
    return stage.loop(PROG, step_of(store, root), lines, out, name, note="; line skipped, nothing from it was written")


def main(argv: list[str]) -> int:
    p = stage.parser(
        PROG,
        "Commit turn records (one JSON object per line on stdin) to a .egg store.",
        epilog="""input line:
  {"session":S,"turn":T,"cwd":DIR,"prompt":P,
   "tools":[{"name":N,"id":I,"input":{...},"output":...}],"answer":A|null}
output line, per turn that added something:
  {"index":[{"id":CONTENT_ID,"text":SEARCHABLE_TEXT,"store":EGG,"turn":[ID,ID],"roots":[ID,...]}]}
  (egg-index caches a turn only while no tombstone in EGG hides it)

example:
  egg-save --egg .eggs/work.egg < turns.ndjson | egg-index

exit status: 0 all lines saved; 1 some lines were malformed (reported on stderr,
earlier and later lines are still saved); 2 usage or store error.""",
    )
    p.add_argument("--egg", required=True, metavar="PATH", help="the .egg file to write (created if missing)")
    p.add_argument("--root", metavar="DIR", help="project root that cwd is stored relative to (default: the nearest .eggshell.toml above cwd)")
    p.add_argument("input", nargs="?", metavar="FILE", help="read turn records from FILE instead of stdin")
    a = p.parse_args(argv)
    try:
        store = AppendStore.open(a.egg)  # reads only what its index has not seen: cost flat in the file's size
        start = store.offset
        if a.input:
            with open(a.input, encoding="utf-8") as f:
                bad = run(store, f, sys.stdout, a.root, a.input)
        else:
            bad = run(store, sys.stdin, sys.stdout, a.root)
    except (EggError, OSError) as e:
        stage.warn(PROG, str(e))
        return 2
    from eggshell.search.turnindex import index_appended

    index_appended(store, start, lambda m: stage.warn(PROG, m))
    return 1 if bad else 0

