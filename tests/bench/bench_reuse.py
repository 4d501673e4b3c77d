"""Benchmark: the reuse engine's cost against the number of prior tool calls.

The reuse engine (engine.handoff: intrinsic matching, saturation, extraction, rendering)
runs on every prompt and on every proposed tool call, and the PreToolUse hook sits in
front of each shell command the agent runs, so its cost must stay flat as a project's
history grows. Measured against stores of 100, 1,000 and 10,000 prior tool calls (turns
of five calls each, saved with save.save_turn into temporary `.egg` files, never the
user's):

1. One proposed call, warm: `engine.handoff(ws, work, command, enforce=True)` with the
   Workspace already built. A mix of calls that a stored call covers (a repeat spelled
   `./Lib/...`), that one covers in part (a batched command with one repeated clause, a
   search over more directories, a new option) and that nothing covers. Median and p90.
   The covered ones must be denied (counted; the bench fails if none is).
2. One prompt, warm: `engine.handoff(ws, prompt, prompt)` for prompts naming stored
   symbols and files (a few repeat a stored request word for word).
3. Growth per 10x of both (median at 1,000 / median at 100, and 10,000 / 1,000).
   Target: each ratio at most 10 (no worse than linear). Also the workspace build
   (Store.open + engine.workspace) per size and its growth (informational: the warm
   manager pays it once, a cold hook on every call).
4. The PreToolUse hook's own work at 10,000, warm (what a warm manager holding the
   store and the workspace runs per call): the chat's `Deliveries.load`, `engine.handoff`
   with the project's config and `enforce=True`, and encoding the reply with ujson.
   Target: median under 250 ms.
5. For reference (no target): the real cold hook, `bin/egg-hook codex` with a PreToolUse
   payload, a fresh process over the 10,000-call store (Store.open dominates).

The prior calls are built from the Python standard library's own source: module paths
(`Lib/json/decoder.py`), the names they define, commands such as `rg -n NAME DIR`, `sed -n
A,Bp FILE`, `cat FILE`, `python -m pytest -q Lib/test/test_X.py -k NAME`, `git log`, and
batched `cd DIR && rg ... && sed ...`; their outputs are the real source lines (a few
lines to a few KB). The smaller stores are prefixes of the larger one, and every inquiry
is drawn from the first 20 turns (or from files no stored call touches), so each size
answers the same questions. Calls that are "new" use files held out of the corpus.

Timings interleave the sizes (each inquiry is run at every size in turn, the order
rotating) and report medians, so a shared machine's noise hits every size alike; the
first time an inquiry is seen (its memos cold) is reported apart. The stores and
workspaces are built once and frozen out of the garbage collector's passes (a warm
manager would do the same). Exits 1 if a target is missed; a cProfile summary of the
slowest path then says where the time goes.

    python tests/bench/bench_reuse.py [--sizes 100,1000,10000] [--reps 5] [--hook-runs 2]
        [--keep DIR] [--profile]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "lib"))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, HERE)

from bench_retrieval import _corpus, med_ms, p90_ms, profile_summary  # noqa: E402

TARGET_GROWTH = 10.0  # median ratio per 10x more prior calls: no worse than linear
TARGET_HOOK_MS = 250.0  # warm PreToolUse hook work at the largest size
CALLS_PER_TURN = 5
SOURCE_TURNS = 20  # inquiries are drawn from these first turns: every size holds them

PROMPTS = [
    "where is {f} defined in {p} and who calls it?",
    "why does {f} raise {e} when the input is empty",
    "fix the failing test for {f} in {p}",
    "refactor {f} in {m} so it no longer reads the whole file into memory",
    "add type hints to {f} and make sure the tests for {m} still pass",
    "what does {f} return when the argument is None?",
    "the CI job fails in {p} after the last change to {f}, find out why",
]
ASK = [
    "where is {f} defined and who calls it?",
    "why does {f} in {p} fail on an empty argument",
    "explain what {f} does in {p}",
    "is {f} covered by the tests of {m}?",
]
GENERIC = [
    "the tests started failing after I upgraded the dependencies, what changed?",
    "speed up the slow startup of the command line tool",
]
ANSWERS = [
    "{f} is defined in {p} at line {n}; it is called from {g} and from the tests.",
    "The {e} comes from {f}: it indexes the first element without checking the length. I added a guard and a test.",
    "Fixed: {f} now handles the empty case, and the tests for {m} pass.",
    "{f} returns None in that case because {g} swallows the {e}; I documented it.",
]
ERRORS = ["ValueError", "KeyError", "TypeError", "IndexError", "OSError", "AttributeError"]


# -- realistic prior tool calls ---------------------------------------------------------------------


class Vocab:
    """Standard-library files split into the corpus and a held-out part (for calls nothing covers)."""

    def __init__(self):
        files = [("Lib/" + p, lines, defs) for p, lines, defs in _corpus()]
        self.used = [f for i, f in enumerate(files) if i % 8]
        held = [f for i, f in enumerate(files) if i % 8 == 0]
        used_names = {n for _, _, defs in self.used for n, _ in defs}
        self.held = [(p, lines, [d for d in defs if d[0] not in used_names and len(d[0]) >= 6]) for p, lines, defs in held]
        self.held = [h for h in self.held if h[2]]
        self.by_dir: dict[str, list[tuple[str, list[str]]]] = {}
        for p, lines, _ in self.used:
            self.by_dir.setdefault(os.path.dirname(p), []).append((p, lines))


def _dir_of(path: str) -> str:
    d = os.path.dirname(path)
    return path if d == "Lib" else d  # a top-level module is searched as a file, not all of Lib/


def rg_output(v: Vocab, sym: str, target: str, cap: int = 40) -> str:
    files = v.by_dir.get(target) if target in v.by_dir else None
    files = files or [(p, ls) for p, ls, _ in v.used if p == target or p.startswith(target + "/")][:60]
    out = []
    for p, lines in files:
        for j, ln in enumerate(lines):
            if sym in ln:
                out.append("%s:%d:%s" % (p, j + 1, ln) if len(files) > 1 or target != p else "%d:%s" % (j + 1, ln))
                if len(out) >= cap:
                    return "\n".join(out) + "\n"
    return "\n".join(out) + "\n" if out else ""


def make_records(v: Vocab, n: int, seed: int = 7) -> list[dict]:
    """n turns of CALLS_PER_TURN Bash calls each (the save_turn input shape), deterministic for a seed."""
    rng = random.Random(seed)
    recs = []
    for i in range(n):
        path, lines, defs = v.used[rng.randrange(len(v.used))]
        f, line = defs[rng.randrange(len(defs))]
        g = defs[rng.randrange(len(defs))][0]
        d, base = _dir_of(path), os.path.basename(path)
        stem = base[:-3]
        a = max(1, line + 1 - rng.randint(0, 5))
        b = min(len(lines), a + rng.randint(15, 60))
        kw = dict(f=f, g=g, p=path, m=path[4:-3].replace("/", "."), e=rng.choice(ERRORS), n=line + 1)

        def sed(a=a, b=b):
            return "\n".join(lines[a - 1 : b]) + "\n"

        status = rng.random() < 0.3
        test = ("F" if status else ".") + "." * rng.randint(2, 12)
        pytest_out = "%s%s\n" % (test, " " * (70 - len(test)) + "[100%]")
        if status:
            pytest_out += ("=" * 20 + " FAILURES " + "=" * 20 + "\n____ test_%s ____\n\n" % f + "\n".join(lines[line : line + 8])
                           + "\nE       %s: %s\n\n%s:%d: %s\n" % (kw["e"], f, path, line + 1, kw["e"]))
        pytest_out += "%s%d passed, %d deselected in %.2fs\n" % ("1 failed, " if status else "", len(test) - status, rng.randint(20, 300), rng.random())
        templates = [
            ("rg -n %s %s" % (f, d), lambda: rg_output(v, f, d)),
            ("rg -n 'def %s' %s" % (f, path), lambda: rg_output(v, "def " + f, path)),
            ("grep -rn %s %s" % (g, d), lambda: rg_output(v, g, d)),
            ("sed -n %d,%dp %s" % (a, b, path), sed),
            ("cat %s" % path, lambda: "\n".join(lines)[: rng.randint(1500, 4500)] + "\n"),
            ("python -m pytest -q Lib/test/test_%s.py -k %s" % (stem, f), lambda: pytest_out),
            ("git log -n 5 --oneline -- %s" % path, lambda: "".join("%07x gh-%d: %s %s in %s\n" % (
                rng.getrandbits(28), rng.randint(90000, 130000), rng.choice(["Fix", "Speed up", "Document", "Refactor"]), rng.choice([f, g]), kw["m"])
                for _ in range(5))),
            ("cd %s && rg -n %s %s && sed -n %d,%dp %s" % (os.path.dirname(path), g, base, a, b, base),
             lambda: rg_output(v, g, path) + sed()),
            ("wc -l %s" % path, lambda: "%d %s\n" % (len(lines), path)),
            ("ls %s" % os.path.dirname(path), lambda: "\n".join(sorted(os.path.basename(p) for p, _ in v.by_dir[os.path.dirname(path)])) + "\n"),
        ]
        picks = rng.sample(templates, CALLS_PER_TURN)
        calls = [{"name": "Bash", "id": "call-%d-%d" % (i, k), "input": {"command": cmd}, "output": out()} for k, (cmd, out) in enumerate(picks)]
        recs.append({"session": "bench-%d" % (i // 10), "turn": "turn-%d" % i, "cwd": "", "prompt": rng.choice(PROMPTS).format(**kw),
                     "tools": calls, "answer": rng.choice(ANSWERS).format(**kw)})
    return recs


def call_inquiries(v: Vocab, recs: list[dict], seed: int = 11) -> list[tuple[str, str]]:
    """(kind, command) proposed calls: covered, partly covered, new; drawn from the first turns."""
    rng = random.Random(seed)
    stored = [c["input"]["command"] for r in recs[:SOURCE_TURNS] for c in r["tools"]]
    single = [c for c in stored if "&&" not in c and " Lib/" in c and not c.startswith("ls ")]
    rng.shuffle(single)
    out = [("covered", c.replace(" Lib/", " ./Lib/", 1)) for c in single[:8]]
    rgs = [c for c in stored if c.startswith("rg -n ") and "'" not in c]
    rng.shuffle(rgs)
    held = v.held
    for k, c in enumerate(single[8:14]):
        hp, _, hdefs = held[rng.randrange(len(held))]
        if k % 3 == 0:
            out.append(("partial", "%s && git log -n 5 --oneline -- %s" % (c, hp)))  # one clause repeats a stored call
        elif k % 3 == 1 and rgs:
            r = rgs[k % len(rgs)]
            out.append(("partial", "%s %s" % (r, _dir_of(hp))))  # the stored search, over one more place
        else:
            r = rgs[k % len(rgs)] if rgs else c
            out.append(("partial", r.replace("rg -n ", "rg -n -w ", 1)))  # an option the stored call lacked
    for k in range(6):
        hp, _, hdefs = held[rng.randrange(len(held))]
        f = hdefs[rng.randrange(len(hdefs))][0]
        out.append(("new", ["rg -n %s %s" % (f, _dir_of(hp)), "sed -n 1,40p %s" % hp, "cat %s" % hp,
                            "python -m pytest -q Lib/test/test_%s.py -k %s" % (os.path.basename(hp)[:-3], f)][k % 4]))
    return out


def prompt_inquiries(recs: list[dict], seed: int = 13) -> list[str]:
    """Prompts naming stored symbols and files; three repeat a stored request word for word."""
    import re

    rng = random.Random(seed)
    out = [r["prompt"] for r in rng.sample(recs[:SOURCE_TURNS], 3)]
    for r in rng.sample(recs[:SOURCE_TURNS], 15):
        cmd = next(c["input"]["command"] for c in r["tools"] if c["input"]["command"].split()[0] in ("rg", "grep", "sed", "cat", "python", "git", "cd", "wc", "ls"))
        path = re.search(r"Lib/[\w/]+\.py", " ".join(c["input"]["command"] for c in r["tools"])) or re.search(r"Lib/[\w/]+", cmd)
        name = re.findall(r"(?:rg -n|grep -rn|-k|def) '?(\w+)", " ".join(c["input"]["command"] for c in r["tools"]))
        f = name[0] if name else re.findall(r"\w{6,}", r["prompt"])[0]
        p = path.group(0) if path else "Lib"
        out.append(rng.choice(ASK).format(f=f, p=p, m=p[4:].replace("/", ".").removesuffix(".py")))
    return out + GENERIC


# -- setup ------------------------------------------------------------------------------------------


def project(root: str, n: int) -> str:
    proj = os.path.join(root, "proj-%d" % n)
    os.makedirs(os.path.join(proj, ".eggs"), exist_ok=True)
    from eggshell import config

    with open(os.path.join(proj, ".eggshell.toml"), "w", encoding="utf-8") as f:
        f.write(config.PROJECT_TEMPLATE)
    return proj


def build_stores(root: str, sizes: list[int], recs: list[dict]) -> dict[int, str]:
    """One project per size, its store holding the first size/5 turns, saved turn by turn with save_turn."""
    from eggshell.graph.save import save_turn
    from eggshell.graph.store import Store

    projs = {n: project(root, n) for n in sizes}
    marks = {n: os.path.join(projs[n], ".eggs", "built-%d" % len(recs)) for n in sizes}
    todo = [n for n in sizes if not os.path.exists(marks[n])]
    if not todo:
        print("  stores reused from %s" % root, flush=True)
        return projs
    for n in todo:
        for x in ("work.egg", "work.egg.lock"):
            if os.path.exists(os.path.join(projs[n], ".eggs", x)):
                os.remove(os.path.join(projs[n], ".eggs", x))
    stores = {n: Store.open(os.path.join(projs[n], ".eggs", "work.egg")) for n in todo}
    t0 = time.perf_counter()
    turns = max(todo) // CALLS_PER_TURN
    for i in range(turns):
        for n in todo:
            if i < n // CALLS_PER_TURN:
                save_turn(stores[n], dict(recs[i], cwd=projs[n]), projs[n])
        if (i + 1) % 200 == 0 or i + 1 == turns:
            print("  saved %5d / %d turns (%d calls) in %.1f s" % (i + 1, turns, (i + 1) * CALLS_PER_TURN, time.perf_counter() - t0), flush=True)
    for n in todo:
        with open(marks[n], "w"):
            pass
        print("  store of %6d calls: %.1f MB" % (n, os.path.getsize(stores[n].path) / 1e6), flush=True)
    return projs


def open_workspace(proj: str):
    from eggshell.reuse import engine
    from eggshell.reuse.engine import Inquiry
    from eggshell.graph.store import Store

    store = Store.open(os.path.join(proj, ".eggs", "work.egg"))
    return store, engine.workspace([store.graph])


def bench_paths(root: str):
    from eggshell.paths import Paths

    prefix = os.path.join(root, "prefix")
    return Paths(prefix, os.path.join(root, "data"), os.path.join(prefix, "config", "eggshell", "config.toml"), os.path.join(root, "codex"),
                 os.path.join(REPO, "bin"))


# -- measurements -----------------------------------------------------------------------------------


def bench_build(projs: dict[int, str], reps: int) -> dict[str, dict[int, list[float]]]:
    """Store.open and engine.workspace per size, interleaved; each part and their sum."""
    from eggshell.reuse import engine
    from eggshell.reuse.engine import Inquiry
    from eggshell.graph.store import Store

    t: dict[str, dict[int, list[float]]] = {k: {n: [] for n in projs} for k in ("open", "workspace", "build")}
    sizes = list(projs)
    for r in range(reps):
        for n in sizes[r % len(sizes):] + sizes[: r % len(sizes)]:
            t0 = time.perf_counter()
            store = Store.open(os.path.join(projs[n], ".eggs", "work.egg"))
            t1 = time.perf_counter()
            engine.workspace([store.graph])
            t2 = time.perf_counter()
            t["open"][n].append(t1 - t0)
            t["workspace"][n].append(t2 - t1)
            t["build"][n].append(t2 - t0)
            del store
    return t


def bench_engine(wss: dict, calls: list[tuple[str, str]], prompts: list[str], reps: int) -> dict:
    """Warm engine.handoff for each inquiry at every size, interleaved, the size order rotating."""
    from eggshell.reuse import engine
    from eggshell.reuse.engine import Inquiry
    from eggshell.reuse.render import data_share
    from eggshell.graph.turns import work_text

    sizes = list(wss)
    res = {k: {n: [] for n in sizes} for k in ("call", "prompt", "call_first", "prompt_first")}
    kinds = {n: {} for n in sizes}  # (kind) -> [inquiries, denied] at the first rep
    chars = {n: [] for n in sizes}
    shares = {n: [] for n in sizes}  # recorded data's share of each handoff given
    session = "bench-live"
    j = 0
    for r in range(reps):
        for i in range(max(len(calls), len(prompts))):
            j += 1
            order = sizes[j % len(sizes):] + sizes[: j % len(sizes)]
            for n in order:
                ws = wss[n]
                if i < len(calls):
                    kind, cmd = calls[i]
                    work = work_text("Bash", {"command": cmd})
                    t0 = time.perf_counter()
                    h = engine.handoff(ws, Inquiry(work, cmd, session=session, enforce=True))
                    dt = time.perf_counter() - t0
                    res["call"][n].append(dt)
                    if r == 0:
                        res["call_first"][n].append(dt)
                        k = kinds[n].setdefault(kind, [0, 0, 0])
                        k[0] += 1
                        k[1] += h.deny
                        k[2] += bool(h.text) and not h.deny
                if i < len(prompts):
                    t0 = time.perf_counter()
                    h = engine.handoff(ws, Inquiry(prompts[i], prompts[i], session=session))
                    dt = time.perf_counter() - t0
                    res["prompt"][n].append(dt)
                    if r == 0:
                        res["prompt_first"][n].append(dt)
                        chars[n].append(len(h.text))
                        if h.text:
                            shares[n].append(data_share(h.text))
    res["kinds"] = kinds
    res["chars"] = chars
    res["shares"] = shares
    return res


def seed_chat_state(paths, session: str, n_keys: int = 300) -> None:
    """A chat that has been given some evidence already: realistic delivery keys to load."""
    import hashlib

    from eggshell.reuse.delivery import Deliveries

    keys = ["%s:%s:%s" % ("gd"[i % 2], hashlib.sha256(b"o%d" % i).hexdigest(), hashlib.sha256(b"p%d" % i).hexdigest()) for i in range(n_keys)]
    Deliveries(paths.state_dir, session).add(keys)


def hook_work(ws, cfg, paths, session: str, tool_input: dict) -> tuple[dict, bool]:
    """The PreToolUse branch of runtime/turnflow.py with the store and workspace already in memory."""
    import ujson

    from eggshell.reuse.delivery import Deliveries
    from eggshell.reuse.engine import Inquiry, handoff
    from eggshell.reuse.intrinsic import canonical_tool_work
    from eggshell.graph.records import command_of

    work = canonical_tool_work("Bash", tool_input)
    chat = Deliveries(paths.state_dir, session)
    state = chat.load()
    h = handoff(ws, Inquiry(work, command_of(work), budget=cfg.handoff_chars, delivered=state.delivered, session=session, after_compaction=state.after_compaction, enforce=True, local_union=cfg.local_union))
    if h.deny:
        reply = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": h.text}}
    else:
        reply = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": h.text}} if h.text else {}
    ujson.dumps(reply, ensure_ascii=False)
    return reply, h.deny


def bench_hook_warm(ws, proj: str, paths, calls: list[tuple[str, str]], n: int) -> dict:
    from eggshell import config

    cfg = config.load(paths, proj)
    session = "bench-hook-warm"
    seed_chat_state(paths, session)
    times, denied = [], 0
    for i in range(n):
        t0 = time.perf_counter()
        _, deny = hook_work(ws, cfg, paths, session, {"command": calls[i % len(calls)][1]})
        times.append(time.perf_counter() - t0)
        denied += deny
    return {"times": times, "denied": denied, "cfg": cfg, "session": session}


def bench_hook_cold(root: str, proj: str, calls: list[tuple[str, str]], runs: int) -> list[tuple[str, float, str]]:
    """The real `bin/egg-hook codex` PreToolUse, a fresh process each, as Codex runs it."""
    from helpers import real_venv

    prefix = os.path.join(root, "prefix")
    link = os.path.join(prefix, "share", "eggshell", "venv")
    if not os.path.exists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(real_venv(), link)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EGGSHELL_", "CODEX_"))}
    env.update(EGGSHELL_PREFIX=prefix, EGGSHELL_DATA_ROOT=os.path.join(root, "data-cold"), CODEX_HOME=os.path.join(root, "codex"))
    from eggshell.graph import trust
    from eggshell.graph.store import Store

    # The store was saved under the run's other data root: trust it here too, as `egg trust` would.
    trust.record(env["EGGSHELL_DATA_ROOT"], sorted(Store.open(os.path.join(proj, ".eggs", "work.egg")).graph.commits))
    picks = [c for c in calls if c[0] == "covered"][:1] + [c for c in calls if c[0] == "new"][:1]
    out = []
    for r in range(runs):
        kind, cmd = picks[r % len(picks)]
        payload = {"hook_event_name": "PreToolUse", "session_id": "bench-cold-%d-%d" % (os.getpid(), r), "turn_id": "bench-turn-%d" % r, "cwd": proj,
                   "transcript_path": "/dev/null", "model": "m", "permission_mode": "bypassPermissions", "tool_name": "Bash",
                   "tool_input": {"command": cmd}, "tool_use_id": "bench-use-%d" % r}
        t0 = time.perf_counter()
        p = subprocess.run([os.path.join(REPO, "bin", "egg-hook"), "codex"], input=json.dumps(payload), capture_output=True, text=True,
                           env=env, cwd=proj, timeout=600)
        dt = time.perf_counter() - t0
        if p.returncode != 0 or not p.stdout.strip().startswith("{"):
            raise SystemExit("bench_reuse: egg-hook failed: rc=%s out=%.300r err=%.2000r" % (p.returncode, p.stdout, p.stderr))
        reply = json.loads(p.stdout)
        decision = reply.get("hookSpecificOutput", {}).get("permissionDecision") or ("context" if reply else "nothing")
        log = os.path.join(env["EGGSHELL_DATA_ROOT"], "logs", "hook.log")
        if os.path.exists(log) and os.path.getsize(log):
            raise SystemExit("bench_reuse: egg-hook logged a failure:\n%s" % open(log, encoding="utf-8").read()[-2000:])
        out.append((kind, dt, decision))
    return out


# -- main -------------------------------------------------------------------------------------------


def growth(xs: dict[int, list[float]], sizes: list[int]) -> list[tuple[int, int, float]]:
    """(smaller, larger, median ratio per 10x more calls) for consecutive sizes (the ratio itself when they are 10x apart)."""
    return [(a, b, (med_ms(xs[b]) / med_ms(xs[a])) ** (1 / math.log10(b / a))) for a, b in zip(sizes, sizes[1:])]


def paired(xs: dict[int, list[float]], a: int, b: int) -> float:
    """Median over the runs of (time at b / time at a) ** per 10x: the k-th runs of both sizes are one inquiry, back to back."""
    return statistics.median((y / x) ** (1 / math.log10(b / a)) for x, y in zip(xs[a], xs[b]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,10000", help="prior tool calls per store, ascending (default %(default)s)")
    ap.add_argument("--reps", type=int, default=5, help="passes over the inquiries in [1] and [2] (default %(default)s)")
    ap.add_argument("--hook-calls", type=int, default=30, help="calls timed in [4] (default %(default)s)")
    ap.add_argument("--hook-runs", type=int, default=2, help="runs of the real cold hook in [5], 0 to skip (default %(default)s)")
    ap.add_argument("--keep", metavar="DIR", help="keep the stores in DIR and reuse them on the next run")
    ap.add_argument("--profile", action="store_true", help="print the profiles even when the targets are met")
    a = ap.parse_args()
    sizes = sorted(int(x) for x in a.sizes.split(","))
    if any(n < SOURCE_TURNS * CALLS_PER_TURN for n in sizes):
        raise SystemExit("bench_reuse: every size must be at least %d calls" % (SOURCE_TURNS * CALLS_PER_TURN))
    t_start = time.perf_counter()
    tmp = tempfile.TemporaryDirectory(prefix="eggshell-bench-reuse-")
    root = os.path.abspath(a.keep) if a.keep else tmp.name
    os.makedirs(root, exist_ok=True)
    # Nothing may touch the user's data: every location points into the run's directory.
    os.environ["EGGSHELL_DATA_ROOT"] = os.path.join(root, "data")
    os.environ["EGGSHELL_PREFIX"] = os.path.join(root, "prefix")
    failed: list[str] = []

    def say(line: str = "") -> None:
        print(line, flush=True)

    big = sizes[-1]
    print("[setup] stores of %s prior tool calls (%d per turn), from the standard library's source; %d CPUs; data under %s" % (
        ", ".join("%d" % n for n in sizes), CALLS_PER_TURN, os.cpu_count() or 0, root), flush=True)
    t = time.perf_counter()
    vocab = Vocab()
    recs = make_records(vocab, big // CALLS_PER_TURN)
    calls = call_inquiries(vocab, recs)
    prompts = prompt_inquiries(recs)
    outs = [len(c["output"]) for r in recs for c in r["tools"]]
    print("  %d turns generated in %.1f s (%d files, %d held out); outputs median %d chars, p90 %d, max %d" % (
        len(recs), time.perf_counter() - t, len(vocab.used), len(vocab.held), statistics.median(outs),
        sorted(outs)[int(0.9 * len(outs))], max(outs)), flush=True)
    projs = build_stores(root, sizes, recs)

    print("\n[3] workspace build (Store.open + engine.workspace), interleaved", flush=True)
    tb = bench_build(projs, max(1, min(a.reps, 3)))
    t_build = tb["build"]
    stores, wss = {}, {}
    for n in sizes:
        stores[n], wss[n] = open_workspace(projs[n])
        say("  %6d calls: %d candidates, %d turn decompositions" % (n, len(wss[n].corpus.candidates), len(wss[n].alls)))
    gc.collect()
    gc.freeze()  # the stores and workspaces are long-lived: keep GC passes over them out of the timings

    print("\n[1,2] warm engine.handoff, %d proposed calls and %d prompts, %d passes, sizes interleaved" % (len(calls), len(prompts), a.reps), flush=True)
    r = bench_engine(wss, calls, prompts, a.reps)

    say()
    say("[1] one proposed call, warm: engine.handoff(ws, work, command, enforce=True); %d calls x %d passes" % (len(calls), a.reps))
    say("    | %8s | %11s | %9s | %15s | %-52s |" % ("calls", "median (ms)", "p90 (ms)", "first seen (ms)", "denied / handoff only / count, by kind"))
    say("    |%s|%s|%s|%s|%s|" % ("-" * 10, "-" * 13, "-" * 11, "-" * 17, "-" * 54))
    for n in sizes:
        kinds = "; ".join("%s %d/%d/%d" % (k, v[1], v[2], v[0]) for k, v in r["kinds"][n].items())
        say("    | %8d | %11.1f | %9.1f | %15.1f | %-52s |" % (n, med_ms(r["call"][n]), p90_ms(r["call"][n]), med_ms(r["call_first"][n]), kinds))
    say("[2] one prompt, warm: engine.handoff(ws, prompt, prompt); %d prompts x %d passes" % (len(prompts), a.reps))
    say("    | %8s | %11s | %9s | %15s | %-52s |" % ("calls", "median (ms)", "p90 (ms)", "first seen (ms)", "handoffs given; share of recorded data"))
    say("    |%s|%s|%s|%s|%s|" % ("-" * 10, "-" * 13, "-" * 11, "-" * 17, "-" * 54))
    for n in sizes:
        given = [c for c in r["chars"][n] if c]
        say("    | %8d | %11.1f | %9.1f | %15.1f | %-52s |" % (n, med_ms(r["prompt"][n]), p90_ms(r["prompt"][n]), med_ms(r["prompt_first"][n]),
                                                            "%d of %d, median %d chars; data median %.2f" % (
                                                                len(given), len(r["chars"][n]), statistics.median(given) if given else 0,
                                                                statistics.median(r["shares"][n]) if r["shares"][n] else 0.0)))
    say("[3] workspace build, median of %d (Store.open + engine.workspace):" % len(t_build[sizes[0]]))
    for n in sizes:
        say("    %6d calls: %7.0f ms  (Store.open %.0f ms, engine.workspace %.0f ms)" % (n, med_ms(t_build[n]), med_ms(tb["open"][n]), med_ms(tb["workspace"][n])))

    say()
    say("[3] growth per 10x: median at the larger size / median at the smaller (in brackets, informational: the median of the"
        " same inquiry's paired ratio, run back to back)")
    say("    | %-16s | %s |" % ("", " | ".join("%22s" % ("%d -> %d" % (x, y)) for x, y in zip(sizes, sizes[1:]))))
    for name, xs in (("proposed call", r["call"]), ("prompt", r["prompt"]), ("workspace build", t_build)):
        g = growth(xs, sizes)
        say("    | %-16s | %s |" % (name, " | ".join("%11.2fx (%6.2fx)" % (x, paired(xs, a_, b_)) for a_, b_, x in g)))
        if name != "workspace build":
            for x, y, per10 in g:
                if per10 > TARGET_GROWTH:
                    failed.append("[3] %s grows %.1fx per 10x from %d to %d calls" % (name, per10, x, y))

    denied = {n: sum(v[1] for k, v in r["kinds"][n].items() if k == "covered") for n in sizes}
    covered = {n: r["kinds"][n].get("covered", [0])[0] for n in sizes}

    print("\n[4] PreToolUse hook work at %d calls, warm" % big, flush=True)
    h = bench_hook_warm(wss[big], projs[big], bench_paths(root), calls, a.hook_calls)
    hm = med_ms(h["times"])
    say("[4] PreToolUse hook, warm, %d prior calls: Deliveries.load + engine.handoff(enforce=True) + ujson reply, in-process" % big)
    say("    median %.1f ms, p90 %.1f ms, max %.1f ms over %d calls (%d denied; the chat holds 300 delivery keys)" % (
        hm, p90_ms(h["times"]), max(h["times"]) * 1000, len(h["times"]), h["denied"]))

    if a.hook_runs:
        print("\n[5] the real cold hook at %d calls" % big, flush=True)
        runs = bench_hook_cold(root, projs[big], calls, a.hook_runs)
        say("[5] bin/egg-hook codex, PreToolUse, a fresh process per call, %d prior calls (reference, no target):" % big)
        for kind, dt, decision in runs:
            say("    %-8s call: %.2f s wall, reply: %s" % (kind, dt, decision))
        say("    (in this process, [3] measured Store.open %.2f s + engine.workspace %.2f s at %d calls)" % (
            med_ms(tb["open"][big]) / 1000, med_ms(tb["workspace"][big]) / 1000, big))

    say()
    say("targets")
    for name, xs in (("proposed call", r["call"]), ("prompt", r["prompt"])):
        g = growth(xs, sizes)
        worst = max(x for _, _, x in g) if g else 0.0
        say("  %-44s %s" % ("%s growth per 10x at most %.0fx:" % (name, TARGET_GROWTH), ", ".join("%.2fx" % x for _, _, x in g) + (
            "  met" if worst <= TARGET_GROWTH else "  MISSED")))
    say("  %-44s %.1f ms  %s" % ("warm PreToolUse hook median under %.0f ms:" % TARGET_HOOK_MS, hm, "met" if hm < TARGET_HOOK_MS else "MISSED"))
    if hm >= TARGET_HOOK_MS:
        failed.append("[4] warm PreToolUse hook median %.0f ms at %d calls" % (hm, big))
    say("  %-44s %s" % ("covered calls denied (at least one per size):", ", ".join("%d/%d at %d" % (denied[n], covered[n], n) for n in sizes)))
    for n in sizes:
        if not denied[n]:
            failed.append("[1] no covered call was denied at %d calls" % n)
    given = {n: sum(1 for c in r["chars"][n] if c) for n in sizes}
    if given[big] * 2 < given[sizes[0]]:
        say("  note (no target): at %d calls only %d of %d prompts got a handoff (%d at %d calls)" % (
            big, given[big], len(prompts), given[sizes[0]], sizes[0]))

    if failed or a.profile:
        from eggshell.reuse import engine
        from eggshell.reuse.engine import Inquiry
        from eggshell.graph.turns import work_text

        # the slowest call and prompt at the largest size, by their first-pass times
        ci = max(range(len(calls)), key=lambda i: r["call_first"][big][i])
        pi = max(range(len(prompts)), key=lambda i: r["prompt_first"][big][i])
        slow_call = calls[ci][1]
        say()
        say("profile: the slowest proposed call at %d calls, %r (%.0f ms):" % (big, slow_call, r["call_first"][big][ci] * 1000))
        print(profile_summary(lambda: engine.handoff(wss[big], Inquiry(work_text("Bash", {"command": slow_call}), slow_call, enforce=True))), flush=True)
        say("profile: the slowest prompt at %d calls, %r (%.0f ms):" % (big, prompts[pi], r["prompt_first"][big][pi] * 1000))
        print(profile_summary(lambda: engine.handoff(wss[big], Inquiry(prompts[pi], prompts[pi]))), flush=True)
        say("profile: the warm hook at %d calls, all %d inquiry calls once:" % (big, len(calls)))
        cfg, paths = h["cfg"], bench_paths(root)
        print(profile_summary(lambda: [hook_work(wss[big], cfg, paths, h["session"], {"command": c}) for _, c in calls]), flush=True)

    say()
    say("whole benchmark: %.0f s" % (time.perf_counter() - t_start))
    if failed:
        say("targets missed: " + "; ".join(failed))
    gc.unfreeze()
    tmp.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
