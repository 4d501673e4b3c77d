"""Benchmark: one `egg-save` process adding 10 turns costs the same on a 100,000-turn file as on a 100-turn one.

This is what a user runs (`egg-save --egg F < turns | egg-index`), timed as a whole fresh
process: interpreter start, imports, opening the store, 10 commits (each locked, appended,
fsynced, vouched for), exit. Stores of each size are written once (streamed, as a
compaction would), then one untimed egg-save builds each store's commit index (its cost
is printed: it is paid once per file, and again after a compaction), then timed runs
alternate between the sizes so the shared machine's noise hits all alike. For contrast it
also times the way egg-save used to commit (a full `Store` load, then the same 10 turns).
Exits 1 if the median ratio from the smallest to the largest size is over 1.5x.

    python tests/bench/bench_save.py [--sizes 100,10000,100000] [--runs 7]
"""

from __future__ import annotations

import argparse
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
from eggshell.core.identity import content_hex  # noqa: E402
from eggshell.core.values import walk  # noqa: E402
from eggshell.graph import eggfile as ef  # noqa: E402
from eggshell.graph.commitindex import index_path  # noqa: E402
from eggshell.graph.turns import compile_turn, parse_turn  # noqa: E402

TARGET = 1.5
PER_RUN = 10

FULL_SAVE = """
import sys, ujson
from eggshell.graph.save import save_turn
from eggshell.graph.store import Store
s = Store.open(sys.argv[1])
for line in sys.stdin:
    save_turn(s, ujson.loads(line), sys.argv[2])
"""


def build(path: str, n: int) -> None:
    """Write a store of n turns in one pass, streaming (holding only the ids written)."""
    seen: set[str] = set()
    with open(path, "wb") as f:
        f.write(ef.header_line(ef.Header("bench-authority", ef.VERSION, "2026-01-01T00:00:00.000000Z")))
        for i in range(n):
            c = compile_turn(parse_turn(record(i)))
            ids: dict = {}
            out = []
            for r in c.roots:
                for node in walk(r):
                    nid = content_hex(node)
                    ids[node] = nid
                    if nid not in seen:
                        seen.add(nid)
                        out.append(ef.node_line(nid, node, ids))
            cm = ef.Commit("", "2026-01-01T00:00:00.%06dZ" % (i % 1000000), "bench-%d" % (i // 10), "turn-%d" % i,
                           tuple(dict.fromkeys(content_hex(r) for r in c.roots)), ())
            out.append(ef.commit_line(ef.Commit(ef.commit_id(cm), cm.time, cm.session, cm.turn, cm.roots, cm.unions)))
            f.write(b"".join(out))
    os.chmod(path, 0o600)


def run(argv: list[str], lines: str, env: dict) -> float:
    t = time.perf_counter()
    p = subprocess.run(argv, input=lines, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit("%s failed (exit %d): %s" % (argv[0], p.returncode, p.stderr[-2000:]))
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,10000,100000")
    ap.add_argument("--runs", type=int, default=7, help="timed egg-save processes per size (default 7)")
    ap.add_argument("--full-runs", type=int, default=2, help="timed full-load processes per size, for contrast (0: skip)")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, EGGSHELL_DATA_ROOT=os.path.join(d, "data"), PYTHONPATH=os.path.join(REPO, "lib"))
        save = os.path.join(REPO, "bin", "egg-save")
        paths = {}
        for n in sizes:
            paths[n] = os.path.join(d, "s%d" % n, "work.egg")
            os.makedirs(os.path.dirname(paths[n]), mode=0o700)
            t = time.perf_counter()
            build(paths[n], n)
            print("store of %7d turns: %7.1f MB, written in %.1f s" % (n, os.path.getsize(paths[n]) / 1e6, time.perf_counter() - t), flush=True)
        counter = [20_000_000]

        def batch() -> str:
            counter[0] += PER_RUN
            return "".join(json.dumps(record(i)) + "\n" for i in range(counter[0], counter[0] + PER_RUN))

        for n in sizes:
            dt = run([save, "--egg", paths[n], "--root", d], batch(), env)
            print("first egg-save on %7d turns (builds the commit index): %.2f s" % (n, dt), flush=True)
        times: dict[int, list[float]] = {n: [] for n in sizes}
        old: dict[int, list[float]] = {n: [] for n in sizes}
        for j in range(a.runs):
            for n in sizes:
                times[n].append(run([save, "--egg", paths[n], "--root", d], batch(), env))
                if j < a.full_runs:
                    old[n].append(run([sys.executable, "-c", FULL_SAVE, paths[n], d], batch(), env))
        med = {n: statistics.median(times[n]) for n in sizes}
        for n in sizes:
            line = "egg-save adding %d turns to %7d: median %6.0f ms, max %6.0f ms over %d processes" % (
                PER_RUN, n, med[n] * 1000, max(times[n]) * 1000, a.runs)
            if old[n]:
                line += "; a full load then the same commits: median %6.0f ms" % (statistics.median(old[n]) * 1000)
            print(line, flush=True)
        big = sizes[-1]
        print("commit index of the %d-turn store: %.1f MB (the store: %.1f MB)" % (
            big, os.path.getsize(index_path(env["EGGSHELL_DATA_ROOT"], paths[big])) / 1e6, os.path.getsize(paths[big]) / 1e6))
    ratio = med[sizes[-1]] / med[sizes[0]]
    print("ratio %d/%d turns: %.2fx (target <= %.1fx)" % (sizes[-1], sizes[0], ratio, TARGET))
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
