"""Run the real Gemini CLI (`gemini -p`) offline, in an isolated home, against a FakeGeminiServer.

    with FakeGeminiServer({"say hi": [{"shell": "echo hi"}, {"say": "done"}]}) as server:
        home = GeminiHome(tmp_path / "gemini", server, gemini=gemini_bin)
        run = home.run("say hi", cwd=project_dir).check()

Isolation: ``HOME`` is ``<root>/home``, so Gemini CLI reads ``<root>/home/.gemini/settings.json``
(which ``egg install gemini`` run with the same env edits) and keeps its chats under
``<root>/home/.gemini/tmp``. Inherited ``GEMINI_*``, ``GOOGLE_*`` and ``XDG_*`` are dropped.

Offline: ``GOOGLE_GEMINI_BASE_URL`` points the API client at the fake server and
``GEMINI_API_KEY`` makes it use a key, not a Google sign-in; the settings turn off usage
statistics, telemetry and the update check, so the fake server is all it talks to (the
suite runs in a network namespace with only loopback, so anything else would fail loudly).
``--skip-trust`` runs in an untrusted project folder headless; ``--yolo`` runs the scripted
tools without asking. Hooks run either way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from codex_harness import CodexRun, agent_env, cli_version, find_pinned, run_agent

PINNED_GEMINI_VERSION = "0.61.0"
GEMINI_ENV_OVERRIDE = "EGGSHELL_E2E_GEMINI"  # path to a gemini binary, wins over the search
DEFAULT_TIMEOUT = 120.0
DEFAULT_MODEL = "gemini-2.5-flash"
DROPPED = ("GEMINI_", "GOOGLE_", "XDG_")  # inherited variables that would point it elsewhere
SETTINGS = {"security": {"auth": {"selectedType": "gemini-api-key"}}, "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False}, "general": {"disableAutoUpdate": True, "disableUpdateNag": True}}


class GeminiNotFound(RuntimeError):
    pass


def find_gemini() -> str:
    """Path of ``gemini``, or raise :class:`GeminiNotFound` with the install command."""
    return find_pinned("gemini", GEMINI_ENV_OVERRIDE, "@google/gemini-cli", PINNED_GEMINI_VERSION, GeminiNotFound)


def gemini_version(gemini: str, timeout: float = 60.0) -> str:
    return cli_version(gemini, DROPPED, timeout)


def _base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return agent_env(DROPPED, extra)


class GeminiRun(CodexRun):
    name = "gemini"


class GeminiHome:
    """An isolated ``HOME`` wired to a fake Gemini API server (anything with ``.base_url``)."""

    def __init__(self, root: str | os.PathLike, server: Any, *, gemini: str, model: str = DEFAULT_MODEL,
                 env: Mapping[str, str] | None = None):
        self.root = Path(root)
        self.home = self.root / "home"
        self.settings_path = self.home / ".gemini" / "settings.json"
        self.settings_path.parent.mkdir(parents=True, exist_ok=True)
        self.settings_path.write_text(json.dumps(SETTINGS, indent=2) + "\n", encoding="utf-8")
        self.base_url = server if isinstance(server, str) else server.base_url
        self.gemini = gemini
        self.model = model
        self.extra_env = dict(env or {})

    def read_settings(self) -> dict:
        return json.loads(self.settings_path.read_text(encoding="utf-8"))

    def env(self, extra_env: Mapping[str, str] | None = None) -> dict[str, str]:
        env = _base_env({"HOME": str(self.home), "GOOGLE_GEMINI_BASE_URL": self.base_url, "GEMINI_API_KEY": "test-key"})
        env.update(self.extra_env)
        env.update(extra_env or {})
        return env

    def run(self, prompt: str, cwd: str | os.PathLike, *, env: Mapping[str, str] | None = None,
            timeout: float = DEFAULT_TIMEOUT, extra_args: Sequence[str] = ()) -> GeminiRun:
        """One ``gemini -p`` chat, waited for; never raises (see ``ClaudeHome.run``)."""
        argv = [self.gemini, "-p", prompt, "-m", self.model, "--yolo", "--skip-trust", *extra_args]
        return run_agent(GeminiRun, argv, cwd, self.env(env), timeout)
