"""What SessionStart tells the user when memory is off, or partly off: one line, the cause and the fix.

Hooks fail open: with a broken config, a refused data root or a damaged store every event
answers {} and the host shows only that the hook completed, so memory would stay off until
the user thought of `egg doctor`. SessionStart's reply is the one the hosts show the user
(docs/hooks.md), so it says what is wrong there instead of the usual status line. Every
check is cheap: the config SessionStart loads anyway, a few stats, the store its status line
counts anyway; no model is loaded.
"""

from __future__ import annotations

import os
import re

from eggshell.core import printable

OFF = "Eggshell is OFF for this project: "


def one_line(text: str) -> str:
    """`text` with every control and format character (a newline, ESC, U+2028, a right-to-left
    override) written as its escape: the line quotes what a repository wrote (a profile's name, a
    store's path), and a host draws it on the user's terminal, where an escape sequence could repaint
    the screen, a newline fake a second line, or U+202E show a path reversed (core/printable.one_line)."""
    return printable.one_line(text)


def config_off(e: Exception) -> str:
    """A config error (config.ConfigError) as SessionStart's line: the file and line, the key, the rule."""
    return one_line(OFF + with_line(str(e)) + "; fix it or run `egg doctor`")


def root_off(why: str) -> str:
    """The data root is refused (paths.UnsafePath): nothing is recorded, in any project."""
    return one_line("Eggshell is OFF (nothing is recorded or handed over, in any project): %s; `egg doctor` checks the "
                    "rest" % why)


def store_off(why: str) -> str:
    """The chat's write store is refused (paths.store_problem): no turn of it is journaled."""
    return one_line(OFF + why)


def damaged_off(e: Exception, path: str) -> str:
    """The chat's store cannot be read (graph.store.EggError, which names the file and line)."""
    return one_line(OFF + "%s; nothing is handed over from it, and new turns wait in the journal until it can be read: "
                    "`egg fsck %s` says what is wrong" % (e, path))


def matcher_note(cfg, prefix: str) -> str | None:
    """What the status line adds when the semantic side the config asks for cannot run (None: it can)."""
    from eggshell.search import installed

    m = installed.in_force(cfg, prefix)
    if m.problem is None:
        return None
    return "prompts are matched lexically only (%s)" % m.problem


# What a config error's message names after "FILE: " (config.py's messages), and a TOML table header.
_KEY = r"(?:unknown key )?'([A-Za-z0-9_.-]+)'"
_PROFILE = r"\[profiles\.([A-Za-z0-9_.-]+)\](?:: (?:unknown key )?'([A-Za-z0-9_]+)')?"
_EGG = r"\[eggs\] ([A-Za-z0-9_.-]+)"
_HEADER = r"\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$"


def with_line(msg: str) -> str:
    """A config error's message with the line of the key it names: "FILE line N: ..." (unchanged
    when the file cannot be read or the key not found, and for TOML syntax errors, which name
    their line and column already)."""
    path, sep, rest = msg.partition(": ")
    if not sep or "(at line " in rest:
        return msg
    n = None
    if m := re.match(_PROFILE, rest):
        n = key_line(path, "profiles." + m.group(1), m.group(2))
    elif m := re.match(_EGG, rest):
        n = key_line(path, "eggs", m.group(1))
    elif m := re.match(_KEY, rest):
        n = key_line(path, None, m.group(1))
    return "%s line %d: %s" % (path, n, rest) if n else msg


def key_line(path: str, table: str | None, key: str | None) -> int | None:
    """The line of `key` in `table` (None: the top level) of a TOML file, or of the table's own
    header when `key` is None; None when it is not there or the file cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read(1 << 20).splitlines()
    except OSError:
        return None
    current = None
    assign = re.compile(r"""\s*["']?%s["']?\s*=""" % re.escape(key)) if key else None
    for n, line in enumerate(lines, 1):
        h = re.match(_HEADER, line)
        if h:
            current = re.sub(r"""\s*\.\s*|["']""", lambda x: "." if "." in x.group(0) else "", h.group(1))
            if key is None and current == table:
                return n
            continue
        if assign is not None and current == table and assign.match(line):
            return n
    if key is not None and table is not None:
        return key_line(path, table, None)  # the key is the table's (a missing one): its header
    return None


def data_root_off(data_root: str, e: OSError) -> str:
    """A data root that cannot be checked (a stat failed: a parent not searchable, an I/O error)."""
    try:
        mode = " (mode %04o)" % (os.stat(data_root).st_mode & 0o7777)
    except OSError:
        mode = ""
    return ("%s%s: cannot be checked: %s; fix its permissions, or set EGGSHELL_DATA_ROOT "
            "to a directory of yours" % (data_root, mode, e.strerror or e))
