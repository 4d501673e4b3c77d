"""egg-save: commit turn records to a `.egg` store and announce what became searchable.

Reads turn records (see turns.py) one per line, commits each, and for every turn that
added something writes a provider index message, so `egg-save ... | egg-index`
embeds new records at save time. A replayed turn adds nothing and prints nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import IO

from . import stage
from .paths import find_project
from .records import index_items, view_of_turn
from .redact import redact_record
from .store import EggError, Store
from .turns import Turn, TurnError, compile_turn, parse_turn, relative_cwd

PROG = "egg-save"


@dataclass(frozen=True, slots=True)
class Saved:
    turn: Turn
    commit_id: str | None  # None when the turn was already stored
    index: list[dict]


def save_turn(store: Store, record: dict, root: str | None = None) -> Saved:
    """Compile and commit one decoded turn record (the in-process form of egg-save).

    The record is redacted with the built-in rules first (redact.py): a journal the hooks
    wrote is already redacted (and stays the same), and a record from anywhere else
    (egg-save's input, a journal written before redaction existed) is made so here.
    """
    t = parse_turn(redact_record(record))
    if t.cwd:
        base = root if root is not None else find_project(t.cwd)
        t = Turn(t.session, t.turn, relative_cwd(t.cwd, base), t.prompt, t.tools, t.answer)
    compiled = compile_turn(t)
    c = store.commit(compiled.roots, session=t.session, turn=t.turn, within=root)
    if c is None:
        return Saved(t, None, [])
    view = view_of_turn(t, compiled, c.time, store.path)
    if store.graph.hidden:  # a forgotten call of a turn still running is not embedded either
        view = replace(view, tools=tuple(x for x in view.tools if x.id not in store.graph.hidden))
    return Saved(t, c.id, index_items([view]))


def run(store: Store, lines: IO[str], out: IO[str], root: str | None = None, name: str = "<stdin>") -> int:
    """Save every record; returns the number of bad lines (each reported on stderr)."""
    bad = 0
    for n, obj in stage.read_ndjson(lines, name):
        if isinstance(obj, stage.InputError):
            stage.warn(PROG, "%s; line skipped, nothing from it was written" % obj)
            bad += 1
            continue
        try:
            saved = save_turn(store, obj, root)
        except TurnError as e:
            stage.warn(PROG, "%s:%d: %s; line skipped, nothing from it was written" % (name, n, e))
            bad += 1
            continue
        if saved.index:
            stage.write({"index": saved.index}, out)
    return bad


def main(argv: list[str]) -> int:
    p = stage.parser(
        PROG,
        "Commit turn records (one JSON object per line on stdin) to a .egg store.",
        epilog="""input line:
  {"session":S,"turn":T,"cwd":DIR,"prompt":P,
   "tools":[{"name":N,"id":I,"input":{...},"output":...}],"answer":A|null}
output line, per turn that added something:
  {"index":[{"id":CONTENT_ID,"text":SEARCHABLE_TEXT}]}

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
        store = Store.open(a.egg)
        if a.input:
            with open(a.input, encoding="utf-8") as f:
                bad = run(store, f, sys.stdout, a.root, a.input)
        else:
            bad = run(store, sys.stdin, sys.stdout, a.root)
    except (EggError, OSError) as e:
        stage.warn(PROG, str(e))
        return 2
    return 1 if bad else 0
