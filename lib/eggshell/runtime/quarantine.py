"""Events that could not be stored, kept aside for the user instead of lost.

A hook event that no turn can store (a tool name spanning lines, `NaN` in a tool's input,
input nested past events.MAX_DEPTH, a payload ujson cannot read at all) is appended here,
one JSON object per line, and the rest of its turn is recorded as usual:

    {"time":TIME,"session":S,"turn":T,"event":EVENT,"why":REASON,"payload":TEXT}

`payload` is the event's JSON text as a string (the raw hook payload when it could not
be parsed, cut at events.OUTPUT_CHARS characters), so every line reads back as JSON
whatever the event held. The file is `<data root>/quarantine/events.ndjson`, 0600 in a
0700 directory; nothing reads it but the user, and it can be deleted at any time.

A whole turn that could not be saved (its record fails to compile, or the save hits
something no retry fixes) is never deleted from the save queue: its journal file moves,
byte for byte, to `<data root>/quarantine/turns/NAME.ndjson`, with `NAME.why` beside it (one
JSON object: time, session, turn, store, why). `egg recover` saves what can be saved again
and leaves the rest, saying why; `egg doctor` counts both kinds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import ujson

from eggshell.graph.events import OUTPUT_CHARS
from eggshell.log import append_whole, utc_now
from eggshell.paths import private_dir

FILE = os.path.join("quarantine", "events.ndjson")
TURNS = os.path.join("quarantine", "turns")


def path(data_root: str) -> str:
    return os.path.join(data_root, FILE)


def payload_text(value: object) -> str:
    """`value` as JSON text for the record; NaN stays NaN, since the point is to show it."""
    try:
        text = ujson.dumps(value, ensure_ascii=False, escape_forward_slashes=False)
    except (OverflowError, TypeError, ValueError) as e:
        text = "<not representable even as loose JSON: %s>" % e
    return cut(text)


def cut(text: str) -> str:
    """The payload text cut to OUTPUT_CHARS, never inside a secret (it is redacted as text after the cut)."""
    if len(text) <= OUTPUT_CHARS:
        return text
    from eggshell.core.redact import cut_point

    at = cut_point(text, OUTPUT_CHARS)
    return text[:at] + "\n[quarantined payload truncated by Eggshell at %d of %d characters]" % (at, len(text))


def _json_line(rec: dict) -> bytes:
    """One record as a line; a lone surrogate is escaped, so the line stays exact and valid UTF-8."""
    try:
        return (ujson.dumps(rec, ensure_ascii=False, escape_forward_slashes=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (ujson.dumps(rec, ensure_ascii=True, escape_forward_slashes=False) + "\n").encode("ascii")


def add(data_root: str, session: object, turn: object, event: object, why: str, payload: str) -> str:
    """Append one quarantined event (fsynced); returns the file's path. Raises OSError."""
    rec = {"time": utc_now(), "session": session, "turn": turn, "event": event, "why": why, "payload": payload}
    p = path(data_root)
    private_dir(os.path.dirname(p))
    fd = os.open(p, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        append_whole(fd, _json_line(rec), p)
    finally:
        os.close(fd)
    return p


def turns_dir(data_root: str) -> str:
    return os.path.join(data_root, TURNS)


def keep_turn(data_root: str, journal_file: str, session: object, turn: object, store: object, why: str) -> str:
    """Move a journaled turn's file into quarantine/turns/ with its reason; the new path.

    The reason is written (and fsynced) first and the file moved after, by rename within the
    data root, so at every instant the turn exists whole in one of the two places.
    Raises OSError (the file then stays in the queue).
    """
    d = private_dir(turns_dir(data_root))
    base = "%s-%s" % (os.path.basename(os.path.dirname(journal_file)), os.path.basename(journal_file)[: -len(".ndjson")])
    name, n = base, 1
    while os.path.lexists(os.path.join(d, name + ".ndjson")):
        n += 1
        name = "%s.%d" % (base, n)
    rec = {"time": utc_now(), "session": session, "turn": turn, "store": store, "why": why}
    why_path = os.path.join(d, name + ".why")
    fd = os.open(why_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        append_whole(fd, _json_line(rec), why_path)
    finally:
        os.close(fd)
    dest = os.path.join(d, name + ".ndjson")
    os.rename(journal_file, dest)
    return dest


@dataclass(frozen=True, slots=True)
class HeldTurn:
    """One quarantined turn: its journal file and why it was kept aside (a dict, possibly empty)."""

    path: str
    why: dict

    @property
    def reason(self) -> str:
        w = self.why.get("why")
        return w if isinstance(w, str) and w else "no reason recorded"

    def release(self) -> None:
        """Remove the quarantined copy: only once its turn is in a store."""
        for p in (self.path, self.path[: -len(".ndjson")] + ".why"):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def held_turns(data_root: str) -> list[HeldTurn]:
    """The quarantined turns, oldest first."""
    d = turns_dir(data_root)
    try:
        names = sorted(n for n in os.listdir(d) if n.endswith(".ndjson"))
    except OSError:
        return []
    out = []
    for n in names:
        p = os.path.join(d, n)
        why: dict = {}
        try:
            with open(p[: -len(".ndjson")] + ".why", "rb") as f:
                v = ujson.loads(f.readline() or b"{}")
            why = v if isinstance(v, dict) else {}
        except (OSError, ValueError):
            pass
        out.append(HeldTurn(p, why))
    out.sort(key=lambda h: (str(h.why.get("time") or ""), h.path))
    return out
