"""Run the real OpenCode (`opencode run`) offline, in an isolated home, against a FakeOpenAIServer.

    with FakeOpenAIServer({"say hi": [{"shell": "echo hi"}, {"say": "done"}]}) as server:
        home = OpenCodeHome(tmp_path / "opencode", server, opencode=opencode_bin)
        run = home.run("say hi", cwd=project_dir).check()

Isolation: ``HOME`` is ``<root>/home``, so OpenCode reads its config and plugins from
``<root>/home/.config/opencode`` (where ``egg install opencode`` run with the same env writes
the plugin) and keeps its sessions under ``<root>/home/.local/share/opencode``. Inherited
``OPENCODE_*`` and ``XDG_*`` variables are dropped.

Offline: the config names one provider, ``fake`` (OpenCode's bundled openai-compatible SDK,
``baseURL`` the fake server), and its one model; the models.dev catalog fetch, the update
check, LSP downloads and sharing are turned off, so the fake server is all it talks to (the
suite runs in a network namespace with only loopback). Every permission is allowed, so the
scripted tools run headless. The prompt goes on stdin: `opencode run` quotes a message
argument that holds spaces.

One more thing reaches for the network: at start OpenCode installs its plugin SDK
(`@opencode-ai/plugin`) into each config folder from npm, and when any plugin is there it waits
for that install before it loads them (1.18.33: Npm.install, then waitForDependencies). Offline,
that wait outlasts any test (over 3 minutes, observed). It skips the install where the folder
has a node_modules/ and a package-lock.json that already lists the package, as after an
earlier online start; the home is seeded so (Eggshell's plugin imports nothing from it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from codex_harness import CodexRun, agent_env, cli_version, find_pinned, run_agent

PINNED_OPENCODE_VERSION = "1.18.33"
OPENCODE_ENV_OVERRIDE = "EGGSHELL_E2E_OPENCODE"  # path to an opencode binary, wins over the search
DEFAULT_TIMEOUT = 120.0
DROPPED = ("OPENCODE_", "XDG_")  # inherited variables that would point it elsewhere
OFFLINE = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
           "OPENCODE_DISABLE_SHARE": "1"}


class OpenCodeNotFound(RuntimeError):
    pass


def find_opencode() -> str:
    """Path of ``opencode``, or raise :class:`OpenCodeNotFound` with the install command."""
    return find_pinned("opencode", OPENCODE_ENV_OVERRIDE, "opencode-ai", PINNED_OPENCODE_VERSION, OpenCodeNotFound)


def opencode_version(opencode: str, timeout: float = 60.0) -> str:
    return cli_version(opencode, DROPPED, timeout, **OFFLINE)


class OpenCodeRun(CodexRun):
    name = "opencode"


def config(base_url: str) -> dict:
    return {"$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
            "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Scripted",
                                  "options": {"baseURL": base_url, "apiKey": "test-key"},
                                  "models": {"scripted": {"name": "Scripted", "tool_call": True}}}},
            "model": "fake/scripted", "small_model": "fake/scripted", "permission": {"*": "allow"}}


class OpenCodeHome:
    """An isolated ``HOME`` wired to a fake Chat Completions server (anything with ``.base_url``)."""

    def __init__(self, root: str | os.PathLike, server: Any, *, opencode: str, env: Mapping[str, str] | None = None):
        self.root = Path(root)
        self.home = self.root / "home"
        self.config_dir = self.home / ".config" / "opencode"
        self.config_dir.mkdir(parents=True, exist_ok=True)
        self.base_url = server if isinstance(server, str) else server.base_url
        (self.config_dir / "opencode.json").write_text(json.dumps(config(self.base_url), indent=2) + "\n", encoding="utf-8")
        deps = {"@opencode-ai/plugin": PINNED_OPENCODE_VERSION}
        (self.config_dir / "node_modules").mkdir()
        (self.config_dir / "package.json").write_text(json.dumps({"dependencies": deps}) + "\n", encoding="utf-8")
        (self.config_dir / "package-lock.json").write_text(
            json.dumps({"lockfileVersion": 3, "packages": {"": {"dependencies": deps}}}) + "\n", encoding="utf-8")
        self.plugin_path = self.config_dir / "plugins" / "eggshell.js"
        self.opencode = opencode
        self.extra_env = dict(env or {})

    def env(self, extra_env: Mapping[str, str] | None = None) -> dict[str, str]:
        env = agent_env(DROPPED, {"HOME": str(self.home), **OFFLINE})
        env.update(self.extra_env)
        env.update(extra_env or {})
        return env

    def run(self, prompt: str, cwd: str | os.PathLike, *, env: Mapping[str, str] | None = None,
            timeout: float = DEFAULT_TIMEOUT, extra_args: Sequence[str] = ()) -> OpenCodeRun:
        """One ``opencode run`` chat, waited for; never raises (see ``ClaudeHome.run``)."""
        argv = [self.opencode, "run", *extra_args]
        # It takes its directory from $PWD, not from the working directory it was started in.
        return run_agent(OpenCodeRun, argv, cwd, {**self.env(env), "PWD": str(cwd)}, timeout, stdin=prompt)
