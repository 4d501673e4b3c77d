"""The user's `redact` patterns, run on RE2: no pattern a repository carries can stall a hook.

Why not Python's `re`: a project's .eggshell.toml is written by whoever controls the
repository, and `re` backtracks. `^(\\w+\\s?)+$` kept a hook busy past 60 s on one ordinary
prompt (issue 31), holding the GIL, so not even the hook's own deadline thread could answer.
RE2 (google-re2) runs in time linear in the text; what it cannot run that way
(backreferences, lookaround, atomic groups) it refuses, and config.py reports the refusal
with its file and line.

Three costs remain, and all are bounded here:
- the google-re2 wrapper builds a Python object per match (1M matches of `abc` on str text took
  5 s), so matches are found on the UTF-8 bytes, without captures (the DFA alone); the group
  `secret` is looked for only inside a match, anchored to it;
- a pattern that matches everywhere (`\\w`) still means millions of replacements: every user
  pattern of a payload shares one deadline, checked between matches, and text not scanned by
  then is withheld with its size, never kept unscanned (as redact.SCAN_CAP does for length);
- linear is not always fast: a large program whose DFA does not fit RE2's memory runs on the
  NFA, about 4 ns per byte per instruction (`(\\w+\\s?){1000}!`, 8,005 instructions, took 32 s
  on 1 MB), and one search cannot be interrupted. RE2 releases the GIL while it searches, so a
  text whose bound (length x program size) is not small is redacted in a worker thread that
  the hook waits for only until the deadline; past it, the whole text is withheld.

Imported only when a config has `redact` patterns: the hook of a project without them never
loads RE2. A namedtuple, not a dataclass, like redact.py: it is on the hook path.
"""

from __future__ import annotations

import time
from collections import namedtuple

PLACEHOLDER = b"[redacted: custom]"
PAST_TIME = "\n[withheld: %d characters past the redaction time limit]"
TIME_S = 1.0  # seconds all user patterns of one payload may take, whatever the text: well inside every hook budget
INLINE_COST = 5_000_000  # characters x program instructions redacted in the caller's thread (about 20 ms at worst)
WITHHELD = "[withheld: %d characters past the redaction time limit]"
MAX_MEM = 2 << 20  # bytes of RE2 memory per compiled pattern (program and DFA cache): 64 patterns stay small
_compiled: dict = {}  # pattern -> UserPattern: a hook checks its config, then redacts with it


class UserPattern(namedtuple("UserPattern", "pattern find whole secret size")):
    """One compiled `redact` pattern: `find` (no captures) locates matches, `whole` (with captures)
    finds the group `secret` (its number, 0 for none) inside one; `size` is its program's
    instructions, which bound the time of one search with the text's length."""

    __slots__ = ()


def _options(capture: bool):
    import re2

    o = re2.Options()
    o.log_errors = False  # RE2 would print its refusal on stderr, which a host may show the user
    o.never_capture = not capture
    o.max_mem = MAX_MEM  # past it RE2 refuses the pattern (too large) or searches on its NFA
    return o


def _reason(e: Exception) -> str:
    msg = e.args[0] if e.args else str(e)
    return msg.decode("utf-8", "replace") if isinstance(msg, bytes) else str(msg)


def compile_user(pattern: str) -> UserPattern:
    """`pattern` compiled by RE2; ValueError with RE2's reason when it refuses it."""
    done = _compiled.get(pattern)
    if done is not None:
        return done
    import re2

    src = pattern.encode("utf-8", "surrogatepass")
    try:
        whole = re2.compile(src, _options(True))
        find = re2.compile(src, _options(False))
    except re2.error as e:
        raise ValueError("%r is not a valid regular expression for RE2, the engine `redact` runs on (docs/config.md): %s" % (
            pattern, _reason(e))) from None
    if find.search(b"") is not None:
        raise ValueError("%r matches the empty string (it would mark every position)" % pattern)
    secret = whole.groupindex.get(b"secret", whole.groupindex.get("secret", 0))
    out = _compiled[pattern] = UserPattern(pattern, find, whole if secret else None, secret,
                                           max(find.programsize, find.reverseprogramsize))
    return out


def deadline() -> float:
    """The deadline of one payload's user patterns, from now."""
    return time.monotonic() + TIME_S


def redact_all(patterns, text: str, until: float) -> str:
    """`text` redacted by each of `patterns` in turn, by the deadline `until`.

    A text whose bound is small runs here (if the deadline has not passed); any other runs in
    a worker thread, and when that is not done by the deadline the whole text is withheld.
    """
    clock = time.monotonic
    if len(text) * sum(p.size for p in patterns) <= INLINE_COST:
        if clock() > until:
            return WITHHELD % len(text)
        for p in patterns:
            text = redact(p, text, until)
        return text
    import threading

    box: list = []

    def work() -> None:
        out = text
        for p in patterns:
            out = redact(p, out, until)
        box.append(out)

    t = threading.Thread(target=work, daemon=True)  # abandoned past the deadline: it ends with the search
    t.start()
    t.join(max(0.0, until - clock()))
    return box[0] if box else WITHHELD % len(text)


def redact(p: UserPattern, text: str, until: float) -> str:
    """`text` with each match of `p` replaced by `[redacted: custom]` (or only its `secret` group).

    Past `until`, the text not yet scanned is withheld with its size (PAST_TIME).
    """
    b = text.encode("utf-8", "surrogatepass")
    out = []
    at = 0
    clock = time.monotonic
    for m in p.find.finditer(b):
        s, e = m.span()
        if clock() > until:
            out.append(b[at:s])
            done = _decode(b"".join(out))
            rest = len(text) - len(_decode(b[:s]))
            return done + PAST_TIME % rest
        out.append(b[at:s])
        out.append(_replacement(p, b, s, e))
        at = e
    if not out:
        return text
    out.append(b[at:])
    return _decode(b"".join(out))


def _replacement(p: UserPattern, b: bytes, s: int, e: int) -> bytes:
    if not p.secret:
        return PLACEHOLDER
    m = p.whole.fullmatch(b, s, e)
    if m is None or m.start(p.secret) < 0:
        return PLACEHOLDER
    gs, ge = m.span(p.secret)
    return b[s:gs] + PLACEHOLDER + b[ge:e]


def _decode(b: bytes) -> str:
    try:
        return b.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # `\C` matches one byte and may cut a character in two
        return b.decode("utf-8", "replace")
