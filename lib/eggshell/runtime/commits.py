"""The save queue: journaled turns reach their `.egg`, and leave the queue only once they did.

The journal (journal.py) is the queue. A turn's file gets its prompt (with the turn's
snapshotted write target), each tool result as it happens, and at the end a seal (the
Stop's final message, or a mark that the turn was interrupted). `settle` commits what a
file holds so far: an open turn's observations land as an interrupted turn (its tool
Outcomes, usable by other chats at once), a sealed turn lands whole. The file is removed
only after the commit that covers its seal has landed, so a crash at any point leaves the
file for the next pass; a commit is idempotent, so a replay adds nothing.

A read-only turn (a `private` profile, or a turn the user will `egg keep` by hand) is
never committed here; its sealed file stays until the chat's next prompt or for
KEEP_READ_ONLY_S after its seal, whichever comes first, so `egg keep` can still save it
and nothing the user chose not to record stays on disk for long.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable

from eggshell.errors import EggshellError
from eggshell.runtime.journal import Journal, bad_tools, forgotten, sealed, turn_record
from eggshell.graph.save import save_turn
from eggshell.graph.turns import TurnError


KEEP_READ_ONLY_S = 3600.0


@dataclass(frozen=True, slots=True)
class Settled:
    path: str
    committed: bool  # something new reached the store
    removed: bool  # the file left the queue
    index: tuple[dict, ...] = ()  # what became searchable (for the provider's index)


def _prompt(events: list[dict]) -> dict | None:
    return next((e for e in events if e.get("event") == "prompt"), None)


def target(events: list[dict]) -> tuple[str | None, str | None, bool]:
    """(write egg, project root, whether the prompt named them) from a turn's prompt event."""
    prompt = _prompt(events)
    if prompt is None or "write" not in prompt:
        return None, None, False
    w, r = prompt.get("write"), prompt.get("root")
    return (w if isinstance(w, str) and w else None), (r if isinstance(r, str) and r else None), True


def captured(events: list[dict]) -> bool:
    """Whether the turn's events were redacted at capture by the redaction in force now (its prompt
    event names redact.scheme): then saving it redacts nothing more, and skips the pass."""
    from eggshell.core.redact import scheme

    prompt = _prompt(events)
    return prompt is not None and prompt.get("redacted") == scheme()


def settle(journal: Journal, path: str, store_for: Callable[[str], object],
           resolve: Callable[[str], tuple[str | None, str | None]] | None = None,
           log: Callable[[str], None] = lambda m: None) -> Settled:
    """Commit one journaled turn as far as it goes; remove its file once it is whole in the store.

    `store_for(path)` gives the Store to write (a warm process passes its own, kept current);
    `resolve(cwd)` gives (write egg, root) for a journal written before turns carried their target.
    A tool event no turn can store is left out of the commit and quarantined when the file goes;
    a sealed turn whose record cannot be saved at all moves whole to quarantine/turns/.
    """
    events = journal.read_file(path)
    seal = sealed(events)
    if forgotten(events):  # `egg forget` named it while journaled: nothing of it is saved, ever
        removable = seal is not None or not journal.is_current(path) or _age(path) > KEEP_READ_ONLY_S
        if removable:
            _unlink(path)
            _tidy(path)
        return Settled(path, False, removable)
    record = turn_record(events)
    if record is None:  # no prompt: a file torn at its first line, or not ours
        return Settled(path, False, False)
    write, root, named = target(events)
    if not named and resolve is not None:
        write, root = resolve(record.get("cwd") or "")
    committed, index, failed = False, (), None
    if write is not None and (record["tools"] or record["answer"] is not None):
        store = store_for(write)  # a store that cannot be opened now raises: the file stays for the next pass
        try:
            saved = save_turn(store, record, root, redacted=captured(events))
        except TurnError as e:  # the record itself is at fault: no retry fixes it
            saved, failed = None, str(e)
        if saved is not None and saved.commit_id is not None:
            committed, index = True, tuple(saved.index)
    removable = seal is not None and (write is not None or not journal.is_current(path) or _age(path) > KEEP_READ_ONLY_S)
    if removable and failed is not None:  # never deleted: moved whole, with why, for `egg recover`
        from eggshell.runtime import quarantine

        where = quarantine.keep_turn(_data_root(journal), path, record.get("session"), record.get("turn"), write, failed)
        log("save queue: turn %s could not be saved (%s); the whole turn is kept in %s: see `egg doctor`, then `egg recover`"
            % (record.get("turn"), failed, where))
        _tidy(path)
        return Settled(path, False, True)
    if removable:
        if write is not None:  # a read-only turn keeps nothing once it leaves
            _quarantine(journal, events, record, log)
        _unlink(path)
        _tidy(path)
    return Settled(path, committed, removable, index)


def _data_root(journal: Journal) -> str:
    return os.path.dirname(os.path.abspath(journal.root))


def _quarantine(journal: Journal, events: list[dict], record: dict, log: Callable[[str], None]) -> None:
    """Before a turn's file leaves the queue, keep the events no turn can store for the user."""
    from eggshell.runtime import quarantine

    for ev, why in bad_tools(events):
        where = quarantine.add(_data_root(journal), record.get("session"), record.get("turn"), "journal", why, quarantine.payload_text(ev))
        log("save queue: a tool event of turn %s: %s; kept in %s, the rest of the turn was saved" % (record.get("turn"), why, where))


def settle_all(journal: Journal, store_for: Callable[[str], object], resolve=None, log: Callable[[str], None] = lambda m: None,
               only: Callable[[str], bool] = lambda p: True) -> list[Settled]:
    """Settle every queued turn `only` accepts; one failing file never stops the others."""
    out = []
    for path in journal.files():
        if not only(path):
            continue
        try:
            out.append(settle(journal, path, store_for, resolve, log))
        except Exception as e:  # a full disk, a locked store: the file stays for the next pass
            log("save queue: %s: %s: %s (kept for the next pass)" % (path, type(e).__name__, e))
    return out


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _age(path: str) -> float:
    try:
        return time.time() - os.stat(path).st_mtime
    except OSError:
        return 0.0


def _tidy(path: str) -> None:
    """Remove a chat's journal directory once its last turn left, unless a turn is still open.

    Without this every chat ever held would leave a directory (and its `current` file) behind.
    A chat that goes on simply makes the directory again at its next prompt.
    """
    d = os.path.dirname(path)
    try:
        names = os.listdir(d)
    except OSError:
        return
    if any(n.endswith(".ndjson") for n in names):
        return
    for n in names:
        if n == "current" or ".tmp-" in n:
            _unlink(os.path.join(d, n))
    try:
        os.rmdir(d)
    except OSError:
        pass  # a prompt wrote here meanwhile: it stays


@dataclass(frozen=True, slots=True)
class Recovered:
    path: str  # the quarantined file
    turn: object
    saved: bool  # its turn is in a store now (committed now, or found already there); the copy was removed
    why: str  # what happened, in a line


def recover(data_root: str, store_for: Callable[[str], object], resolve=None) -> list[Recovered]:
    """Save the quarantined turns again (quarantine.keep_turn put them aside); each one that
    reaches its store leaves quarantine, each one that does not stays, with the reason now.

    A turn is saved exactly as the save queue would (save_turn), so a fix to the code that
    failed it is all it takes; a commit is idempotent, so a turn already stored costs nothing.
    """
    from eggshell.runtime import quarantine

    out = []
    for held in quarantine.held_turns(data_root):
        events = Journal(os.path.dirname(held.path)).read_file(held.path)
        record = turn_record(events)
        if record is None:
            out.append(Recovered(held.path, held.why.get("turn"), False, "no prompt in the file: nothing to save from it"))
            continue
        write, root, named = target(events)
        if not named and resolve is not None:
            write, root = resolve(record.get("cwd") or "")
        if write is None:
            out.append(Recovered(held.path, record.get("turn"), False, "no store to write: the project is not recorded now"))
            continue
        try:
            saved = save_turn(store_for(write), record, root)
        except TurnError as e:
            out.append(Recovered(held.path, record.get("turn"), False, "still cannot be saved: %s" % e))
            continue
        except (OSError, EggshellError) as e:
            out.append(Recovered(held.path, record.get("turn"), False, "%s: %s (try again)" % (write, e)))
            continue
        held.release()
        out.append(Recovered(held.path, record.get("turn"), True,
                             "saved to %s" % write if saved.commit_id is not None else "already in %s" % write))
    return out
