"""Claude Code (2.1): hooks in its user settings file, payloads of the lifecycle's shape.

It names a turn `prompt_id`, reports a failed call (a non-zero exit) as PostToolUseFailure
with the text in `error`, groups tool events by a matcher, and accepts less hook context
than Codex (about 10,000 characters). What egg-hook does with each event: docs/hooks.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from eggshell.hosts.base import Host, expand
from eggshell.paths import Paths


class Claude(Host):
    name = "claude"
    label = "Claude Code"
    binary = "claude"
    context_cap = 10000
    chat_env = None  # it sets no chat id for commands; `!egg` there takes --chat or EGGSHELL_CHAT
    # All of these fire for `claude` and `claude -p`. Events egg-hook does not act on yet are
    # registered too, so handling them later needs no reinstall.
    events = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact",
              "PostCompact", "Stop", "SessionEnd")
    tool_events = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
    turn_keys = ("turn_id", "prompt_id")
    option = "--settings"
    option_help = "Claude Code's settings file (default: $CLAUDE_CONFIG_DIR/settings.json, else ~/.claude/settings.json)"
    next_step = ("Other settings and hooks in that file were kept. Next: start a new Claude Code session in a project "
                 "with .eggshell.toml (`egg init`); /hooks in Claude Code lists these hooks.")
    # Claude Code 2.1.328 gives SessionEnd hooks one budget: the largest SessionEnd timeout, at least
    # 1.5 s and at most 60 s (silently); every other event takes the timeout it is given.
    timeout_limits = {"SessionEnd": 60}

    def settings_file(self, paths: Paths, env: Mapping[str, str], given: str | None) -> str:
        """With CLAUDE_CONFIG_DIR set, Claude Code reads only that directory's settings, not ~/.claude's."""
        if given:
            return expand(given)
        config_dir = (env.get("CLAUDE_CONFIG_DIR") or "").strip()  # it treats blank as unset
        home = env.get("HOME") or os.path.expanduser("~")
        return os.path.join(expand(config_dir) if config_dir else os.path.join(home, ".claude"), "settings.json")


HOST = Claude()
