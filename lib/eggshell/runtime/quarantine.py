"""Events that could not be stored, kept aside for the user instead of lost.

A hook event that no turn can store (a tool name spanning lines, `NaN` in a tool's input,
input nested past events.MAX_DEPTH, a payload ujson cannot read at all) is appended here,
one JSON object per line, and the rest of its turn is recorded as usual:

    {"time":TIME,"session":S,"turn":T,"event":EVENT,"why":REASON,"payload":TEXT}

`payload` is the event's JSON text as a string (the raw hook payload when it could not
be parsed, cut at events.OUTPUT_CHARS characters), so every line reads back as JSON
whatever the event held. The file is `<data root>/quarantine/events.ndjson`, 0600 in a
0700 directory; nothing reads it but the user, and it can be deleted at any time.
"""

from __future__ import annotations

import datetime as _dt
import os

import ujson

from eggshell.graph.events import OUTPUT_CHARS
from eggshell.log import append_whole
from eggshell.paths import private_dir

FILE = os.path.join("quarantine", "events.ndjson")


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
    if len(text) <= OUTPUT_CHARS:
        return text
    return text[:OUTPUT_CHARS] + "\n[quarantined payload truncated by Eggshell at %d of %d characters]" % (OUTPUT_CHARS, len(text))


def add(data_root: str, session: object, turn: object, event: object, why: str, payload: str) -> str:
    """Append one quarantined event (fsynced); returns the file's path. Raises OSError."""
    rec = {"time": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "session": session,
           "turn": turn, "event": event, "why": why, "payload": payload}
    try:
        line = (ujson.dumps(rec, ensure_ascii=False, escape_forward_slashes=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, so the line stays exact and valid UTF-8
        line = (ujson.dumps(rec, ensure_ascii=True, escape_forward_slashes=False) + "\n").encode("ascii")
    p = path(data_root)
    private_dir(os.path.dirname(p))
    fd = os.open(p, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        append_whole(fd, line, p)
    finally:
        os.close(fd)
    return p
