"""End to end with the real OpenCode: record a chat, hand it to the next, stop a repeated call once.

Everything is real except the model: ./install.sh into a temporary prefix, `egg install
opencode` writing its plugin into a temporary HOME's ~/.config/opencode/plugins, `egg init` in
a temporary project, then `opencode run` chats against the scripted local Chat Completions
server (fake_openai_server.py). A counting `rg` shim first on OpenCode's PATH logs every
search that really runs.

Chat 1 searches `rg -n parse_config src`, reads src/config.py and answers: the turn must be in
the project's .egg, with both calls and the answer (the plugin's session.idle). Chat 2 (a new
session) asks a related question: its first model request must carry chat 1's recorded work
(the plugin's synthetic part from chat.message), and its repeat of the search is blocked by
tool.execute.before: the model gets the reason as the call's error and the shim never sees a
second run. A search no prior work covers still runs. Chat 3, unrelated, is handed nothing.
"""

from __future__ import annotations

import pytest

from fake_openai_server import FakeOpenAIServer, tool_results, user_texts
from opencode_harness import PINNED_OPENCODE_VERSION, OpenCodeHome, opencode_version
from test_claude_eggshell import _shim, _shim_runs as _runs, _stored_turn
from test_codex_eggshell import _egg
from test_codex_reuse import _project
from test_gemini_eggshell import (CHAT1, CHAT1_ANSWER, CHAT2, CHAT2_ANSWER, CHAT3, SEARCH_SRC, SEARCH_TESTS,  # the same chats
                                  SRC_LINE_1, TESTS_LINE_5)

pytestmark = pytest.mark.e2e



def test_opencode_version_is_the_pinned_one(opencode_bin):
    assert opencode_version(opencode_bin) == PINNED_OPENCODE_VERSION


def test_opencode_chats_are_recorded_handed_over_and_a_repeat_is_denied(opencode_bin, prefix, tmp_path):
    project = _project(tmp_path / "project")
    shim_log = tmp_path / "rg-runs.log"
    read_src = {"call": "read", "args": {"filePath": str(project / "src" / "config.py")}}
    scripts = {
        CHAT1: [{"shell": SEARCH_SRC}, read_src, {"say": CHAT1_ANSWER}],
        CHAT2: [{"shell": SEARCH_SRC}, {"shell": SEARCH_TESTS}, {"say": CHAT2_ANSWER}],
        CHAT3: [{"say": "Leaves fall."}],
    }
    with FakeOpenAIServer(scripts) as server:
        data_root = tmp_path / "data"
        env = {"EGGSHELL_PREFIX": str(prefix), "EGGSHELL_DATA_ROOT": str(data_root), "PATH": _shim(tmp_path / "shim", shim_log)}
        home = OpenCodeHome(tmp_path / "opencode", server, opencode=opencode_bin, env=env)
        tool_env = home.env()
        out = _egg(prefix, ["install", "opencode"], project, tool_env)
        assert str(home.plugin_path) in out, out
        plugin = home.plugin_path.read_text()
        assert 'const EGG_HOOK = "%s/bin/egg-hook";' % prefix in plugin, plugin[:2000]
        _egg(prefix, ["init"], project, tool_env)
        egg_file = project / ".eggs" / "work.egg"

        run1 = home.run(CHAT1, project).check()
        assert CHAT1_ANSWER in run1.stdout, str(run1)
        assert _runs(shim_log) == ["-n parse_config src"], (_runs(shim_log), str(run1))
        reqs1 = server.requests_for(CHAT1)
        assert [r.step for r in reqs1] == [0, 1, 2], [(r.step, r.reply) for r in reqs1]
        assert not any("EGGSHELL PRIOR WORK" in t for t in user_texts(reqs1[0].body))  # nothing to reuse yet
        assert egg_file.exists(), "chat 1 was not recorded:\n%s" % run1.stderr[-3000:]
        shown = _stored_turn(prefix, project, tool_env, "parse_config defined")
        assert CHAT1 in shown and CHAT1_ANSWER in shown and "Bash: %s" % SEARCH_SRC in shown and SRC_LINE_1 in shown, shown
        assert "Read" in shown and "def parse_config(path):" in shown, shown

        run2 = home.run(CHAT2, project).check()
        assert CHAT2_ANSWER in run2.stdout, str(run2)
        reqs2 = server.requests_for(CHAT2)
        assert [r.step for r in reqs2] == [0, 1, 2], [(r.step, r.reply) for r in reqs2]
        texts = user_texts(reqs2[0].body)
        assert texts[0] == CHAT2, texts  # the prompt is the user's, untouched; the handoff follows it
        handoff = "\n".join(t for t in texts if "EGGSHELL PRIOR WORK" in t)
        assert CHAT1 in handoff and CHAT1_ANSWER in handoff and SEARCH_SRC in handoff and SRC_LINE_1 in handoff, texts
        (blocked,) = tool_results(reqs2[1].body)
        assert "this call was not run, because earlier work already did it" in blocked and SEARCH_SRC in blocked, blocked
        runs = _runs(shim_log)
        assert runs.count("-n parse_config src") == 1, runs  # chat 1's run only
        assert runs.count("-n parse_config tests") == 1, runs  # the uncovered search ran
        allowed = tool_results(reqs2[2].body)[1]
        assert TESTS_LINE_5 in allowed and "not run" not in allowed, allowed

        run3 = home.run(CHAT3, project).check()
        (req3,) = server.requests_for(CHAT3)
        assert not any("EGGSHELL" in t for t in user_texts(req3.body)), user_texts(req3.body)
        assert "Leaves fall." in run3.stdout

        assert "3 turns" in _egg(prefix, ["fsck", str(egg_file)], project, tool_env)
        hook_log = data_root / "logs" / "hook.log"
        assert not hook_log.exists() or not hook_log.read_text().strip(), hook_log.read_text()
        assert {r.path for r in server.requests} == {"/v1/chat/completions"}, {r.path for r in server.requests}

        out = _egg(prefix, ["uninstall", "opencode"], project, tool_env)
        assert not home.plugin_path.exists(), out
