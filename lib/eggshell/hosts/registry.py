"""The hosts Eggshell serves, in one place: `egg-hook HOST`, `egg install HOST` and `egg doctor` read this.

The built-in hosts are registered exactly as another would be: a module in this folder
exposing HOST (a hosts.base.Host), named here.
"""

from __future__ import annotations

import importlib

from eggshell.hosts.base import Host

NAMES = ("codex", "claude")


def get(name: str) -> Host | None:
    """The host called `name`, or None when there is none by that name."""
    if name not in NAMES:
        return None
    return importlib.import_module("eggshell.hosts." + name).HOST


def every() -> list[Host]:
    return [get(n) for n in NAMES]
