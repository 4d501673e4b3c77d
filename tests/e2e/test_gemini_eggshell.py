"""End to end with the real Gemini CLI: record a chat, hand it to the next, stop a repeated call once.

Everything is real except the model: ./install.sh into a temporary prefix, `egg install
gemini` into a temporary HOME's ~/.gemini/settings.json, `egg init` in a temporary project,
then `gemini -p` chats against the scripted local Gemini API server (fake_gemini_server.py).
A counting `rg` shim first on Gemini CLI's PATH logs every search that really runs.

Chat 1 searches `rg -n parse_config src` and answers: the turn must be in the project's .egg.
Chat 2 (a new session) asks a related question: its first model request must carry chat 1's
recorded work in the prompt (BeforeAgent's additionalContext is appended to it), and its
repeat of the search is denied by BeforeTool: the model gets the reason as the call's error
and the shim never sees a second run. A search no prior work covers still runs. Chat 3,
unrelated, is handed nothing.
"""

from __future__ import annotations

import json

import pytest

from fake_gemini_server import FakeGeminiServer, function_responses, user_texts
from gemini_harness import PINNED_GEMINI_VERSION, GeminiHome, gemini_version
from test_claude_eggshell import _shim, _shim_runs as _runs, _stored_turn
from test_codex_eggshell import _egg
from test_codex_reuse import _project

pytestmark = pytest.mark.e2e

CHAT1 = "Where is parse_config defined in this project?"
SEARCH_SRC = "rg -n parse_config src"
CHAT1_ANSWER = "parse_config is defined in src/config.py (line 1); load_default calls it on line 14."
CHAT2 = "Does parse_config in src/config.py skip comment lines, and which tests cover it?"
SEARCH_TESTS = "rg -n parse_config tests"
CHAT2_ANSWER = "Yes: lines starting with # are skipped; tests/test_config.py covers parse_config."
CHAT3 = "Write a haiku about autumn leaves."
SRC_LINE_1 = "src/config.py:1:def parse_config(path):"
TESTS_LINE_5 = "tests/test_config.py:5:from config import parse_config"


def _responses(request) -> list[str]:
    """What the model got back for each call, as text (a denied call's reason is in it)."""
    return [json.dumps(r.get("response"), ensure_ascii=False) for r in function_responses(request.body)]


def test_gemini_version_is_the_pinned_one(gemini_bin):
    assert gemini_version(gemini_bin) == PINNED_GEMINI_VERSION


def test_gemini_chats_are_recorded_handed_over_and_a_repeat_is_denied(gemini_bin, prefix, tmp_path):
    project = _project(tmp_path / "project")
    shim_log = tmp_path / "rg-runs.log"
    scripts = {
        CHAT1: [{"shell": SEARCH_SRC}, {"say": CHAT1_ANSWER}],
        CHAT2: [{"shell": SEARCH_SRC}, {"shell": SEARCH_TESTS}, {"say": CHAT2_ANSWER}],
        CHAT3: [{"say": "Leaves fall."}],
    }
    with FakeGeminiServer(scripts) as server:
        data_root = tmp_path / "data"
        env = {"EGGSHELL_PREFIX": str(prefix), "EGGSHELL_DATA_ROOT": str(data_root), "PATH": _shim(tmp_path / "shim", shim_log)}
        home = GeminiHome(tmp_path / "gemini", server, gemini=gemini_bin, env=env)
        tool_env = home.env()
        out = _egg(prefix, ["install", "gemini"], project, tool_env)
        assert str(home.settings_path) in out, out
        hooks = home.read_settings()["hooks"]
        for event in ("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent", "PreCompress", "SessionEnd"):
            assert [h["command"] for g in hooks[event] for h in g["hooks"]] == ["%s/bin/egg-hook gemini" % prefix], event
        assert home.read_settings()["telemetry"] == {"enabled": False}  # its other settings are kept
        _egg(prefix, ["init"], project, tool_env)
        egg_file = project / ".eggs" / "work.egg"

        run1 = home.run(CHAT1, project).check()
        assert CHAT1_ANSWER in run1.stdout, str(run1)
        assert _runs(shim_log) == ["-n parse_config src"], (_runs(shim_log), str(run1))
        reqs1 = server.requests_for(CHAT1)
        assert [r.step for r in reqs1] == [0, 1], [(r.step, r.reply) for r in reqs1]
        assert not any("EGGSHELL PRIOR WORK" in t for t in user_texts(reqs1[0].body))  # nothing to reuse yet
        assert egg_file.exists(), "chat 1 was not recorded:\n%s" % run1.stderr[-3000:]
        shown = _stored_turn(prefix, project, tool_env, "parse_config defined")
        assert CHAT1 in shown and CHAT1_ANSWER in shown and "Bash: %s" % SEARCH_SRC in shown and SRC_LINE_1 in shown, shown

        run2 = home.run(CHAT2, project).check()
        assert CHAT2_ANSWER in run2.stdout, str(run2)
        reqs2 = server.requests_for(CHAT2)
        assert [r.step for r in reqs2] == [0, 1, 2], [(r.step, r.reply) for r in reqs2]
        handoff = "\n".join(t for t in user_texts(reqs2[0].body) if "EGGSHELL PRIOR WORK" in t)
        assert CHAT1 in handoff and CHAT1_ANSWER in handoff and SEARCH_SRC in handoff and SRC_LINE_1 in handoff, \
            user_texts(reqs2[0].body)
        (blocked,) = _responses(reqs2[1])
        assert "this call was not run, because earlier work already did it" in blocked and SEARCH_SRC in blocked, blocked
        runs = _runs(shim_log)
        assert runs.count("-n parse_config src") == 1, runs  # chat 1's run only
        assert runs.count("-n parse_config tests") == 1, runs  # the uncovered search ran
        allowed = _responses(reqs2[2])[1]
        assert TESTS_LINE_5 in allowed and "not run" not in allowed, allowed

        run3 = home.run(CHAT3, project).check()
        (req3,) = server.requests_for(CHAT3)
        assert not any("EGGSHELL" in t for t in user_texts(req3.body)), user_texts(req3.body)
        assert "Leaves fall." in run3.stdout

        assert "3 turns" in _egg(prefix, ["fsck", str(egg_file)], project, tool_env)
        hook_log = data_root / "logs" / "hook.log"
        assert not hook_log.exists() or not hook_log.read_text().strip(), hook_log.read_text()
        assert {r.path for r in server.requests} <= {"/v1beta/models/gemini-2.5-flash:streamGenerateContent",
                                                   "/v1beta/models/gemini-2.5-flash:generateContent",
                                                   "/v1beta/models/gemini-2.5-flash:countTokens"}, {r.path for r in server.requests}
