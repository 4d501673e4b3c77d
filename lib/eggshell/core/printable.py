"""Recorded text made safe to show a person: control and direction characters written as escapes.

What Eggshell prints quotes what others wrote: a tool's output, a prompt, a repository's
config (a store's path, a profile's name). On a terminal, ESC starts sequences that write
the clipboard (OSC 52), retitle the window or repaint the screen, a lone CR overwrites the
line it ends, and bidirectional overrides (U+202E) show `txt.exe` for `exe.txt`. So every
printer of recorded text goes through one of these two rules, and nothing else changes:

- `terminal(text)`: a block (`egg show`, `egg find`, `egg graph`, `egg why`, every `egg`
  command's output, through cli/common.say): line breaks and tabs stay, so the text reads
  as recorded; C0 and C1 controls, DEL, a CR not ending a line, lone surrogates and the
  bidi and direction marks (U+061C, U+200E/F, U+202A..U+202E, U+2066..U+2069) are escaped.
- `one_line(text)`: one line (a handoff's frame line, SessionStart's status line): every
  Unicode category C character (controls, format characters, surrogates, unassigned) and
  U+2028/2029 escaped, line breaks included, so nothing can end the line or fake another.

An escape is Python's `unicode_escape` spelling (`\\x1b`, `\\u202e`, `\\n`): visible, and
the same text every time.
"""

from __future__ import annotations

import re
import unicodedata

BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # the characters that reorder what follows them
_TERMINAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f" + BIDI + "\ud800-\udfff]|\r(?!\n)")


def escape(c: str) -> str:
    """One character as its visible escape."""
    return c.encode("unicode_escape").decode("ascii")


def terminal(text: str) -> str:
    """`text` as it may reach a terminal: lines and tabs kept, every control and direction character escaped."""
    return _TERMINAL.sub(lambda m: escape(m.group(0)), text)


def one_line(text: str) -> str:
    """`text` on one line: every control, format and line-separator character escaped (render.plain's rule)."""
    return "".join(c if unicodedata.category(c)[0] != "C" and c not in "\u2028\u2029" else escape(c) for c in text)
