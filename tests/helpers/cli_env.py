"""`egg` run in-process with an isolated prefix, data root and Codex home (the cli tests' Egg)."""

from __future__ import annotations

import json
import os

from helpers import REPO
from eggshell.cli import main as cli

BIN = os.path.join(REPO, "bin")


class Egg:
    """Runs `egg` in-process with an isolated prefix, data root and Codex home."""

    def __init__(self, tmp, monkeypatch, capsys):
        self.tmp, self.mp, self.capsys = tmp, monkeypatch, capsys
        self.prefix = tmp / "prefix"
        self.codex = tmp / "codex"
        self.hooks = self.codex / "hooks.json"
        for k in list(os.environ):
            if k.startswith(("EGGSHELL_", "CODEX_")):
                monkeypatch.delenv(k)
        monkeypatch.setenv("EGGSHELL_PREFIX", str(self.prefix))
        monkeypatch.setenv("EGGSHELL_DATA_ROOT", str(tmp / "data"))
        monkeypatch.setenv("CODEX_HOME", str(self.codex))
        monkeypatch.setenv("EGGSHELL_BIN", BIN)
        self.cwd = tmp / "work"
        self.cwd.mkdir()
        monkeypatch.chdir(self.cwd)

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        rc = cli.main(list(argv))
        cap = self.capsys.readouterr()
        return rc, cap.out, cap.err

    def hooks_json(self) -> dict:
        return json.loads(self.hooks.read_text())
