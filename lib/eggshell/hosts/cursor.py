"""Cursor: command hooks in `~/.cursor/hooks.json` (`{"version": 1, "hooks": {EVENT: [{"command"}]}}`).

Written from Cursor's documented hook schema; its CLI cannot be installed here, so this
adapter is tested on payloads written from that documentation only (tests/unit/hosts/
test_cursor.py), never against the real Cursor. Every payload carries `conversation_id` (the
chat), `generation_id` (one per prompt: the turn) and `workspace_roots`.

    beforeSubmitPrompt    UserPromptSubmit   `prompt`. Cursor takes no context at prompt time: the
                                             handoff is left out, silently; the reply only lets
                                             the prompt go on (`continue`)
    beforeShellExecution  PreToolUse Bash    a covered command is denied: `permission: deny`,
                                             the prior output in `agent_message` (the model's)
    afterShellExecution   PostToolUse Bash   `output`
    beforeMCPExecution    PreToolUse         the MCP tool, `tool_input` (JSON text or an object)
    afterMCPExecution     PostToolUse        `result_json`
    beforeReadFile        PostToolUse Read   Cursor hands the hook the file's `content`: that is the
                                             read's result. It takes only `permission` there, no
                                             reason, so a read is never denied (the model would
                                             lose the file and learn nothing)
    afterFileEdit         PostToolUse Edit   `edits` ([{old_string, new_string}]: MultiEdit when several)
    afterAgentResponse    Stop               `text`: the answer; the turn is sealed with it
    stop                  Stop / Interrupt   the seal when no answer came (`status` aborted or error:
                                             Interrupt)

A reply that says nothing is `{}`, which Cursor documents as its default behaviour (the
command, read or prompt goes on).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from eggshell.hosts.base import Host, absolute, expand
from eggshell.paths import Paths

EVENTS = {"beforeSubmitPrompt": "UserPromptSubmit", "beforeShellExecution": "PreToolUse", "afterShellExecution": "PostToolUse",
          "beforeMCPExecution": "PreToolUse", "afterMCPExecution": "PostToolUse", "beforeReadFile": "PostToolUse",
          "afterFileEdit": "PostToolUse", "afterAgentResponse": "Stop", "stop": "Stop"}
DENY_NOTE = "Eggshell: earlier work already ran this; its output was given to the agent instead."


class Cursor(Host):
    name = "cursor"
    label = "Cursor"
    binary = "cursor-agent"
    context_cap = 10000  # what agent_message may carry is not documented; Claude Code's, until one is measured
    chat_env = None  # it names the chat to hooks only (conversation_id)
    events = tuple(EVENTS)
    turn_keys = ("turn_id", "generation_id")
    session_keys = ("conversation_id", "session_id")  # as event() reads it
    event_names = EVENTS
    option = "--cursor-home"
    option_metavar = "DIR"
    option_help = "the home Cursor reads .cursor/hooks.json from (default: ~)"
    next_step = ("Other hooks in that file were kept. Cursor reads it at start: restart Cursor; chats in a project "
                 "with .eggshell.toml (`egg init`) are recorded.")
    hooks_file_defaults = {"version": 1}

    def event(self, payload: object) -> object:
        if not isinstance(payload, dict):
            return payload
        out = super().event(payload)  # generation_id is the turn
        name = out.get("hook_event_name")
        if name not in EVENTS:
            return out
        out["hook_event_name"] = EVENTS[name]
        out["session_id"] = out.get("conversation_id") if isinstance(out.get("conversation_id"), str) else out.get("session_id")
        roots = out.get("workspace_roots")
        root = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else None
        if not (isinstance(out.get("cwd"), str) and out["cwd"]) and root:
            out["cwd"] = root
        cwd = out.get("cwd") if isinstance(out.get("cwd"), str) else ""
        if name in ("beforeShellExecution", "afterShellExecution"):
            out["tool_name"], out["tool_input"] = "Bash", {"command": out.get("command")}
            if name == "afterShellExecution":
                out["tool_response"] = _text(out.get("output"))
        elif name in ("beforeMCPExecution", "afterMCPExecution"):
            args = out.get("tool_input")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    pass
            out["tool_input"] = args
            if name == "afterMCPExecution":
                out["tool_response"] = _text(out.get("result_json"))
        elif name == "beforeReadFile":
            out["tool_name"], out["tool_input"] = "Read", {"file_path": absolute(cwd, out.get("file_path"))}
            out["tool_response"] = _text(out.pop("content", None))
        elif name == "afterFileEdit":
            path = absolute(cwd, out.get("file_path"))
            edits = [e for e in out.get("edits") or () if isinstance(e, dict)] if isinstance(out.get("edits"), list) else []
            if len(edits) == 1:
                out["tool_name"] = "Edit"
                out["tool_input"] = {"file_path": path, "old_string": edits[0].get("old_string"), "new_string": edits[0].get("new_string")}
            else:
                out["tool_name"], out["tool_input"] = "MultiEdit", {"file_path": path, "edits": edits}
            out["tool_response"] = ""
        elif name == "afterAgentResponse":
            out["last_assistant_message"] = out.get("text") if isinstance(out.get("text"), str) else None
        elif name == "stop" and out.get("status") in ("aborted", "error"):
            out["hook_event_name"] = "Interrupt"
        return out

    def reply(self, event: str, answer: dict) -> dict:
        if answer.get("deny") and event == "PreToolUse":
            return {"permission": "deny", "user_message": DENY_NOTE, "agent_message": answer["deny"]}
        if event == "UserPromptSubmit":
            return {"continue": True}  # its context, if any, has nowhere to go: left out, never an error
        return {}

    def settings_file(self, paths: Paths, env: Mapping[str, str], given: str | None) -> str:
        home = expand(given) if given else expand(env.get("HOME") or "~")
        return os.path.join(home, ".cursor", "hooks.json")

    def hook_groups(self, command: str) -> dict[str, dict]:
        """Cursor's entries are flat: one {"command"} per hook, no groups, no matcher."""
        return {event: {"command": command} for event in self.events}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ("" if value is None else json.dumps(value, ensure_ascii=False))


HOST = Cursor()
