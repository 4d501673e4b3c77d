"""Benchmark: the cost of one commit must not grow with the store.

Builds stores holding 100 and 10,000 turns, opens each (loading is not what is
measured), then times committing new turns one by one, each with its own lock,
append and fsync. Prints the medians and their ratio; exits 1 if the ratio is over
the target (1.5x), so `make bench` fails loudly.

    python tests/bench/bench_commit.py [--sizes 100,10000] [--commits 60]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "lib"))

from eggshell.graph import eggfile as ef  # noqa: E402
from eggshell.graph.store import Store, write_compact  # noqa: E402
from eggshell.graph.turns import compile_turn, parse_turn  # noqa: E402

TARGET = 1.5


def record(i: int) -> dict:
    return {
        "session": "bench-%d" % (i // 10),
        "turn": "turn-%d" % i,
        "cwd": ".",
        "prompt": "where is handler_%d defined and who calls it?" % i,
        "tools": [
            {"name": "Bash", "id": "c%d-1" % i, "input": {"command": "rg -n handler_%d src" % i}, "output": "src/mod_%d.py:%d: def handler_%d(x):\n" % (i % 97, i % 400, i) * 3},
            {"name": "Bash", "id": "c%d-2" % i, "input": {"command": "sed -n 1,40p src/mod_%d.py" % (i % 97)}, "output": ("line of module %d\n" % (i % 97)) * 20},
        ],
        "answer": "handler_%d is defined in src/mod_%d.py and called from main." % (i, i % 97),
    }


def build(path: str, n: int) -> None:
    """Write a store of n turns quickly (one write, as compaction would), not by n fsyncs."""
    s = Store(path)
    g = s.graph
    g.header = ef.Header("bench-authority", ef.VERSION, "2026-01-01T00:00:00.000000Z")
    for i in range(n):
        c = compile_turn(parse_turn(record(i)))
        from eggshell.core.identity import content_hex

        ids = tuple(content_hex(r) for r in c.roots)
        for r in c.roots:
            from eggshell.core.values import walk

            for node in walk(r):
                g.nodes[content_hex(node)] = node
        cm = ef.Commit("", "2026-01-01T00:00:%02d.%06dZ" % (i // 1000000, i % 1000000), "s", "t%d" % i, ids, ())
        cm = ef.Commit(ef.commit_id(cm), cm.time, cm.session, cm.turn, cm.roots, cm.unions)
        g.commits[cm.id] = cm
    write_compact(path, g.header, [g])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,10000")
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    with tempfile.TemporaryDirectory() as d:
        stores = {}
        for n in sizes:
            path = os.path.join(d, "store-%d.egg" % n)
            build(path, n)
            t0 = time.perf_counter()
            stores[n] = Store.open(path)
            stores[n].data_root = os.path.join(d, "data")  # each commit is vouched for in a ledger of the run's own
            print("store of %6d turns: %.1f MB, full load %.2f s" % (n, os.path.getsize(path) / 1e6, time.perf_counter() - t0), flush=True)
        times: dict[int, list[float]] = {n: [] for n in sizes}
        # Interleave the stores so the shared machine's noise hits every size alike.
        for j in range(a.warmup + a.commits):
            for n in sizes:
                c = compile_turn(parse_turn(record(10_000_000 + n * 10_000 + j)))
                t = time.perf_counter()
                stores[n].commit(c.roots, session="s", turn="new-%d" % j)
                if j >= a.warmup:
                    times[n].append(time.perf_counter() - t)
        med = {n: statistics.median(times[n]) for n in sizes}
        for n in sizes:
            print("commit cost with %6d stored turns: median %.2f ms, p90 %.2f ms over %d commits (lock, append, fsync, trust ledger append)"
                  % (n, med[n] * 1000, sorted(times[n])[int(0.9 * len(times[n]))] * 1000, a.commits))
    ratio = med[sizes[-1]] / med[sizes[0]]
    print("ratio %d/%d turns: %.2fx (target <= %.1fx)" % (sizes[-1], sizes[0], ratio, TARGET))
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
