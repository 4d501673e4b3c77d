"""save_turn: one turn record compiled, redacted and committed to a store, and what it made searchable.

The one way a turn reaches a `.egg` file: egg-save, the save queue (runtime/commits.py)
and `!egg keep` all call it, so redaction and the turn compiler cannot be skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from eggshell.core.redact import redact_record
from eggshell.graph.records import index_items, view_of_turn
from eggshell.graph.store import Store
from eggshell.graph.turns import Compiled, Turn, TurnError, compile_turn, parse_turn, relative_cwd
from eggshell.paths import find_project


@dataclass(frozen=True, slots=True)
class Saved:
    turn: Turn
    commit_id: str | None  # None when the turn was already stored
    index: list[dict]


def prepare_turn(record: dict, root: str | None = None, redacted: bool = False) -> tuple[Turn, Compiled]:
    """The record redacted, parsed and compiled, ready to commit; TurnError says what is wrong.

    Whatever goes wrong here is the record's own doing (no store is touched), so any failure,
    even one this code did not foresee, is a TurnError: the save queue then keeps the turn
    aside for `egg recover` instead of retrying it forever or dropping it.
    """
    try:
        t = parse_turn(record if redacted else redact_record(record))
        if t.cwd:
            base = root if root is not None else find_project(t.cwd)
            t = Turn(t.session, t.turn, relative_cwd(t.cwd, base), t.prompt, t.tools, t.answer)
        return t, compile_turn(t)
    except TurnError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
        raise TurnError("the turn could not be compiled (%s: %s)" % (type(e).__name__, e)) from e


def save_turn(store: Store, record: dict, root: str | None = None, when: str | None = None, redacted: bool = False) -> Saved:
    """Compile and commit one decoded turn record (the in-process form of egg-save).

    The record is redacted with the built-in rules first (redact.py): a journal the hooks
    wrote is already redacted (and stays the same), and a record from anywhere else
    (egg-save's input, a journal written before redaction existed) is made so here.
    `when` is the commit's time (default now): `egg import` gives a turn the time it ran,
    so a handoff states the age of its calls truly. `redacted`: the save queue's word that the
    journal was redacted at capture by this very code (redact.scheme), so the second pass is
    skipped; no other caller passes it. TurnError: the record is at fault;
    anything else (OSError, a store error) is the store's, and the record may be saved later.
    """
    t, compiled = prepare_turn(record, root, redacted)
    c = store.commit(compiled.roots, session=t.session, turn=t.turn, when=when, within=root)
    if c is None:
        return Saved(t, None, [])
    view = view_of_turn(t, compiled, c.time, store.path)
    if store.graph.hidden:  # a forgotten call of a turn still running is not embedded either
        view = replace(view, tools=tuple(x for x in view.tools if x.id not in store.graph.hidden))
    return Saved(t, c.id, index_items([view]))
