"""Codex rollout files (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`) as turn records.

Read from what Codex 0.169 writes (tests/e2e/test_import_codex.py runs it), compared with
what its hooks send for the same chat:

- one `session_meta` line first: `session_id` is the chat the hooks name (a subagent's file
  names its parent's, as its hooks do; its own thread id is `id`), `cwd` where it ran;
- a turn is `event_msg` `task_started` (its `turn_id`, the hooks' turn) ... `task_complete`
  (`last_agent_message`, the Stop hook's final answer) or `turn_aborted` (interrupted); its
  request is the `item_completed` UserMessage (the UserPromptSubmit prompt, without the
  `<environment_context>` and `<turn_aborted>` messages Codex adds itself);
- a call is a `response_item` `function_call` (`call_id`, the hooks' tool_use_id) and its
  `function_call_output`; `item_completed` items (CommandExecution, FileChange,
  McpToolCall) carry what the tool itself reported.

What the hooks report, and so what this rebuilds: `exec_command {"cmd": C}` is the tool
`Bash` with input `{"command": C}` (other arguments, such as `workdir`, are not part of
it) and output the text after the `Output:` header of its function_call_output (the text
the model saw, after Codex's own truncation), reported once the process exited; an MCP
tool is `mcp__SERVER__TOOL` with the MCP result object as output; other tools keep their
name and their output as the model got it. `write_stdin` is no call of its own (it polls
an exec_command), and a call of an unknown tool never ran: neither fires a hook, so
neither is rebuilt. Two calls the 0.169 hooks do not report are rebuilt too, since the
file holds their real result: a command still running when its exec_command returned
(its output is the CommandExecution's once it exited) and `apply_patch` run through
exec_command (its output is what apply_patch printed).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

import ujson

from eggshell.core.binary import without_binary
from eggshell.hosts.transcripts import Found, Records, Transcript, text_of

NAME = "codex"
LABEL = "Codex"
EXITED = "Process exited with code "
SILENT = ("write_stdin",)  # calls the hooks never report: their effect belongs to another call
UNSUPPORTED = "unsupported call: "


def default_roots(env: Mapping[str, str], codex_home: str) -> list[str]:
    """Where Codex keeps its rollout files: `$CODEX_HOME/sessions` (default ~/.codex)."""
    return [os.path.join(codex_home, "sessions")]


def is_transcript_name(name: str) -> bool:
    return name.startswith("rollout-") and name.endswith(".jsonl")


def skip_dir(name: str) -> bool:
    return False


def exec_output(text: str) -> str | None:
    """What the hook reports for an exec_command result: the text after `Output:`, or None
    while the process still runs (Codex reports it only once it exited)."""
    head, sep, body = text.partition("\nOutput:\n")
    if not sep:
        if not text.endswith("\nOutput:"):
            return None
        head, body = text[: -len("\nOutput:")], ""
    return body if EXITED in head else None


def _args(text: object) -> object:
    if not isinstance(text, str):
        return text
    try:
        return ujson.loads(text)
    except (ValueError, OverflowError):
        return text


def _tool(call: dict, output: object, item: dict | None) -> tuple[dict | None, bool]:
    """(the call as its PostToolUse hook reports it, or None; whether a missing result counts as one)."""
    name, ns, args, cid = call["name"], call.get("namespace"), call["args"], call["id"]
    kind = item.get("type") if isinstance(item, dict) else None
    if call["custom"]:
        if kind == "FileChange":
            output = _printed(item)
        return ({"name": name, "id": cid, "input": args, "output": output}, True) if output is not None else (None, True)
    if name == "exec_command" and not ns:
        cmd = args.get("cmd") if isinstance(args, dict) else None
        if not isinstance(cmd, str):
            return None, True
        out = None
        if kind == "FileChange":  # apply_patch through the shell
            out = _printed(item)
        elif isinstance(output, str):
            out = exec_output(output)
        if out is None and kind == "CommandExecution":  # it exited after its exec_command returned
            code, text = item.get("exit_code"), item.get("aggregated_output")
            if isinstance(code, int) and code >= 0 and isinstance(text, str):
                out = text
        return ({"name": "Bash", "id": cid, "input": {"command": cmd}, "output": out}, True) if out is not None else (None, True)
    if name in SILENT and not ns:
        return None, False
    if isinstance(output, str) and output.startswith(UNSUPPORTED):
        return None, False  # no such tool: nothing ran
    if isinstance(ns, str) and ns.startswith("mcp__"):
        name = ns + "__" + name
        if kind == "McpToolCall" and isinstance(item.get("result"), dict):
            output = item["result"]
    if output is None:
        return None, True
    return {"name": name, "id": cid, "input": args, "output": without_binary(output)}, True


def _printed(item: dict) -> str | None:
    out, err = item.get("stdout"), item.get("stderr")
    if not isinstance(out, str) and not isinstance(err, str):
        return None
    out, err = out if isinstance(out, str) else "", err if isinstance(err, str) else ""
    return out + ("" if not err or not out or out.endswith("\n") else "\n") + err


def parse(lines: Iterable[bytes], path: str = "") -> Transcript:
    """The turns of one rollout file, in order (see the module docstring)."""
    meta: dict | None = None
    turns: dict[str, dict] = {}
    current: str | None = None
    calls: dict[str, dict] = {}
    outputs: dict[str, object] = {}
    items: dict[str, dict] = {}
    cwd_of: dict[str, str] = {}
    rows = Records(lines)
    for d in rows:
        kind, p = d.get("type"), d.get("payload")
        if not isinstance(p, dict):
            continue  # a record type this parser does not know: nothing of a turn
        if kind == "session_meta":
            if meta is None:
                meta = p
        elif kind == "turn_context":
            if isinstance(p.get("turn_id"), str) and isinstance(p.get("cwd"), str):
                cwd_of[p["turn_id"]] = p["cwd"]
        elif kind == "event_msg":
            what = p.get("type")
            tid = p.get("turn_id") if isinstance(p.get("turn_id"), str) else current
            if what == "task_started" and isinstance(p.get("turn_id"), str):
                current = p["turn_id"]
                turns.setdefault(current, {"time": d.get("timestamp") or "", "prompt": None, "calls": [], "answer": None, "ended": False})
            elif what == "item_completed" and isinstance(p.get("item"), dict):
                it = p["item"]
                if it.get("type") == "UserMessage":
                    t = turns.get(tid)
                    if t is not None and t["prompt"] is None:
                        t["prompt"] = text_of(it.get("content"))
                elif isinstance(it.get("id"), str):
                    items[it["id"]] = it
            elif what == "user_message" and isinstance(p.get("message"), str):
                t = turns.get(tid)
                if t is not None and t["prompt"] is None:
                    t["prompt"] = p["message"]
            elif what in ("task_complete", "turn_aborted") and tid in turns:
                t = turns[tid]
                t["ended"] = True
                msg = p.get("last_agent_message") if what == "task_complete" else None
                t["answer"] = msg if isinstance(msg, str) and msg else None
        elif kind == "response_item":
            what = p.get("type")
            cid = p.get("call_id")
            if what in ("function_call", "custom_tool_call") and isinstance(cid, str) and isinstance(p.get("name"), str):
                meta_turn = (p.get("internal_chat_message_metadata_passthrough") or {}).get("turn_id")
                tid = meta_turn if isinstance(meta_turn, str) and meta_turn in turns else current
                if tid in turns and cid not in calls:
                    custom = what == "custom_tool_call"
                    calls[cid] = {"id": cid, "name": p["name"], "namespace": p.get("namespace"), "custom": custom,
                                  "args": p.get("input") if custom else _args(p.get("arguments"))}
                    turns[tid]["calls"].append(cid)
            elif what in ("function_call_output", "custom_tool_call_output") and isinstance(cid, str):
                outputs.setdefault(cid, p.get("output"))
    if meta is None:
        return Transcript(path, bad_lines=rows.bad, bad_at=tuple(rows.bad_at), problem="not a Codex rollout file (no session_meta record)")
    session = meta.get("session_id") if isinstance(meta.get("session_id"), str) else meta.get("id")
    if not isinstance(session, str) or not session:
        return Transcript(path, bad_lines=rows.bad, bad_at=tuple(rows.bad_at), problem="its session_meta names no session id")
    cwd = meta.get("cwd") if isinstance(meta.get("cwd"), str) else ""
    found, no_result, untitled = [], 0, 0
    for tid, t in turns.items():
        tools = []
        for cid in t["calls"]:
            tool, counts = _tool(calls[cid], outputs.get(cid), items.get(cid))
            if tool is not None:
                tools.append(tool)
            elif counts:
                no_result += 1
        if t["prompt"] is None:
            untitled += 1
            continue
        record = {"session": session, "turn": tid, "cwd": cwd_of.get(tid, cwd), "prompt": t["prompt"], "tools": tools,
                  "answer": t["answer"]}
        found.append(Found(record, t["time"], open=not t["ended"]))
    orphans = sum(1 for cid in outputs if cid not in calls)
    return Transcript(path, session, cwd, tuple(found), bad_lines=rows.bad, no_result=no_result, orphans=orphans, promptless=untitled,
                      bad_at=tuple(rows.bad_at))
