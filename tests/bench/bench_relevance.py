"""Benchmark (issue 29): the warm prompt at 10,000 turns, with the relevance decision and before it.

The decision adds to each prompt: the model's nearest turns and the latest one as candidates,
the prompt's calibration against the background turns (one product with the shipped vectors),
and the evidence of each candidate (its terms). Target: no warm prompt slower than before by
more than 10%.

One project of N realistic turns (realistic.py), every window in the vector cache (a sample
embedded for real, the rest near a real one: bench_retrieval.fill_cache), in hybrid mode with
the real model answering the prompts, answered
in-process as the warm manager answers (`runtime/turnflow.answer` on UserPromptSubmit with
warm `Resources`, at most runtime.warm.QUERY_WINDOWS windows of stored turns embedded per prompt, as
the manager sets; every window is cached, so none is).
Two versions of lib/eggshell answer it: this tree, and REV (default: the commit before the
decision) exported with `git archive`; each in its own process, alternating ROUNDS times, so
the shared machine's noise hits both alike; each round's process warms up on 3 prompts, then
times --prompts prompts (new chats, questions like stored ones and unrelated ones) and --long
pasted issues (past rank.LONG_QUERY terms: the long-query ranking). Prints the medians, the
pasted issues' apart, and the ratio; exits 1 when the ratio is over 1.10.

    python tests/bench/bench_relevance.py [--turns 10000] [--prompts 12] [--rounds 3] [--rev REV] [--keep DIR]
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

import realistic  # noqa: E402
from bench_retrieval import fill_cache  # noqa: E402
from bench_scale import venv_python  # noqa: E402

TARGET_RATIO = 1.10
UNRELATED = ("how do I make the carousel swipe on touch screens?", "what's a good name for a grey kitten?",
             "why does the nginx reload drop websocket connections?", "and what about the tests for that?")

CHILD = r"""
import json, os, sys, time, statistics
sys.path.insert(0, sys.argv[1])
from eggshell.paths import Paths
from eggshell.runtime.warm import Resources
from eggshell.runtime import turnflow
from eggshell.hosts.codex import HOST
from eggshell.config import load
from eggshell.runtime.warm import QUERY_WINDOWS
proj, data, prompts = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
prefix = os.path.join(data, "prefix")
paths = Paths(prefix, data, os.path.join(prefix, "config.toml"), os.path.join(data, "codex"), os.path.join(sys.argv[1], "..", "bin"))
res = Resources(data, paths.bin_dir, warm=True)
cfg = load(paths, proj)
read = (os.path.join(proj, ".eggs", "work.egg"),)
s = res.searcher(cfg, read)
p = getattr(s.semantic, "provider", None)
if p is not None:
    p.query_embed_limit = QUERY_WINDOWS
def ask(n, text):
    sel = cfg.selection()
    st = turnflow.Step("UserPromptSubmit", "bench-%d-%d" % (os.getpid(), n), "1", proj, sel.to_json(), None, True)
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": st.session, "turn_id": "1", "cwd": proj, "prompt": text}
    t = time.perf_counter()
    got = turnflow.answer(payload, st, paths, res, None, HOST.context_cap)
    return time.perf_counter() - t, bool(got.get("context"))
for i, t in enumerate(prompts[:3]):
    ask(1000 + i, t)
out = [ask(i, t) for i, t in enumerate(prompts)]
res.close()
print(json.dumps({"times": [x[0] for x in out], "handed": sum(x[1] for x in out)}))
"""


def export(rev: str, dest: str) -> str:
    """lib/ and bin/ of REV under dest; the path of its lib."""
    os.makedirs(dest, exist_ok=True)
    tar = subprocess.run(["git", "-C", REPO, "archive", rev, "lib", "bin"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=tar, check=True)
    return os.path.join(dest, "lib")


def project(d: str, n: int) -> tuple[str, str]:
    proj, data = os.path.join(d, "proj"), os.path.join(d, "data")
    egg = os.path.join(proj, ".eggs", "work.egg")
    if not os.path.exists(egg):
        os.makedirs(os.path.dirname(egg), exist_ok=True)
        with open(os.path.join(proj, ".eggshell.toml"), "w") as f:
            f.write('egg = ".eggs/work.egg"\nmode = "hybrid"\n')
        realistic.write_sources(proj)
        t = time.perf_counter()
        realistic.build(egg + ".tmp", n, data, proj)
        os.replace(egg + ".tmp", egg)
        print("built %d turns in %.0f s" % (n, time.perf_counter() - t), flush=True)
    done = os.path.join(data, "bench-filled")
    if not os.path.exists(done):  # every window cached, as `egg index` leaves a store (bench_retrieval.fill_cache)
        import numpy as np

        from eggshell.graph.store import Store
        from eggshell.search.embed import Encoder
        from eggshell.search.searcher import Searcher

        s = Searcher([Store.open(egg)])
        s._refresh()  # noqa: SLF001 - the turns' searchable texts
        got = fill_cache(Encoder(), data, [c["text"] for c in s.candidates], 64, np.random.default_rng(2))
        with open(done, "w") as f:
            json.dump(got, f)
        print("cached %d windows (%d embedded for real)" % (got["windows"], got["sample"]), flush=True)
    return proj, data


def pasted(seed: int) -> str:
    """A prompt as a pasted issue: a realistic turn's question with what its tools printed (a log, a
    traceback), past rank.LONG_QUERY terms, so the long-query ranking (tool inputs, openings) is timed."""
    from eggshell.search.rank import LONG_QUERY
    from eggshell.search.terms import terms

    r = realistic.record(seed)
    text = r["prompt"] + "\n\nWhat I see:\n" + "\n".join(str(t.get("output") or "") for t in r["tools"])
    while len(terms(text)) <= LONG_QUERY:
        text += "\n" + realistic.record(seed + len(text))["prompt"]
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=10000)
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rev", default="d72a166^", help="the version before the relevance decision (default %(default)s)")
    ap.add_argument("--keep", metavar="DIR")
    ap.add_argument("--long", type=int, default=2, help="pasted-issue prompts (past rank.LONG_QUERY terms) added, timed apart too")
    a = ap.parse_args()
    d = a.keep or tempfile.mkdtemp(prefix="egg-bench-relevance-")
    proj, data = project(d, a.turns)
    old = export(a.rev, os.path.join(d, "old"))
    new = os.path.join(REPO, "lib")
    prompts = [realistic.record(i * 97 + 5)["prompt"] for i in range(a.prompts - len(UNRELATED))] + list(UNRELATED)
    short = len(prompts)
    prompts += [pasted(i * 131 + 7) for i in range(a.long)]
    env = dict(os.environ, EGGSHELL_DATA_ROOT=data, EGGSHELL_MANAGER="off", HF_HUB_OFFLINE="1")
    times: dict[str, list[float]] = {"before": [], "decision": []}
    long_times: dict[str, list[float]] = {"before": [], "decision": []}
    handed: dict[str, int] = {"before": 0, "decision": 0}
    for r in range(a.rounds):
        for name, lib in (("before", old), ("decision", new)) if r % 2 == 0 else (("decision", new), ("before", old)):
            got = subprocess.run([venv_python(), "-c", CHILD, lib, proj, data, json.dumps(prompts)], env=env, capture_output=True, text=True)
            if got.returncode:
                print(got.stderr[-3000:], file=sys.stderr)
                return 2
            out = json.loads(got.stdout.strip().splitlines()[-1])
            times[name] += out["times"]
            long_times[name] += out["times"][short:]
            handed[name] += out["handed"]
            print("round %d %-8s median %.1f ms" % (r + 1, name, statistics.median(out["times"]) * 1000), flush=True)
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    p90 = {k: sorted(v)[int(0.9 * (len(v) - 1))] * 1000 for k, v in times.items()}
    ratio = med["decision"] / med["before"]
    print("\n| %d turns, hybrid, warm | median | p90 | prompts handed something |" % a.turns)
    print("| --- | ---: | ---: | ---: |")
    for k in ("before", "decision"):
        print("| %s | %.1f ms | %.1f ms | %d of %d |" % (k, med[k], p90[k], handed[k], len(times[k])))
    if a.long:
        lm = {k: statistics.median(v) * 1000 for k, v in long_times.items()}
        print("\nthe %d pasted-issue prompts alone: before %.1f ms, now %.1f ms median (ratio %.3f)"
              % (a.long, lm["before"], lm["decision"], lm["decision"] / lm["before"]))
    print("\nratio decision / before: %.3f (target <= %.2f)" % (ratio, TARGET_RATIO))
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
