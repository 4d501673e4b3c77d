"""The hosts Eggshell serves, in one place: `egg-hook HOST`, `egg install HOST` and `egg doctor` read this.

The built-in hosts are registered exactly as another would be: a module in this folder
exposing HOST (a hosts.base.Host), listed here.
"""

from __future__ import annotations

from eggshell.hosts.base import Host

NAMES = ("codex", "claude", "gemini", "opencode", "cursor")


def get(name: str) -> Host | None:
    """The host called `name`, or None when there is none by that name.

    Only that host's module is loaded (a hook serves one host); `__import__`, not importlib,
    whose own import costs a hook more than the module it finds."""
    if name not in NAMES:
        return None
    return __import__("eggshell.hosts." + name, fromlist=["HOST"]).HOST


def every() -> list[Host]:
    return [get(n) for n in NAMES]
