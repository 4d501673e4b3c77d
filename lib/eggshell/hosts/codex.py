"""Codex CLI (`@openai/codex`): hooks in `$CODEX_HOME/hooks.json`, the lifecycle's own payloads.

Codex runs `!egg ...` and the model's commands with the chat's id in CODEX_THREAD_ID, and
appends ". Command: CMD" to a deny reason itself. It asks the user to review and trust new
or changed hooks (/hooks) before it runs them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from eggshell.hosts.base import Host, expand
from eggshell.paths import Paths


class Codex(Host):
    name = "codex"
    label = "Codex"
    binary = "codex"
    context_cap = 48000  # characters of hook context it accepts
    chat_env = "CODEX_THREAD_ID"
    events = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostCompact", "Stop", "SessionEnd")
    option = "--codex-home"
    option_metavar = "DIR"
    option_help = "Codex's home (default: $CODEX_HOME or ~/.codex)"
    required = True  # the host Eggshell is set up for first (README)
    doctor_note = "Codex runs new or changed hooks only once you review and trust them: open /hooks in Codex"
    next_step = "Other hooks in that file were kept. Review and trust the new hooks in Codex with /hooks."
    # Codex 0.169 cuts these down and warns in every chat ("warning: clamping SessionEnd hook timeout
    # to 3s in .../hooks.json"), observed with 30 s and 100000 s on every event: the others keep theirs.
    # egg-hook's own budget for them is 2 s (EGGSHELL_BUDGET_END_S), inside the 3.
    timeout_limits = {"SessionEnd": 3, "Interrupt": 3}

    def deny_reason(self, text: str) -> str:
        # Codex appends ". Command: CMD": a reason ending in its own full stop would read "..".
        return text[:-1] if text.endswith(".") else text

    def settings_file(self, paths: Paths, env: Mapping[str, str], given: str | None) -> str:
        return os.path.join(expand(given) if given else paths.codex_home, "hooks.json")


HOST = Codex()
