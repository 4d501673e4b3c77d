"""Benchmark: wall time of `egg-hook codex` per event, as Codex would run it.

Each event is a fresh process (the POSIX bootstrap, Python start-up, imports, the
work). The project holds --turns prior turns, so UserPromptSubmit really searches
and renders a handoff and Stop really commits. Prints medians in milliseconds;
informational (no pass/fail target in this issue).

    python tests/bench/bench_hook.py [--turns 100] [--runs 15]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "lib"))
sys.path.insert(0, HERE)

from bench_commit import record  # noqa: E402
from eggshell import save  # noqa: E402
from eggshell.store import Store  # noqa: E402


def run_hook(payload: dict, env: dict) -> tuple[float, str]:
    t = time.perf_counter()
    p = subprocess.run([os.path.join(REPO, "bin", "egg-hook"), "codex"], input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=60)
    dt = time.perf_counter() - t
    if p.returncode != 0 or not p.stdout.strip().startswith("{"):
        raise SystemExit("egg-hook failed: rc=%s out=%r err=%r" % (p.returncode, p.stdout, p.stderr))
    return dt, p.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--runs", type=int, default=15)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        proj = os.path.join(d, "proj")
        os.makedirs(os.path.join(proj, ".eggs"))
        with open(os.path.join(proj, ".eggshell.toml"), "w") as f:
            f.write('egg = ".eggs/work.egg"\n')
        store = Store.open(os.path.join(proj, ".eggs", "work.egg"))
        save.run(store, io.StringIO("".join(json.dumps(dict(record(i), cwd=proj)) + "\n" for i in range(a.turns))), io.StringIO())
        env = dict(os.environ, EGGSHELL_DATA_ROOT=os.path.join(d, "data"))
        base = {"cwd": proj, "model": "m", "permission_mode": "bypassPermissions", "transcript_path": "/dev/null"}
        results: dict[str, list[float]] = {}
        handoff_chars = 0
        for r in range(a.runs):
            sid, tid = "bench-session-%d" % r, "bench-turn-%d" % r
            events = [
                dict(base, session_id=sid, hook_event_name="SessionStart", source="startup"),
                dict(base, session_id=sid, turn_id=tid, hook_event_name="UserPromptSubmit", prompt="where is handler_%d defined and who calls it" % (r * 7)),
                dict(base, session_id=sid, turn_id=tid, hook_event_name="PreToolUse", tool_name="Bash", tool_input={"command": "rg -n handler_1 src"}, tool_use_id="c1"),
                dict(base, session_id=sid, turn_id=tid, hook_event_name="PostToolUse", tool_name="Bash", tool_input={"command": "rg -n handler_1 src"}, tool_response="src/a.py:1: def handler_1():\n", tool_use_id="c1"),
                dict(base, session_id=sid, turn_id=tid, hook_event_name="Stop", stop_hook_active=False, last_assistant_message="handler_1 is in src/a.py"),
            ]
            for ev in events:
                dt, out = run_hook(ev, env)
                results.setdefault(ev["hook_event_name"], []).append(dt)
                if ev["hook_event_name"] == "UserPromptSubmit":
                    handoff_chars = max(handoff_chars, len(json.loads(out).get("hookSpecificOutput", {}).get("additionalContext", "")))
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare = time.perf_counter() - t
        print("egg-hook codex wall time, %d prior turns, median of %d runs (bare `python -c pass`: %.0f ms):" % (a.turns, a.runs, bare * 1000))
        for name, ts in results.items():
            print("  %-17s %6.0f ms  (p90 %4.0f ms)" % (name, statistics.median(ts) * 1000, sorted(ts)[int(0.9 * len(ts))] * 1000))
        print("  largest handoff: %d characters" % handoff_chars)
    return 0


if __name__ == "__main__":
    sys.exit(main())
