"""hosts/gemini.py: Gemini CLI's hook payloads as lifecycle events, and neutral answers as its replies.

The payloads are written from Gemini CLI's documented hook schema (docs/hooks/reference.md of
google-gemini/gemini-cli: a base of session_id, transcript_path, cwd, hook_event_name and
timestamp; BeforeAgent's `prompt`; BeforeTool's tool_name and tool_input; AfterTool's
tool_response `{llmContent, returnDisplay, error}`; AfterAgent's `prompt_response`), then run
through the real hook path (helpers.hooks.answer_here) into a real store.
"""

from __future__ import annotations

import json
import os

import pytest

from eggshell.hosts import registry
from eggshell.hosts.gemini import HOST as GEMINI
from eggshell.paths import Paths
from helpers.hook_env import Env

PATHS = Paths("/p", "/d", "/p/config.toml", "/home/u/.codex", "/p/bin")
B64 = "iVBORw0KGgo" + "QUJD" * 500


def base(event: str, cwd: str = "/w/proj", **kw) -> dict:
    return {"session_id": "g-1", "transcript_path": "/home/u/.gemini/tmp/x/chats/session.json", "cwd": cwd,
            "hook_event_name": event, "timestamp": "2026-12-02T08:00:00.000Z", **kw}


def test_gemini_is_registered_like_the_others():
    assert "gemini" in registry.NAMES and registry.get("gemini") is GEMINI
    assert GEMINI.chat_env is None and not GEMINI.required


def test_its_events_are_the_lifecycle_events():
    assert GEMINI.event(base("BeforeAgent", prompt="why"))["hook_event_name"] == "UserPromptSubmit"
    assert GEMINI.event(base("SessionStart", source="resume"))["source"] == "resume"
    stop = GEMINI.event(base("AfterAgent", prompt="why", prompt_response="because", stop_hook_active=False))
    assert (stop["hook_event_name"], stop["last_assistant_message"]) == ("Stop", "because") and "prompt_response" not in stop
    assert GEMINI.event(base("PreCompress", trigger="auto"))["hook_event_name"] == "PostCompact"
    assert GEMINI.event(base("SessionEnd", reason="exit"))["hook_event_name"] == "SessionEnd"
    assert GEMINI.event(base("BeforeModel", llm_request={}))["hook_event_name"] == "BeforeModel"  # not acted on
    p = base("BeforeAgent", prompt="x")
    assert GEMINI.event(p) is not p and p["hook_event_name"] == "BeforeAgent"  # a copy
    assert GEMINI.event([1]) == [1]


@pytest.mark.parametrize("name, args, tool, shaped", [
    ("run_shell_command", {"command": "rg -n late_fee src", "description": "search"}, "Bash",
     {"command": "rg -n late_fee src", "description": "search"}),
    ("read_file", {"file_path": "src/billing.py"}, "Read", {"file_path": "/w/proj/src/billing.py"}),
    ("read_file", {"file_path": "/abs/a.py", "start_line": 10, "end_line": 19}, "Read", {"file_path": "/abs/a.py", "offset": 10, "limit": 10}),
    ("grep_search", {"pattern": "late_fee"}, "Grep", {"pattern": "late_fee"}),
    ("grep_search", {"pattern": "x", "dir_path": "src", "include_pattern": "*.py"}, "Grep", {"pattern": "x", "path": "/w/proj/src", "glob": "*.py"}),
    ("glob", {"pattern": "**/*.py"}, "Glob", {"pattern": "**/*.py"}),
    ("list_directory", {"dir_path": "src"}, "LS", {"path": "/w/proj/src"}),
    ("write_file", {"file_path": "n.txt", "content": "hi"}, "Write", {"file_path": "/w/proj/n.txt", "content": "hi"}),
    ("replace", {"file_path": "a.py", "old_string": "a", "new_string": "b"}, "Edit", {"file_path": "/w/proj/a.py", "old_string": "a", "new_string": "b"}),
    ("mcp_docs_search", {"q": "x"}, "mcp_docs_search", {"q": "x"}),  # not built in: as it came
])
def test_its_tools_are_named_and_shaped_as_the_lifecycles(name, args, tool, shaped):
    ev = GEMINI.event(base("BeforeTool", tool_name=name, tool_input=args))
    assert (ev["hook_event_name"], ev["tool_name"], ev["tool_input"]) == ("PreToolUse", tool, shaped)


def test_a_shell_command_in_another_directory_runs_there():
    ev = GEMINI.event(base("BeforeTool", tool_name="run_shell_command", tool_input={"command": "ls", "dir_path": "sub"}))
    assert ev["cwd"] == "/w/proj/sub" and ev["tool_input"] == {"command": "ls"}


def test_a_result_is_the_text_the_model_was_given_and_an_error_is_a_failed_call():
    done = GEMINI.event(base("AfterTool", tool_name="run_shell_command", tool_input={"command": "ls"},
                             tool_response={"llmContent": "a\nb\n", "returnDisplay": "a\nb"}))
    assert (done["hook_event_name"], done["tool_response"]) == ("PostToolUse", "a\nb\n")
    parts = GEMINI.event(base("AfterTool", tool_name="read_file", tool_input={"file_path": "p.png"},
                              tool_response={"llmContent": [{"text": "the image:"}, {"inlineData": {"mimeType": "image/png", "data": B64}}]}))
    assert parts["tool_response"] == "the image:\n[image/png not stored by Eggshell: %d characters of base64]" % len(B64)
    failed = GEMINI.event(base("AfterTool", tool_name="run_shell_command", tool_input={"command": "false"},
                               tool_response={"llmContent": "Exit Code: 1", "error": {"message": "Command failed", "type": "shell"}}))
    assert (failed["hook_event_name"], failed["tool_response"]) == ("PostToolUseFailure", "Command failed\nExit Code: 1")


def test_neutral_answers_become_its_replies():
    assert GEMINI.reply("UserPromptSubmit", {"context": "prior"}) == {
        "hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": "prior"}}
    assert GEMINI.reply("PostToolUse", {"context": "prior"})["hookSpecificOutput"]["hookEventName"] == "AfterTool"
    assert GEMINI.reply("PreToolUse", {"deny": "It was run before."}) == {"decision": "deny", "reason": "It was run before."}
    assert GEMINI.reply("PreToolUse", {"context": "advice"}) == {}  # BeforeTool takes no context: silent, not an error
    assert GEMINI.reply("SessionStart", {"status": "Eggshell: on"}) == {"systemMessage": "Eggshell: on"}
    assert GEMINI.reply("Stop", {}) == {}


def test_hooks_file_and_timeouts_in_milliseconds():
    groups = GEMINI.hook_groups("/p/bin/egg-hook gemini")
    assert list(groups) == list(GEMINI.events)
    assert {e for e, g in groups.items() if g.get("matcher") == "*"} == {"BeforeTool", "AfterTool"}
    assert groups["AfterAgent"]["hooks"] == [{"type": "command", "name": "eggshell", "command": "/p/bin/egg-hook gemini", "timeout": 30000}]
    assert GEMINI.settings_file(PATHS, {"HOME": "/home/u"}, None) == "/home/u/.gemini/settings.json"
    assert GEMINI.settings_file(PATHS, {"HOME": "/home/u", "GEMINI_CLI_HOME": "/g"}, None) == "/g/.gemini/settings.json"
    assert GEMINI.settings_file(PATHS, {"HOME": "/home/u"}, "/x") == "/x/.gemini/settings.json"


# -- through the hook, into a store --------------------------------------------------------------


@pytest.fixture
def env(tmp_path):
    return Env(tmp_path)


def gemini(env, event: str, session: str = "g-1", **kw) -> dict:
    return env.respond(base(event, cwd=env.project, session_id=session, **kw), host="gemini")


def test_a_gemini_turn_is_recorded_and_handed_to_the_next_chat_and_a_repeat_is_denied_once(env):
    os.makedirs(os.path.join(env.project, "src"))
    with open(os.path.join(env.project, "src", "billing.py"), "w") as f:
        f.write("def late_fee(days):\n    return 0.5 * days\n")
    assert gemini(env, "SessionStart", source="startup").get("systemMessage", "").startswith("Eggshell")
    assert gemini(env, "BeforeAgent", prompt="where is late_fee computed?") == {}
    read = {"file_path": "src/billing.py"}
    assert gemini(env, "BeforeTool", tool_name="read_file", tool_input=read) == {}
    gemini(env, "AfterTool", tool_name="read_file", tool_input=read,
           tool_response={"llmContent": "def late_fee(days):\n    return 0.5 * days\n", "returnDisplay": ""})
    assert gemini(env, "AfterAgent", prompt="where is late_fee computed?", prompt_response="late_fee is in src/billing.py",
                  stop_hook_active=False) == {}
    (v,) = env.views()
    assert (v.prompt, v.answer) == ("where is late_fee computed?", "late_fee is in src/billing.py")
    assert [t.outcome for t in v.tools] == ["def late_fee(days):\n    return 0.5 * days\n"]

    got = gemini(env, "BeforeAgent", session="g-2", prompt="how is the late_fee computed?")
    text = got["hookSpecificOutput"]["additionalContext"]
    assert got["hookSpecificOutput"]["hookEventName"] == "BeforeAgent" and "late_fee is in src/billing.py" in text
    denied = gemini(env, "BeforeTool", session="g-2", tool_name="read_file", tool_input=read)
    assert denied.get("decision") == "deny", denied
    # the handoff already gave this chat that output: the reason points at it instead of repeating it
    assert "this call was not run, because earlier work already did it:\n$ Read %s/src/billing.py" % env.project in denied["reason"]
    again = gemini(env, "BeforeTool", session="g-2", tool_name="read_file", tool_input=read)
    assert again.get("decision") != "deny"  # once: proposing it again runs it
    assert gemini(env, "BeforeAgent", session="g-3", prompt="configure the kubernetes ingress") == {}


def test_a_malformed_gemini_payload_fails_open(env):
    from helpers.hooks import answer_here

    assert answer_here("gemini", "not json", env.paths) == {}
    assert answer_here("gemini", json.dumps(base("AfterTool", cwd=env.project, tool_name=7)), env.paths) == {}


# -- egg install gemini / egg uninstall gemini ------------------------------------------------------


def test_install_merges_into_gemini_settings_and_uninstall_takes_only_ours(home, capsys):
    from eggshell.cli import main as cli
    from helpers import REPO

    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    theirs = {"model": {"name": "gemini-2.5-pro"}, "security": {"auth": {"selectedType": "gemini-api-key"}},
              "hooks": {"BeforeTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "./guard.sh"}]}]}}
    settings.write_text(json.dumps(theirs))
    command = "%s gemini" % os.path.join(REPO, "bin", "egg-hook")

    assert cli.main(["install", "gemini"]) == 0
    out = capsys.readouterr().out
    assert "wrote   %s: Eggshell hooks for SessionStart, BeforeAgent, BeforeTool, AfterTool, AfterAgent, PreCompress, SessionEnd" % settings in out
    data = json.loads(settings.read_text())
    assert {k: v for k, v in data.items() if k != "hooks"} == {k: v for k, v in theirs.items() if k != "hooks"}
    assert data["hooks"]["BeforeTool"][0] == theirs["hooks"]["BeforeTool"][0]  # theirs first, kept as it was
    ours = {e: [h for g in gs for h in g["hooks"] if h["command"] == command] for e, gs in data["hooks"].items()}
    assert all(len(v) == 1 and v[0]["timeout"] == 30000 for v in ours.values()) and set(ours) == set(GEMINI.events)
    assert settings.stat().st_mode & 0o777 == 0o600
    assert cli.main(["install", "gemini"]) == 0 and "updated " in capsys.readouterr().out  # again: still one each
    assert sum(len(gs) for gs in json.loads(settings.read_text())["hooks"].values()) == len(GEMINI.events) + 1

    rc = cli.main(["doctor"])
    assert "ok   Gemini CLI hooks: %s runs egg-hook for SessionStart, BeforeAgent" % settings in capsys.readouterr().out, rc

    assert cli.main(["uninstall", "gemini"]) == 0
    assert "removed 7 Eggshell hooks from %s" % settings in capsys.readouterr().out
    assert json.loads(settings.read_text()) == theirs


def test_doctor_names_a_host_on_this_machine_that_eggshell_is_not_installed_in(home, tmp_path, monkeypatch, capsys):
    from eggshell.cli import main as cli

    tools = tmp_path / "tools"
    tools.mkdir()
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % tools)

    def gemini_lines():
        cli.main(["doctor"])
        return [x for x in capsys.readouterr().out.splitlines() if "Gemini CLI" in x]

    assert gemini_lines() == []  # not on this machine, never set up: nothing to say
    exe = tools / "gemini"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    settings = home / ".gemini" / "settings.json"
    assert gemini_lines() == ["note Gemini CLI is on this machine (%s), without Eggshell: %s does not exist; "
                              "run `egg install gemini` to record its chats" % (exe, settings)]
    assert cli.main(["install", "gemini"]) == 0
    capsys.readouterr()
    (line,) = gemini_lines()
    assert line.startswith("ok   Gemini CLI hooks: %s runs egg-hook for " % settings)


def test_a_payload_no_parser_reads_keeps_the_lifecycle_name():
    raw = '{"session_id": "g-1", "cwd": "/w/proj", "hook_event_name": "AfterTool", "tool_response": 1e99999'
    assert GEMINI.raw_event(raw) == {"session_id": "g-1", "cwd": "/w/proj", "hook_event_name": "PostToolUse"}
