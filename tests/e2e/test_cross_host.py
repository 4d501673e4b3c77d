"""One memory across hosts: a turn recorded in Codex serves a chat in OpenCode and one in Claude Code.

The three real CLIs share one project (its .eggs/work.egg), one data root and one Eggshell
install; each runs against its own scripted local model server. Codex 0.169 runs the
search as its exec_command, OpenCode as its `bash` tool, Claude Code as Bash: each adapter
names it Bash with `{"command"}`, so all three are one Work. Chat 1 (Codex) searches and
answers. Chat 2 (OpenCode, a related question) is handed chat 1's work in its prompt and its
repeat of the search is blocked, the shim never seeing a second run. Chat 3 (Claude Code) is
handed the same work.
"""

from __future__ import annotations

import pytest

from claude_harness import ClaudeHome
from codex_harness import CodexHome
from fake_anthropic_server import FakeAnthropicServer, hook_contexts
from fake_model_server import FakeModelServer
from fake_openai_server import FakeOpenAIServer, tool_results, user_texts
from opencode_harness import OpenCodeHome
from test_claude_eggshell import _shim_runs as _runs
from test_codex_eggshell import _egg
from test_codex_reuse import _project, _shim
from test_gemini_eggshell import CHAT1, CHAT1_ANSWER, CHAT2, CHAT2_ANSWER, SEARCH_SRC, SEARCH_TESTS, SRC_LINE_1

pytestmark = pytest.mark.e2e

CHAT3 = "Which function reads the INI file with parse_config, and where is it defined?"
CHAT3_ANSWER = "load_default calls parse_config, which src/config.py defines on line 1."


def test_a_turn_recorded_in_codex_serves_opencode_and_claude_code(codex_bin, opencode_bin, claude_bin, prefix, tmp_path):
    project = _project(tmp_path / "project")
    shim_log = tmp_path / "rg-runs.log"
    data_root = tmp_path / "data"
    with FakeModelServer({CHAT1: [{"exec": SEARCH_SRC}, {"say": CHAT1_ANSWER}]}) as codex_server, \
            FakeOpenAIServer({CHAT2: [{"shell": SEARCH_SRC}, {"shell": SEARCH_TESTS}, {"say": CHAT2_ANSWER}]}) as openai_server, \
            FakeAnthropicServer({CHAT3: [{"say": CHAT3_ANSWER}]}) as anthropic_server:
        codex = CodexHome(tmp_path / "codex", codex_server, features={"shell_snapshot": False})
        path = _shim(tmp_path / "shim", shim_log, codex.home)
        env = {"EGGSHELL_PREFIX": str(prefix), "EGGSHELL_DATA_ROOT": str(data_root), "PATH": path}
        opencode = OpenCodeHome(tmp_path / "opencode", openai_server, opencode=opencode_bin, env=env)
        claude = ClaudeHome(tmp_path / "claude", anthropic_server, claude=claude_bin, env=env)
        _egg(prefix, ["install", "codex"], project, codex.env(env))
        _egg(prefix, ["install", "opencode"], project, opencode.env())
        _egg(prefix, ["install", "claude"], project, claude.env())
        _egg(prefix, ["init"], project, codex.env(env))
        egg_file = project / ".eggs" / "work.egg"

        run1 = codex.run(CHAT1, project, env=env)
        assert run1.returncode == 0, str(run1)
        assert _runs(shim_log) == ["-n parse_config src"], (_runs(shim_log), str(run1))
        assert "1 turn," in _egg(prefix, ["fsck", str(egg_file)], project, codex.env(env)), str(run1)

        run2 = opencode.run(CHAT2, project).check()
        assert CHAT2_ANSWER in run2.stdout, str(run2)
        reqs2 = openai_server.requests_for(CHAT2)
        assert [r.step for r in reqs2] == [0, 1, 2], [(r.step, r.reply) for r in reqs2]
        handoff = "\n".join(t for t in user_texts(reqs2[0].body) if "EGGSHELL PRIOR WORK" in t)
        assert CHAT1 in handoff and CHAT1_ANSWER in handoff and SRC_LINE_1 in handoff, user_texts(reqs2[0].body)
        (blocked,) = tool_results(reqs2[1].body)
        assert "this call was not run, because earlier work already did it" in blocked and SEARCH_SRC in blocked, blocked
        runs = _runs(shim_log)
        assert runs.count("-n parse_config src") == 1 and runs.count("-n parse_config tests") == 1, runs

        run3 = claude.run(CHAT3, project).check()
        assert CHAT3_ANSWER in run3.stdout, str(run3)
        (req3,) = anthropic_server.requests_for(CHAT3)
        context = "\n".join(hook_contexts(req3))
        assert CHAT1 in context and SRC_LINE_1 in context, hook_contexts(req3)

        assert "3 turns" in _egg(prefix, ["fsck", str(egg_file)], project, codex.env(env))
        hook_log = data_root / "logs" / "hook.log"
        assert not hook_log.exists() or not hook_log.read_text().strip(), hook_log.read_text()
