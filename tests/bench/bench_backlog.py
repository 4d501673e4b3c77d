"""Benchmark (issue 30): a backlog of unembedded turns never holds a prompt.

A project in hybrid mode (the built-in model) whose warm manager has answered a first prompt;
then one `egg-save` of --turns realistic turns no model has seen (realistic.py: what `egg import`
of a few weeks of history gives), into a data root of its own, so nothing is embedded. Right
after that save, in one run:

- warm UserPromptSubmit (a fresh `egg-hook codex` per prompt, each a question like a stored
  turn's, --think seconds apart): median and p90, as a multiple of a bare `python -c pass` in the
  same run, and how many were answered with memory (found lexically while not embedded);
- the manager's embedding of the backlog meanwhile (`egg status`'s counts from the manager) and
  the background embedder's progress (turns, windows, rate, resident memory); with --wait, the
  time until the embedder has done the whole backlog and exited, and its peak memory;
- the manager's resident memory.

Exits 1 if the warm prompt median is over 10 times the bare start (the issue's target) or a
prompt was answered without memory.

    python tests/bench/bench_backlog.py [--turns 2000] [--prompts 20] [--think 1] [--wait] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
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
from bench_hook import hook_env, run_hook, stop_manager, timed, wait_manager  # noqa: E402
from bench_scale import events, turns_ndjson, venv_python  # noqa: E402
from eggshell.runtime import client, embedder  # noqa: E402

BIN = os.path.join(REPO, "bin")
TARGET_RATIO = 10.0


def rss_mb(pid: int) -> float:
    try:
        with open("/proc/%d/status" % pid) as f:
            return next(int(x.split()[1]) for x in f if x.startswith("VmRSS:")) / 1024
    except (OSError, StopIteration, ValueError):
        return 0.0


def counts(data: str, egg: str) -> dict:
    got = client.request(data, {"op": "counts", "stores": [egg]}, timeout=10.0) or {}
    c = (got.get("counts") or {}).get(egg)
    return c if isinstance(c, dict) else {}


def stop_embedder(data: str) -> None:
    p = embedder.progress(data)
    if p is not None:
        try:
            os.kill(int(p["pid"]), 15)
        except OSError:
            pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--prompts", type=int, default=20)
    ap.add_argument("--think", type=float, default=1.0)
    ap.add_argument("--wait", action="store_true", help="also wait until the whole backlog is embedded")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR (emptied first) and leave it")
    a = ap.parse_args()
    root = a.keep or tempfile.mkdtemp(prefix="bench-backlog-")
    shutil.rmtree(root, ignore_errors=True)
    proj, data = os.path.join(root, "proj"), os.path.join(root, "data")
    egg = os.path.join(proj, ".eggs", "work.egg")
    os.makedirs(os.path.dirname(egg))
    os.makedirs(data, mode=0o700)
    with open(os.path.join(proj, ".eggshell.toml"), "w") as f:
        f.write('egg = ".eggs/work.egg"\n')  # the default mode: hybrid, the built-in model
    realistic.write_sources(proj)
    env = dict(hook_env(), EGGSHELL_DATA_ROOT=data, EGGSHELL_MANAGER_IDLE="900")
    py = venv_python()
    floor = statistics.median(timed([py, "-c", "pass"], env) for _ in range(10)) * 1000
    base = {"cwd": proj, "model": "m", "permission_mode": "bypassPermissions", "transcript_path": "/dev/null"}
    save = [os.path.join(BIN, "egg-save"), "--egg", egg, "--root", proj]
    out: dict = {"turns": a.turns, "floor_ms": floor}
    try:
        # a first turn, and a manager that has answered a prompt with memory (the model loaded)
        subprocess.run(save, input=turns_ndjson(0, 1, proj), env=env, check=True, stdout=subprocess.DEVNULL)
        run_hook(events(base, "warm-0", "warm-0", 0)[0], env)
        wait_manager(data)
        t = time.perf_counter()
        while "additionalContext" not in run_hook(events(base, "warm-1", "warm-1-%d" % int(t), 0)[1], env)[1]:
            if time.perf_counter() - t > 300:
                raise SystemExit("no prompt was answered with memory within 5 minutes")
            time.sleep(1)
        # the backlog: one egg-save of --turns turns, nothing embedded
        t = time.perf_counter()
        subprocess.run(save, input=turns_ndjson(1, a.turns, proj), env=env, check=True, stdout=subprocess.DEVNULL)
        out["save_s"] = time.perf_counter() - t
        saved_at = time.perf_counter()
        rng = random.Random(7)
        times, memory, progress = [], 0, []
        for r in range(a.prompts):
            i = rng.randrange(1, a.turns + 1)
            dt, reply = run_hook(events(base, "chat-%d" % r, "turn-%d" % r, i)[1], env)
            times.append(dt * 1000)
            memory += "additionalContext" in reply
            c = counts(data, egg)
            progress.append((time.perf_counter() - saved_at, c.get("embedded"), c.get("searchable")))
            time.sleep(a.think)
        out["prompt_ms"] = statistics.median(times)
        out["prompt_p90_ms"] = sorted(times)[int(0.9 * (len(times) - 1))]
        out["prompt_max_ms"] = max(times)
        out["with_memory"] = "%d of %d" % (memory, a.prompts)
        known = [(t, e) for t, e, _ in progress if isinstance(e, int)]
        if len(known) >= 2 and known[-1][0] > known[0][0]:
            out["embed_turns_s"] = (known[-1][1] - known[0][1]) / (known[-1][0] - known[0][0])
        out["embedded_after_prompts"] = "%s of %s" % (progress[-1][1], progress[-1][2])
        p = embedder.progress(data)
        if p is not None:
            out["embedder"] = {k: p.get(k) for k in ("turns", "done", "windows", "rate_turns_s")}
            out["embedder_rss_mb"] = rss_mb(int(p["pid"]))
        st = wait_manager(data)
        out["rss_mb"] = st["rss_kb"] / 1024
        if a.wait:  # until the embedder has done the backlog and exited (the manager may idle out meanwhile)
            peak, quiet = 0.0, 0
            while time.perf_counter() - saved_at < 4 * 3600:
                p = embedder.progress(data)
                if p is not None:
                    quiet = 0
                    peak = max(peak, rss_mb(int(p["pid"])))
                    out["embedder_rate_turns_s"] = p.get("rate_turns_s")
                    out["embedder_windows"] = p.get("windows")
                else:
                    quiet += 1
                    if quiet >= 3 and peak:
                        out["backlog_s"] = time.perf_counter() - saved_at
                        out["embedder_peak_rss_mb"] = peak
                        break
                time.sleep(5)
    finally:
        stop_manager(data)
        if not a.keep:
            stop_embedder(data)
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(out))
    ratio = out["prompt_ms"] / floor
    print("\nright after one egg-save of %d unembedded turns (%.1f s):" % (a.turns, out["save_s"]))
    print("  warm UserPromptSubmit median %.0f ms (%.1fx a bare start of %.0f ms), p90 %.0f, max %.0f; with memory %s"
          % (out["prompt_ms"], ratio, floor, out["prompt_p90_ms"], out["prompt_max_ms"], out["with_memory"]))
    print("  embedded by the end of the prompts: %s turns; rate %s turns/s; manager %.0f MB"
          % (out["embedded_after_prompts"], "%.1f" % out["embed_turns_s"] if "embed_turns_s" in out else "?", out["rss_mb"]))
    if "embedder" in out:
        e = out["embedder"]
        print("  the background embedder (nice 19, one thread): %s of %s turns looked at, %s windows embedded, %.2f turns/s; %.0f MB resident"
              % (e["done"], e["turns"], e["windows"], e["rate_turns_s"] or 0.0, out["embedder_rss_mb"]))
    if "backlog_s" in out:
        print("  the whole backlog embedded %.0f s after the save (the embedder at %.0f MB at most)" % (out["backlog_s"], out["embedder_peak_rss_mb"]))
    stop_embedder(data)
    missed = []
    if ratio > TARGET_RATIO:
        missed.append("warm prompt %.1fx bare (target %.0fx)" % (ratio, TARGET_RATIO))
    if memory < a.prompts:
        missed.append("answered with memory %s" % out["with_memory"])
    if missed:
        print("MISSED: " + "; ".join(missed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
