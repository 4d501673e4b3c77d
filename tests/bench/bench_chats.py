"""Benchmark: hook wall times while several chats work at once against one warm manager.

Two loads on a project of --turns realistic stored turns (realistic.py; built once, shared
with bench_scale.py through --keep), each event a fresh `bin/egg-hook codex` process as the
host starts it:

1. Chats: --chats chats in parallel (4 by default), each a loop of turns for --seconds (120):
   a prompt like a stored one, three tool calls (a covered read, two new searches with a few KB
   of output), a Stop, then about --pause seconds (1) before the next prompt. Meanwhile the
   manager settles the open turns every 3 s, saves the sealed ones and brings its indexes up to
   date. Target: p99 of every event under 1 s.
2. Tool storm: --clients clients (8) firing PostToolUse as fast as they can for --storm seconds
   (30), each in an open turn of its own. Target: p99 under 500 ms.

Prints p50/p99/max per event, how many events ran, the manager's resident memory after each
load, and how many hooks got no answer in their budget (hook.log); exits 1 if a target is
missed.

With --backlog, issue 30's case: a new project in hybrid mode whose --turns turns arrive in one
`egg-save` right before the chats start (an import, a pull), none embedded; the chats then run
while the manager and the background embedder work through that backlog.

    python tests/bench/bench_chats.py [--turns 10000] [--chats 4] [--seconds 120] [--clients 8]
                                      [--storm 30] [--keep DIR] [--backlog]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "lib"))
sys.path.insert(0, HERE)

import realistic  # noqa: E402
from bench_hook import hook_env, stop_manager, wait_manager  # noqa: E402
from bench_load import Load, log_lines, parallel, pct  # noqa: E402
from bench_scale import project, turns_ndjson  # noqa: E402

HOOK = os.path.join(REPO, "bin", "egg-hook")
TARGET_CHATS_P99_MS = 1000
TARGET_STORM_P99_MS = 500


def backlog_project(d: str) -> tuple[str, str]:
    """(project, data root), new: hybrid mode, no turn stored yet, nothing embedded."""
    shutil.rmtree(d, ignore_errors=True)
    proj, data = os.path.join(d, "proj"), os.path.join(d, "data")
    os.makedirs(os.path.join(proj, ".eggs"))
    os.makedirs(data, mode=0o700)
    with open(os.path.join(proj, ".eggshell.toml"), "w") as f:
        f.write('egg = ".eggs/work.egg"\n')
    realistic.write_sources(proj)
    return proj, data


def Timed(env: dict) -> Load:
    """Every hook's wall time by event (bench_load's recorder: one fresh egg-hook process per event)."""
    return Load(HOOK, env, {}, None)


def output(rng: random.Random, tag: str) -> str:
    """A few KB of search output unlike any stored one."""
    return "".join("%s:%d:    %s_%s = %s(%s)  # %08x\n" % (realistic.module(rng.randrange(realistic.MODULES)), rng.randint(1, 400), tag,
                                                          rng.choice(realistic._WORDS), tag, rng.choice(realistic._WORDS),
                                                          rng.getrandbits(32)) for _ in range(rng.randint(20, 80)))


def chat(t: Load, base: dict, c: int, until: float, pause: float, run_id: str, at_least: int = 0) -> None:
    rng = random.Random(c)
    sid = "chat-%s-%d" % (run_id, c)
    k = 0
    while k < at_least or time.monotonic() < until:
        i = rng.randrange(1000, 9000)
        rec = realistic.record(i)
        tid = "%s-t%d" % (sid, k)
        ev = dict(base, session_id=sid, turn_id=tid)
        t.fire(dict(ev, hook_event_name="UserPromptSubmit", prompt=rec["prompt"]))
        calls = [rec["tools"][1]["input"]["command"], "rg -n new_%d_%d src" % (c, k), "rg -n other_%d_%d src" % (c, k)]
        for n, cmd in enumerate(calls):
            t.fire(dict(ev, hook_event_name="PreToolUse", tool_name="Bash", tool_input={"command": cmd}, tool_use_id="c%d" % n))
            t.fire(dict(ev, hook_event_name="PostToolUse", tool_name="Bash", tool_input={"command": cmd}, tool_use_id="c%d" % n,
                        tool_response=output(rng, "t%d_%d" % (c, k))))
        t.fire(dict(ev, hook_event_name="Stop", stop_hook_active=False, last_assistant_message="done with %s" % rec["prompt"]))
        k += 1
        time.sleep(rng.uniform(0.5 * pause, 1.5 * pause))


def storm(t: Load, base: dict, c: int, until: float, run_id: str) -> None:
    rng = random.Random(100 + c)
    sid = "storm-%s-%d" % (run_id, c)
    ev = dict(base, session_id=sid, turn_id=sid + "-t0")
    t.fire(dict(ev, hook_event_name="UserPromptSubmit", prompt="collect every caller of the storm_%d helpers" % c))
    n = 0
    while time.monotonic() < until:
        t.fire(dict(ev, hook_event_name="PostToolUse", tool_name="Bash", tool_input={"command": "rg -n storm_%d_%d src" % (c, n)},
                    tool_use_id="s%d" % n, tool_response=output(rng, "s%d_%d" % (c, n))))
        n += 1
    t.fire(dict(ev, hook_event_name="Stop", stop_hook_active=False, last_assistant_message="done"))


def summary(name: str, t: Load, wall: float, status: dict, unanswered: int) -> None:
    n = sum(len(v) for v in t.times.values())
    print("%s: %d events in %.0f s; manager %.0f MB resident; hooks unanswered in their budget: %d"
          % (name, n, wall, status["rss_kb"] / 1024, unanswered))
    for ev, ts in sorted(t.times.items()):
        print("  %-17s n=%4d  p50 %6.0f ms  p99 %6.0f ms  max %6.0f ms" % (ev, len(ts), pct(ts, 0.5), pct(ts, 0.99), pct(ts, 1.0)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=10000)
    ap.add_argument("--chats", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--pause", type=float, default=1.0, help="mean seconds between a chat's Stop and its next prompt (default 1)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--storm", type=float, default=30.0)
    ap.add_argument("--keep", metavar="DIR", help="build the project under DIR/nTURNS and keep it (bench_scale.py's layout)")
    ap.add_argument("--backlog", action="store_true",
                    help="issue 30's case instead: a new project in hybrid mode (the built-in model) whose --turns turns arrive "
                         "in one egg-save right before the chats start, none of them embedded")
    a = ap.parse_args()
    root = a.keep or tempfile.mkdtemp(prefix="bench-chats-", dir="/tmp")
    if a.backlog:
        proj, data = backlog_project(os.path.join(root, "backlog%d" % a.turns))
    else:
        proj, data, _ = project(os.path.join(root, "n%d" % a.turns), a.turns)
    env = dict(hook_env(), EGGSHELL_DATA_ROOT=data, EGGSHELL_MANAGER_IDLE="900")
    base = {"cwd": proj, "model": "m", "permission_mode": "bypassPermissions", "transcript_path": "/dev/null"}
    run_id = "%x" % int(time.time() * 1000)
    log = os.path.join(data, "logs", "hook.log")
    missed = []
    try:
        stop_manager(data)
        t = Timed(env)
        t.fire(dict(base, session_id="warm-" + run_id, hook_event_name="SessionStart", source="startup"))
        wait_manager(data)
        chat(t, base, 1000, 0, 0, run_id, at_least=2)  # the first prompt loads the indexes; the second is warm
        if a.backlog:  # then the backlog: one egg-save of every turn, nothing embedded, and the chats at once
            t0 = time.monotonic()
            egg = os.path.join(proj, ".eggs", "work.egg")
            subprocess.run([os.path.join(REPO, "bin", "egg-save"), "--egg", egg, "--root", proj], env=env, check=True,
                           input=turns_ndjson(0, a.turns, proj), stdout=subprocess.DEVNULL)
            print("egg-save of %d turns: %.0f s" % (a.turns, time.monotonic() - t0), flush=True)
        else:
            time.sleep(3)
        before = log_lines(log, "TimeoutError")
        t = Timed(env)
        until = time.monotonic() + a.seconds
        wall = parallel([(chat, (t, base, c, until, a.pause, run_id)) for c in range(a.chats)])
        summary("%d chats for %.0f s over %d stored turns" % (a.chats, a.seconds, a.turns), t, wall, wait_manager(data),
                log_lines(log, "TimeoutError") - before)
        for ev, ts in t.times.items():
            if pct(ts, 0.99) >= TARGET_CHATS_P99_MS:
                missed.append("chats %s p99 %.0f ms (target < %d)" % (ev, pct(ts, 0.99), TARGET_CHATS_P99_MS))
        time.sleep(5)
        before = log_lines(log, "TimeoutError")
        t = Timed(env)
        until = time.monotonic() + a.storm
        wall = parallel([(storm, (t, base, c, until, run_id)) for c in range(a.clients)])
        summary("%d clients firing PostToolUse for %.0f s" % (a.clients, a.storm), t, wall, wait_manager(data),
                log_lines(log, "TimeoutError") - before)
        p99 = pct(t.times.get("PostToolUse", []), 0.99)
        if p99 >= TARGET_STORM_P99_MS:
            missed.append("storm PostToolUse p99 %.0f ms (target < %d)" % (p99, TARGET_STORM_P99_MS))
    finally:
        stop_manager(data)
        if a.backlog:
            from bench_backlog import stop_embedder

            stop_embedder(data)
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    if missed:
        print("MISSED: " + "; ".join(missed))
        return 1
    print("targets met: chats p99 < %d ms for every event; storm PostToolUse p99 < %d ms" % (TARGET_CHATS_P99_MS, TARGET_STORM_P99_MS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
