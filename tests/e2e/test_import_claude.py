"""End to end with the real Claude Code: a chat run before Eggshell was installed, imported, then reused.

Chat 1 runs with no Eggshell at all: it searches with Bash, reads the file it found with
Read, runs a command that fails, and answers; Claude Code writes its session file under
~/.claude/projects. Then `egg init` and `egg import claude` (its default folder) must put the
turn into the project's store with every call and its output as the hooks would have
reported it (the failure as PostToolUseFailure's error) and the answer; a second run adds
nothing. After `egg install claude`, chat 2 asks a related question: its first request
carries the imported work, and its repeat of chat 1's search is not denied (imported calls
are advice only).
"""

from __future__ import annotations

import pytest

from claude_harness import ClaudeHome
from fake_anthropic_server import FakeAnthropicServer, hook_contexts, tool_results, tool_use_id
from test_claude_eggshell import BLOCKED
from test_codex_eggshell import _egg
from test_codex_reuse import _project

from eggshell.graph.records import turn_views
from eggshell.graph.store import Store

pytestmark = pytest.mark.e2e

CHAT1 = "Where is parse_config defined in this project?"
SEARCH = "rg -n parse_config src"
FAILING = "ls src/missing.py"
CHAT1_ANSWER = "parse_config is defined in src/config.py (line 1)."
CHAT2 = "Does parse_config in src/config.py skip comment lines?"
CHAT2_ANSWER = "Yes: lines starting with # are skipped."
SRC_LINE_1 = "src/config.py:1:def parse_config(path):"


def test_a_claude_chat_from_before_eggshell_is_imported_and_handed_to_the_next_chat(claude_bin, prefix, tmp_path):
    project = _project(tmp_path / "project")
    scripts = {
        CHAT1: [{"bash": SEARCH, "description": "Find parse_config"},
                {"tool": "Read", "input": {"file_path": str(project / "src" / "config.py")}},
                {"bash": FAILING, "description": "Check for a file"},
                {"say": CHAT1_ANSWER}],
        CHAT2: [{"bash": SEARCH, "description": "Look again"}, {"say": CHAT2_ANSWER}],
    }
    with FakeAnthropicServer(scripts) as server:
        data_root = tmp_path / "data"
        env = {"EGGSHELL_PREFIX": str(prefix), "EGGSHELL_DATA_ROOT": str(data_root)}
        home = ClaudeHome(tmp_path / "claude", server, claude=claude_bin, env=env)
        tool_env = home.env()

        run1 = home.run(CHAT1, project, extra_args=["--allowedTools", "Read"]).check()
        assert CHAT1_ANSWER in run1.stdout, str(run1)
        assert not home.settings_path.exists() and not (project / ".eggshell.toml").exists()
        sessions = sorted((home.config_dir / "projects").glob("*/*.jsonl"))
        assert len(sessions) == 1, sessions

        _egg(prefix, ["init"], project, tool_env)
        egg_file = project / ".eggs" / "work.egg"
        out = _egg(prefix, ["import", "claude"], project, tool_env)
        assert "imported 1 turn from 1 session into 1 store, skipped 0 already present" in out, out

        (v,) = turn_views(Store.open(str(egg_file)).graph)
        assert v.session == sessions[0].stem and v.prompt == CHAT1 and v.answer == CHAT1_ANSWER
        names = [t.work.partition("\n")[0] for t in v.tools]
        assert names == ["Bash", "Read", "Bash"], [t.work for t in v.tools]
        assert SRC_LINE_1 in v.tools[0].outcome  # Bash's stdout, as live capture stores it
        assert "def parse_config(path):" in v.tools[1].outcome
        assert v.tools[2].outcome.startswith("Exit code 2") and "missing.py" in v.tools[2].outcome, v.tools[2].outcome  # the failure

        before = egg_file.read_bytes()
        out = _egg(prefix, ["import", "claude"], project, tool_env)
        assert "imported 0 turns from 0 sessions into 0 stores, skipped 1 already present" in out, out
        assert egg_file.read_bytes() == before

        _egg(prefix, ["install", "claude"], project, tool_env)
        run2 = home.run(CHAT2, project).check()
        assert CHAT2_ANSWER in run2.stdout, str(run2)
        reqs = server.requests_for(CHAT2)
        contexts = hook_contexts(reqs[0])
        assert len(contexts) == 1 and "EGGSHELL PRIOR WORK" in contexts[0], contexts
        assert CHAT1 in contexts[0] and CHAT1_ANSWER in contexts[0] and SRC_LINE_1 in contexts[0], contexts[0]
        rerun = tool_results(reqs[1]).get(tool_use_id(reqs[1], SEARCH))
        assert rerun is not None and not rerun.startswith(BLOCKED) and SRC_LINE_1 in rerun, rerun  # advice only
