"""End to end with the real Claude Code: record a chat, hand it to the next, stop a repeated call.

Everything is real except the model: ./install.sh into a temporary prefix, `egg install
claude` into a temporary HOME's ~/.claude/settings.json, `egg init` in a temporary project,
then two `claude -p` chats against the scripted local Messages-API server. A counting `rg`
shim first on Claude Code's PATH logs every search that really runs.

Chat 1 searches `rg -n parse_config src` and answers; the turn must be in the project's .egg.
Chat 2 (a new session) asks a related question: its first model request must carry chat 1's
recorded output in the `UserPromptSubmit hook additional context` system reminder, and when
the model proposes the same search again (with another `description`, which Claude Code adds
to every Bash call) the PreToolUse hook must deny it: the model gets the block as the call's
tool_result and the shim never sees a second run. A search no prior work covers
(`rg -n parse_config tests`) still runs.
"""

from __future__ import annotations

import os
import re
import shlex
import stat

import pytest

from claude_harness import ClaudeHome, claude_version, PINNED_CLAUDE_VERSION
from fake_anthropic_server import FakeAnthropicServer, hook_contexts, tool_results, tool_use_id
from test_codex_eggshell import _egg
from test_codex_reuse import RG_SHIM, _project  # the same small project and counting rg shim

from eggshell.reuse.render import data_share

pytestmark = pytest.mark.e2e

CHAT1 = "Where is parse_config defined in this project?"
SEARCH_SRC = "rg -n parse_config src"
READ_SRC = "sed -n 1,20p src/config.py"  # and, as an agent does after a search, the file it found
CHAT1_ANSWER = "parse_config is defined in src/config.py (line 1); load_default calls it on line 14."
CHAT2 = "Does parse_config in src/config.py skip comment lines, and which tests cover it?"
SEARCH_TESTS = "rg -n parse_config tests"  # not covered by chat 1
CHAT2_ANSWER = "Yes: lines starting with # are skipped; tests/test_config.py covers parse_config."

SRC_LINE_1 = "src/config.py:1:def parse_config(path):"
SRC_LINE_14 = 'src/config.py:14:    return parse_config("app.cfg")'
TESTS_LINE_5 = "tests/test_config.py:5:from config import parse_config"
BLOCKED = "PreToolUse:Bash hook error:"  # how Claude Code 2.1.328 hands a denied call's reason to the model
CONTEXT_CAP = 10_000  # Claude Code replaces longer hook output with a preview and a file path


def _shim(directory, log):
    """A counting `rg` first on PATH; returns that PATH.

    Claude Code runs Bash commands with its own PATH (not a login shell that resets it, as
    Codex does), so putting the shim first in its environment is enough.
    """
    directory.mkdir(parents=True)
    rest = os.environ.get("PATH") or "/usr/bin:/bin"
    rg = directory / "rg"
    rg.write_text(RG_SHIM.format(log=shlex.quote(str(log)), rest=shlex.quote(rest)))
    rg.chmod(rg.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return "%s:%s" % (directory, rest)


def _shim_runs(log):
    return log.read_text().splitlines() if log.exists() else []


def _stored_turn(prefix, project, env, prompt):  # noqa: F811
    """`egg show` of the turn `egg find` lists first for this prompt."""
    found = _egg(prefix, ["find", prompt], project, env)
    key = re.match(r"([0-9a-f]{12})\s", found)
    assert key, found
    return _egg(prefix, ["show", key.group(1)], project, env)


def test_claude_version_is_the_pinned_one(claude_bin):
    assert claude_version(claude_bin) == "%s (Claude Code)" % PINNED_CLAUDE_VERSION


def test_claude_chats_are_recorded_handed_over_and_a_repeat_is_denied(claude_bin, prefix, tmp_path):  # noqa: F811
    project = _project(tmp_path / "project")
    shim_log = tmp_path / "rg-runs.log"
    scripts = {
        CHAT1: [{"bash": SEARCH_SRC, "description": "Find where parse_config is defined"},
                {"bash": READ_SRC, "description": "Read parse_config"}, {"say": CHAT1_ANSWER}],
        CHAT2: [{"bash": SEARCH_SRC, "description": "Look at parse_config in src"},
                {"bash": SEARCH_TESTS, "description": "Find the tests of parse_config"},
                {"say": CHAT2_ANSWER}],
    }
    with FakeAnthropicServer(scripts) as server:
        data_root = tmp_path / "data"
        env = {"EGGSHELL_PREFIX": str(prefix), "EGGSHELL_DATA_ROOT": str(data_root), "PATH": _shim(tmp_path / "shim", shim_log)}
        home = ClaudeHome(tmp_path / "claude", server, claude=claude_bin, env=env)
        tool_env = home.env()

        out = _egg(prefix, ["install", "claude"], project, tool_env)
        assert str(home.settings_path) in out, out
        hooks = home.read_settings()["hooks"]
        for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact",
                      "PostCompact", "Stop", "SessionEnd"):
            assert [h["command"] for g in hooks[event] for h in g["hooks"]] == ["%s/bin/egg-hook claude" % prefix], event
        _egg(prefix, ["init"], project, tool_env)
        egg_file = project / ".eggs" / "work.egg"

        # Chat 1: the search really runs, the model answers, and Eggshell records the turn.
        run1 = home.run(CHAT1, project).check()
        assert CHAT1_ANSWER in run1.stdout, str(run1)
        assert _shim_runs(shim_log) == ["-n parse_config src"], (_shim_runs(shim_log), str(run1))
        reqs1 = server.requests_for(CHAT1)
        assert [r.step for r in reqs1] == [0, 1, 2], [(r.step, r.reply) for r in reqs1]
        assert hook_contexts(reqs1[0]) == [], "chat 1 had nothing to reuse: %r" % hook_contexts(reqs1[0])
        search_out = tool_results(reqs1[1])[tool_use_id(reqs1[1], SEARCH_SRC)]
        assert SRC_LINE_1 in search_out and SRC_LINE_14 in search_out, search_out

        assert egg_file.exists(), "chat 1 was not recorded:\n%s" % run1.stderr[-3000:]
        assert "1 turn," in _egg(prefix, ["fsck", str(egg_file)], project, tool_env)
        shown = _stored_turn(prefix, project, tool_env, "parse_config defined")
        assert CHAT1 in shown and CHAT1_ANSWER in shown, shown
        # the command (with the key of its Work, for `egg union`) and its stdout, as text
        assert re.search(r"Bash: %s  \[work [0-9a-f]{12}\]\n%s" % (re.escape(SEARCH_SRC), re.escape(SRC_LINE_1)), shown), shown

        # Chat 2, a new session: the related question gets chat 1's work as context ...
        run2 = home.run(CHAT2, project).check()
        assert CHAT2_ANSWER in run2.stdout, str(run2)
        reqs2 = server.requests_for(CHAT2)
        assert [r.step for r in reqs2] == [0, 1, 2], [(r.step, r.reply) for r in reqs2]
        contexts = hook_contexts(reqs2[0])
        assert len(contexts) == 1, ("chat 2's first request carries no UserPromptSubmit context in a system reminder "
                                    "(with another model Claude Code puts it in a role: system message)")
        handoff = contexts[0]
        assert len(handoff) < CONTEXT_CAP, "the handoff (%d chars) is over Claude Code's cap" % len(handoff)
        assert "EGGSHELL PRIOR WORK" in handoff and CHAT1 in handoff and CHAT1_ANSWER in handoff, handoff
        assert SEARCH_SRC in handoff and SRC_LINE_1 in handoff, handoff  # the prior tool output, verbatim
        assert data_share(handoff) >= 0.60, (data_share(handoff), handoff)  # mostly recorded data, not frame

        # ... and its repeat of chat 1's search is denied: it never runs, the model is told why.
        blocked_id = tool_use_id(reqs2[1], SEARCH_SRC)
        reason = tool_results(reqs2[1]).get(blocked_id)
        assert reason is not None and reason.startswith(BLOCKED), "the repeated search was not denied: %r\n%s" % (
            reason, run2.stderr[-3000:])
        assert "this call was not run, because earlier work already did it:\n$ %s\n" % SEARCH_SRC in reason, reason
        # The recorded output is not resent: the reason names the item the handoff already gave.
        evidence = re.search(r"recorded output \(\[([0-9a-f]{12})\]\) is already in this chat's context", reason)
        assert evidence and "\n[%s] Call" % evidence.group(1) in handoff, reason
        assert "| " + SRC_LINE_1 in handoff.split("\n[%s] Call" % evidence.group(1), 1)[1], handoff
        # A sentence, its full stop its own (Claude Code may append a <system-reminder> of its own after it).
        assert reason.split("\n\n<system-reminder>", 1)[0].rstrip().endswith("propose it again."), reason
        runs = _shim_runs(shim_log)
        assert runs.count("-n parse_config src") == 1, runs  # chat 1's run only

        # The uncovered search is allowed, and the model gets its real output.
        assert runs.count("-n parse_config tests") == 1 and len(runs) == 2, runs
        allowed = tool_results(reqs2[2]).get(tool_use_id(reqs2[2], SEARCH_TESTS))
        assert allowed is not None and BLOCKED not in allowed and TESTS_LINE_5 in allowed, allowed
        assert tool_results(reqs2[2])[blocked_id] == reason  # history is kept

        # Both chats were recorded, the store is sound, and no hook failed.
        assert "2 turns" in _egg(prefix, ["fsck", str(egg_file)], project, tool_env)
        hook_log = data_root / "logs" / "hook.log"
        assert not hook_log.exists() or not hook_log.read_text().strip(), hook_log.read_text()


def test_a_broken_config_is_shown_when_a_chat_starts(claude_bin, prefix, tmp_path):
    """SessionStart names a broken .eggshell.toml, its line and the fix, where Claude Code shows the
    user (its interactive screen: `claude -p` prints no systemMessage, tests/e2e/screen.py)."""
    import json

    from screen import screen_until

    project = tmp_path / "project"
    project.mkdir()
    with FakeAnthropicServer({"hello": [{"say": "Hello."}]}) as server:
        env = {"EGGSHELL_PREFIX": str(prefix), "EGGSHELL_DATA_ROOT": str(tmp_path / "data")}
        home = ClaudeHome(tmp_path / "claude", server, claude=claude_bin, env=env)
        tool_env = home.env()
        _egg(prefix, ["install", "claude"], project, tool_env)
        _egg(prefix, ["init"], project, tool_env)
        # The interactive UI asks first-run questions (theme, trusting the folder, the API key) unless answered here.
        (home.home / ".claude.json").write_text(json.dumps({
            "hasCompletedOnboarding": True, "theme": "dark", "customApiKeyResponses": {"approved": ["sk-test"], "rejected": []},
            "projects": {str(project): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}}}))
        config = project / ".eggshell.toml"
        config.write_text('default = "work"\ntop_k = "five"\n')
        told = ("Eggshell is OFF for this project: %s line 2: 'top_k' must be an integer from 1 to 50, got 'five'; "
                "fix it or run `egg doctor`" % config)
        argv = [claude_bin, "--model", home.model, "hello"]
        shown, screen = screen_until(argv, str(project), tool_env, "SessionStart:startup says: " + told)
        assert shown, "Claude Code's screen does not show %r:\n%s" % (told, screen[-3000:])
