"""hosts/transcripts_codex.py and transcripts_claude.py: a transcript's turns, as the hooks reported them.

The fixtures are what the real Codex 0.169 and Claude Code 2.1 wrote in scripted chats,
next to what a logging hook received in the same chats (tests/fixtures/transcripts/
README.md). The rebuilt turns must name the same session and turns as the hooks, and each
call the hooks reported must come back with the same tool name, input and output, so an
imported turn compiles to the same Work as one captured live. The edge fixtures, written
in the same shapes, hold what real files also hold: unknown record types, lines that are
not JSON, a last line cut short, results without calls and calls without results, images,
subagent side chains, compactions, interrupted turns.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, strategies as st

from eggshell.hosts import registry
from eggshell.hosts import transcripts_claude as claude
from eggshell.hosts import transcripts_codex as codex
from eggshell.core.binary import BINARY, without_binary
from helpers.transcripts import FIXTURES, hook_payloads, lines

AGENT = "claude/agent/59ed3417-f638-4127-9f09-0ecfa33bdc72.jsonl"
SUBAGENT = "claude/agent/59ed3417-f638-4127-9f09-0ecfa33bdc72/subagents/agent-af8f9ce208069f1ab.jsonl"
PAIRS = [  # (host, transcript, what the hooks received, calls rebuilt that the 0.169 hooks do not report)
    ("codex", "codex/basic.jsonl", "codex/basic.hooks.ndjson", set()),
    ("codex", "codex/tools.jsonl", "codex/tools.hooks.ndjson", set()),
    ("codex", "codex/late.jsonl", "codex/late.hooks.ndjson", {"call_1", "call_3"}),  # finished later; apply_patch
    ("codex", "codex/mcp.jsonl", "codex/mcp.hooks.ndjson", set()),
    ("codex", "codex/subagent-parent.jsonl", "codex/subagent.hooks.ndjson", {"call_2"}),  # a wait_agent that failed
    ("claude", "claude/basic.jsonl", "claude/basic.hooks.ndjson", set()),
    ("claude", AGENT, "claude/agent.hooks.ndjson", set()),
]
PARSERS = {"codex": codex, "claude": claude}


def parse(host: str, name: str):
    return PARSERS[host].parse(lines(name), name)


def tools(t) -> dict[str, dict]:
    return {x["id"]: x for f in t.turns for x in f.record["tools"]}


def has_base64(value) -> bool:
    return "iVBORw0KGgo" in json.dumps(value)


def reported(host: str, name: str) -> list[dict]:
    """The hook payloads of the main chat, as the host adapter hands them on (hosts/*.event)."""
    h = registry.get(host)
    return [h.event(p) for p in hook_payloads(name) if not p.get("agent_id")]


@pytest.mark.parametrize("host,name,hooks,extra", PAIRS, ids=[p[1] for p in PAIRS])
def test_every_call_the_hooks_reported_is_rebuilt_as_they_reported_it(host, name, hooks, extra):
    t = parse(host, name)
    assert t.problem is None and t.bad_lines == 0
    events = reported(host, hooks)
    rebuilt = tools(t)
    posted = {e["tool_use_id"]: e for e in events if e["hook_event_name"] in ("PostToolUse", "PostToolUseFailure")}
    assert posted, "the fixture's hooks reported no call"
    for use, e in posted.items():
        got = rebuilt.get(use)
        assert got is not None, "call %s (%s) was reported by the hooks but not rebuilt" % (use, e["tool_name"])
        assert (got["name"], got["input"]) == (e["tool_name"], e["tool_input"]), use  # the same Work
        if has_base64(e["tool_response"]):
            assert not has_base64(got["output"]) and "not stored by Eggshell" in json.dumps(got["output"])
        elif isinstance(e["tool_response"], dict) and isinstance(got["output"], str):
            assert json.loads(got["output"]) == e["tool_response"], use  # Codex hands some tools' JSON text over parsed
        else:
            assert got["output"] == e["tool_response"], use
    assert set(rebuilt) - set(posted) == extra


@pytest.mark.parametrize("host,name,hooks,extra", PAIRS, ids=[p[1] for p in PAIRS])
def test_sessions_turns_prompts_and_answers_are_the_hooks_own(host, name, hooks, extra):
    t = parse(host, name)
    events = reported(host, hooks)
    assert {e["session_id"] for e in events} == {t.session}
    prompts = {e["turn_id"]: e["prompt"] for e in events if e["hook_event_name"] == "UserPromptSubmit"}
    stops = {e["turn_id"]: e.get("last_assistant_message") for e in events if e["hook_event_name"] == "Stop"}
    got = {f.record["turn"]: f.record for f in t.turns}
    if prompts:  # the MCP fixture's hooks were tool hooks only
        assert {k: r["prompt"] for k, r in got.items()} == prompts
    for turn, answer in stops.items():
        assert got[turn]["answer"] == answer
    assert all(not f.open for f in t.turns) and all(r["session"] == t.session for r in got.values())


def test_a_codex_subagent_is_a_turn_of_the_parent_session_as_its_hooks_say():
    child = parse("codex", "codex/subagent-child.jsonl")
    parent = parse("codex", "codex/subagent-parent.jsonl")
    sub = [e for e in hook_payloads("codex/subagent.hooks.ndjson") if e.get("agent_id") and e["hook_event_name"] == "UserPromptSubmit"]
    assert child.session == parent.session == sub[0]["session_id"]
    assert [f.record["turn"] for f in child.turns] == [sub[0]["turn_id"]]
    assert child.turns[0].record["prompt"] == sub[0]["prompt"]
    assert [x["input"] for x in child.turns[0].record["tools"]] == [{"command": "echo in-sub"}]


def test_codex_hooks_report_a_command_once_it_exited_and_only_the_text_after_output():
    assert codex.exec_output("Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 3\nOriginal token count: 1\nOutput:\nerr\n") == "err\n"
    assert codex.exec_output("Chunk ID: 1\nProcess exited with code 0\nOriginal token count: 0\nOutput:\n") == ""
    assert codex.exec_output("Chunk ID: 1\nProcess exited with code 0\nOutput:") == ""
    assert codex.exec_output("Chunk ID: 1\nWall time: 0.25 seconds\nProcess running with session ID 4\nOutput:\n") is None
    assert codex.exec_output("Wall time: 5.2 seconds\naborted by user") is None


def test_a_codex_command_that_finished_later_and_apply_patch_keep_their_real_output():
    got = tools(parse("codex", "codex/late.jsonl"))
    assert got["call_1"]["output"] == "late-output\n"  # from its CommandExecution, after the turn's answer
    assert got["call_3"]["input"]["command"].startswith("apply_patch <<'EOF'")
    assert got["call_3"]["output"] == "Success. Updated the following files:\nA b.txt\nM a.txt\n"
    assert got["call_5"]["output"].startswith("Warning: truncated output (original token count: 5000)")  # what the model saw


def test_an_interrupted_codex_turn_has_no_answer_and_keeps_what_ran():
    t = parse("codex", "codex/interrupted.jsonl")
    (f,) = t.turns
    assert f.record["answer"] is None and not f.open
    assert [x["input"]["command"] for x in f.record["tools"]] == ["echo first"]  # "aborted by user": no result
    assert t.no_result == 1
    assert f.record["prompt"] == "PROMPT long"  # not the <turn_aborted> message Codex adds


def test_codex_edge_cases():
    t = parse("codex", "codex/edge.jsonl")
    assert t.problem is None and t.session == "edge-sess"
    assert (t.bad_lines, t.bad_at) == (3, (3, 4, 28))  # not JSON, a JSON list, the cut last line
    assert t.no_result == 1 and t.orphans == 1  # sleep 600 never returned; call_zzz has no call
    assert t.promptless == 1  # t0, started by Codex itself
    first, second = t.turns
    assert first.record["turn"] == "t1" and first.record["cwd"] == "@ROOT@/proj/sub"  # its turn_context's cwd
    assert first.record["answer"] == "compute_late_fee in src/billing.py" and not first.open
    assert [x["name"] for x in first.record["tools"]] == ["Bash", "view_image"]  # no write_stdin, no unknown tool
    assert first.record["tools"][0]["input"] == {"command": "grep -rn late_fee src"}  # workdir is not part of it
    assert not has_base64(first.record) and BINARY % ("image/png", 96) in json.dumps(first.record)
    assert second.open and second.record["answer"] is None and second.record["prompt"] == "now cap it at 10%"
    assert [f.record["prompt"] for f in t.turns].count("where is the late fee computed?") == 1  # not again from the compaction


def test_claude_edge_cases():
    t = parse("claude", "claude/edge.jsonl")
    assert t.problem is None and t.session == "edge-claude"
    assert (t.bad_lines, t.bad_at) == (1, (27,))  # the cut last line
    assert t.sidechain == 3 and t.orphans == 1 and t.no_result == 2  # sleep 100 (interrupted), pytest (cut)
    first, second, third = t.turns
    assert first.record["turn"] == "p1" and first.record["answer"] is None and not first.open  # interrupted by the user
    assert [x["input"].get("command") or x["input"].get("file_path") for x in first.record["tools"]] == ["ls", "@ROOT@/proj/chart.png"]
    assert "find ." not in json.dumps(t.turns[0].record)  # the subagent's side chain is not part of it
    assert not has_base64(first.record)
    assert second.record["turn"] == "claude-u-15"  # no prompt id (older files): the record's uuid
    assert second.record["answer"] == "There is no Makefile target 'all'.\nAdd one, or run `make build`."  # after the API error
    assert second.record["tools"][0]["output"] == "Exit code 2\nmake: *** No rule to make target 'all'."  # PostToolUseFailure's error
    assert third.open and third.record["tools"] == [] and third.record["answer"] is None
    prompts = [f.record["prompt"] for f in t.turns]
    assert not any(p.startswith(("<command-name>", "This session is being continued")) for p in prompts)  # /compact, its summary


def test_claude_subagent_files_and_side_chains_are_skipped():
    main = parse("claude", AGENT)
    assert [f.record["prompt"][:18] for f in main.turns] == ["PROMPT use agent", "<task-notification"]  # both fired UserPromptSubmit
    assert [x["name"] for x in main.turns[0].record["tools"]] == ["Agent"]
    side = parse("claude", SUBAGENT)
    assert side.turns == () and side.sidechain > 0 and side.problem is None
    assert claude.skip_dir("subagents") and not codex.skip_dir("subagents")


def test_a_claude_chat_that_was_compacted_keeps_its_one_turn():
    t = parse("claude", "claude/basic.jsonl")  # /compact was run on it after the chat
    assert [f.record["prompt"] for f in t.turns] == ["PROMPT do things"]


@pytest.mark.parametrize("host", ["codex", "claude"])
def test_a_file_that_is_not_a_transcript_says_so(host):
    t = parse(host, "not-a-transcript.jsonl")
    assert t.problem and t.turns == () and ("Codex" if host == "codex" else "Claude Code") in t.problem
    assert parse("claude" if host == "codex" else "codex", "codex/basic.jsonl" if host == "codex" else "claude/basic.jsonl").problem


def test_without_binary_leaves_no_base64_and_says_what_was_there():
    b64 = "iVBORw0KGgoAAAA" * 50
    value = {"a": [{"type": "image", "source": {"type": "base64", "data": b64, "media_type": "image/jpeg"}}],
             "file": {"base64": b64, "type": "image/png"}, "url": "data:image/webp;base64," + b64, "text": "kept"}
    out = without_binary(value)
    assert "iVBORw0KGgo" not in json.dumps(out)
    assert out["a"][0]["source"]["data"] == BINARY % ("image/jpeg", len(b64))
    assert out["file"]["base64"] == BINARY % ("image/png", len(b64))
    assert out["url"] == BINARY % ("image/webp", len(b64)) and out["text"] == "kept"
    assert without_binary("data: not a url") == "data: not a url"


def test_default_roots_follow_the_hosts_own_settings():
    assert codex.default_roots({}, "/x/.codex") == ["/x/.codex/sessions"]
    assert claude.default_roots({"HOME": "/h"}, "") == ["/h/.claude/projects"]
    assert claude.default_roots({"HOME": "/h", "CLAUDE_CONFIG_DIR": "/c"}, "") == ["/c/projects"]
    assert claude.default_roots({"HOME": "/h", "CLAUDE_CONFIG_DIR": "  "}, "") == ["/h/.claude/projects"]
    assert codex.is_transcript_name("rollout-2026-12-02T04-06-00-x.jsonl") and not codex.is_transcript_name("history.jsonl")


FILES = [("codex", "codex/basic.jsonl"), ("codex", "codex/edge.jsonl"), ("claude", "claude/basic.jsonl"), ("claude", "claude/edge.jsonl")]


@pytest.mark.parametrize("host,name", FILES)
@given(data=st.data())
def test_damaged_lines_are_counted_never_a_crash(host, name, data):
    """Any line cut anywhere, dropped, or replaced by noise: the parser still returns, counting it."""
    src = lines(name)
    i = data.draw(st.integers(0, len(src) - 1))
    how = data.draw(st.sampled_from(["cut", "drop", "noise", "swap"]))
    out = list(src)
    if how == "cut":
        out[i] = out[i][: data.draw(st.integers(0, max(0, len(out[i]) - 1)))] + b"\n"
    elif how == "drop":
        del out[i]
    elif how == "noise":
        out[i] = data.draw(st.binary(max_size=64)).replace(b"\n", b" ") + b"\n"
    else:
        j = data.draw(st.integers(0, len(src) - 1))
        out[i], out[j] = out[j], out[i]
    t = PARSERS[host].parse(out, name)
    assert t.problem is not None or all(isinstance(f.record["prompt"], str) for f in t.turns)
    for f in t.turns:
        for x in f.record["tools"]:
            assert isinstance(x["name"], str) and isinstance(x["id"], str) and "output" in x


def test_the_fixtures_are_what_the_readme_lists():
    with open(os.path.join(FIXTURES, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    for d, _dirs, names in os.walk(FIXTURES):
        for n in names:
            if n.endswith((".jsonl", ".ndjson")):
                rel = os.path.relpath(os.path.join(d, n), FIXTURES)
                assert rel in readme or os.path.basename(os.path.dirname(rel)) == "subagents", rel
