"""hosts/opencode.py: the plugin's payloads as lifecycle events, neutral answers as its replies,
and `egg install opencode` writing the plugin.

The payloads are the ones opencode_plugin.js sends, with the fields OpenCode 1.18.33 gave its
plugin hooks when observed (chat.message's parts, tool.execute.before's args,
tool.execute.after's {title, output, metadata.exit}, the error of a tool part); the plugin
itself is tested in test_opencode_plugin.py, and both in the real CLI in
tests/e2e/test_opencode_eggshell.py.
"""

from __future__ import annotations

import json
import os

import pytest

from eggshell.hosts import registry
from eggshell.hosts.opencode import HOST as OPENCODE
from eggshell.paths import Paths
from helpers.hook_env import Env

PATHS = Paths("/p", "/d", "/p/config.toml", "/home/u/.codex", "/p/bin")


def base(event: str, cwd: str = "/w/proj", session: str = "ses_1", turn: str | None = "msg_1", **kw) -> dict:
    return {"cwd": cwd, "hook_event_name": event, "session_id": session, **({"turn_id": turn} if turn else {}), **kw}


def tool(event: str, name: str, args: dict, call: str = "call_1", **kw) -> dict:
    return base(event, tool=name, call_id=call, args=args, **kw)


def test_opencode_is_registered_like_the_others():
    assert "opencode" in registry.NAMES and registry.get("opencode") is OPENCODE
    assert OPENCODE.chat_env is None and not OPENCODE.required and OPENCODE.plugin


def test_its_events_are_the_lifecycle_events():
    prompt = OPENCODE.event(base("chat.message", parts=[
        {"type": "text", "text": "why is it slow?"},
        {"type": "text", "text": "Called the Read tool with the following input: {...}", "synthetic": True},
        {"type": "file", "mime": "image/png", "filename": "shot.png"},
        {"type": "text", "text": "and since when?"}]))
    assert (prompt["hook_event_name"], prompt["prompt"], prompt["turn_id"]) == ("UserPromptSubmit", "why is it slow?\nand since when?", "msg_1")
    assert "parts" not in prompt
    stop = OPENCODE.event(base("session.idle", answer="because"))
    assert (stop["hook_event_name"], stop["last_assistant_message"]) == ("Stop", "because") and "answer" not in stop
    assert OPENCODE.event(base("session.idle", answer=None))["last_assistant_message"] is None
    start = OPENCODE.event(base("session.created", turn=None))
    assert (start["hook_event_name"], start["source"]) == ("SessionStart", "startup")
    assert OPENCODE.event(base("session.compacted"))["hook_event_name"] == "PostCompact"
    assert OPENCODE.event(base("message.updated"))["hook_event_name"] == "message.updated"  # not acted on
    p = base("chat.message", parts=[])
    assert OPENCODE.event(p) is not p and p["hook_event_name"] == "chat.message"  # a copy
    assert OPENCODE.event([1]) == [1]


@pytest.mark.parametrize("name, args, kind, shaped", [
    ("bash", {"command": "rg -n late_fee src", "description": "search"}, "Bash", {"command": "rg -n late_fee src", "description": "search"}),
    ("read", {"filePath": "src/billing.py"}, "Read", {"file_path": "/w/proj/src/billing.py"}),
    ("read", {"filePath": "/abs/a.py", "offset": 10, "limit": 20}, "Read", {"file_path": "/abs/a.py", "offset": 10, "limit": 20}),
    ("grep", {"pattern": "late_fee"}, "Grep", {"pattern": "late_fee"}),
    ("grep", {"pattern": "x", "path": "src", "include": "*.py"}, "Grep", {"pattern": "x", "path": "/w/proj/src", "glob": "*.py"}),
    ("glob", {"pattern": "**/*.py", "path": "/w/proj"}, "Glob", {"pattern": "**/*.py", "path": "/w/proj"}),
    ("list", {"path": "src"}, "LS", {"path": "/w/proj/src"}),
    ("write", {"filePath": "n.txt", "content": "hi"}, "Write", {"file_path": "/w/proj/n.txt", "content": "hi"}),
    ("edit", {"filePath": "a.py", "oldString": "a", "newString": "b", "replaceAll": True}, "Edit",
     {"file_path": "/w/proj/a.py", "old_string": "a", "new_string": "b", "replace_all": True}),
    ("webfetch", {"url": "https://example.com", "format": "text"}, "WebFetch", {"url": "https://example.com", "format": "text"}),
    ("docs_search", {"q": "x"}, "docs_search", {"q": "x"}),  # an MCP or plugin tool: as it came
])
def test_its_tools_are_named_and_shaped_as_the_lifecycles(name, args, kind, shaped):
    e = OPENCODE.event(tool("tool.execute.before", name, args))
    assert (e["hook_event_name"], e["tool_name"], e["tool_input"], e["tool_use_id"]) == ("PreToolUse", kind, shaped, "call_1")
    assert not {"tool", "args", "call_id"} & set(e)


def test_a_command_in_another_directory_runs_there():
    e = OPENCODE.event(tool("tool.execute.before", "bash", {"command": "ls", "workdir": "sub"}))
    assert (e["cwd"], e["tool_input"]) == ("/w/proj/sub", {"command": "ls"})


def test_a_result_is_its_output_and_a_failure_is_a_failed_call():
    ok = OPENCODE.event(tool("tool.execute.after", "bash", {"command": "echo hi"}, output={"title": "echo hi", "output": "hi\n", "exit": 0}))
    assert (ok["hook_event_name"], ok["tool_response"]) == ("PostToolUse", "hi\n") and "output" not in ok
    bad = OPENCODE.event(tool("tool.execute.after", "bash", {"command": "exit 3"}, output={"title": "", "output": "(no output)", "exit": 3}))
    assert (bad["hook_event_name"], bad["tool_response"]) == ("PostToolUseFailure", "Exit code 3\n(no output)")
    read = OPENCODE.event(tool("tool.execute.after", "read", {"filePath": "a"}, output={"title": "a", "output": "<content>1: x</content>"}))
    assert (read["hook_event_name"], read["tool_response"]) == ("PostToolUse", "<content>1: x</content>")
    threw = OPENCODE.event(tool("tool.error", "read", {"filePath": "gone.py"}, error="File not found: /w/proj/gone.py"))
    assert (threw["hook_event_name"], threw["tool_name"], threw["tool_response"]) == ("PostToolUseFailure", "Read", "File not found: /w/proj/gone.py")
    assert OPENCODE.event(tool("tool.error", "read", {}, error=None))["tool_response"] == ""


def test_neutral_answers_become_what_the_plugin_applies():
    assert OPENCODE.reply("UserPromptSubmit", {"context": "PRIOR"}) == {"context": "PRIOR"}
    assert OPENCODE.reply("PostToolUse", {"context": "PRIOR"}) == {"context": "PRIOR"}
    assert OPENCODE.reply("PreToolUse", {"deny": "not run"}) == {"deny": "not run"}
    assert OPENCODE.reply("PreToolUse", {"context": "advice"}) == {}  # its before hook takes no context: silent
    assert OPENCODE.reply("SessionStart", {"status": "Eggshell: on"}) == {"status": "Eggshell: on"}
    assert OPENCODE.reply("Stop", {}) == {}


def test_a_payload_no_parser_reads_keeps_the_lifecycle_name():
    raw = '{"cwd": "/w/proj", "hook_event_name": "tool.execute.after", "session_id": "ses_1", "turn_id": "msg_1", "x": 1e99999'
    assert OPENCODE.raw_event(raw) == {"session_id": "ses_1", "turn_id": "msg_1", "cwd": "/w/proj", "hook_event_name": "PostToolUse"}


def test_the_plugin_folder():
    assert OPENCODE.settings_file(PATHS, {"HOME": "/home/u"}, None) == "/home/u/.config/opencode/plugins/eggshell.js"
    assert OPENCODE.settings_file(PATHS, {"HOME": "/home/u", "XDG_CONFIG_HOME": "/x"}, None) == "/x/opencode/plugins/eggshell.js"
    assert OPENCODE.settings_file(PATHS, {"HOME": "/home/u", "XDG_CONFIG_HOME": " "}, None) == "/home/u/.config/opencode/plugins/eggshell.js"
    assert OPENCODE.settings_file(PATHS, {"HOME": "/home/u"}, "/c") == "/c/plugins/eggshell.js"


def test_the_plugin_names_the_egg_hook_it_runs():
    text = OPENCODE.plugin_source("/opt/egg's dir/bin/egg-hook")
    assert OPENCODE.plugin_command(text) == "/opt/egg's dir/bin/egg-hook"
    assert "@EGG_HOOK@" not in text and "@TIMEOUT_MS@" not in text and "const TIMEOUT_MS = 30000;" in text
    assert OPENCODE.plugin_command("export const Mine = async () => ({})\n") is None


# -- through the hook, into a store --------------------------------------------------------------


@pytest.fixture
def env(tmp_path):
    return Env(tmp_path)


def opencode(env, event: str, session: str = "ses_1", turn: str | None = "msg_1", **kw) -> dict:
    return env.respond(base(event, cwd=env.project, session=session, turn=turn, **kw), host="opencode")


def test_an_opencode_turn_is_recorded_and_handed_to_the_next_chat_and_a_repeat_is_denied_once(env):
    os.makedirs(os.path.join(env.project, "src"))
    with open(os.path.join(env.project, "src", "billing.py"), "w") as f:
        f.write("def late_fee(days):\n    return 0.5 * days\n")
    assert opencode(env, "session.created", turn=None).get("status", "").startswith("Eggshell")
    assert opencode(env, "chat.message", parts=[{"type": "text", "text": "where is late_fee computed?"}]) == {}
    read = {"filePath": "src/billing.py"}
    assert opencode(env, "tool.execute.before", tool="read", call_id="call_1", args=read) == {}
    opencode(env, "tool.execute.after", tool="read", call_id="call_1", args=read,
             output={"title": "src/billing.py", "output": "def late_fee(days):\n    return 0.5 * days\n"})
    assert opencode(env, "session.idle", answer="late_fee is in src/billing.py") == {}
    (v,) = env.views()
    assert (v.prompt, v.answer) == ("where is late_fee computed?", "late_fee is in src/billing.py")
    assert [t.outcome for t in v.tools] == ["def late_fee(days):\n    return 0.5 * days\n"]

    got = opencode(env, "chat.message", session="ses_2", turn="msg_9", parts=[{"type": "text", "text": "how is the late_fee computed?"}])
    assert set(got) == {"context"} and "late_fee is in src/billing.py" in got["context"]
    denied = opencode(env, "tool.execute.before", session="ses_2", turn="msg_9", tool="read", call_id="call_2", args=read)
    assert set(denied) == {"deny"}, denied
    assert "this call was not run, because earlier work already did it:\n$ Read %s/src/billing.py" % env.project in denied["deny"]
    again = opencode(env, "tool.execute.before", session="ses_2", turn="msg_9", tool="read", call_id="call_3", args=read)
    assert "deny" not in again  # once: proposing it again runs it
    assert opencode(env, "chat.message", session="ses_3", turn="msg_20", parts=[{"type": "text", "text": "configure the kubernetes ingress"}]) == {}


def test_a_malformed_opencode_payload_fails_open(env):
    from helpers.hooks import answer_here

    assert answer_here("opencode", "not json", env.paths) == {}
    assert answer_here("opencode", json.dumps(base("tool.execute.after", cwd=env.project, tool=7, args="x", output=[1])), env.paths) == {}
    assert answer_here("opencode", json.dumps(base("chat.message", cwd=env.project, parts="not a list")), env.paths) == {}


# -- egg install opencode / egg uninstall opencode ------------------------------------------------------


def test_install_writes_the_plugin_and_uninstall_removes_only_ours(home, capsys):
    from eggshell.cli import main as cli
    from helpers import REPO

    plugins = home / ".config" / "opencode" / "plugins"
    plugins.mkdir(parents=True)
    (plugins / "theirs.js").write_text("export const Theirs = async () => ({})\n")
    plugin = plugins / "eggshell.js"
    hook = os.path.join(REPO, "bin", "egg-hook")

    assert cli.main(["install", "opencode"]) == 0
    out = capsys.readouterr().out
    assert "wrote   %s: the Eggshell plugin for OpenCode, relaying chat.message, tool.execute.before" % plugin in out
    assert "command: %s opencode" % hook in out
    assert OPENCODE.plugin_command(plugin.read_text()) == hook
    assert plugin.stat().st_mode & 0o777 == 0o600
    assert cli.main(["install", "opencode"]) == 0 and "updated " in capsys.readouterr().out
    assert sorted(p.name for p in plugins.iterdir()) == ["eggshell.js", "theirs.js"]

    cli.main(["doctor"])
    assert "ok   OpenCode plugin: %s relays chat.message, " % plugin in capsys.readouterr().out

    assert cli.main(["uninstall", "opencode"]) == 0
    assert "removed %s" % plugin in capsys.readouterr().out
    assert sorted(p.name for p in plugins.iterdir()) == ["theirs.js"]
    assert cli.main(["uninstall", "opencode"]) == 0 and "nothing to do" in capsys.readouterr().out


def test_a_plugin_file_eggshell_did_not_write_is_left_alone(home, capsys):
    from eggshell.cli import main as cli

    plugin = home / ".config" / "opencode" / "plugins" / "eggshell.js"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("export const Mine = async () => ({})\n")
    for verb in ("install", "uninstall"):
        assert cli.main([verb, "opencode"]) == 2  # as for a hooks file that is not JSON
        assert "was not written by Eggshell; move it away" in capsys.readouterr().err
        assert plugin.read_text() == "export const Mine = async () => ({})\n"
    cli.main(["doctor"])
    assert "WARN OpenCode plugin: %s was not written by Eggshell" % plugin in capsys.readouterr().out


def test_doctor_warns_when_the_plugin_runs_an_egg_hook_that_is_gone(home, capsys):
    from eggshell.cli import main as cli

    plugin = home / ".config" / "opencode" / "plugins" / "eggshell.js"
    plugin.parent.mkdir(parents=True)
    plugin.write_text(OPENCODE.plugin_source("/gone/bin/egg-hook"))
    cli.main(["doctor"])
    assert ("WARN OpenCode plugin: %s runs /gone/bin/egg-hook, which is missing or not executable: run `egg install opencode`"
            % plugin) in capsys.readouterr().out
