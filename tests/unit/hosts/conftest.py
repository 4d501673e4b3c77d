"""Fixtures the host tests share."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An isolated HOME, prefix and data root for `egg` run in-process, with the checkout's bin/;
    no inherited variable points a host's settings elsewhere."""
    from helpers import REPO

    for k in list(os.environ):
        if k.startswith(("EGGSHELL_", "GEMINI_", "OPENCODE_", "XDG_", "CLAUDE_CONFIG_DIR", "CODEX_HOME")):
            monkeypatch.delenv(k)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("EGGSHELL_PREFIX", str(tmp_path / "prefix"))
    monkeypatch.setenv("EGGSHELL_DATA_ROOT", str(tmp_path / "data"))
    monkeypatch.setenv("EGGSHELL_BIN", os.path.join(REPO, "bin"))
    return home
