"""Self-test of the e2e harness against the real Codex CLI, with no Eggshell code involved.

It pins what Eggshell relies on: the hooks.json format Codex accepts, the payload each hook
event receives, where UserPromptSubmit ``additionalContext`` lands in the model's input, and
that a chat runs offline.
"""

from __future__ import annotations

import json
import os
import socketserver
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler

import pytest

from codex_harness import (PINNED_CODEX_VERSION, events_by_name, hooks_json, read_hook_log,
                           write_logging_hook)
from fake_model_server import (EXHAUSTED_TEXT, NO_SCRIPT_TEXT, FakeModelServer, developer_messages,
                               function_call_outputs, function_calls)

pytestmark = pytest.mark.e2e

MARKER = "MARKER-123"
FINAL = "Final answer: the tool said hello."
PROMPT = "harness self-test: run the hello tool"
TOOL_CMD = "echo hello-from-tool"
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
UPS_REPLY = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": MARKER}}


def _log_all_events(codex_home, tmp_path, replies=None, events=EVENTS + ("SessionEnd",), **kw):
    log = tmp_path / "hooks.log"
    cmd = write_logging_hook(tmp_path / "hookbin", log, replies or {})
    doc = hooks_json({e: cmd for e in events}, **kw)
    codex_home.write_hooks(doc)
    return log


# --------------------------------------------------------------------------------------------
# The fake server alone (no Codex)


def _post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.headers.get("Content-Type"), resp.read().decode()


def _sse_items(text):
    items = []
    for block in text.strip().split("\n\n"):
        data = [l[len("data: "):] for l in block.splitlines() if l.startswith("data: ")]
        event = json.loads(data[0])
        if event["type"] == "response.output_item.done":
            items.append(event["item"])
    return items


def test_fake_server_scripts_and_records():
    user = lambda t: {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}
    env_ctx = user("<environment_context>\n  <cwd>/x</cwd>\n</environment_context>")
    with FakeModelServer({"alpha": [{"exec": "echo a"}, {"say": "done a"}]}) as server:
        url = server.base_url + "/responses"
        ctype, text = _post(url, {"input": [env_ctx, user("do alpha")]})
        assert ctype == "text/event-stream"
        (item,) = _sse_items(text)
        assert item["type"] == "function_call" and item["name"] == "exec_command"
        assert json.loads(item["arguments"]) == {"cmd": "echo a"}
        call = dict(item)
        out = {"type": "function_call_output", "call_id": item["call_id"], "output": "a\n"}
        dev = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "CTX"}]}
        (item,) = _sse_items(_post(url, {"input": [env_ctx, user("do alpha"), dev, call, out]})[1])
        assert item["content"][0]["text"] == "done a"
        (item,) = _sse_items(_post(url, {"input": [user("do alpha"), call, out, call, out]})[1])
        assert item["content"][0]["text"] == EXHAUSTED_TEXT
        (item,) = _sse_items(_post(url, {"input": [user("unknown")]})[1])
        assert item["content"][0]["text"] == NO_SCRIPT_TEXT
        with urllib.request.urlopen(server.base_url + "/models", timeout=30) as resp:
            assert json.loads(resp.read())["data"] == []

        reqs = server.requests_for("alpha")
        assert [r.step for r in reqs] == [0, 1, 2]
        assert reqs[0].prompt == "do alpha"
        assert developer_messages(reqs[1]) == ["CTX"]
        assert function_call_outputs(reqs[1]) == ["a\n"]
        assert len(function_calls(reqs[2])) == 2
        assert [r.path for r in server.other_requests()] == ["/v1/models"]
        assert server.wait_for(lambda rs: len(rs) == 5, timeout=5)


# --------------------------------------------------------------------------------------------
# Real Codex


def test_codex_version_is_pinned(codex_cli_version):
    # Not fatal for the harness, but the facts in README.md were observed on this version.
    assert PINNED_CODEX_VERSION in codex_cli_version, codex_cli_version


def test_hooks_round_trip(codex_home, fake_model, project_dir, tmp_path):
    fake_model.add_script(PROMPT, [{"exec": TOOL_CMD}, {"say": FINAL}])
    log = _log_all_events(codex_home, tmp_path, replies={"UserPromptSubmit": UPS_REPLY},
                          matchers={"SessionStart": "^(startup|resume|clear)$", "PreToolUse": "^Bash$",
                                    "PostToolUse": "^Bash$"},
                          description="harness self-test hooks",
                          extra_handler_fields={"UserPromptSubmit": {"additionalContextLimit": 48000}})

    run = codex_home.run(PROMPT, project_dir, extra_args=["--strict-config"]).check()
    print(f"codex exec chat took {run.duration:.2f}s")
    assert FINAL in run.stdout, run

    records = read_hook_log(log)
    by = events_by_name(records)
    assert [r["payload"]["hook_event_name"] for r in records] == [*EVENTS, "SessionEnd"], run
    for event in EVENTS:
        assert len(by[event]) == 1, (event, records)
        assert f"hook: {event} Completed" in run.stderr, run
    ss, ups, pre, post, stop = (by[e][0] for e in EVENTS)
    (end,) = by["SessionEnd"]

    real_project = os.path.realpath(project_dir)
    for p in (ss, ups, pre, post, stop, end):
        assert p["session_id"] == ss["session_id"] and p["session_id"]
        assert os.path.realpath(p["cwd"]) == real_project
        assert p["transcript_path"].startswith(str(codex_home.sessions_dir))
    for p in (ss, ups, pre, post, stop):
        assert p["model"] == "mock-model"
        assert p["permission_mode"] == "bypassPermissions"
    assert ss["source"] == "startup" and "turn_id" not in ss
    turn_ids = {p.get("turn_id") for p in (ups, pre, post, stop)}
    assert len(turn_ids) == 1 and None not in turn_ids, turn_ids
    assert ups["prompt"] == PROMPT

    call_id = fake_model.requests_for(PROMPT)[0].reply["call_id"]
    for p in (pre, post):
        assert p["tool_name"] == "Bash"
        assert p["tool_input"] == {"command": TOOL_CMD}
        assert p["tool_use_id"] == call_id
    assert isinstance(post["tool_response"], str) and "hello-from-tool" in post["tool_response"]
    assert stop["last_assistant_message"] == FINAL
    assert stop["stop_hook_active"] is False
    assert end["reason"] == "other"
    # Hooks run in the session cwd with the harness environment.
    assert all(os.path.realpath(r["cwd"]) == real_project for r in records)

    reqs = fake_model.requests_for(PROMPT)
    assert [r.step for r in reqs] == [0, 1], [r.body for r in reqs]
    first, second = reqs
    assert MARKER in developer_messages(first)
    assert MARKER in developer_messages(second)
    assert any("hello-from-tool" in o for o in function_call_outputs(second))
    # The injected context sits right after the user's prompt.
    items = second.body["input"]
    idx = next(i for i, it in enumerate(items) if it.get("role") == "user"
               and PROMPT in json.dumps(it.get("content")))
    assert items[idx + 1]["role"] == "developer"
    assert items[idx + 1]["content"] == [{"type": "input_text", "text": MARKER}]
    # Nothing but the Responses endpoint was called.
    assert fake_model.other_requests() == []


def test_pre_tool_use_deny_blocks_the_command(codex_home, fake_model, project_dir, tmp_path):
    prompt = "harness self-test: denied tool"
    marker_file = project_dir / "ran.txt"
    fake_model.add_script(prompt, [{"exec": f"touch {marker_file}"}, {"say": "ok"}])
    deny = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": "NOPE-42"}}
    _log_all_events(codex_home, tmp_path, replies={"PreToolUse": deny}, events=("PreToolUse",))
    codex_home.run(prompt, project_dir).check()
    assert not marker_file.exists()
    (output,) = function_call_outputs(fake_model.requests_for(prompt)[1])
    assert output.startswith("Command blocked by PreToolUse hook: NOPE-42"), output


def test_hooks_need_trust_or_bypass(codex_home, fake_model, project_dir, tmp_path):
    prompt = "harness self-test: untrusted hooks"
    fake_model.add_script(prompt, [{"say": "ok"}])
    log = _log_all_events(codex_home, tmp_path)
    run = codex_home.run(prompt, project_dir, bypass_hook_trust=False).check()
    assert read_hook_log(log) == [], run  # silently skipped: no warning either


def test_unknown_top_level_key_disables_hooks_file(codex_home, fake_model, project_dir, tmp_path):
    prompt = "harness self-test: bad hooks file"
    fake_model.add_script(prompt, [{"say": "ok"}])
    log = tmp_path / "hooks.log"
    doc = hooks_json({"Stop": write_logging_hook(tmp_path / "hookbin", log)})
    doc["version"] = 1
    codex_home.write_hooks(doc)
    run = codex_home.run(prompt, project_dir).check()
    assert read_hook_log(log) == []
    assert "failed to parse hooks config" in run.stderr and "unknown field `version`" in run.stderr


def test_two_chats_share_one_server(codex_home, fake_model, project_dir):
    fake_model.add_script("chat one", [{"exec": "echo one-out"}, {"say": "first done"}])
    fake_model.add_script("chat two", [{"say": "second done"}])
    one = codex_home.run("chat one please", project_dir).check()
    two = codex_home.run("chat two please", project_dir).check()
    assert "first done" in one.stdout and "second done" in two.stdout
    assert [r.step for r in fake_model.requests_for("chat one")] == [0, 1]
    assert [r.step for r in fake_model.requests_for("chat two")] == [0]
    assert len(codex_home.rollout_files()) == 2


class _RefusingProxy(BaseHTTPRequestHandler):
    """Records every proxied destination and refuses it."""
    seen: list

    def _refuse(self):
        self.seen.append(f"{self.command} {self.path}")
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_CONNECT = do_GET = do_POST = do_HEAD = _refuse

    def log_message(self, *args):
        pass


def test_chat_runs_offline(codex_home, fake_model, project_dir):
    """With the harness config Codex contacts nothing but the fake server (a refusing HTTPS
    proxy records any other destination)."""
    prompt = "harness self-test: offline"
    fake_model.add_script(prompt, [{"exec": "echo offline"}, {"say": "ok"}])
    seen: list = []
    handler = type("Proxy", (_RefusingProxy,), {"seen": seen})
    proxy = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    proxy.daemon_threads = True
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{proxy.server_address[1]}"
        env = {k: url for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")}
        codex_home.run(prompt, project_dir, env=env).check()
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert seen == []
    assert [r.step for r in fake_model.requests_for(prompt)] == [0, 1]
