"""Benchmark (issue 31.1): big turns reach the store whole, timed as the user's hooks run them.

Real `egg-hook codex` processes, one per event, in a fresh project: a prompt, N tool results,
a Stop, then the wait until the journal is empty (the turn saved). Two shapes, each with the
warm manager (the default) and without one (EGGSHELL_MANAGER=off: the Stop hook saves the
turn itself): 200 calls of 4,000 characters, and 50 calls of 1 MiB (a 50 MB turn). Prints
the PostToolUse median and maximum, the Stop hook's wall time and how long after it the turn
was in the store; exits 1 if any turn is not stored whole (every call, every output).

    python tests/bench/bench_big_turn.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "lib"))
sys.path.insert(0, os.path.join(REPO, "tests"))

from eggshell.runtime.journal import Journal  # noqa: E402
from helpers.hook_env import EGG_HOOK, Env  # noqa: E402

SHAPES = ((200, 4000), (50, 1 << 20))


def run(env: Env, payload: dict, penv: dict) -> float:
    t = time.monotonic()
    r = subprocess.run([EGG_HOOK, "codex"], input=json.dumps(payload), capture_output=True, text=True, env=penv,
                       cwd=env.project, timeout=120)
    if r.returncode != 0:
        raise SystemExit("egg-hook failed: %s" % r.stderr)
    return time.monotonic() - t


def block(i: int, size: int) -> str:
    line = "2026-12-06T06:%02d:00Z worker[%d] retrying upload chunk, disk at 97%%\n" % (i % 60, i)
    return (line * (size // len(line) + 1))[:size]


def one(base: str, manager: bool, calls: int, size: int) -> bool:
    tmp = Path(base) / ("%s-%d" % ("warm" if manager else "cold", calls))
    tmp.mkdir()
    env = Env(tmp)
    penv = env.proc_env()
    if manager:
        penv.pop("EGGSHELL_MANAGER")
        penv["EGGSHELL_MANAGER_IDLE"] = "10"
    run(env, env.prompt("why does the nightly upload fail?"), penv)
    times = sorted(run(env, env.tool("cat log%d" % i, block(i, size), use="c%d" % i), penv) for i in range(calls))
    stop = run(env, env.stop("the disk is full"), penv)
    t0 = time.monotonic()
    while Journal(env.paths.journal_dir).files() and time.monotonic() - t0 < 120:
        time.sleep(0.1)
    saved = time.monotonic() - t0
    views = env.views()
    whole = len(views) == 1 and [t.outcome for t in views[0].tools] == [block(i, size) for i in range(calls)]
    print("%-14s %3d calls x %7d chars: PostToolUse median %4.0f ms, max %4.0f ms; Stop %5.0f ms; in the store %.1f s after Stop; whole: %s"
          % ("warm manager" if manager else "no manager", calls, size, times[len(times) // 2] * 1000, times[-1] * 1000,
             stop * 1000, saved, whole), flush=True)
    return whole


def main() -> int:
    base = tempfile.mkdtemp(prefix="bench-big-turn-")
    try:
        ok = all([one(base, manager, calls, size) for manager in (True, False) for calls, size in SHAPES])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
