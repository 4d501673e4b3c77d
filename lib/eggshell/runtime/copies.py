"""Copies of recorded text outside the stores, and taking out those `egg forget` names.

A store is not the only place a turn's text lives. The journal holds every open or queued
turn (a `private`-profile chat's too), quarantine/ holds events and whole turns that could
not be stored, and hook.log, run/manager.log and the matcher trace may quote a prompt, a
tool's name or an output. None of them is a store, so a tombstone cannot hide them: they
are swept. `egg forget` sweeps at once, since only then is a `--match TEXT` known (a purge
knows forgotten content only by what the stores held) and since an open chat's Stop may
come before any purge; `egg compact --purge` sweeps again with what the stores forgot.

What a sweep takes (docs/privacy.md#deleting-data says the same to users):

- a journaled turn (open, queued or private) and a quarantined turn go whole when they are
  a forgotten turn, or (`--match`) when any of their texts holds TEXT: the way `--match`
  selects stored turns. A journaled one is replaced by the journal's FORGOTTEN mark, so its
  later tool results and its Stop's answer are never journaled and nothing of it is saved;
  a quarantined one is deleted, so `egg recover` cannot save it again;
- a line of quarantine/events.ndjson goes when it belongs to such a turn or holds a
  forgotten text; a line of a log or of the matcher trace when it holds a forgotten text.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import ujson

from eggshell.runtime import quarantine
from eggshell.runtime.journal import Journal, forgotten

LOGS = (("logs", "hook.log"), ("run", "manager.log"), ("semantic", "matcher-trace.jsonl"))


def _strings(v: object) -> Iterator[str]:
    """Every string a decoded JSON value holds (keys too): a text as it was, not as escaped."""
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield str(k)
            yield from _strings(x)
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _strings(x)


@dataclass(frozen=True)
class Needles:
    """What a forget names outside the stores."""

    texts: frozenset[str] = frozenset()  # a line holding one goes
    turn_texts: frozenset[str] = frozenset()  # a turn any of whose texts holds one goes whole (--match)
    turns: frozenset[tuple[str, str]] = frozenset()  # (session, turn) of forgotten turns: each goes whole

    @staticmethod
    def matching(text: str) -> "Needles":
        """`egg forget --match TEXT`: every turn holding TEXT, every line holding it."""
        return Needles(frozenset((text,)), frozenset((text,)))

    @staticmethod
    def forgotten(texts: Iterable[str], turns: Iterable[tuple[str, str]]) -> "Needles":
        """What the stores forgot (forget.Forgotten): those turns whole, lines holding their texts or keys."""
        return Needles(frozenset(texts), frozenset(), frozenset(turns))

    def __bool__(self) -> bool:
        return bool(self.texts or self.turn_texts or self.turns)

    def mentions(self, s: str) -> bool:
        return bool(s) and any(t in s for t in self.texts)

    def line_mentions(self, line: str) -> bool:
        """A line as written, or (a JSON line) any text in it unescaped."""
        if self.mentions(line):
            return True
        try:
            v = ujson.loads(line)
        except ValueError:
            return False
        return any(self.mentions(s) for s in _strings(v))

    def takes_turn(self, events: list[dict]) -> bool:
        """Whether a journaled turn (its events, the prompt first) is one to drop whole."""
        for e in events:
            if (e.get("session"), e.get("turn")) in self.turns:
                return True
            if self.turn_texts and any(t in s for s in _strings(list(e.values())) for t in self.turn_texts):  # not our own keys
                return True
        return False


@dataclass(frozen=True)
class Marked:
    """A journaled turn a sweep marked forgotten: where it would have been saved, and its ids."""

    write: str | None
    session: str
    turn: str


@dataclass(frozen=True)
class Swept:
    journal: tuple[Marked, ...] = ()
    quarantined: int = 0  # quarantined turns removed and quarantined event lines dropped
    log_lines: int = 0
    held: tuple[Marked, ...] = ()  # the quarantined turns removed


def sweep(data_root: str, journal_dir: str, needles: Needles, log: Callable[[str], None] = lambda m: None) -> Swept:
    """Take every copy `needles` names out of the journal, quarantine/ and the logs (see the module docstring)."""
    if not needles:
        return Swept()
    marked = sweep_journal(Journal(journal_dir), needles, log)
    held, lines_held = sweep_quarantine(data_root, needles, log)
    lines = sum(filter_lines(os.path.join(data_root, *p), needles.line_mentions, log) for p in _log_files(data_root))
    return Swept(tuple(marked), len(held) + lines_held, lines, tuple(held))


def sweep_journal(journal: Journal, needles: Needles, log: Callable[[str], None]) -> list[Marked]:
    out = []
    for path in journal.files():
        events = journal.read_file(path)
        if not events or forgotten(events) or not needles.takes_turn(events):
            continue
        prompt = next((e for e in events if e.get("event") == "prompt"), {})
        try:
            journal.mark_forgotten(path)
        except OSError as e:
            log("%s: could not mark it forgotten: %s" % (path, e))
            continue
        out.append(_marked(prompt))
    return out


def _marked(prompt: dict) -> Marked:
    write = prompt.get("write")
    return Marked(write if isinstance(write, str) and write else None, str(prompt.get("session") or ""), str(prompt.get("turn") or ""))


def sweep_quarantine(data_root: str, needles: Needles, log: Callable[[str], None]) -> tuple[list[Marked], int]:
    """(the quarantined turns removed, the quarantined event lines dropped)."""
    removed = []
    for held in quarantine.held_turns(data_root):
        events = Journal(os.path.dirname(held.path)).read_file(held.path)
        if needles.takes_turn(events) or needles.takes_turn([held.why]):
            held.release()
            prompt = next((e for e in events if e.get("event") == "prompt"), {})
            why = {k: held.why.get(k) for k in ("session", "turn")}
            removed.append(_marked({"write": held.why.get("store"), **why, **prompt}))

    def drop(line: str) -> bool:
        try:
            v = ujson.loads(line)
        except ValueError:
            v = None
        if isinstance(v, dict):
            payload = v.get("payload")
            decoded = []
            if isinstance(payload, str):  # the event's own JSON text, as a string
                try:
                    decoded = [ujson.loads(payload)]
                except ValueError:
                    pass
            if needles.takes_turn([v, *decoded]) or any(needles.mentions(s) for s in _strings([v, *decoded])):
                return True
        return needles.line_mentions(line)

    return removed, filter_lines(quarantine.path(data_root), drop, log)


def _log_files(data_root: str) -> list[tuple[str, str]]:
    """The logs and the trace, with any rotated or set-aside copy beside them (NAME.1, NAME.old)."""
    out = []
    for d, name in LOGS:
        try:
            names = os.listdir(os.path.join(data_root, d))
        except OSError:
            continue
        out.extend((d, n) for n in sorted(names) if n == name or n.startswith(name + "."))
    return out


def filter_lines(path: str, drop: Callable[[str], bool], log: Callable[[str], None] = lambda m: None) -> int:
    """Rewrite a line file in place without the lines `drop` selects; how many went.

    In place, under the file's lock (log.append_whole's appenders take it for each line), so
    an appender holding the file open keeps appending to it rather than to a replaced copy.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except FileNotFoundError:
        return 0
    except OSError as e:
        log("%s: could not open it to remove forgotten lines: %s" % (path, e))
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = b""
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            data += b
        lines = data.splitlines(keepends=True)
        keep = [ln for ln in lines if not drop(ln.decode("utf-8", "replace"))]
        if len(keep) == len(lines):
            return 0
        out = b"".join(keep)
        os.pwrite(fd, out, 0)
        os.ftruncate(fd, len(out))
        os.fsync(fd)
        return len(lines) - len(keep)
    finally:
        os.close(fd)
