"""Run the real Claude Code (`claude -p`) offline, in an isolated home, against a FakeAnthropicServer.

    with FakeAnthropicServer({"say hi": [{"bash": "echo hi"}, {"say": "done"}]}) as server:
        home = ClaudeHome(tmp_path / "claude", server)
        home.write_settings({"hooks": {...}})
        run = home.run("say hi", cwd=project_dir).check()

Isolation: ``HOME`` is ``<root>/home``, so Claude Code reads and writes ``<root>/home/.claude``
(``settings.json``, ``projects/`` transcripts, ``.claude.json``) and ``egg install claude`` run
with the same env lands in the same place. Inherited ``ANTHROPIC_*``, ``CLAUDE_*`` (among them
``CLAUDE_CONFIG_DIR``, which would move the settings file, and ``CLAUDECODE``) and ``XDG_*`` are
dropped.

Offline: with ``ANTHROPIC_BASE_URL`` alone, Claude Code 2.1.328 still opened three connections
to ``api.anthropic.com:443`` per run (seen through a refusing proxy);
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` stops all of them. What is left is
``HEAD /api/hello`` and ``POST /v1/messages`` to the fake server.

Root: Claude Code refuses ``--dangerously-skip-permissions`` as root (CI runs as root), so runs
use ``--permission-mode acceptEdits --allowedTools Bash``, which lets Bash run without a prompt.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from codex_harness import CodexRun, agent_env, cli_version, find_pinned, run_agent  # the same run record, binary search and run as for Codex

REPO_ROOT = Path(__file__).resolve().parents[2]
PINNED_CLAUDE_VERSION = "2.1.328"
CLAUDE_ENV_OVERRIDE = "EGGSHELL_E2E_CLAUDE"  # path to a claude binary, wins over the search
DEFAULT_TIMEOUT = 120.0
# The model decides where Claude Code 2.1.328 puts hook additionalContext: for claude-sonnet-4-5
# (and haiku) it is a `<system-reminder>` text block in the user message; for the default model
# (claude-opus-5-5) it is a paragraph of a `role: "system"` message. Tests pin the first.
DEFAULT_MODEL = "claude-sonnet-4-5"
QUIET_ENV = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
DROPPED = ("ANTHROPIC_", "CLAUDE", "XDG_")  # inherited variables that would point it elsewhere


class ClaudeNotFound(RuntimeError):
    pass


def find_claude() -> str:
    """Path of ``claude``, or raise :class:`ClaudeNotFound` with the install command."""
    return find_pinned("claude", CLAUDE_ENV_OVERRIDE, "@anthropic-ai/claude-code", PINNED_CLAUDE_VERSION, ClaudeNotFound)


def claude_version(claude: str, timeout: float = 60.0) -> str:
    """``claude --version``, e.g. ``"2.1.328 (Claude Code)"``, run with a throwaway HOME."""
    return cli_version(claude, DROPPED, timeout, **QUIET_ENV)


def _base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return agent_env(DROPPED, {**QUIET_ENV, **(extra or {})})


class ClaudeRun(CodexRun):
    """``(returncode, stdout, stderr)``, plus ``.duration`` (s), ``.argv``, ``.cwd``, ``.timed_out``."""

    name = "claude"


class ClaudeHome:
    """An isolated ``HOME`` wired to a fake Messages-API server (anything with ``.base_url``).

    ``env`` is extra environment for every run (e.g. ``EGGSHELL_PREFIX``); :meth:`env` gives the
    whole environment, also right for running ``egg install claude`` into this home.
    """

    def __init__(self, root: str | os.PathLike, server: Any, *, claude: str, model: str = DEFAULT_MODEL,
                 env: Mapping[str, str] | None = None):
        self.root = Path(root)
        self.home = self.root / "home"
        self.config_dir = self.home / ".claude"
        self.config_dir.mkdir(parents=True, exist_ok=True)
        self.base_url = server if isinstance(server, str) else server.base_url
        self.claude = claude
        self.model = model
        self.extra_env = dict(env or {})

    @property
    def settings_path(self) -> Path:
        return self.config_dir / "settings.json"

    def write_settings(self, settings: Mapping[str, Any]) -> Path:
        self.settings_path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
        return self.settings_path

    def read_settings(self) -> dict:
        return json.loads(self.settings_path.read_text(encoding="utf-8"))

    def env(self, extra_env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment Claude Code (and so every hook) runs with."""
        env = _base_env({"HOME": str(self.home), "ANTHROPIC_BASE_URL": self.base_url, "ANTHROPIC_API_KEY": "sk-test"})
        env.update(self.extra_env)
        env.update(extra_env or {})
        return env

    def command(self, prompt: str, extra_args: Sequence[str] = ()) -> list[str]:
        # The prompt right after -p: --allowedTools takes a list and would swallow a later one.
        return [self.claude, "-p", prompt, "--model", self.model, "--permission-mode", "acceptEdits",
                "--allowedTools", "Bash", *extra_args]

    def run(self, prompt: str, cwd: str | os.PathLike, *, env: Mapping[str, str] | None = None,
            timeout: float = DEFAULT_TIMEOUT, extra_args: Sequence[str] = ()) -> ClaudeRun:
        """One ``claude -p`` chat, waited for. Never raises on a failure or timeout (the process
        group is killed, ``.timed_out`` is set): use ``.check()`` or assert on the tuple. Hooks
        are synchronous, so every hook has finished when this returns."""
        return run_agent(ClaudeRun, self.command(prompt, extra_args), cwd, self.env(env), timeout)
