"""egg-hook: the command a host runs for each hook event.

Reads one JSON payload on stdin and always writes exactly one JSON object on stdout
and exits 0, whatever happens: memory must never block the agent. Failures go to a
log under the data root (and a short line on stderr).
"""

from __future__ import annotations

import os
import sys

import ujson

from eggshell import paths as _paths
from eggshell.hosts import registry
from eggshell.log import log_failure
from eggshell.runtime import hookinput
from eggshell.runtime.hookflow import budget_s, managed, process_age

PROG = "egg-hook"
REPLY_MARGIN_S = 0.25  # of the budget, kept for writing {} when stdin is never closed

USAGE = """usage: egg-hook HOST < payload.json

Handle one hook event from a coding agent. HOST names the agent CLI: %s
(hosts/registry.py). Reads the hook's JSON payload on stdin and writes one JSON reply
on stdout. Always exits 0: on any error the reply is {} and the error is logged
to $EGGSHELL_DATA_ROOT/logs/hook.log; SessionStart's reply then says why memory is
off (a broken config, a refused data root or store, a store that cannot be read).
Projects without .eggshell.toml are ignored.

What must survive (the prompt, each tool result, the end of a turn) is journaled
first, in this process. The reply then comes from the warm manager of the data
root (started in the background when none runs; this hook then answers itself,
ranking lexically). A hook never takes longer than its budget: 10 s for prompt and
tool events, 2 s for Stop and end events; past it the reply is {}. A stdin not
closed within the prompt events' budget answers {} and the log says why.

environment:
  EGGSHELL_MANAGER=off        answer and save in this process, start no manager
  EGGSHELL_MANAGER_IDLE=S     a started manager exits after S idle seconds (300)
  EGGSHELL_BUDGET_S=S         budget of prompt and tool events (10)
  EGGSHELL_BUDGET_END_S=S     budget of Stop, SessionEnd, PostCompact (2)
  EGGSHELL_TOOL_WAIT_S=S      a PostToolUse waits at most S seconds from its start for
                              the warm manager's context, then answers without it (0.3)

Register it with `egg install HOST` rather than by hand.""" % ", ".join(registry.NAMES)


def _payload(started: float) -> tuple[str, str | None]:
    """(stdin's text, None), or (what was read, why) when stdin was not closed within the budget.

    The event is not known before its payload is read: stdin gets the prompt events' budget,
    less the moment it takes to answer {}.
    """
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, ValueError, OSError):  # no file behind it (a test's StringIO)
        return (sys.stdin.read() if sys.stdin is not None else ""), None
    data, why = hookinput.read(fd, started + budget_s("?") - REPLY_MARGIN_S)
    # Bytes that are not UTF-8 become U+FFFD: one bad byte must not cost the whole event.
    return data.decode("utf-8", "replace"), why


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    import gc
    import time

    started = time.monotonic() - process_age()  # the host's clock started when it spawned us
    os.umask(0o077)  # the journal, chat state and logs hold prompts and tool output: owner only
    # A hook is one short process that loads a large, long-lived object graph (the stores)
    # and exits: cyclic collection passes over it were about 40% of loading 10k tool calls.
    gc.disable()
    paths = _paths.from_env()
    name = argv[0] if argv else "codex"
    host = registry.get(name)
    why = None
    try:
        raw, why = _payload(started)
    except Exception as e:
        log_failure(paths, "?", e)
        raw = ""
    after = None
    if why is not None:
        log_failure(paths, "?", TimeoutError(why))
        reply: dict = {}
    elif host is None:
        log_failure(paths, "?", ValueError("unknown host %r (known: %s)" % (name, ", ".join(registry.NAMES))))
        reply = {}
    else:
        reply, after = managed(host, raw, paths, started)
    try:
        sys.stdout.write(ujson.dumps(reply, ensure_ascii=False, escape_forward_slashes=False) + "\n")
        sys.stdout.flush()
    except OSError as e:  # the host went away: what it never received was not delivered
        log_failure(paths, "reply", e)
        return 0
    if after is not None:
        try:
            after()
        except Exception as e:
            log_failure(paths, "after reply", e)
    return 0
