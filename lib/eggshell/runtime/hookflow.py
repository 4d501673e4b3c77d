"""One hook event, end to end: journal it here, then let the warm manager answer, or answer cold.

The egg-hook stage reads the payload and writes the reply; everything between is this
module. It never raises and never waits past the event's budget: memory must not block
the agent (docs/hooks.md).
"""

from __future__ import annotations

import os
import sys

import ujson

from eggshell import paths as _paths
from eggshell.log import log_failure

PROG = "egg-hook"


def run_effects(effects: list, paths: _paths.Paths) -> None:
    """What may only happen once the reply is out (recording delivered evidence)."""
    for f in effects:
        try:
            f()
        except Exception as e:
            log_failure(paths, "effect", e)


JSON_FAST_CHARS = 1 << 20  # past this, the standard library parses long strings several times faster


def _parse(raw: str, paths: _paths.Paths, host):
    try:
        if len(raw) <= JSON_FAST_CHARS:
            return ujson.loads(raw)
        import json  # a 50 MB tool output: about 0.4 s instead of 1.8 s

        return json.loads(raw)
    except (ValueError, RecursionError) as e:
        why = "payload is not valid JSON (%s)" % e
    kept = None
    try:
        from eggshell.runtime import turnflow

        kept = turnflow.quarantine_raw(raw, host.raw_event(raw), paths, why)  # a recorded turn's event: keep it for the user
    except Exception as q:
        log_failure(paths, "quarantine", q)
    if kept:
        raise ValueError("%s: kept in %s" % (why, kept))
    from eggshell.core.redact import redact_text

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


def managed(host, raw: str, paths: _paths.Paths, deadline_from: float, res=None, env=None) -> tuple[dict, object]:
    """(reply, what to do once it is written), using the warm manager when one runs.

    The durable step runs here first, whatever happens next. Then the manager answers; if
    none is listening, one is started in the background and this process answers cold,
    bounded by the same deadline; a hook past its deadline answers {} (without memory).

    `host` (hosts.base.Host) reads the payload as a lifecycle event and writes the reply; all
    between is host-neutral, the manager included. `env` is the hook's environment (os.environ); `res` the Resources a cold answer uses
    (warm.py; by default a cold set made for this event), so tests run this very path.
    """
    import time

    from eggshell.runtime import client
    from eggshell.runtime import turnflow

    event = "?"
    try:
        payload = turnflow.admit(host.event(_parse(raw, paths, host)))
        event = _event_of(payload)
        env = os.environ if env is None else env
        deadline = deadline_from + budget_s(event, env)
        try:
            _paths.check_data_root(paths.data_root)
        except (_paths.UnsafePath, OSError) as e:  # someone else's, or open to others: write nothing there, not even the log
            if not isinstance(e, _paths.UnsafePath):
                from eggshell.runtime.health import data_root_off

                e = data_root_off(paths.data_root, e)
            print("%s: failed open: %s" % (PROG, e), file=sys.stderr)
            return host.reply(event, turnflow.refused_root(payload, paths, str(e))), None
        st = turnflow.record(payload, paths)
        if st is None:
            return {}, None
        if st.off is not None:  # memory is off for this project (SessionStart): say why, ask no manager
            return host.reply(st.event, {"status": st.off}), None
        use_manager = env.get("EGGSHELL_MANAGER", "on") != "off"
        conn, start = None, use_manager
        advice_only = st.event in AFTER_TOOL_EVENTS
        wait = min(deadline, deadline_from + tool_wait_s(env)) if advice_only else deadline  # the manager's answer, at the latest
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
            if conn.send({"op": "answer", "cap": host.context_cap, "payload": payload, "step": st.to_json(),
                          "budget": max(0.0, wait - time.monotonic() - 0.05)}, wait):
                got = conn.receive(wait)
                if got is not None and isinstance(got.get("reply"), dict):
                    reply = host.reply(st.event, got["reply"])
                    if not host.carries(got["reply"], reply):  # left out by the host: not delivered, so not acknowledged
                        return reply, conn.close
                    return reply, lambda: (conn.send({"op": "ack"}, time.monotonic() + 1.0), conn.close())
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
        return _cold(host, payload, st, paths, deadline, settle=not use_manager and st.event in turnflow.SEALING, res=res)
    except Exception as e:  # fail open: the agent goes on without memory
        _failed(paths, event, e)
        return {}, None


def _cold(host, payload: dict, st, paths: _paths.Paths, deadline: float, settle: bool, res=None) -> tuple[dict, object]:
    """Answer in this process within the deadline (a thread we stop waiting for at the deadline)."""
    import threading
    import time

    from eggshell.runtime import turnflow
    from eggshell.runtime.warm import Resources, TooLargeCold

    effects: list = []
    box: dict = {}
    res = res or Resources(paths.data_root, paths.bin_dir, warm=False, log=turnflow._log(paths))
    res.deadline = deadline  # what cannot be read by then is not started on (warm.TooLargeCold)

    def work() -> None:
        try:
            answer = turnflow.answer(payload, st, paths, res, effects, host.context_cap)
            box["reply"] = host.reply(st.event, answer)
            ujson.dumps(box["reply"])
            if not host.carries(answer, box["reply"]):
                effects[:] = []  # the host left it out: nothing of it was delivered
        except Exception as e:
            box["error"] = e

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(max(0.0, deadline - time.monotonic()))
    if t.is_alive():
        log_failure(paths, st.event, TimeoutError("no answer within the hook's budget; answered without memory"))
        return {}, None
    res.deadline = None  # saving the sealed turn below has no deadline
    if isinstance(box.get("error"), TooLargeCold):
        log_failure(paths, st.event, box.pop("error"))  # no failure of ours: a big store, a manager still loading
        box["reply"], effects[:] = {}, []
    if "error" in box:
        _failed(paths, st.event, box["error"])
        box["reply"], effects[:] = {}, []

    def after() -> None:
        run_effects(effects, paths)
        if settle:
            try:
                turnflow.settle_here(paths, st, res)  # no manager will: save the sealed turn now
            except Exception as e:  # the turn stays journaled for the next save
                log_failure(paths, st.event, e)

    return box["reply"], after
