"""egg-hook: the command a host runs for each hook event.

Reads one JSON payload on stdin and always writes exactly one JSON object on stdout
and exits 0, whatever happens: memory must never block the agent. Failures go to a
log under the data root (and a short line on stderr).
"""

from __future__ import annotations

import datetime as _dt
import os
import sys

import ujson

from . import paths as _paths

PROG = "egg-hook"
HOSTS = ("codex", "claude")

USAGE = """usage: egg-hook HOST < payload.json

Handle one hook event from a coding agent. HOST is codex or claude (the same
payload shape). Reads the hook's JSON payload on stdin and writes one JSON reply
on stdout. Always exits 0: on any error the reply is {} and the error is logged
to $EGGSHELL_DATA_ROOT/logs/hook.log. Projects without .eggshell.toml are ignored.

Register it with `egg install codex` rather than by hand."""


def log_failure(paths: _paths.Paths, event: str, exc: BaseException) -> None:
    try:
        import traceback

        _paths.private_dir(os.path.dirname(paths.log_file))
        when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:]).replace("\n", " | ")
        line = "%s %s %s: %s [%s]\n" % (when, event, type(exc).__name__, exc, tb)
        fd = os.open(paths.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except Exception:
        pass


def respond(host: str, raw: str, paths: _paths.Paths) -> dict:
    """The reply for one raw payload, its effects applied at once; never raises."""
    reply, effects = respond_later(host, raw, paths)
    run_effects(effects, paths)
    return reply


def run_effects(effects: list, paths: _paths.Paths) -> None:
    """What may only happen once the reply is out (recording delivered evidence)."""
    for f in effects:
        try:
            f()
        except Exception as e:
            log_failure(paths, "effect", e)


def respond_later(host: str, raw: str, paths: _paths.Paths) -> tuple[dict, list]:
    """(reply, effects to run after the reply was written); never raises."""
    event = "?"
    effects: list = []
    try:
        try:
            payload = ujson.loads(raw)
        except ValueError as e:
            raise ValueError("payload is not valid JSON (%s): %.80r" % (e, raw)) from None
        if isinstance(payload, dict) and isinstance(payload.get("hook_event_name"), str):
            event = payload["hook_event_name"]
        from .hooks import codex

        reply = codex.handle(payload, paths, effects)
        ujson.dumps(reply)  # a reply that cannot be encoded is a failure too
        return reply, effects
    except Exception as e:  # fail open: the agent goes on without memory
        log_failure(paths, event, e)
        try:
            print("%s: failed open (%s: %s); details in %s" % (PROG, type(e).__name__, e, paths.log_file), file=sys.stderr)
        except Exception:
            pass
        return {}, []


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    import gc

    # A hook is one short process that loads a large, long-lived object graph (the stores)
    # and exits: cyclic collection passes over it were about 40% of loading 10k tool calls.
    gc.disable()
    paths = _paths.from_env()
    host = argv[0] if argv else "codex"
    try:
        raw = sys.stdin.read()
    except Exception as e:
        log_failure(paths, "?", e)
        raw = ""
    effects: list = []
    if host not in HOSTS:
        log_failure(paths, "?", ValueError("unknown host %r (known: %s)" % (host, ", ".join(HOSTS))))
        reply: dict = {}
    else:
        reply, effects = respond_later(host, raw, paths)
    try:
        sys.stdout.write(ujson.dumps(reply, ensure_ascii=False, escape_forward_slashes=False) + "\n")
        sys.stdout.flush()
    except OSError as e:  # the host went away: what it never received was not delivered
        log_failure(paths, "reply", e)
        return 0
    run_effects(effects, paths)
    return 0
