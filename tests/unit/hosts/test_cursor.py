"""hosts/cursor.py: Cursor's hook payloads as lifecycle events, neutral answers as its replies,
and `egg install cursor` writing ~/.cursor/hooks.json.

Cursor cannot be installed here: every payload below is written from its documented hook
schema (the common conversation_id, generation_id, workspace_roots, hook_event_name; each
event's own fields: beforeSubmitPrompt's prompt and attachments, before/afterShellExecution's
command, cwd, output and duration, before/afterMCPExecution's tool_name, tool_input (a JSON
string) and result_json, beforeReadFile's file_path and content, afterFileEdit's edits,
afterAgentResponse's text, stop's status and loop_count), then run through the real hook path
into a real store.
"""

from __future__ import annotations

import json
import os

import pytest

from eggshell.hosts import registry
from eggshell.hosts.cursor import DENY_NOTE, HOST as CURSOR
from eggshell.paths import Paths
from helpers.hook_env import Env

PATHS = Paths("/p", "/d", "/p/config.toml", "/home/u/.codex", "/p/bin")


def base(event: str, root: str = "/w/proj", conv: str = "conv-1", gen: str = "gen-1", **kw) -> dict:
    return {"hook_event_name": event, "conversation_id": conv, "generation_id": gen, "workspace_roots": [root],
            "model": "gpt-5", "cursor_version": "2.0.77", **kw}


def test_cursor_is_registered_like_the_others():
    assert "cursor" in registry.NAMES and registry.get("cursor") is CURSOR
    assert CURSOR.chat_env is None and not CURSOR.required and not CURSOR.plugin


def test_its_events_are_the_lifecycle_events():
    p = CURSOR.event(base("beforeSubmitPrompt", prompt="why?", attachments=[{"type": "file", "filePath": "/w/proj/a.py"}]))
    assert (p["hook_event_name"], p["session_id"], p["turn_id"], p["cwd"], p["prompt"]) == ("UserPromptSubmit", "conv-1", "gen-1", "/w/proj", "why?")
    sh = CURSOR.event(base("beforeShellExecution", command="rg -n x src", cwd="/w/proj/sub"))
    assert (sh["hook_event_name"], sh["tool_name"], sh["tool_input"], sh["cwd"]) == ("PreToolUse", "Bash", {"command": "rg -n x src"}, "/w/proj/sub")
    done = CURSOR.event(base("afterShellExecution", command="rg -n x src", output="src/a.py:1:x\n", duration=150))
    assert (done["hook_event_name"], done["tool_name"], done["tool_response"]) == ("PostToolUse", "Bash", "src/a.py:1:x\n")
    mcp = CURSOR.event(base("beforeMCPExecution", tool_name="database_query", tool_input='{"query": "SELECT 1"}', command="npx srv"))
    assert (mcp["hook_event_name"], mcp["tool_name"], mcp["tool_input"]) == ("PreToolUse", "database_query", {"query": "SELECT 1"})
    res = CURSOR.event(base("afterMCPExecution", tool_name="database_query", tool_input="not json", result_json='{"rows": 1}', duration=250))
    assert (res["hook_event_name"], res["tool_input"], res["tool_response"]) == ("PostToolUse", "not json", '{"rows": 1}')
    read = CURSOR.event(base("beforeReadFile", file_path="src/a.py", content="x = 1\n", attachments=[]))
    assert (read["hook_event_name"], read["tool_name"], read["tool_input"], read["tool_response"]) == \
        ("PostToolUse", "Read", {"file_path": "/w/proj/src/a.py"}, "x = 1\n")
    assert "content" not in read
    one = CURSOR.event(base("afterFileEdit", file_path="/w/proj/a.py", edits=[{"old_string": "1", "new_string": "2"}]))
    assert (one["tool_name"], one["tool_input"]) == ("Edit", {"file_path": "/w/proj/a.py", "old_string": "1", "new_string": "2"})
    two = CURSOR.event(base("afterFileEdit", file_path="/w/proj/a.py", edits=[{"old_string": "1", "new_string": "2"}, {"old_string": "3", "new_string": "4"}]))
    assert two["tool_name"] == "MultiEdit" and len(two["tool_input"]["edits"]) == 2
    answer = CURSOR.event(base("afterAgentResponse", text="because"))
    assert (answer["hook_event_name"], answer["last_assistant_message"]) == ("Stop", "because")
    assert CURSOR.event(base("stop", status="completed", loop_count=0))["hook_event_name"] == "Stop"
    assert CURSOR.event(base("stop", status="aborted", loop_count=0))["hook_event_name"] == "Interrupt"
    assert CURSOR.event(base("afterAgentThought", text="hmm"))["hook_event_name"] == "afterAgentThought"  # not acted on
    assert CURSOR.event([1]) == [1]


def test_replies_say_only_what_cursor_takes():
    assert CURSOR.reply("PreToolUse", {"deny": "not run: see"}) == {"permission": "deny", "user_message": DENY_NOTE, "agent_message": "not run: see"}
    assert CURSOR.reply("UserPromptSubmit", {"context": "PRIOR"}) == {"continue": True}  # no context at prompt time: silent
    assert CURSOR.reply("UserPromptSubmit", {}) == {"continue": True}
    assert CURSOR.reply("PreToolUse", {"context": "advice"}) == {}
    assert CURSOR.reply("PostToolUse", {"context": "PRIOR"}) == {}
    assert CURSOR.reply("SessionStart", {"status": "on"}) == {}


def test_a_payload_no_parser_reads_is_still_named():
    raw = '{"hook_event_name": "afterShellExecution", "conversation_id": "conv-1", "generation_id": "gen-1", "output": 1e99999'
    assert CURSOR.raw_event(raw) == {"session_id": "conv-1", "turn_id": "gen-1", "hook_event_name": "PostToolUse"}


def test_hooks_file():
    assert CURSOR.settings_file(PATHS, {"HOME": "/home/u"}, None) == "/home/u/.cursor/hooks.json"
    assert CURSOR.settings_file(PATHS, {"HOME": "/home/u"}, "/x") == "/x/.cursor/hooks.json"
    assert CURSOR.hook_groups("egg-hook cursor")["stop"] == {"command": "egg-hook cursor"}


# -- through the hook, into a store --------------------------------------------------------------


@pytest.fixture
def env(tmp_path):
    return Env(tmp_path)


def cursor(env, event: str, conv: str = "conv-1", gen: str = "gen-1", **kw) -> dict:
    return env.respond(base(event, root=env.project, conv=conv, gen=gen, **kw), host="cursor")


def test_a_cursor_turn_is_recorded_and_a_covered_command_denied_once_with_its_output(env):
    os.makedirs(os.path.join(env.project, "src"))
    with open(os.path.join(env.project, "src", "billing.py"), "w") as f:
        f.write("def late_fee(days):\n    return 0.5 * days\n")
    grep = "grep -n late_fee src/billing.py"
    assert cursor(env, "beforeSubmitPrompt", prompt="where is late_fee computed?", attachments=[]) == {"continue": True}
    assert cursor(env, "beforeShellExecution", command=grep, cwd=env.project) == {}
    cursor(env, "afterShellExecution", command=grep, output="1:def late_fee(days):\n", duration=12)
    cursor(env, "beforeReadFile", file_path=os.path.join(env.project, "src", "billing.py"),
           content="def late_fee(days):\n    return 0.5 * days\n", attachments=[])
    assert cursor(env, "afterAgentResponse", text="late_fee is in src/billing.py") == {}
    assert cursor(env, "stop", status="completed", loop_count=0) == {}
    (v,) = env.views()
    assert (v.prompt, v.answer) == ("where is late_fee computed?", "late_fee is in src/billing.py")
    assert [t.outcome for t in v.tools] == ["1:def late_fee(days):\n", "def late_fee(days):\n    return 0.5 * days\n"]

    # The next chat's prompt gets no handoff (Cursor takes none), but its repeat of the search
    # is answered from the earlier run: denied, with that output for the model.
    assert cursor(env, "beforeSubmitPrompt", conv="conv-2", gen="gen-9", prompt="how is the late_fee computed?") == {"continue": True}
    denied = cursor(env, "beforeShellExecution", conv="conv-2", gen="gen-9", command=grep, cwd=env.project)
    assert denied["permission"] == "deny" and denied["user_message"] == DENY_NOTE, denied
    assert "1:def late_fee(days):" in denied["agent_message"] and grep in denied["agent_message"]
    assert cursor(env, "beforeShellExecution", conv="conv-2", gen="gen-9", command=grep, cwd=env.project) == {}  # once


def test_a_malformed_cursor_payload_fails_open(env):
    from helpers.hooks import answer_here

    assert answer_here("cursor", "not json", env.paths) == {}
    assert answer_here("cursor", json.dumps(base("afterShellExecution", root=env.project, command=7, output=[1])), env.paths) == {}
    assert answer_here("cursor", json.dumps(base("afterFileEdit", root=env.project, edits="x")), env.paths) == {}


# -- egg install cursor / egg uninstall cursor ------------------------------------------------------


def test_install_writes_flat_entries_and_uninstall_takes_only_ours(home, capsys):
    from eggshell.cli import main as cli
    from helpers import REPO

    hooks_file = home / ".cursor" / "hooks.json"
    hooks_file.parent.mkdir(parents=True)
    theirs = {"version": 1, "hooks": {"afterFileEdit": [{"command": "./hooks/format.sh"}]}}
    hooks_file.write_text(json.dumps(theirs))
    command = "%s cursor" % os.path.join(REPO, "bin", "egg-hook")

    assert cli.main(["install", "cursor"]) == 0
    assert "wrote   %s: Eggshell hooks for beforeSubmitPrompt, beforeShellExecution" % hooks_file in capsys.readouterr().out
    data = json.loads(hooks_file.read_text())
    assert data["version"] == 1 and data["hooks"]["afterFileEdit"] == [{"command": "./hooks/format.sh"}, {"command": command}]
    assert {e: gs[-1] for e, gs in data["hooks"].items()} == {e: {"command": command} for e in CURSOR.events}
    assert cli.main(["install", "cursor"]) == 0 and "updated " in capsys.readouterr().out
    assert sum(len(gs) for gs in json.loads(hooks_file.read_text())["hooks"].values()) == len(CURSOR.events) + 1

    cli.main(["doctor"])
    assert "ok   Cursor hooks: %s runs egg-hook for beforeSubmitPrompt" % hooks_file in capsys.readouterr().out
    assert cli.main(["uninstall", "cursor"]) == 0
    assert "removed %d Eggshell hooks from %s" % (len(CURSOR.events), hooks_file) in capsys.readouterr().out
    assert json.loads(hooks_file.read_text()) == theirs


def test_a_new_hooks_file_gets_its_version(home, capsys):
    from eggshell.cli import main as cli

    assert cli.main(["install", "cursor"]) == 0
    data = json.loads((home / ".cursor" / "hooks.json").read_text())
    assert list(data) == ["version", "hooks"] and data["version"] == 1
