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

What must survive (the prompt, each tool result, the end of a turn) is journaled
first, in this process. The reply then comes from the warm manager of the data
root (started in the background when none runs; this hook then answers itself,
ranking lexically). A hook never takes longer than its budget: 10 s for prompt and
tool events, 2 s for Stop and end events; past it the reply is {}.

environment:
  EGGSHELL_MANAGER=off        answer and save in this process, start no manager
  EGGSHELL_MANAGER_IDLE=S     a started manager exits after S idle seconds (300)
  EGGSHELL_BUDGET_S=S         budget of prompt and tool events (10)
  EGGSHELL_BUDGET_END_S=S     budget of Stop, SessionEnd, PostCompact (2)
  EGGSHELL_TOOL_WAIT_S=S      a PostToolUse waits at most S seconds from its start for
                              the warm manager's context, then answers without it (0.3)

Register it with `egg install codex` rather than by hand."""


def log_failure(paths: _paths.Paths, event: str, exc: BaseException) -> bool:
    """One line in hook.log; False when even that could not be written (a full disk)."""
    try:
        import traceback

        _paths.private_dir(os.path.dirname(paths.log_file))
        when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:]).replace("\n", " | ")
        line = "%s %s %s: %s [%s]\n" % (when, event, type(exc).__name__, exc, tb)
        fd = os.open(paths.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            _paths.write_all(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
        return True
    except Exception:
        return False


def respond(host: str, raw: str, paths: _paths.Paths, res=None) -> dict:
    """The reply for one raw payload, its effects applied at once; never raises."""
    reply, effects = respond_later(host, raw, paths, res)
    run_effects(effects, paths)
    return reply


def run_effects(effects: list, paths: _paths.Paths) -> None:
    """What may only happen once the reply is out (recording delivered evidence)."""
    for f in effects:
        try:
            f()
        except Exception as e:
            log_failure(paths, "effect", e)


def respond_later(host: str, raw: str, paths: _paths.Paths, res=None) -> tuple[dict, list]:
    """(reply, effects to run after the reply was written), all in this process; never raises.

    `res` is the Resources to answer from (warm.py); by default a cold set for this call.
    """
    event = "?"
    effects: list = []
    try:
        payload = _parse(raw, paths)
        event = _event_of(payload)
        from .hooks import codex

        reply = codex.handle(payload, paths, effects, res=res, host=host)
        ujson.dumps(reply)  # a reply that cannot be encoded is a failure too
        return reply, effects
    except Exception as e:  # fail open: the agent goes on without memory
        _failed(paths, event, e)
        return {}, []


JSON_FAST_CHARS = 1 << 20  # past this, the standard library parses long strings several times faster


def _parse(raw: str, paths: _paths.Paths):
    try:
        if len(raw) <= JSON_FAST_CHARS:
            return ujson.loads(raw)
        import json  # a 50 MB tool output: about 0.4 s instead of 1.8 s

        return json.loads(raw)
    except (ValueError, RecursionError) as e:
        why = "payload is not valid JSON (%s)" % e
    kept = None
    try:
        from .hooks import codex

        kept = codex.quarantine_raw(raw, paths, why)  # a recorded turn's event: keep it for the user
    except Exception as q:
        log_failure(paths, "quarantine", q)
    if kept:
        raise ValueError("%s: kept in %s" % (why, kept))
    from .redact import redact_text

    # hook.log quotes the start of the payload: redacted, and long enough that no secret is cut in two
    raise ValueError("%s: %.80r" % (why, redact_text(raw[:16384])))


def _event_of(payload) -> str:
    if isinstance(payload, dict) and isinstance(payload.get("hook_event_name"), str):
        return payload["hook_event_name"]
    return "?"


def _failed(paths: _paths.Paths, event: str, e: BaseException) -> None:
    logged = log_failure(paths, event, e)
    where = "details in %s" % paths.log_file if logged else "and %s could not be written either" % paths.log_file
    try:
        print("%s: failed open (%s: %s); %s" % (PROG, type(e).__name__, e, where), file=sys.stderr)
    except Exception:
        pass


FAST_EVENTS = ("Stop", "SessionEnd", "Interrupt", "PostCompact")


def budget_s(event: str, env=os.environ) -> float:
    """How long this hook may take: the host waits for it, and the agent waits for the host."""
    key, default = ("EGGSHELL_BUDGET_END_S", 2.0) if event in FAST_EVENTS else ("EGGSHELL_BUDGET_S", 10.0)
    try:
        return max(0.1, float(env.get(key) or default))
    except ValueError:
        return default


def process_age() -> float:
    """Seconds since this process was started (the bootstrap `sh` execs Python in place).

    Budgets count from there, not from when Python is ready: on a busy machine the start
    of a hook (the shell, the interpreter, the imports) alone can take a few hundred ms.
    0 where /proc does not say.
    """
    try:
        import time

        with open("/proc/self/stat", "rb") as f:
            start = int(f.read().rpartition(b")")[2].split()[19])  # field 22, starttime, in clock ticks since boot
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - start / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


AFTER_TOOL_EVENTS = ("PostToolUse", "PostToolUseFailure")


def tool_wait_s(env=os.environ) -> float:
    """How long after its start a PostToolUse hook waits for the warm manager's context.

    Its one duty, journaling the result, is done before it asks; the context it may add is
    advice. So it never waits behind a busy manager (eight chats at once on two cores):
    past this it answers without it, and the manager skips the job if it has not begun it.
    """
    try:
        return max(0.05, float(env.get("EGGSHELL_TOOL_WAIT_S") or 0.3))
    except ValueError:
        return 0.3


def managed(host: str, raw: str, paths: _paths.Paths, deadline_from: float) -> tuple[dict, object]:
    """(reply, what to do once it is written), using the warm manager when one runs.

    The durable step runs here first, whatever happens next. Then the manager answers; if
    none is listening, one is started in the background and this process answers cold,
    bounded by the same deadline; a hook past its deadline answers {} (without memory).
    """
    import time

    from . import client
    from .hooks import codex

    event = "?"
    try:
        payload = codex.admit(_parse(raw, paths))
        event = _event_of(payload)
        deadline = deadline_from + budget_s(event)
        try:
            note = _paths.secure_data_root(paths.data_root)
        except _paths.UnsafePath as e:  # someone else's: write nothing there, not even the log
            print("%s: failed open: %s" % (PROG, e), file=sys.stderr)
            return {}, None
        if note is not None:
            log_failure(paths, "data root", RuntimeError(note))
        st = codex.record(payload, paths)
        if st is None:
            return {}, None
        use_manager = os.environ.get("EGGSHELL_MANAGER", "on") != "off"
        conn, start = None, use_manager
        advice_only = st.event in AFTER_TOOL_EVENTS
        wait = min(deadline, deadline_from + tool_wait_s()) if advice_only else deadline  # the manager's answer, at the latest
        if use_manager:
            try:
                conn = client.reach(paths.data_root, wait, hello=st.answer_needed, hung_after=deadline)
            except client.NoManager as e:  # none runs, or it must not be trusted or waited for: answer cold
                if e.busy:
                    return {}, None  # advice only, from a manager too busy to greet us in time: none
                start = e.start
                if str(e):
                    log_failure(paths, event, e)
        if conn is not None and not st.answer_needed:
            conn.send({"op": "nudge"}, deadline)  # save what was just sealed
            conn.close()
            return {}, None
        if conn is not None:
            if conn.send({"op": "answer", "host": host, "payload": payload, "step": st.to_json(),
                          "budget": max(0.0, wait - time.monotonic() - 0.05)}, wait):
                got = conn.receive(wait)
                if got is not None and isinstance(got.get("reply"), dict):
                    return got["reply"], lambda: (conn.send({"op": "ack"}, time.monotonic() + 1.0), conn.close())
            conn.close()
            if advice_only and time.monotonic() < deadline:
                return {}, None  # a busy manager: the result is journaled, its advice is not waited for
            log_failure(paths, event, TimeoutError("the manager gave no answer within the budget; answered without memory"))
            # A manager killed a moment ago can still accept a connection it will never answer:
            # start one (if one is alive, the new one finds the lock held and exits at once).
            client.spawn(paths.data_root)
            return {}, None
        if start:
            client.spawn(paths.data_root)
        return _cold(host, payload, st, paths, deadline, settle=not use_manager and st.event in codex.SEALING)
    except Exception as e:  # fail open: the agent goes on without memory
        _failed(paths, event, e)
        return {}, None


def _cold(host: str, payload: dict, st, paths: _paths.Paths, deadline: float, settle: bool) -> tuple[dict, object]:
    """Answer in this process within the deadline (a thread we stop waiting for at the deadline)."""
    import threading
    import time

    from .hooks import codex
    from .warm import Resources

    effects: list = []
    box: dict = {}
    res = Resources(paths.data_root, paths.bin_dir, warm=False, log=codex._log(paths))

    def work() -> None:
        try:
            box["reply"] = codex.answer(payload, st, paths, res, effects, host)
            ujson.dumps(box["reply"])
        except Exception as e:
            box["error"] = e

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(max(0.0, deadline - time.monotonic()))
    if t.is_alive():
        log_failure(paths, st.event, TimeoutError("no answer within the hook's budget; answered without memory"))
        return {}, None
    if "error" in box:
        _failed(paths, st.event, box["error"])
        box["reply"], effects[:] = {}, []

    def after() -> None:
        run_effects(effects, paths)
        if settle:
            try:
                codex.settle_here(paths, st, res)  # no manager will: save the sealed turn now
            except Exception as e:  # the turn stays journaled for the next save
                log_failure(paths, st.event, e)

    return box["reply"], after


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
    host = argv[0] if argv else "codex"
    try:
        stdin = getattr(sys.stdin, "buffer", None)
        # Bytes that are not UTF-8 become U+FFFD: one bad byte must not cost the whole event.
        raw = stdin.read().decode("utf-8", "replace") if stdin is not None else sys.stdin.read()
    except Exception as e:
        log_failure(paths, "?", e)
        raw = ""
    after = None
    if host not in HOSTS:
        log_failure(paths, "?", ValueError("unknown host %r (known: %s)" % (host, ", ".join(HOSTS))))
        reply: dict = {}
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
