"""hosts/: each host's adapter maps its payloads onto the lifecycle's events and neutral answers onto its replies."""

from __future__ import annotations

import json

import pytest

from eggshell.hosts import registry
from eggshell.hosts.base import EVENT_KEYS
from eggshell.hosts.claude import HOST as CLAUDE
from eggshell.hosts.codex import HOST as CODEX
from eggshell.paths import Paths

PATHS = Paths("/p", "/d", "/p/config.toml", "/home/u/.codex", "/p/bin")


def test_the_registry_names_every_host_once_and_nothing_else():
    assert registry.NAMES == ("codex", "claude", "gemini", "opencode", "cursor")
    assert [h.name for h in registry.every()] == list(registry.NAMES)
    assert registry.get("codex") is CODEX and registry.get("claude") is CLAUDE
    assert registry.get("windsurf") is None and registry.get("") is None


def test_a_codex_payload_is_already_a_lifecycle_event():
    p = {"hook_event_name": "PreToolUse", "session_id": "s", "turn_id": "t", "cwd": "/w", "tool_name": "Bash",
         "tool_input": {"command": "ls"}, "tool_use_id": "c1"}
    assert CODEX.event(p) == p and CODEX.event(p) is not p  # a copy: the payload is never changed in place
    assert set(p) <= set(EVENT_KEYS)
    assert CODEX.event("not an object") == "not an object"  # the journal step refuses it, naming why


def test_claude_names_its_turn_prompt_id_and_a_failed_call_carries_error():
    base = {"session_id": "s", "cwd": "/w", "prompt_id": "p-1"}
    assert CLAUDE.event(dict(base, hook_event_name="UserPromptSubmit", prompt="hi"))["turn_id"] == "p-1"
    assert CLAUDE.event(dict(base, hook_event_name="Stop", turn_id="t-9"))["turn_id"] == "t-9"  # a turn id it names wins
    failed = CLAUDE.event(dict(base, hook_event_name="PostToolUseFailure", tool_name="Bash", error="Exit code 1\nboom",
                               is_interrupt=True))
    assert failed["tool_response"] == "Exit code 1\nboom\n[interrupted]" and "error" not in failed
    assert CODEX.event(dict(base, hook_event_name="Stop")).get("turn_id") is None  # Codex has no prompt_id


def test_raw_event_reads_the_fields_of_a_payload_no_parser_can_read():
    raw = '{"session_id": "s\\"1", "prompt_id": "p-2", "cwd": "/w", "hook_event_name": "PostToolUse", "tool_response": ' + "[" * 5000
    with pytest.raises((ValueError, RecursionError)):
        json.loads(raw)
    assert CLAUDE.raw_event(raw) == {"session_id": 's"1', "turn_id": "p-2", "cwd": "/w", "hook_event_name": "PostToolUse"}
    assert "turn_id" not in CODEX.raw_event(raw)  # prompt_id is Claude Code's
    assert CODEX.raw_event("garbage") == {}


@pytest.mark.parametrize("host", [CODEX, CLAUDE], ids=["codex", "claude"])
def test_neutral_answers_become_the_hosts_replies(host):
    assert host.reply("UserPromptSubmit", {"context": "prior work"}) == {
        "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "prior work"}}
    assert host.reply("SessionStart", {"status": "Eggshell: on"}) == {"systemMessage": "Eggshell: on"}
    assert host.reply("PreToolUse", {}) == {} and host.reply("PostToolUse", {"context": ""}) == {}
    deny = host.reply("PreToolUse", {"deny": "It was run before."})["hookSpecificOutput"]
    assert deny["permissionDecision"] == "deny"
    # Codex appends ". Command: CMD" itself: its reason must not end in a full stop of its own
    assert deny["permissionDecisionReason"] == ("It was run before" if host is CODEX else "It was run before.")


def test_each_host_registers_timeouts_it_accepts():
    """A timeout over the host's limit is cut down (Codex 0.169 warns of it in every chat)."""
    for host in (CODEX, CLAUDE):
        for event, group in host.hook_groups("egg-hook %s" % host.name).items():
            (entry,) = group["hooks"]
            assert entry["timeout"] == min(30, host.timeout_limits.get(event, 30)), (host.name, event)
    assert CODEX.hook_groups("x")["SessionEnd"]["hooks"][0]["timeout"] == 3
    assert CLAUDE.hook_groups("x")["SessionEnd"]["hooks"][0]["timeout"] == 30  # its limit is 60 s
    assert {e for e in CODEX.events if CODEX.timeout(e) < 30} == {"SessionEnd"}


def test_hook_groups_and_settings_files():
    codex = CODEX.hook_groups("/p/bin/egg-hook codex")
    assert list(codex) == list(CODEX.events) and all("matcher" not in g for g in codex.values())
    assert codex["Stop"]["hooks"] == [{"type": "command", "command": "/p/bin/egg-hook codex", "timeout": 30}]
    claude = CLAUDE.hook_groups("egg-hook claude")
    assert {e for e, g in claude.items() if g.get("matcher") == "*"} == set(CLAUDE.tool_events) == {
        "PreToolUse", "PostToolUse", "PostToolUseFailure"}
    assert CODEX.settings_file(PATHS, {}, None) == "/home/u/.codex/hooks.json"
    assert CODEX.settings_file(PATHS, {}, "/elsewhere") == "/elsewhere/hooks.json"
    assert CLAUDE.settings_file(PATHS, {"HOME": "/home/u"}, None) == "/home/u/.claude/settings.json"
    assert CLAUDE.settings_file(PATHS, {"HOME": "/home/u", "CLAUDE_CONFIG_DIR": " "}, None) == "/home/u/.claude/settings.json"
    assert CLAUDE.settings_file(PATHS, {"HOME": "/home/u", "CLAUDE_CONFIG_DIR": "/cfg"}, None) == "/cfg/settings.json"
    assert CLAUDE.settings_file(PATHS, {}, "/x/s.json") == "/x/s.json"


def test_context_caps_and_chat_variables():
    assert (CODEX.context_cap, CLAUDE.context_cap) == (48000, 10000)
    assert (CODEX.chat_env, CLAUDE.chat_env) == ("CODEX_THREAD_ID", None)
    assert CODEX.required and not CLAUDE.required


def test_a_reply_carries_an_answer_only_when_the_model_gets_all_of_it():
    from eggshell.hosts.codex import HOST as codex
    from eggshell.hosts.cursor import HOST as cursor
    from eggshell.hosts.gemini import HOST as gemini

    deny = {"deny": "not run: see the earlier output."}
    assert codex.carries(deny, codex.reply("PreToolUse", deny))  # Codex drops the full stop: still all of it
    assert codex.carries({"context": "PRIOR"}, codex.reply("UserPromptSubmit", {"context": "PRIOR"}))
    assert not cursor.carries({"context": "PRIOR"}, cursor.reply("UserPromptSubmit", {"context": "PRIOR"}))
    assert not gemini.carries({"context": "advice"}, gemini.reply("PreToolUse", {"context": "advice"}))
    assert gemini.carries({"status": "on"}, gemini.reply("SessionStart", {"status": "on"}))  # a status is not for the model
    assert codex.carries({}, {})
