"""Benchmark (issue 30): BM25 on disk (search/postings.DiskBM25) against the in-memory index.

A project of N realistic turns (realistic.py, as bench_scale builds it). Their documents, as the
Searcher makes them (each text's line terms), go into a DiskBM25 ten at a time, one segment
per `extend` as saves would add them; then `merge` folds the segments. Prints the file's size
against the store's, the time to add them and to merge, a fresh process's time to open the
file and answer one question (against a bare `python -c pass` in the same run), the time a
question takes warm before and after the merge, and whether every question's top ten equals
the in-memory index's (exits 1 if one does not).

    python tests/bench/bench_postings.py [--turns 10000] [--questions 20] [--keep DIR]
"""

from __future__ import annotations

import argparse
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

import realistic  # noqa: E402
from bench_scale import project, venv_python  # noqa: E402

OPEN_AND_ASK = r"""
import sys
sys.path.insert(0, sys.argv[1])
from eggshell.search.postings import DiskBM25
from eggshell.search.terms import terms
print(len(DiskBM25(sys.argv[2]).search(terms(sys.argv[3]), 10)))
"""


def fresh_ms(argv: list[str], runs: int = 5) -> float:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=10000)
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--keep", metavar="DIR")
    a = ap.parse_args()
    from eggshell.graph.store import Store
    from eggshell.search.postings import DiskBM25
    from eggshell.search.rank import BM25, line_terms
    from eggshell.search.searcher import Searcher
    from eggshell.search.terms import terms

    d = a.keep or tempfile.mkdtemp(prefix="egg-bench-postings-")
    _, _, egg = project(d, a.turns)
    s = Searcher([Store.open(egg)])
    s._refresh()  # noqa: SLF001 - the turns' searchable texts
    docs = [[t for line in line_terms(c["text"], terms) for t in line] for c in s.candidates]
    mem = BM25(docs)
    path = os.path.join(d, "lexical-%d.db" % os.getpid())
    disk = DiskBM25(path)
    t = time.perf_counter()
    for k in range(0, len(docs), 10):
        disk.extend(docs[k:k + 10])
    add_s = time.perf_counter() - t
    questions = [realistic.record(i * 97 + 5)["prompt"] for i in range(a.questions)]

    def ask() -> tuple[float, int]:
        times, same = [], 0
        for q in questions:
            qt = terms(q)
            t0 = time.perf_counter()
            got = disk.search(qt, 10)
            times.append((time.perf_counter() - t0) * 1000)
            same += [(x.index, round(x.score, 9)) for x in got] == [(x.index, round(x.score, 9)) for x in mem.search(qt, 10)]
        return statistics.median(times), same

    before_ms, same_before = ask()
    segments = disk.segments()
    t = time.perf_counter()
    disk.merge(8)
    merge_s = time.perf_counter() - t
    after_ms, same_after = ask()
    mem_ms = statistics.median(
        [(lambda t0: (mem.search(terms(q), 10), (time.perf_counter() - t0) * 1000)[1])(time.perf_counter()) for q in questions])
    py = venv_python()
    bare = fresh_ms([py, "-c", "pass"])
    opened = fresh_ms([py, "-c", OPEN_AND_ASK, os.path.join(REPO, "lib"), path, questions[0]])
    print("| %d turns | |" % len(docs))
    print("| --- | ---: |")
    print("| store MB / index file MB | %.1f / %.1f |" % (os.path.getsize(egg) / 1e6, os.path.getsize(path) / 1e6))
    print("| add, 10 turns an extend (%d segments) | %.1f s |" % (segments, add_s))
    print("| merge to 8 segments | %.1f s |" % merge_s)
    print("| a fresh process opens it and answers a question | %.0f ms (bare python %.0f ms) |" % (opened, bare))
    print("| a question, warm: unmerged / merged / in memory | %.1f / %.1f / %.1f ms |" % (before_ms, after_ms, mem_ms))
    print("| top ten equal to the in-memory index's | %d and %d of %d |" % (same_before, same_after, len(questions)))
    os.unlink(path)
    return 0 if same_before == same_after == len(questions) else 1


if __name__ == "__main__":
    sys.exit(main())
