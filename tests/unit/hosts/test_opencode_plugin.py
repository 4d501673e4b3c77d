"""opencode_plugin.js, the relay `egg install opencode` writes, run in Node against a scripted egg-hook.

OpenCode loads the plugin in its own runtime (Bun) and calls its hooks; here Node imports the
same file, as written for this machine, and calls the hooks as OpenCode 1.18.33 was observed
to (their arguments are the ones it passed). The egg-hook is a small script that logs each
payload and answers what the test scripted, or misbehaves on purpose. What the plugin must do:
apply each reply where OpenCode reads it, send the runs in order, never block or break the
agent when egg-hook fails, and wait for the last runs before OpenCode exits. The real CLI
runs it in tests/e2e/test_opencode_eggshell.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap

import pytest

from eggshell.hosts.opencode import HOST as OPENCODE

NODE = shutil.which("node")

# egg-hook stand-in: logs the payload, then answers from replies.json by event name, or
# pauses (1 s, then {}), hangs (30 s), exits without a word, or prints something that is not JSON.
HOOK = """#!/bin/sh
[ "$1" = opencode ] || { echo "host $1" >&2; exit 9; }
payload=$(cat)
printf '%s\\n' "$payload" >> "@LOG@"
event=$(printf '%s' "$payload" | sed -n 's/.*"hook_event_name":"\\([^"]*\\)".*/\\1/p')
exec python3 -c '
import json, sys, time
how = json.load(open(sys.argv[1])).get(sys.argv[2], {})
if how == "slow": time.sleep(30)
elif how == "pause": time.sleep(1); print("{}")
elif how == "garbage": print("Traceback (most recent call last):")
elif how != "silent": print(json.dumps(how))
' "@REPLIES@" "$event"
"""

DRIVER = """
import * as mod from "{plugin}";
import {{ existsSync, readFileSync }} from "node:fs";
const toasts = [];
const client = {{ tui: {{ showToast: async (x) => {{ toasts.push(x.body.message); }} }} }};
const hooks = await mod.Eggshell({{ client, directory: "/w/proj", worktree: "/" }});
const out = {{}};
const call = async (name, fn) => {{
  const t = Date.now();
  try {{ out[name] = {{ value: await fn(), ms: Date.now() - t }}; }}
  catch (e) {{ out[name] = {{ error: String(e.message), ms: Date.now() - t }}; }}
}};
{steps}
await hooks.dispose();
out.sent_by_dispose = existsSync("{log}") ? readFileSync("{log}", "utf8").split("\\n").filter(Boolean).length : 0;
out.toasts = toasts;
console.log(JSON.stringify(out));
"""


@pytest.fixture
def relay(tmp_path):
    if NODE is None:  # a failure, not a skip, as for a missing agent CLI (tests/e2e/conftest.py)
        pytest.fail("node is not on PATH: install npm (`apt-get install npm`), which `make test-tools` needs anyway", pytrace=False)
    log, replies = tmp_path / "payloads.ndjson", tmp_path / "replies.json"
    hook = tmp_path / "egg-hook"
    hook.write_text(HOOK.replace("@LOG@", str(log)).replace("@REPLIES@", str(replies)))
    hook.chmod(0o755)

    def run(steps: str, answers: dict | None = None, command: str | None = None, timeout_ms: int | None = None):
        replies.write_text(json.dumps(answers or {}))
        text = OPENCODE.plugin_source(command or str(hook))
        if timeout_ms is not None:
            text = text.replace("const TIMEOUT_MS = 30000;", "const TIMEOUT_MS = %d;" % timeout_ms)
        plugin = tmp_path / "eggshell.mjs"
        plugin.write_text(text)
        driver = tmp_path / "driver.mjs"
        driver.write_text(DRIVER.format(plugin=plugin, log=log, steps=textwrap.dedent(steps)))
        p = subprocess.run([NODE, str(driver)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        sent = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
        return json.loads(p.stdout), sent

    return run


PROMPT = """
const prompt = { message: { id: "msg_1", sessionID: "ses_1", role: "user" },
                 parts: [{ id: "prt_1", type: "text", text: "why is it slow?" }] };
await call("prompt", async () => { await hooks["chat.message"]({ sessionID: "ses_1" }, prompt); return prompt.parts; });
"""


def test_prompt_context_is_a_synthetic_part_after_the_prompt(relay):
    out, sent = relay(PROMPT, {"chat.message": {"context": "PRIOR WORK"}})
    first, added = out["prompt"]["value"]
    assert first == {"id": "prt_1", "type": "text", "text": "why is it slow?"}  # the user's text untouched
    assert added["type"] == "text" and added["text"] == "PRIOR WORK" and added["synthetic"] is True
    assert added["messageID"] == "msg_1" and added["sessionID"] == "ses_1"
    assert added["id"].startswith("prt_") and len(added["id"]) == len("prt_") + 12 + 14 and added["id"] > "prt_0"
    assert sent == [{"cwd": "/w/proj", "hook_event_name": "chat.message", "session_id": "ses_1", "turn_id": "msg_1",
                     "parts": [{"type": "text", "text": "why is it slow?"}]}]


def test_a_denied_call_throws_its_reason_and_its_error_is_not_journaled(relay):
    steps = PROMPT + """
    await call("before", () => hooks["tool.execute.before"]({ tool: "read", sessionID: "ses_1", callID: "c1" }, { args: { filePath: "/w/a.py" } }));
    const part = (callID, error) => ({ event: { type: "message.part.updated", properties: { sessionID: "ses_1",
        part: { type: "tool", tool: "read", callID, state: { status: "error", input: { filePath: "/w/a.py" }, error } } } } });
    await hooks.event(part("c1", "not run: see earlier work"));  // our own denial, as OpenCode reports it
    await hooks.event(part("c2", "File not found: /w/b.py"));    // a tool that threw
    await hooks.event(part("c2", "File not found: /w/b.py"));    // announced again
    """
    out, sent = relay(steps, {"tool.execute.before": {"deny": "not run: see earlier work"}})
    assert out["before"]["error"] == "not run: see earlier work"
    assert [p["hook_event_name"] for p in sent] == ["chat.message", "tool.execute.before", "tool.error"]
    assert sent[1] == {"cwd": "/w/proj", "hook_event_name": "tool.execute.before", "session_id": "ses_1", "tool": "read",
                            "call_id": "c1", "args": {"filePath": "/w/a.py"}, "turn_id": "msg_1"}
    assert (sent[2]["call_id"], sent[2]["error"], sent[2]["args"]) == ("c2", "File not found: /w/b.py", {"filePath": "/w/a.py"})


def test_results_answers_and_the_session_events_are_sent_in_order(relay):
    steps = PROMPT + """
    const result = { title: "echo hi", output: "hi\\n", metadata: { exit: 0, output: "hi\\n" } };
    await call("after", async () => { await hooks["tool.execute.after"]({ tool: "bash", sessionID: "ses_1", callID: "c1",
        args: { command: "echo hi" } }, result); return result.output; });
    await hooks["experimental.text.complete"]({ sessionID: "ses_1", messageID: "msg_2", partID: "p1" }, { text: "first" });
    await hooks["experimental.text.complete"]({ sessionID: "ses_1", messageID: "msg_3", partID: "p2" }, { text: "It is" });
    await hooks["experimental.text.complete"]({ sessionID: "ses_1", messageID: "msg_3", partID: "p3" }, { text: "slow." });
    hooks.event({ event: { type: "session.idle", properties: { sessionID: "ses_1" } } });  // not awaited, as OpenCode's bus
    hooks.event({ event: { type: "session.compacted", properties: { sessionID: "ses_1" } } });
    const env = { env: {} };
    await hooks["shell.env"]({ cwd: "/w/proj", sessionID: "ses_1", callID: "c1" }, env);
    out.env = env.env;
    """
    out, sent = relay(steps, {"chat.message": "pause", "tool.execute.after": {"context": "SEE ALSO"}})
    assert out["after"]["value"] == "hi\n\n\nSEE ALSO"
    assert out["env"] == {"EGGSHELL_CHAT": "ses_1"}  # `!egg` in this chat's commands knows the chat
    assert [p["hook_event_name"] for p in sent] == ["chat.message", "tool.execute.after", "session.idle", "session.compacted"]
    assert sent[1]["output"] == {"title": "echo hi", "output": "hi\n", "exit": 0}
    assert sent[2]["answer"] == "It is\nslow."  # the last assistant message's text, not an earlier one's
    assert out["sent_by_dispose"] == 4  # OpenCode exits after dispose: the Stop it was not waiting for is in


def test_session_start_status_is_a_toast(relay):
    steps = """
    await hooks.event({ event: { type: "session.created", properties: { sessionID: "ses_1", info: { id: "ses_1" } } } });
    await new Promise((r) => setTimeout(r, 100));
    """
    out, sent = relay(steps, {"session.created": {"status": "Eggshell: recording this project"}})
    assert out["toasts"] == ["Eggshell: recording this project"]
    assert sent == [{"cwd": "/w/proj", "hook_event_name": "session.created", "session_id": "ses_1"}]


@pytest.mark.parametrize("how", ["silent", "garbage"])
def test_an_egg_hook_that_says_nothing_useful_changes_nothing(relay, how):
    steps = PROMPT + """
    await call("before", () => hooks["tool.execute.before"]({ tool: "bash", sessionID: "ses_1", callID: "c1" }, { args: { command: "ls" } }));
    """
    out, sent = relay(steps, {"chat.message": how, "tool.execute.before": how})
    assert len(out["prompt"]["value"]) == 1 and "error" not in out["before"]
    assert len(sent) == 2


def test_a_missing_egg_hook_fails_open(relay, tmp_path):
    steps = PROMPT + """
    await call("before", () => hooks["tool.execute.before"]({ tool: "bash", sessionID: "ses_1", callID: "c1" }, { args: { command: "ls" } }));
    """
    out, _ = relay(steps, command=str(tmp_path / "gone" / "egg-hook"))
    assert len(out["prompt"]["value"]) == 1 and "error" not in out["before"]


def test_an_egg_hook_past_its_time_is_killed_and_ignored(relay):
    steps = PROMPT + """
    await call("before", () => hooks["tool.execute.before"]({ tool: "bash", sessionID: "ses_1", callID: "c1" }, { args: { command: "ls" } }));
    """
    # 3 s: a run of this stand-in (a shell and a Python) takes well under that even on a loaded machine
    out, sent = relay(steps, {"chat.message": "slow", "tool.execute.before": {"deny": "late"}}, timeout_ms=3000)
    assert len(out["prompt"]["value"]) == 1 and out["prompt"]["ms"] < 20000  # not the 30 s it would take
    assert out["before"]["error"] == "late"  # the next run is not held up by the killed one
