"""The transcript fixtures (tests/fixtures/transcripts/, see its README.md), placed where a test wants them.

The real Codex and Claude Code transcripts there were written under a temporary root that
is stored as `@ROOT@`; `place` writes a copy with a test's own root in its stead, so the
chat's cwd is a project the test made.
"""

from __future__ import annotations

import json
import os

from helpers import TESTS_DIR

FIXTURES = os.path.join(TESTS_DIR, "fixtures", "transcripts")
ROOT = "@ROOT@"


def text(name: str, root: str | os.PathLike = ROOT) -> str:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return f.read().replace(ROOT, str(root))


def place(name: str, root: str | os.PathLike, dest: str | os.PathLike | None = None) -> str:
    """Write fixture `name` with `root` for @ROOT@ (to `dest`, default under root/transcripts/); its path."""
    dest = str(dest) if dest is not None else os.path.join(str(root), "transcripts", name)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(dest, "w", encoding="utf-8") as f:
        f.write(text(name, root))
    return dest


def hook_payloads(name: str, root: str | os.PathLike = ROOT) -> list[dict]:
    """The hook payloads a logging hook received during the fixture's chat, in order."""
    return [json.loads(line) for line in text(name, root).splitlines() if line.strip()]


def lines(name: str, root: str | os.PathLike = ROOT) -> list[bytes]:
    return [ln.encode("utf-8") for ln in text(name, root).splitlines(keepends=True)]


# -- synthetic transcripts in the shapes the real CLIs write (the fixtures above show them) --


def _codex_line(time: str, kind: str, payload: dict) -> str:
    return json.dumps({"timestamp": time, "type": kind, "payload": payload})


def codex_output(text: str, code: int = 0) -> str:
    """An exec_command function_call_output as Codex 0.169 writes it for a process that exited."""
    return "Chunk ID: 5e2f0a\nWall time: 0.0100 seconds\nProcess exited with code %d\nOriginal token count: %d\nOutput:\n%s" % (
        code, len(text) // 4, text)


def codex_rollout(session: str, cwd: str, turns: list[dict], start: str = "2026-11-01T09:00:00") -> str:
    """A Codex rollout file: each turn {"turn", "prompt", "calls": [(cmd, output)], "answer"} (answer None: aborted)."""
    out = [_codex_line(start + ".000Z", "session_meta", {"session_id": session, "id": session, "timestamp": start + ".000Z", "cwd": cwd,
                                                         "originator": "codex_exec", "cli_version": "0.169.0", "source": "exec",
                                                         "thread_source": "user"})]
    for i, t in enumerate(turns):
        when = "%s.%03dZ" % (start, i % 1000) if "time" not in t else t["time"]
        tid = t["turn"]
        out.append(_codex_line(when, "event_msg", {"type": "task_started", "turn_id": tid}))
        out.append(_codex_line(when, "turn_context", {"turn_id": tid, "cwd": cwd}))
        out.append(_codex_line(when, "event_msg", {"type": "item_completed", "thread_id": session, "turn_id": tid, "item": {
            "type": "UserMessage", "id": "um-" + tid, "content": [{"type": "text", "text": t["prompt"], "text_elements": []}]}}))
        for j, (cmd, text) in enumerate(t.get("calls", ())):
            cid = "call_%s_%d" % (tid, j)
            out.append(_codex_line(when, "response_item", {"type": "function_call", "status": "completed", "id": "fc_" + cid,
                                                           "name": "exec_command", "arguments": json.dumps({"cmd": cmd}), "call_id": cid,
                                                           "internal_chat_message_metadata_passthrough": {"turn_id": tid}}))
            out.append(_codex_line(when, "response_item", {"type": "function_call_output", "id": "fco_" + cid, "call_id": cid,
                                                           "output": codex_output(text)}))
        if t.get("answer") is None:
            out.append(_codex_line(when, "event_msg", {"type": "turn_aborted", "turn_id": tid, "reason": "interrupted"}))
        else:
            out.append(_codex_line(when, "event_msg", {"type": "task_complete", "turn_id": tid, "last_agent_message": t["answer"]}))
    return "\n".join(out) + "\n"


def claude_session(session: str, cwd: str, turns: list[dict], start: str = "2026-11-01T09:00:00") -> str:
    """A Claude Code session file, each turn as codex_rollout's (Bash calls; answer None: interrupted)."""
    base = {"sessionId": session, "cwd": cwd, "version": "2.1.328", "userType": "external", "entrypoint": "sdk-cli", "isSidechain": False}
    out = [json.dumps({"type": "queue-operation", "operation": "enqueue", "timestamp": start + ".000Z", "sessionId": session})]
    n = 0

    def rec(kind: str, message: dict, **kw) -> str:
        nonlocal n
        n += 1
        return json.dumps({"parentUuid": None, "type": kind, "message": message, "uuid": "%s-%d" % (session, n),
                           "timestamp": "%s.%03dZ" % (start, n % 1000), **base, **kw})

    for t in turns:
        pid = t["turn"]
        out.append(rec("user", {"role": "user", "content": t["prompt"]}, promptId=pid))
        for j, (cmd, text) in enumerate(t.get("calls", ())):
            use = "toolu_%s_%d" % (pid, j)
            out.append(rec("assistant", {"id": "msg_%s_%d" % (pid, j), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                                         "content": [{"type": "tool_use", "id": use, "name": "Bash", "input": {"command": cmd, "description": "Run it"}}],
                                         "stop_reason": "tool_use"}))
            out.append(rec("user", {"role": "user", "content": [{"tool_use_id": use, "type": "tool_result", "content": text, "is_error": False}]},
                           promptId=pid, toolUseResult={"stdout": text, "stderr": "", "interrupted": False, "isImage": False,
                                                        "noOutputExpected": False}))
        if t.get("answer") is None:
            out.append(rec("user", {"role": "user", "content": [{"type": "text", "text": "[Request interrupted by user]"}]}, promptId=pid))
        else:
            out.append(rec("assistant", {"id": "msg_%s_end" % pid, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                                         "content": [{"type": "text", "text": t["answer"]}], "stop_reason": "end_turn"}))
    return "\n".join(out) + "\n"
