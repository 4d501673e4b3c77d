"""One host, one small interface: what Eggshell must know about an agent CLI, and nothing more.

A host sends hook payloads in its own shape and takes replies in its own shape. Everything
behind the hook (the journal, the manager, the reuse engine) speaks one host-neutral
shape instead, so adding a host is one file here and one line in registry.py:

- `event(payload)`: the payload as a lifecycle event (EVENT_KEYS below; other keys pass
  through untouched and are ignored downstream);
- `raw_event(text)`: the same few fields read from a payload that is not valid JSON, so
  an event of a recorded turn can still be quarantined instead of lost;
- `reply(event, answer)`: a neutral answer (ANSWER_KEYS) as the host's reply object;
- `context_cap`, `chat_env`: how much hook context it accepts, which environment
  variable names the chat in a command the agent runs (`!egg ...`);
- `events`, `tool_events`, `settings_file`, `hook_groups`, `next_step`: what `egg
  install` writes where, and what `egg doctor` checks is there; `binary`: the command
  `egg doctor` looks for to say the host is on this machine;
- `plugin`, `plugin_source`, `plugin_command`: for a host without command hooks (OpenCode), the
  plugin file `egg install` writes at `settings_file` instead of merging hook entries into it.

A host module knows payloads and replies only: it imports no part of memory (the house
test enforces it), so it can be read, and replaced, without the rest.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from eggshell.paths import Paths

# The lifecycle's event, as every stage behind the hook reads it. It is the Codex payload
# shape, which Claude Code shares: a host of another shape maps onto these names.
EVENT_KEYS = {
    "hook_event_name": "SessionStart | UserPromptSubmit | PreToolUse | PostToolUse | PostToolUseFailure | Stop | "
                       "SessionEnd | Interrupt | PostCompact (other names are ignored)",
    "session_id": "the chat",
    "turn_id": "the turn, when the host names one (else the chat's open turn)",
    "cwd": "the directory the agent works in",
    "prompt": "UserPromptSubmit: the request",
    "tool_name": "tool events: the tool", "tool_input": "its input", "tool_use_id": "the call's id",
    "tool_response": "PostToolUse(Failure): what the call showed",
    "last_assistant_message": "Stop: the final answer",
    "source": "SessionStart: why the session started (compact: after a compaction)",
}
# A neutral answer: at most one of these keys; {} is "nothing to add".
ANSWER_KEYS = {"context": "text for the model", "deny": "block the proposed call, with this reason", "status": "one line for the user"}
TIMEOUT_S = 30  # the host's limit on one egg-hook run, written into its hooks file (unless the host allows less)


class Host:
    """The shared behaviour of hosts that send the lifecycle's own payloads (Codex, Claude Code)."""

    name = ""
    label = ""
    binary = ""  # the command that runs it: `egg doctor` looks for it on PATH
    context_cap = 10000
    chat_env: str | None = None
    events: tuple[str, ...] = ()
    tool_events: tuple[str, ...] = ()  # events whose hook groups select tools ("*": every tool)
    turn_keys = ("turn_id",)
    session_keys = ("session_id",)  # where its payloads name the chat, first found wins (Cursor: conversation_id first)
    event_names: Mapping[str, str] = {}  # its event names as the lifecycle's, where they differ
    option = ""  # the `egg install` option that names its settings file (`settings_file`'s `given`)
    option_metavar = "PATH"
    option_help = ""
    required = False  # `egg doctor` fails without its hooks (else it reports them where its file exists)
    doctor_note = ""  # what `egg doctor` reminds the user of
    next_step = ""
    # The most seconds the host lets a hook of an event run, where it allows less than TIMEOUT_S: a
    # larger timeout in its hooks file is cut down, with a warning in every chat (hosts/codex.py).
    timeout_limits: Mapping[str, int] = {}
    timeout_scale = 1  # the unit of its hooks file's timeouts, per second (1000: milliseconds)
    hook_name = ""  # a name for the hook entry, where the host shows one
    hooks_file_defaults: Mapping[str, object] = {}  # top-level keys its hooks file must have (Cursor: its version)
    plugin = ""  # a host that loads a plugin file, not a hooks file: that file's template (a resource here)

    def timeout(self, event: str) -> int:
        """The timeout `egg install` registers for `event`: TIMEOUT_S, or less where the host allows less."""
        return min(TIMEOUT_S, self.timeout_limits.get(event, TIMEOUT_S))

    def event(self, payload: object) -> object:
        """The payload as a lifecycle event; anything but an object is left for the journal step to refuse."""
        if not isinstance(payload, dict):
            return payload
        out = dict(payload)
        for key in self.turn_keys[1:]:
            if not (isinstance(out.get("turn_id"), str) and out["turn_id"]) and isinstance(out.get(key), str) and out[key]:
                out["turn_id"] = out[key]
        if out.get("hook_event_name") == "PostToolUseFailure" and "tool_response" not in out:
            # A failed call (Claude Code: a non-zero exit) carries its text in `error`: that is what it showed.
            err = out.pop("error", None)
            text = err if isinstance(err, str) else ("" if err is None else str(err))
            out["tool_response"] = text + ("\n[interrupted]" if out.get("is_interrupt") is True else "")
        return out

    def raw_event(self, text: str) -> dict:
        """session_id, turn_id, cwd and hook_event_name as they appear in a payload no parser can read."""
        import re  # only for a payload that is not JSON: a hook's start-up does not pay for it

        import ujson

        def field(key: str) -> str | None:
            m = re.search(r'"%s"\s*:\s*("(?:[^"\\]|\\.)*")' % key, text)
            try:
                v = ujson.loads(m.group(1)) if m else None
            except ValueError:
                return None
            return v if isinstance(v, str) and v else None

        turn = next((t for t in map(field, self.turn_keys) if t), None)
        session = next((t for t in map(field, self.session_keys) if t), None)
        name = field("hook_event_name")
        return {k: v for k, v in (("session_id", session), ("turn_id", turn), ("cwd", field("cwd")),
                                  ("hook_event_name", self.event_names.get(name, name) if name else None)) if v}

    def reply(self, event: str, answer: dict) -> dict:
        """The host's reply object for a neutral answer."""
        if answer.get("deny"):
            return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                           "permissionDecisionReason": self.deny_reason(answer["deny"])}}
        if answer.get("context"):
            return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": answer["context"]}}
        if answer.get("status"):
            return {"systemMessage": answer["status"]}
        return {}

    def deny_reason(self, text: str) -> str:
        return text

    def carries(self, answer: dict, reply: object) -> bool:
        """Whether `reply` (this host's, for `answer`) hands the model all `answer` gives it.

        A host that takes no context for an event (Cursor's prompt, a before-tool hook
        elsewhere) leaves it out of its reply; what never reached the model must not be
        counted as delivered, or the next call would be denied as already seen."""
        def strings(v: object):
            if isinstance(v, str):
                yield v
            elif isinstance(v, dict):
                for x in v.values():
                    yield from strings(x)
            elif isinstance(v, list):
                for x in v:
                    yield from strings(x)

        given = list(strings(reply))
        wanted = [answer[k].rstrip(".") for k in ("context", "deny") if isinstance(answer.get(k), str) and answer[k]]
        return all(any(w in s for s in given) for w in wanted)

    def plugin_source(self, hook_command: str) -> str:
        """The plugin file's text, running `hook_command` (egg-hook's path); only where `plugin` is set."""
        raise NotImplementedError

    def plugin_command(self, text: str) -> str | None:
        """The egg-hook a plugin file's text runs, if Eggshell wrote it; None for someone else's file."""
        raise NotImplementedError

    def settings_file(self, paths: Paths, env: Mapping[str, str], given: str | None) -> str:
        """The file `egg install` edits and `egg doctor` reads; `given`: the path the user named with `option`."""
        raise NotImplementedError

    def hook_groups(self, command: str) -> dict[str, dict]:
        """One hook group per event this host should run `command` (egg-hook) for."""
        named = {"name": self.hook_name} if self.hook_name else {}
        return {event: ({"matcher": "*"} if event in self.tool_events else {}) |
                {"hooks": [{"type": "command", **named, "command": command, "timeout": self.timeout(event) * self.timeout_scale}]}
                for event in self.events}


def expand(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def absolute(here: str, value: object) -> str | None:
    """A path a tool was given, made absolute against the directory the call ran in, as the
    lifecycle's tools name their files (None for no path)."""
    return os.path.normpath(os.path.join(here, value)) if isinstance(value, str) and value else None
