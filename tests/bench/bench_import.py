"""Benchmark: `egg import` throughput, in turns per second, on 2,000 turns of synthetic transcripts.

The transcripts are in the shapes the real CLIs write (tests/helpers/transcripts.py: Codex
rollout files, Claude Code session files): 200 chats of 10 turns, each turn two Bash calls
(a search and a read, about 1.5 KB of output) and an answer. Each host's set is imported
by a whole `egg import HOST DIR` process (interpreter start, parsing, caps, redaction, the
turn compiler, one locked, fsynced, vouched commit per turn) into a fresh `egg init`
project; then the same command again (nothing new: every turn is found in the store), and
once more after one chat grew by 10 turns. Prints the numbers; exits 1 if a first import
runs below FLOOR turns per second or a run that adds nothing takes more than a quarter of
the first import's time.

    python tests/bench/bench_import.py [--chats 200] [--turns 10] [--runs 3]
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
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "lib"))

from helpers.transcripts import claude_session, codex_rollout  # noqa: E402

EGG = os.path.join(REPO, "bin", "egg")
FLOOR = 20.0  # turns per second a first import must reach on the shared 2-core machine (each turn is ~3 fsyncs)


def turns(chat: int, n: int, first: int = 0) -> list[dict]:
    out = []
    for i in range(first, first + n):
        mod = "src/mod_%d.py" % ((chat * 7 + i) % 97)
        out.append({"turn": "t-%d-%d" % (chat, i), "prompt": "where is handler_%d_%d defined and who calls it?" % (chat, i),
                    "calls": [("rg -n handler_%d_%d src" % (chat, i), ("%s:%d: def handler_%d_%d(x):\n" % (mod, i, chat, i)) * 12),
                              ("sed -n 1,40p " + mod, "".join("line %d of %s\n" % (k, mod) for k in range(40)))],
                    "answer": "handler_%d_%d is defined in %s and called from main." % (chat, i, mod)})
    return out


def write(host: str, d: str, cwd: str, chat: int, ts: list[dict]) -> str:
    if host == "codex":
        path = os.path.join(d, "rollout-2026-11-01T09-00-00-chat-%04d.jsonl" % chat)
        text = codex_rollout("chat-%04d" % chat, cwd, ts)
    else:
        path = os.path.join(d, "chat-%04d.jsonl" % chat)
        text = claude_session("chat-%04d" % chat, cwd, ts)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def egg(args: list[str], cwd: str, env: dict) -> tuple[float, str]:
    t = time.perf_counter()
    p = subprocess.run([EGG, *args], cwd=cwd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit("egg %s failed (exit %d): %s%s" % (" ".join(args), p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    return dt, p.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chats", type=int, default=200)
    ap.add_argument("--turns", type=int, default=10, help="turns per chat (default 10)")
    ap.add_argument("--runs", type=int, default=3, help="fresh imports per host (default 3)")
    a = ap.parse_args()
    n = a.chats * a.turns
    ok = True
    for host in ("codex", "claude"):
        firsts, agains = [], []
        for run in range(a.runs):
            with tempfile.TemporaryDirectory() as d:
                env = dict(os.environ, EGGSHELL_DATA_ROOT=os.path.join(d, "data"), EGGSHELL_MANAGER="off")
                env.pop("EGGSHELL_CONFIG", None)
                proj = os.path.join(d, "proj")
                os.makedirs(proj)
                egg(["init"], proj, env)
                tdir = os.path.join(d, "transcripts")
                os.makedirs(tdir)
                size = sum(os.path.getsize(write(host, tdir, proj, c, turns(c, a.turns))) for c in range(a.chats))
                dt, out = egg(["import", host, tdir], proj, env)
                assert "imported %d turns from %d sessions into 1 store" % (n, a.chats) in out, out
                firsts.append(dt)
                dt2, out = egg(["import", host, tdir], proj, env)
                assert "imported 0 turns" in out and "skipped %d already present" % n in out, out
                agains.append(dt2)
                if run == 0:
                    write(host, tdir, proj, 0, turns(0, a.turns + 10))
                    dt3, out = egg(["import", host, tdir], proj, env)
                    assert "imported 10 turns from 1 session" in out, out
                    store = os.path.getsize(os.path.join(proj, ".eggs", "work.egg"))
                    print("%s: %d turns in %d files (%.1f MB of transcripts) -> a %.1f MB store; a chat grown by 10 turns: %.2f s"
                          % (host, n, a.chats, size / 1e6, store / 1e6, dt3), flush=True)
        first, again = statistics.median(firsts), statistics.median(agains)
        rate = n / first
        print("%s: first import %.2f s (median of %d) = %.0f turns/s; again, nothing new: %.2f s (%.0f turns/s checked)"
              % (host, first, a.runs, rate, again, n / again), flush=True)
        ok = ok and rate >= FLOOR and again <= first / 4
    print("target: a first import >= %.0f turns/s, a run that adds nothing <= 1/4 of it: %s" % (FLOOR, "met" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
