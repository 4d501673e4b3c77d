"""OpenCode (`opencode-ai`): no command hooks, so a JavaScript plugin relays its hooks to egg-hook.

`egg install opencode` writes opencode_plugin.js (with this machine's egg-hook in it) into
OpenCode's global plugin folder; OpenCode loads every file there at start. The plugin sends
one payload per plugin hook OpenCode calls, named after that hook, with OpenCode's own
fields; this module maps them onto the lifecycle:

    chat.message          UserPromptSubmit   the prompt: the message's own text parts (not
                                             synthetic ones: a file OpenCode read for an @mention)
    tool.execute.before   PreToolUse
    tool.execute.after    PostToolUse        a shell command that exits non-zero: PostToolUseFailure
    tool.error            PostToolUseFailure a tool that threw (OpenCode calls no after hook then)
    session.idle          Stop               with the assistant's last text, which the plugin kept
    session.created       SessionStart
    session.compacted     PostCompact

The turn is OpenCode's user message (its id comes with every payload of the turn); a call
is named by OpenCode's callID. Its built-in tools are named as the lifecycle's are (bash: Bash,
read: Read, ...) with their input in that shape, paths absolute, as for Gemini CLI, so a read
recorded in OpenCode and the same read proposed in Claude Code are one Work.

Replies are the neutral answer itself, which the plugin applies: context at prompt time (a
synthetic part the model reads) and after a call (appended to its output), a denial (the
plugin throws it, so the model gets the reason as the tool's error), a status line (a toast).
OpenCode's before hook cannot add context: advice without a denial is left out there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib import resources

from eggshell.hosts.base import TIMEOUT_S, Host, absolute, expand
from eggshell.paths import Paths

EVENTS = {"chat.message": "UserPromptSubmit", "tool.execute.before": "PreToolUse", "tool.execute.after": "PostToolUse",
          "tool.error": "PostToolUseFailure", "session.idle": "Stop", "session.created": "SessionStart",
          "session.compacted": "PostCompact"}
CONTEXT_EVENTS = ("UserPromptSubmit", "PostToolUse", "PostToolUseFailure")  # where the plugin can hand the model text
TOOLS = {"bash": "Bash", "read": "Read", "grep": "Grep", "glob": "Glob", "list": "LS", "write": "Write", "edit": "Edit",
         "webfetch": "WebFetch"}
PLUGIN = "opencode_plugin.js"
MARK = "// Eggshell for OpenCode: written by `egg install opencode`"  # the first line of a plugin Eggshell wrote


class OpenCode(Host):
    name = "opencode"
    label = "OpenCode"
    binary = "opencode"
    context_cap = 10000  # it documents no limit on a message part; Claude Code's, until one is measured
    chat_env = None  # the plugin sets EGGSHELL_CHAT for the commands it runs (shell.env)
    events = tuple(EVENTS)
    event_names = EVENTS
    option = "--opencode-config"
    option_metavar = "DIR"
    option_help = "OpenCode's global config folder, whose plugins/ it loads (default: $XDG_CONFIG_HOME/opencode, else ~/.config/opencode)"
    next_step = ("OpenCode loads it at its next start, in every project; chats in a project with .eggshell.toml "
                 "(`egg init`) are recorded.")
    plugin = PLUGIN

    def event(self, payload: object) -> object:
        if not isinstance(payload, dict):
            return payload
        out = dict(payload)
        name = out.get("hook_event_name")
        if name not in EVENTS:
            return out
        out["hook_event_name"] = event = EVENTS[name]
        if event == "UserPromptSubmit":
            parts = out.pop("parts", None)
            texts = [p["text"] for p in (parts if isinstance(parts, list) else ())
                     if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) and not p.get("synthetic")]
            out["prompt"] = "\n".join(texts)
        elif event == "Stop":
            out["last_assistant_message"] = out.pop("answer", None)
        elif event == "SessionStart":
            out.setdefault("source", "startup")
        elif event in ("PreToolUse", "PostToolUse", "PostToolUseFailure"):
            out["tool_name"], out["tool_input"] = out.pop("tool", None), out.pop("args", None)
            out["tool_use_id"] = out.pop("call_id", None)
            _tool(out)
            if event == "PostToolUse":
                result = out.pop("output", None)
                text = result.get("output") if isinstance(result, dict) else result
                out["tool_response"] = text if isinstance(text, str) else ("" if text is None else json.dumps(text))
                code = result.get("exit") if isinstance(result, dict) else None
                if out["tool_name"] == "Bash" and isinstance(code, int) and not isinstance(code, bool) and code != 0:
                    out["hook_event_name"] = "PostToolUseFailure"  # as Claude Code reports a non-zero exit
                    out["tool_response"] = "Exit code %d\n%s" % (code, out["tool_response"])
            elif event == "PostToolUseFailure":
                err = out.pop("error", None)
                out["tool_response"] = err if isinstance(err, str) else ("" if err is None else str(err))
        return out

    def reply(self, event: str, answer: dict) -> dict:
        if answer.get("deny") and event == "PreToolUse":
            return {"deny": answer["deny"]}
        if answer.get("context") and event in CONTEXT_EVENTS:
            return {"context": answer["context"]}
        if answer.get("status"):
            return {"status": answer["status"]}
        return {}

    def settings_file(self, paths: Paths, env: Mapping[str, str], given: str | None) -> str:
        if given:
            root = expand(given)
        else:
            xdg = (env.get("XDG_CONFIG_HOME") or "").strip()
            root = os.path.join(expand(xdg) if xdg else os.path.join(env.get("HOME") or expand("~"), ".config"), "opencode")
        return os.path.join(root, "plugins", "eggshell.js")

    def plugin_source(self, hook_command: str) -> str:
        """The plugin for this machine: opencode_plugin.js with egg-hook's path and its time limit in it."""
        text = resources.files("eggshell.hosts").joinpath(PLUGIN).read_text(encoding="utf-8")
        return text.replace('"@EGG_HOOK@"', json.dumps(hook_command)).replace("@TIMEOUT_MS@", str(TIMEOUT_S * 1000))

    def plugin_command(self, text: str) -> str | None:
        """The egg-hook a plugin file runs, if Eggshell wrote it (None: someone else's file)."""
        if not text.startswith(MARK):
            return None
        for line in text.splitlines():
            if line.startswith("const EGG_HOOK = "):
                try:
                    return json.loads(line[len("const EGG_HOOK = "):].split(";", 1)[0])
                except ValueError:
                    return None
        return None


def _tool(out: dict) -> None:
    """Name a built-in tool as the lifecycle does, with its input in that tool's shape; a path is
    made absolute against the session's directory (`cwd`)."""
    name, args = out.get("tool_name"), out.get("tool_input")
    if name not in TOOLS or not isinstance(args, dict):
        return
    cwd = out.get("cwd") if isinstance(out.get("cwd"), str) else ""

    def at(key: str) -> str | None:
        return absolute(cwd, args.get(key))

    kind = TOOLS[name]
    if kind == "Bash":
        new = {k: v for k, v in args.items() if k != "workdir"}
        if at("workdir") and at("workdir") != cwd:
            out["cwd"] = at("workdir")  # where the command runs, as Codex reports a workdir
    elif kind == "Read":
        new = {"file_path": at("filePath")} | {k: args[k] for k in ("offset", "limit")
                                                if isinstance(args.get(k), int) and not isinstance(args.get(k), bool)}
    elif kind in ("Grep", "Glob"):
        new = {"pattern": args.get("pattern"), "path": at("path")}  # none: the cwd, as in Claude Code
        if kind == "Grep" and isinstance(args.get("include"), str):
            new["glob"] = args["include"]
        new = {k: v for k, v in new.items() if v is not None}
    elif kind == "LS":
        new = {"path": at("path") or cwd}
    elif kind == "Write":
        new = {"file_path": at("filePath"), "content": args.get("content")}
    elif kind == "Edit":
        new = {"file_path": at("filePath"), "old_string": args.get("oldString"), "new_string": args.get("newString")}
        if args.get("replaceAll") is True:
            new["replace_all"] = True
    else:  # WebFetch
        new = {k: v for k, v in (("url", args.get("url")), ("format", args.get("format"))) if v is not None}
    out["tool_name"], out["tool_input"] = kind, new


HOST = OpenCode()
