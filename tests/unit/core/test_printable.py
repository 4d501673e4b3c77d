"""core/printable: recorded text shown to a person, with control and direction characters escaped.

Red-team round IV: `egg show` printed a recorded OSC 52 clipboard write raw
(inj_terminal_egg_show), and SessionStart's status line carried a repository's U+202E raw
(inj_bidi_in_status_path). One module now holds both rules; cli/common.say, health.one_line
and render.plain use it.
"""

from __future__ import annotations

import pytest

from eggshell.core import printable
from eggshell.reuse.render import plain
from eggshell.runtime import health

HOSTILE = {
    "OSC 52 clipboard write": "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07",
    "window title": "\x1b]0;EGGPWN\x07",
    "clear screen (CSI)": "\x1b[2J",
    "C1 CSI": "\x9b2J",
    "C1 OSC with ST": "\x9d0;t\x9c",
    "DEL": "a\x7fb",
    "NUL": "a\x00b",
    "BEL": "\x07",
    "backspace": "abc\x08\x08\x08xyz",
    "lone CR overwrites the line": "rm -rf ~\rls -la   ",
    "vertical tab and form feed": "a\x0bb\x0cc",
    "lone surrogate": "a\ud83db",
    **{"bidi U+%04X" % ord(c): "x%sy" % c for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"},
}
DANGEROUS = set(map(chr, [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0)])) | set(
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def raw_controls(s: str) -> set[str]:
    """The dangerous characters `s` holds raw (a CR counts unless it ends a line)."""
    out = {c for c in s if c in DANGEROUS or 0xD800 <= ord(c) <= 0xDFFF}
    if "\r" in s.replace("\r\n", ""):
        out.add("\r")
    return out


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_terminal_escapes_every_control_and_direction_character(name):
    text = "before %s after\n" % HOSTILE[name]
    shown = printable.terminal(text)
    assert raw_controls(shown) == set(), repr(shown)
    assert shown.startswith("before ") and shown.endswith(" after\n")
    assert shown.encode("utf-8")  # printable: no lone surrogate left to fail the write


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_one_line_escapes_them_too(name):
    shown = printable.one_line("p %s\nq" % HOSTILE[name])
    assert raw_controls(shown) == set() and "\n" not in shown, repr(shown)


@pytest.mark.parametrize("text", [
    "line one\nline two\n",
    "col\tcol\tcol\n",
    "crlf line\r\nnext\r\n",
    "caf\u00e9 \u65e5\u672c\u8a9e \u0645\u0631\u062d\u0628\u0627 \U0001F469\u200d\U0001F4BB \u00ad",
    "plain ascii with \\x1b spelled out",
])
def test_terminal_keeps_everything_else_as_recorded(text):
    assert printable.terminal(text) == text


def test_the_escapes_are_visible_and_exact():
    assert printable.terminal("\x1b]52;c;QQ==\x07") == "\\x1b]52;c;QQ==\\x07"
    assert printable.terminal("a\u202eb") == "a\\u202eb"
    assert printable.terminal("a\rb\r\n") == "a\\rb\r\n"
    assert printable.one_line("a\nb\u2028c\u202e") == "a\\nb\\u2028c\\u202e"


@pytest.mark.parametrize("text", [".eggs/\u202etxt.exe\u202c.egg", "w\x1b]0;title\x07.egg", "x\ny", "ok \u00e9", "\u2066a\u2069\u200f"])
def test_the_one_line_printers_share_one_rule(text):
    """health.one_line (SessionStart's status line) and render.plain (a handoff's frame lines)."""
    assert health.one_line(text) == plain(text) == printable.one_line(text)
    assert raw_controls(health.one_line(text)) == set()
