"""Benchmark: what the user meets at 1,000, 10,000 and 100,000 stored turns, and its growth per 10x.

Each size is a project whose store holds N realistic turns (realistic.py: a question, two or
three tool calls with real-looking output, an answer; every call fingerprinted over a real
`src/` and vouched for in the trust ledger, as the hooks would have written them). For each
size, in one run of this script, so the shared machine's noise hits every size alike:

- store size on disk per turn;
- `egg-save`, a fresh process as the user runs it: adding 10 turns the first time (it builds
  its commit index from the file), then again (the index is current), and one process
  saving 500 turns (bulk throughput, turns a second);
- `egg status` (a fresh process: counts the stored turns and how many are embedded);
- warm hook wall times (a fresh `bin/egg-hook codex` per event, the manager running and
  warmed up) over --runs new chats: SessionStart, UserPromptSubmit (a question like a stored
  one: search, reuse engine, handoff), PreToolUse (a covered read: denied once), PostToolUse,
  Stop; each also as a ratio to a bare interpreter start (`python -c pass`) in the same run;
- the manager's resident memory after the warm runs;
- how long the manager takes to bring the store's search index up to date (search/turnindex.py,
  built in its background; the bench removes it first, as a clone or an upgrade leaves none);
- the snapshot a manager leaves as it exits: its size, how long a fresh process takes to
  load it; the cold UserPromptSubmit (no manager) after a manager ran (ranked from the search
  index over stores too big to read in time, from the snapshot under that) and with neither,
  each with how many were answered with memory.

Search here is lexical: embedding 100,000 turns takes hours on two cores (bench_index.py
measures that rate; docs/benchmarks.md extrapolates it). Prints one table and the growth of
each figure per 10x; exits 1 if a target is missed (warm UserPromptSubmit median under 300 ms,
PreToolUse under 100 ms, cold prompt after a manager under 1 s and with memory, manager under
400 MB at 10,000 turns and 1.5 GB at 100,000).

    python tests/bench/bench_scale.py [--sizes 1000,10000,100000] [--runs 12] [--keep DIR]

--keep DIR builds the projects in DIR once and reuses them (the 100,000-turn build takes
minutes). The saves go to a copy of each store; the chats the warm runs record (a dozen
turns) stay in it, and `egg status` in the table says how many turns it holds.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "lib"))
sys.path.insert(0, HERE)

import realistic  # noqa: E402
from eggshell.runtime import client  # noqa: E402
from bench_hook import hook_env, run_hook, stop_manager, timed, wait_manager  # noqa: E402

BIN = os.path.join(REPO, "bin")
TARGETS = {"UserPromptSubmit": 300, "PreToolUse": 100}
TARGET_COLD_MS = 1000  # issue 30: a cold prompt with memory within 1 s
TARGET_RSS_MB = {10000: 400, 100000: 1500}


def venv_python() -> str:
    py = os.path.join(os.environ.get("EGGSHELL_PREFIX") or os.path.expanduser("~/.local"), "share", "eggshell", "venv", "bin", "python")
    return py if os.path.exists(py) else sys.executable


def project(d: str, n: int) -> tuple[str, str, str]:
    """(project, data root, store) of n realistic turns, built once."""
    proj, data = os.path.join(d, "proj"), os.path.join(d, "data")
    egg = os.path.join(proj, ".eggs", "work.egg")
    if not os.path.exists(egg):
        os.makedirs(os.path.dirname(egg), exist_ok=True)
        with open(os.path.join(proj, ".eggshell.toml"), "w") as f:
            f.write('egg = ".eggs/work.egg"\nmode = "lexical"\nsemantic_matcher = false\n')
        realistic.write_sources(proj)
        t = time.perf_counter()
        realistic.build(egg + ".tmp", n, data, proj)
        os.replace(egg + ".tmp", egg)
        print("built %d turns in %.0f s" % (n, time.perf_counter() - t), flush=True)
    os.makedirs(data, exist_ok=True)
    os.chmod(data, 0o700)  # the bench's own data root: egg refuses one that others can read
    return proj, data, egg


def peak_run(argv: list[str], env: dict, stdin: bytes | None = None, cwd: str | None = None) -> tuple[float, float, bytes]:
    """(wall seconds, peak resident MB, stdout) of one fresh process, from GNU time's report."""
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + argv, input=stdin, capture_output=True, env=env, cwd=cwd)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit("%s failed (%d): %s" % (argv[0], p.returncode, p.stderr.decode()[-2000:]))
    return dt, int(p.stderr.decode().strip().splitlines()[-1]) / 1024, p.stdout


def stop_and_wait(data: str, pid: int | None = None, most: float = 900.0) -> None:
    """Stop the manager and wait for its process to end (its snapshot is written by then)."""
    if pid is None:
        try:
            with open(os.path.join(data, "run", "manager.pid")) as f:
                pid = int(f.read())
        except (OSError, ValueError):
            pid = 0
    stop_manager(data)
    if pid <= 0:
        return
    t = time.monotonic()
    while time.monotonic() - t < most:
        try:
            os.kill(pid, 0)
        except OSError:
            return
        time.sleep(0.5)
    raise SystemExit("manager %d did not exit within %.0f s" % (pid, most))


def turns_ndjson(start: int, n: int, proj: str) -> bytes:
    return "".join(json.dumps(realistic.record(i, proj)) + "\n" for i in range(start, start + n)).encode()


def events(base: dict, sid: str, tid: str, i: int) -> list[dict]:
    """A chat's turn like stored turn i: its question, a covered read of the same lines, a new search, a stop."""
    rec = realistic.record(i)
    read = rec["tools"][1]["input"]["command"]
    return [
        dict(base, session_id=sid, hook_event_name="SessionStart", source="startup"),
        dict(base, session_id=sid, turn_id=tid, hook_event_name="UserPromptSubmit", prompt=rec["prompt"]),
        dict(base, session_id=sid, turn_id=tid, hook_event_name="PreToolUse", tool_name="Bash", tool_input={"command": read},
             tool_use_id="c1"),
        dict(base, session_id=sid, turn_id=tid, hook_event_name="PostToolUse", tool_name="Bash",
             tool_input={"command": "rg -n new_%s src" % tid}, tool_response="src/x.py:1: new_%s = 1\n" % tid, tool_use_id="c2"),
        dict(base, session_id=sid, turn_id=tid, hook_event_name="Stop", stop_hook_active=False,
             last_assistant_message="it is in %s" % realistic.module(i % realistic.MODULES)),
    ]


def index_ready(data: str, egg: str, since: float, most: float = 1800.0) -> float | None:
    """Seconds from `since` until the store's commit and search indexes are current (the manager
    brings them up to date in its background), None past `most`. Reads them only: building one
    here would hide whether the manager does."""
    import sqlite3

    from eggshell.graph.commitindex import index_path

    def size(db: str, table: str = "meta") -> int:
        try:
            c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
            try:
                return int(dict(c.execute("select k, v from %s" % table)).get("size", -1))
            finally:
                c.close()
        except (sqlite3.Error, ValueError, TypeError):
            return -1

    from eggshell.search.turnindex import index_path as search_path

    while time.perf_counter() - since < most:
        end = os.path.getsize(egg)
        if size(index_path(data, egg)) == end and size(search_path(data, egg)) == end:
            return time.perf_counter() - since
        time.sleep(2.0)
    return None


def measure(d: str, n: int, a, env0: dict, floor_ms: float) -> dict:
    proj, data, egg = project(d, n)
    env = dict(env0, EGGSHELL_DATA_ROOT=data, EGGSHELL_MANAGER_IDLE="900")
    stop_manager(data)
    out: dict = {"turns": n}
    shutil.rmtree(os.path.join(data, "cache", "commit-index"), ignore_errors=True)
    stamp = int(time.time() * 1000) % 10**9
    base_turn = 10**7 + stamp * 1000  # new turns each run (a kept project remembers what it stored)
    # Saves go to a copy of the store (a path no index knows: the first egg-save builds one), so the
    # project keeps exactly its n turns for the hooks, run after run.
    copy = os.path.join(proj, ".eggs", "save-copy.egg")
    shutil.copyfile(egg, copy)
    save = [os.path.join(BIN, "egg-save"), "--egg", copy, "--root", proj]
    out["save10_first_s"], out["save10_first_mb"], _ = peak_run(save, env, turns_ndjson(base_turn, 10, proj))
    again = [peak_run(save, env, turns_ndjson(base_turn + 10 * (k + 1), 10, proj)) for k in range(3)]
    out["save10_s"] = statistics.median(x[0] for x in again)
    out["save10_mb"] = max(x[1] for x in again)
    dt, mb, _ = peak_run(save, env, turns_ndjson(base_turn + 5000, 500, proj))
    out["bulk_turns_s"], out["bulk_mb"] = 500 / dt, mb
    os.unlink(copy)
    out["store_mb"] = os.path.getsize(egg) / 1e6
    out["bytes_per_turn"] = os.path.getsize(egg) / n
    out["status_s"], out["status_mb"], status = peak_run([os.path.join(BIN, "egg"), "status"], env, cwd=proj)
    out["status_line"] = next((ln for ln in status.decode().splitlines() if ln.startswith("store")), "").strip()

    base = {"cwd": proj, "model": "m", "permission_mode": "bypassPermissions", "transcript_path": "/dev/null"}
    shutil.rmtree(os.path.join(data, "run", "snapshots"), ignore_errors=True)

    def cold_prompts(tag: str) -> list[tuple[float, bool]]:
        """Each with no manager running: the prompt hook answers itself (and starts one); (seconds, with memory)."""
        out = []
        for r in range(a.cold_runs):
            stop_and_wait(data)
            dt, reply = run_hook(events(base, "cold-%s-%d-%d" % (tag, stamp, r), "cold-%s-%d" % (tag, r), 11 + r)[1], env)
            out.append((dt, "additionalContext" in reply))
        return out

    shutil.rmtree(os.path.join(data, "cache", "search"), ignore_errors=True)  # as after a clone or an upgrade: no search index
    cold_bare = cold_prompts("bare")
    # warm: the manager started by the hooks above, until a prompt is answered with memory (at
    # 100,000 turns loading the store and building the indexes takes minutes; hooks meanwhile
    # answer without memory, and timing those would measure nothing). The last cold hook's
    # manager may have found the lock still held by one that was stopping and left at once (a
    # user's next hook starts another): a SessionStart stands in for that next hook.
    for _ in range(30):
        if client.request(data, {"op": "ping"}, timeout=1.0) is not None:
            break
        run_hook(events(base, "start-%d" % stamp, "start", 7)[0], env)
        time.sleep(2.0)
    wait_manager(data)
    t = time.perf_counter()
    for ev in events(base, "warmup-%d" % stamp, "warmup", 7):
        run_hook(ev, env)
    ask = events(base, "warmup-%d" % stamp, "warmup-2", 7)[1]
    while "additionalContext" not in run_hook(ask, env)[1]:
        if time.perf_counter() - t > 1800:
            raise SystemExit("%d turns: no prompt was answered with memory within 30 minutes" % n)
        time.sleep(5)
    out["warmup_s"] = time.perf_counter() - t
    out["index_ready_s"] = index_ready(data, egg, t)  # the manager builds the search index in the background
    times: dict[str, list[float]] = {}
    denied = 0
    for r in range(a.runs):
        time.sleep(a.think)
        for ev in events(base, "chat-%d-%d" % (stamp, r), "turn-%d" % r, 101 + r * 37):
            dt, reply = run_hook(ev, env)
            times.setdefault(ev["hook_event_name"], []).append(dt)
            if json.loads(reply).get("hookSpecificOutput", {}).get("permissionDecision") == "deny":
                denied += 1
    st = wait_manager(data)
    out["rss_mb"] = st["rss_kb"] / 1024
    out["denied"] = denied
    for name, ts in times.items():
        out["warm_" + name] = statistics.median(ts) * 1000
        out["warm_" + name + "_p90"] = sorted(ts)[int(0.9 * (len(ts) - 1))] * 1000
    t = time.perf_counter()
    stop_and_wait(data, st["pid"])  # it writes its snapshot as it exits
    out["exit_s"] = time.perf_counter() - t
    snaps = sorted(glob.glob(os.path.join(data, "run", "snapshots", "*.pickle")), key=os.path.getsize)[-1:]  # the project's read set
    out["snapshot_mb"] = sum(os.path.getsize(p) for p in snaps) / 1e6
    loads = []
    for _ in range(1 if n >= 100000 else 3):  # a 100,000-turn snapshot takes a minute to load
        code = "import pickle,sys,time;t=time.perf_counter();[pickle.load(open(p,'rb')) for p in sys.argv[1:]];print(time.perf_counter()-t)"
        p = subprocess.run([venv_python(), "-c", code, *snaps], capture_output=True, text=True,
                           env=dict(env, PYTHONPATH=os.path.join(REPO, "lib")), check=True)
        loads.append(float(p.stdout))
    out["snapshot_load_s"] = statistics.median(loads)
    cold = cold_prompts("snap")
    stop_manager(data)
    out["cold_snapshot_ms"] = statistics.median(dt for dt, _ in cold) * 1000
    out["cold_snapshot_memory"] = "%d of %d" % (sum(m for _, m in cold), len(cold))
    out["cold_bare_ms"] = statistics.median(dt for dt, _ in cold_bare) * 1000
    out["cold_bare_memory"] = "%d of %d" % (sum(m for _, m in cold_bare), len(cold_bare))
    out["floor_ms"] = floor_ms
    return out


ROWS = [
    ("store size per turn (bytes)", "bytes_per_turn", "%.0f"),
    ("store (MB)", "store_mb", "%.0f"),
    ("egg-save 10 turns, first (builds its index) s", "save10_first_s", "%.2f"),
    ("  its peak resident MB", "save10_first_mb", "%.0f"),
    ("egg-save 10 turns, index current s", "save10_s", "%.2f"),
    ("  its peak resident MB", "save10_mb", "%.0f"),
    ("egg-save 500 turns, turns a second", "bulk_turns_s", "%.0f"),
    ("  its peak resident MB", "bulk_mb", "%.0f"),
    ("egg status s", "status_s", "%.2f"),
    ("  its peak resident MB", "status_mb", "%.0f"),
    ("warm SessionStart ms", "warm_SessionStart", "%.0f"),
    ("warm UserPromptSubmit ms", "warm_UserPromptSubmit", "%.0f"),
    ("  p90", "warm_UserPromptSubmit_p90", "%.0f"),
    ("warm PreToolUse ms (covered read)", "warm_PreToolUse", "%.0f"),
    ("  p90", "warm_PreToolUse_p90", "%.0f"),
    ("warm PostToolUse ms", "warm_PostToolUse", "%.0f"),
    ("warm Stop ms", "warm_Stop", "%.0f"),
    ("manager resident MB", "rss_mb", "%.0f"),
    ("manager start to the first prompt answered with memory s", "warmup_s", "%.1f"),
    ("manager start to its search index current s", "index_ready_s", "%.1f"),
    ("manager exit (writes its snapshot) s", "exit_s", "%.1f"),
    ("snapshot MB", "snapshot_mb", "%.0f"),
    ("snapshot load s (fresh process)", "snapshot_load_s", "%.2f"),
    ("cold UserPromptSubmit after a manager (index; snapshot under 15 MB) ms", "cold_snapshot_ms", "%.0f"),
    ("  answered with memory", "cold_snapshot_memory", "%s"),
    ("cold UserPromptSubmit, no index, no snapshot ms", "cold_bare_ms", "%.0f"),
    ("  answered with memory", "cold_bare_memory", "%s"),
]


def a_cold_runs(r: dict) -> int:
    return int(r["cold_snapshot_memory"].split(" of ")[1])


def report(results: list[dict]) -> list[str]:
    sizes = [r["turns"] for r in results]
    floor = statistics.median(r["floor_ms"] for r in results)
    print("\nfloor: python -c pass %.0f ms (this run); warm events also as a multiple of it\n" % floor)
    head = "| figure | " + " | ".join("%s turns" % format(n, ",") for n in sizes) + " | growth per 10x |"
    print(head)
    print("| --- |" + " ---: |" * (len(sizes) + 1))
    for label, key, fmt in ROWS:
        vals = [r.get(key) for r in results]
        cells = [(fmt % v) if v is not None else "-" for v in vals]
        if key.startswith("warm_") and not key.endswith("_p90"):
            cells = ["%s (%.0fx)" % (c, v / floor) for c, v in zip(cells, vals)]
        growth = []
        for (n0, v0), (n1, v1) in zip(zip(sizes, vals), list(zip(sizes, vals))[1:]):
            if isinstance(v0, (int, float)) and isinstance(v1, (int, float)) and v0 and v1 and n1 > n0:
                import math
                growth.append("%.2fx" % ((v1 / v0) ** (1 / math.log10(n1 / n0))))
        print("| %s | %s | %s |" % (label, " | ".join(cells), ", ".join(growth) or "-"))
    for r in results:
        print("%s turns: %s; covered reads denied %d of the warm runs" % (format(r["turns"], ","), r["status_line"], r["denied"]))
    missed = []
    for r in results:
        for ev, ms in TARGETS.items():
            if r.get("warm_" + ev, 0) >= ms:
                missed.append("%s warm %s %.0f ms (target < %d)" % (r["turns"], ev, r["warm_" + ev], ms))
        if r["cold_snapshot_ms"] >= TARGET_COLD_MS:
            missed.append("%s cold prompt after a manager %.0f ms (target < %d)" % (r["turns"], r["cold_snapshot_ms"], TARGET_COLD_MS))
        if not r["cold_snapshot_memory"].startswith(str(a_cold_runs(r))):
            missed.append("%s cold prompt after a manager answered with memory %s" % (r["turns"], r["cold_snapshot_memory"]))
        cap = TARGET_RSS_MB.get(r["turns"])
        if cap and r["rss_mb"] >= cap:
            missed.append("%s manager %.0f MB (target < %d)" % (r["turns"], r["rss_mb"], cap))
        if r["denied"] == 0:
            missed.append("%s no covered read was denied" % r["turns"])
    return missed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--cold-runs", type=int, default=3)
    ap.add_argument("--think", type=float, default=3.0, help="seconds between a turn's Stop and the next chat (default 3)")
    ap.add_argument("--keep", metavar="DIR", help="build the projects under DIR and keep them (reused when they exist)")
    a = ap.parse_args()
    root = a.keep or tempfile.mkdtemp(prefix="bench-scale-")
    env = hook_env()
    py = venv_python()
    results = []
    try:
        for n in [int(x) for x in a.sizes.split(",")]:
            floor = statistics.median(timed([py, "-c", "pass"], env) for _ in range(10)) * 1000
            r = measure(os.path.join(root, "n%d" % n), n, a, env, floor)
            results.append(r)
            print(json.dumps(r), flush=True)
        missed = report(results)
    finally:
        for n in a.sizes.split(","):
            stop_manager(os.path.join(root, "n%s" % n, "data"))
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    if missed:
        print("MISSED: " + "; ".join(missed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
