"""Gemini CLI (`@google/gemini-cli`): command hooks in `~/.gemini/settings.json`, payloads of its own.

Its events map one to one onto the lifecycle: SessionStart, BeforeAgent (the prompt),
BeforeTool and AfterTool (a call proposed, a call done), AfterAgent (the answer, in
`prompt_response`), PreCompress and SessionEnd. It names no turn and no tool call, so the
journal step opens a turn at each prompt and gives each call an id of its own.

Its tools are its own (`run_shell_command`, `read_file`, `grep_search`, ...). Each built-in
one is named here as the lifecycle's tools are (Bash, Read, Grep, Glob, LS, Write, Edit),
with its input in their shape, so a call recorded in Gemini CLI and the same call proposed
in Claude Code or Codex are one Work to the reuse engine. A result comes as
`{llmContent, returnDisplay, error}`: the text the model was given (`llmContent`) is the
output, a picture in it a placeholder, and a result with `error` a failed call.

Replies: context goes in `hookSpecificOutput.additionalContext` (BeforeAgent, AfterTool); a
blocked call is `{"decision": "deny", "reason": ...}`, whose reason the model gets as the
tool's error. BeforeTool takes no context: advice without a denial is left out, never
an error. Hook timeouts are in milliseconds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from eggshell.core.binary import without_binary
from eggshell.hosts.base import Host, absolute, expand
from eggshell.paths import Paths

EVENTS = {"BeforeAgent": "UserPromptSubmit", "BeforeTool": "PreToolUse", "AfterTool": "PostToolUse",
          "AfterAgent": "Stop", "PreCompress": "PostCompact", "SessionStart": "SessionStart", "SessionEnd": "SessionEnd"}
REPLY_EVENT = {"UserPromptSubmit": "BeforeAgent", "PostToolUse": "AfterTool", "PostToolUseFailure": "AfterTool",
               "SessionStart": "SessionStart"}  # the events whose replies take context, by the lifecycle's name
# Gemini CLI's built-in tools, as the lifecycle's names them (what Claude Code calls them).
TOOLS = {"run_shell_command": "Bash", "read_file": "Read", "grep_search": "Grep", "search_file_content": "Grep",
         "glob": "Glob", "list_directory": "LS", "write_file": "Write", "replace": "Edit"}


class Gemini(Host):
    name = "gemini"
    label = "Gemini CLI"
    binary = "gemini"
    context_cap = 10000  # it documents no limit; Claude Code's, until one is measured
    chat_env = None  # it names the chat to its hooks only (GEMINI_SESSION_ID), not to the commands it runs
    events = ("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent", "PreCompress", "SessionEnd")
    tool_events = ("BeforeTool", "AfterTool")
    timeout_scale = 1000  # milliseconds
    event_names = EVENTS
    hook_name = "eggshell"
    option = "--gemini-home"
    option_metavar = "DIR"
    option_help = "the home Gemini CLI reads .gemini/settings.json from (default: $GEMINI_CLI_HOME, else ~)"
    next_step = ("Other settings and hooks in that file were kept. Next: start Gemini CLI in a project with "
                 ".eggshell.toml (`egg init`); /hooks in Gemini CLI lists these hooks.")

    def event(self, payload: object) -> object:
        if not isinstance(payload, dict):
            return payload
        out = dict(payload)
        name = out.get("hook_event_name")
        if name not in EVENTS:
            return out  # BeforeModel, Notification, ...: nothing egg-hook acts on
        out["hook_event_name"] = EVENTS[name]
        if name == "AfterAgent":
            out["last_assistant_message"] = out.pop("prompt_response", None)
        if name in ("BeforeTool", "AfterTool"):
            self._tool(out)
        if name == "AfterTool":
            result = out.get("tool_response")
            error = result.get("error") if isinstance(result, dict) else None
            text = _text(result.get("llmContent") if isinstance(result, dict) else result)
            if error:
                message = error.get("message") if isinstance(error, dict) else error
                out["hook_event_name"] = "PostToolUseFailure"
                text = "\n".join(t for t in (message if isinstance(message, str) else str(message), text) if t)
            out["tool_response"] = text
        return out

    @staticmethod
    def _tool(out: dict) -> None:
        """Name a built-in tool as the lifecycle does, with its input in that tool's shape; a
        path is made absolute against the call's directory (`dir_path`, else the payload's cwd)."""
        name, args = out.get("tool_name"), out.get("tool_input")
        if name not in TOOLS or not isinstance(args, dict):
            return
        cwd = out.get("cwd") if isinstance(out.get("cwd"), str) else ""
        here = os.path.join(cwd, args["dir_path"]) if isinstance(args.get("dir_path"), str) else cwd

        def at(key: str) -> str | None:
            return absolute(here, args.get(key))

        kind = TOOLS[name]
        if kind == "Bash":
            new = {k: v for k, v in args.items() if k != "dir_path"}
            if here and here != cwd:
                out["cwd"] = os.path.normpath(here)  # where the command runs, as Codex reports a workdir
        elif kind == "Read":
            new = {"file_path": at("file_path") or at("absolute_path")}
            start, end = args.get("start_line", args.get("offset")), args.get("end_line")
            if isinstance(start, int) and not isinstance(start, bool):
                new["offset"] = start
            if isinstance(start, int) and isinstance(end, int) and end >= start:
                new["limit"] = end - start + 1
            elif isinstance(args.get("limit"), int):
                new["limit"] = args["limit"]
        elif kind in ("Grep", "Glob"):
            named = isinstance(args.get("dir_path"), str) and args["dir_path"]
            new = {"pattern": args.get("pattern"), "path": os.path.normpath(here) if named else None}  # none: the cwd, as in Claude Code
            if isinstance(args.get("include_pattern") or args.get("include"), str):
                new["glob"] = args.get("include_pattern") or args.get("include")
            new = {k: v for k, v in new.items() if v is not None}
        elif kind == "LS":
            new = {"path": here}
        else:  # Write, Edit: the same fields, the path made absolute
            new = dict(args, file_path=at("file_path") or args.get("file_path"))
        out["tool_name"], out["tool_input"] = kind, new

    def reply(self, event: str, answer: dict) -> dict:
        if answer.get("deny"):
            return {"decision": "deny", "reason": answer["deny"]}
        if answer.get("context") and event in REPLY_EVENT:
            return {"hookSpecificOutput": {"hookEventName": REPLY_EVENT[event], "additionalContext": answer["context"]}}
        if answer.get("status"):
            return {"systemMessage": answer["status"]}
        return {}

    def settings_file(self, paths: Paths, env: Mapping[str, str], given: str | None) -> str:
        home = expand(given) if given else expand((env.get("GEMINI_CLI_HOME") or "").strip() or env.get("HOME") or "~")
        return os.path.join(home, ".gemini", "settings.json")


def _text(content: object) -> str:
    """What the model was shown: a string, or the text of Gemini parts ({"text"}; a picture,
    {"inlineData": {"mimeType", "data"}}, as a placeholder)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return "" if content is None else str(content)
    parts = []
    for p in without_binary(content):
        if isinstance(p, dict) and isinstance(p.get("text"), str):
            parts.append(p["text"])
        elif isinstance(p, dict) and isinstance(p.get("inlineData"), dict):
            parts.append(str(p["inlineData"].get("data", "")))
        elif isinstance(p, str):
            parts.append(p)
    return "\n".join(parts)


HOST = Gemini()
