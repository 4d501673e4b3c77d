"""Benchmark: how fast retrieval is, and where the time goes.

Five measurements, all against temporary data roots (never the user's):

1. Semantic ranking cost per query at 1k, 10k and 100k stored windows, against a bare
   numpy product of the same size (rows x 384 float32 @ 384). The ranking step is
   `SemanticIndex.scores` itself, warm (memo filled, cache loaded), with the query
   embedding served from a memo so only the ranking is timed; the window vectors are
   random unit vectors in a real `VectorCache`. Measured twice: with the same string
   objects every query (the in-process hook path) and with freshly built strings (what
   the egg-index child gets from decoding each request). Target: under 3x at 100k.
2. Embedding throughput of the real offline model (`Encoder`), short texts (~10 words)
   and record-sized windows (~250 tokens), with the default threads and with one.
3. Resident memory of a warm provider process holding 10k records (~30k windows): a
   child process that loads the model, answers queries with `Provider.rank`, and reports
   VmRSS / VmHWM from /proc/self/status.
4. Cold start to first answer: `bin/egg-index --mode hybrid` spawned through the real
   `ProviderClient`, its data root holding a cache already filled for the candidates,
   timed until the first `{"related":...}`; then warm queries on the same child.
5. The prompt path at 10k stored turns (realistic texts of a few hundred characters,
   pre-embedded): `Searcher.search` with the in-process semantic side (what the
   UserPromptSubmit hook runs) and `Provider.rank` in hybrid mode (egg-index). Target:
   median under 150 ms. When missed, a cProfile summary says where the time goes. Then the
   real UserPromptSubmit hook once over the
   same turns (`bin/egg-hook codex`, a fresh process per prompt as Codex runs it).

Record texts are built from the Python standard library's own source (prompts about its
functions, `rg`/`sed`/`pytest` commands, real code as tool output), so tokenizing and
BM25 see realistic text. Pre-embedding 10k records with the real model takes minutes on
a small machine, so by default a sample of windows is embedded for real and every other
window gets a vector near a real one (a query then passes the cosine threshold about as
often as with real vectors; vector values do not change the cost of a product).
`--embed-all` embeds everything for real through `Provider.index` instead, and `--keep
DIR` keeps (and on the next run reuses) the data roots.

Timings interleave the variants and report medians, so noise on a shared machine hits
every variant alike; ratios come from the same run. Exits 1 if a target is missed.

    python tests/bench/bench_retrieval.py [--sizes 1000,10000,100000] [--records 10000]
        [--reps 15] [--budget 6] [--sample 64] [--embed-all] [--keep DIR] [--hook-runs 1]
        [--profile] [--skip 2,3]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "lib"))

import numpy as np  # noqa: E402

TARGET_RATIO = 3.0  # semantic ranking / bare product at the largest size
TARGET_PROMPT_MS = 150.0  # median prompt-path query at --records stored turns
DIM = 384
QUERY = "where is the vector cache compacted and who removes orphan segments"

# -- realistic record texts -------------------------------------------------------------------------

_DEF = re.compile(r"^[ \t]*(?:def|class) (\w+)", re.M)
PROMPTS = [
    "where is {f} defined and who calls it?",
    "why does {f} in {m} raise {e} when the input is empty",
    "fix the failing test for {f} in {p}",
    "refactor {f} so it no longer reads the whole file into memory",
    "add type hints to {f} and make sure the tests in {m} still pass",
    "what does {f} return when the argument is None?",
    "the CI job fails in {p} after the last change to {f}, find out why",
    "rename {f} to something clearer across {m}",
]
ANSWERS = [
    "{f} is defined in {p} at line {n}; it is called from {g} and from the tests.",
    "The {e} comes from {f}: it indexes the first element without checking the length. I added a guard and a test.",
    "Fixed: {f} now handles the empty case, and `python -m pytest -k {f}` passes (12 passed).",
    "{f} returns None in that case because {g} swallows the {e}; I documented it.",
]
COMMANDS = ["rg -n 'def {f}' {p}", "sed -n {a},{b}p {p}", "python -m pytest -q -k {f}", "git log -L :{f}:{p}"]
ERRORS = ["ValueError", "KeyError", "TypeError", "IndexError", "OSError", "AttributeError", "UnicodeDecodeError"]
GENERIC_PROMPTS = [
    "the tests started failing after I upgraded the dependencies, what changed?",
    "how do we parse the config file and where are the defaults",
    "speed up the slow startup of the command line tool",
    "add logging when a network request times out",
]


def _corpus() -> list[tuple[str, list[str], list[tuple[str, int]]]]:
    """(relative path, lines, [(defined name, line index)]) for the stdlib's .py files, sorted."""
    std = sysconfig.get_paths()["stdlib"]
    out = []
    for root, dirs, names in os.walk(std):
        dirs[:] = sorted(d for d in dirs if d not in ("test", "tests", "idlelib", "site-packages", "__pycache__"))
        for n in sorted(names):
            if not n.endswith(".py"):
                continue
            try:
                with open(os.path.join(root, n), encoding="utf-8") as f:
                    src = f.read()
            except (OSError, UnicodeDecodeError):
                continue
            defs = [(m.group(1), src.count("\n", 0, m.start())) for m in _DEF.finditer(src)]
            if len(defs) >= 2:
                out.append((os.path.relpath(os.path.join(root, n), std), src.splitlines(), defs))
    if not out:
        raise SystemExit("bench_retrieval: no Python sources under %s to build record texts from" % std)
    return out


_CORPUS = None


def make_records(n: int, seed: int, tools: tuple[int, int], out_chars: tuple[int, int]) -> list[dict]:
    """n turn records (the egg-save input shape), deterministic for a seed."""
    global _CORPUS
    if _CORPUS is None:
        _CORPUS = _corpus()
    c = _CORPUS
    rng = random.Random(seed)
    recs = []
    for i in range(n):
        path, lines, defs = c[rng.randrange(len(c))]
        f, line = defs[rng.randrange(len(defs))]
        kw = dict(f=f, g=defs[rng.randrange(len(defs))][0], m=path[:-3].replace("/", "."), p=path, e=rng.choice(ERRORS), n=line + 1)
        calls = []
        for k in range(rng.randint(*tools)):
            want = rng.randint(*out_chars)
            a = min(len(lines) - 1, max(0, line - rng.randint(0, 3) + 40 * k))
            body, j, size = [], a, 0
            while j < len(lines) and size < want:
                body.append(("%s:%d:%s" % (path, j + 1, lines[j])) if j == a else lines[j])
                size += len(body[-1]) + 1
                j += 1
            cmd = rng.choice(COMMANDS).format(a=a + 1, b=j, **kw)
            calls.append({"name": "Bash", "id": "c%d-%d" % (i, k), "input": {"command": cmd}, "output": "\n".join(body)[:want] + "\n"})
        recs.append({
            "session": "bench-%d" % (i // 20), "turn": "turn-%d" % i, "cwd": "/src/project",
            "prompt": rng.choice(PROMPTS).format(**kw) + " (ticket %d)" % i,
            "tools": calls, "answer": rng.choice(ANSWERS).format(**kw),
        })
    return recs


def prompts_for(recs: list[dict], n: int, seed: int) -> list[str]:
    """Queries a user would type: about functions the records mention, and some generic ones."""
    rng = random.Random(seed)
    out = []
    for r in rng.sample(recs, n):
        f = re.search(r"'def (\w+)'|-k (\w+)|:(\w+):|(\w+) (?:is|in|so|to|and|return)", r["tools"][0]["input"]["command"] + " " + r["prompt"])
        name = next((g for g in (f.groups() if f else ()) if g), "main")
        out.append(rng.choice(["how does %s work", "who calls %s and with which arguments", "%s raises an error on empty input, why"]) % name)
    return out + GENERIC_PROMPTS


def record_text(r: dict) -> str:
    """A record's searchable text without a store: the rule of records.searchable_text."""
    from eggshell.graph.records import OUTPUT_CAP, RECORD_CAP

    parts = [r["prompt"], r["answer"]] + [x for c in r["tools"] for x in (c["input"]["command"], c["output"][:OUTPUT_CAP])]
    return "\n".join(p for p in parts if p)[:RECORD_CAP]


def build_store(path: str, recs: list[dict]) -> None:
    """Write a store of these turns in one compacted write (how it got there is not measured)."""
    from eggshell.graph import eggfile as ef
    from eggshell.core.identity import content_hex
    from eggshell.graph.store import Store, write_compact
    from eggshell.graph.turns import compile_turn, parse_turn
    from eggshell.core.values import walk

    g = Store(path).graph
    g.header = ef.Header("bench-authority", ef.VERSION, "2026-01-01T00:00:00.000000Z")
    for i, r in enumerate(recs):
        c = compile_turn(parse_turn(r))
        for root in c.roots:
            for node in walk(root):
                g.nodes[content_hex(node)] = node
        cm = ef.Commit("", "2026-01-01T00:%02d:%02d.%06dZ" % (i // 60_000_000, i // 1_000_000 % 60, i % 1_000_000), r["session"], r["turn"],
                       tuple(content_hex(x) for x in c.roots), ())
        g.commits[ef.commit_id(cm)] = ef.Commit(ef.commit_id(cm), cm.time, cm.session, cm.turn, cm.roots, cm.unions)
    write_compact(path, g.header, [g])


# -- helpers ----------------------------------------------------------------------------------------


def med_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000.0


def p90_ms(xs: list[float]) -> float:
    return sorted(xs)[min(len(xs) - 1, int(0.9 * len(xs)))] * 1000.0


def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def fresh(texts: list[str]) -> list[str]:
    """Equal strings as new objects, hash not yet computed: what decoding a request yields."""
    return [(t + " ")[:-1] for t in texts]


def proc_status() -> dict[str, int]:
    """VmRSS, VmHWM (kB) of this process."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def profile_summary(fn, n_lines: int = 14) -> str:
    """Where fn's time goes: the functions with the most self time, and eggshell's cumulative times."""
    pr = cProfile.Profile()
    pr.enable()
    fn()
    pr.disable()
    st = pstats.Stats(pr)
    rows = []
    for (file, line, name), (cc, nc, tt, ct, _callers) in st.stats.items():
        short = ("lib/eggshell/" + file.split("/lib/eggshell/", 1)[1]) if "/lib/eggshell/" in file else os.path.basename(file)
        rows.append((tt, ct, nc, "%s:%d(%s)" % (short, line, name), "/lib/eggshell/" in file))
    total = st.total_tt
    lines = ["    total %.0f ms under cProfile; by self time:" % (total * 1000)]
    for tt, ct, nc, where, _ in sorted(rows, reverse=True)[:n_lines]:
        lines.append("      %8.1f ms self %8.1f ms cum %9d calls  %s" % (tt * 1000, ct * 1000, nc, where))
    lines.append("    eggshell functions by cumulative time:")
    for tt, ct, nc, where, _ in sorted((r for r in rows if r[4]), key=lambda r: -r[1])[:n_lines]:
        lines.append("      %8.1f ms cum %8.1f ms self %9d calls  %s" % (ct * 1000, tt * 1000, nc, where))
    return "\n".join(lines)


class WarmQuery:
    """An Encoder stand-in: the real model for anything new, memos for query vectors and window cuts.

    With it `SemanticIndex.scores` runs its real code, but the query embedding (timed on its
    own) and the tokenizing of synthetic record texts (which a warm index never does) are free.
    """

    def __init__(self, enc, windows: dict | None = None):
        self.enc = enc
        self.model_id = enc.model_id
        self.dim = enc.dim
        self._windows = windows or {}
        self._vecs: dict[tuple, np.ndarray] = {}

    def load(self) -> None:
        self.enc.load()

    def windows(self, text: str):
        w = self._windows.get(text)
        return w if w is not None else self.enc.windows(text)

    def embed(self, texts):
        key = tuple(texts)
        v = self._vecs.get(key)
        if v is None:
            v = self._vecs[key] = self.enc.embed(list(texts))
        return v


# -- 1. semantic ranking vs a bare product ---------------------------------------------------------


def bench_ratio(enc, sizes: list[int], reps: int, root: str, per_record: int = 3) -> dict:
    from eggshell.search.embed import Window
    from eggshell.search.semantic import SemanticIndex
    from eggshell.search.vectors import VectorCache

    rng = np.random.default_rng(1)
    filler = ("x" * 60 + " ") * 40  # ~2.4k characters: a record of three windows
    setups = {}
    for n in sizes:
        t0 = time.perf_counter()
        d = os.path.join(root, "ratio-%d" % n)
        wins = ["synthetic window %d of the speed benchmark" % i for i in range(n)]
        writer = VectorCache(d, enc.model_id, enc.dim)
        for i in range(0, n, 50_000):
            writer.put(wins[i : i + 50_000], unit_rows(rng, len(wins[i : i + 50_000])))
        del writer
        texts = ["record %d %s" % (j, filler) for j in range((n + per_record - 1) // per_record)]
        cuts = {t: [Window(0, 0, w) for w in wins[j * per_record : (j + 1) * per_record]] for j, t in enumerate(texts)}
        idx = SemanticIndex(WarmQuery(enc, cuts), d)
        idx.scores(QUERY, texts)  # warm: loads the cache, fills the memo, embeds the query once
        matrix = idx.cache.matrix()
        assert len(matrix) == n, (len(matrix), n)
        q = idx.encoder.embed([w.text for w in enc.windows(QUERY)])[0].copy()
        setups[n] = (idx, texts, matrix, q)
        print("  set up %7d windows / %6d records in %.1f s" % (n, len(texts), time.perf_counter() - t0), flush=True)
    import gc

    gc.collect()
    gc.freeze()  # the big memo dicts are long-lived: keep GC passes over them out of the timings
    t_same: dict[int, list[float]] = {n: [] for n in sizes}
    t_fresh: dict[int, list[float]] = {n: [] for n in sizes}
    t_bare: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(reps):
        for n in sizes:  # interleaved: the machine's noise hits every size and variant alike
            idx, texts, matrix, q = setups[n]
            t = time.perf_counter()
            matrix @ q
            t_bare[n].append(time.perf_counter() - t)
            t = time.perf_counter()
            idx.scores(QUERY, texts)
            t_same[n].append(time.perf_counter() - t)
            ft = fresh(texts)
            t = time.perf_counter()
            idx.scores(QUERY, ft)
            t_fresh[n].append(time.perf_counter() - t)
    # Where the time goes at the largest size: the steps of SemanticIndex.scores, one by one.
    n = sizes[-1]
    idx, texts, matrix, q = setups[n]
    qv = q[None, :]
    steps: dict[str, list[float]] = {}

    def step(name, fn):
        t = time.perf_counter()
        r = fn()
        steps.setdefault(name, []).append(time.perf_counter() - t)
        return r

    for _ in range(reps):
        step("query windows (tokenize the query)", lambda: enc.windows(QUERY))
        rows = step("ensure: memo lookups, one per record", lambda: idx.ensure(texts))
        lengths = step("window counts (np.fromiter over records)", lambda: np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows)))
        flat = step("np.concatenate of per-record row arrays", lambda: np.concatenate(rows))
        prod = step("matrix @ qv.T  (N x 1 result)", lambda: matrix @ qv.T)
        mx = step(".max(axis=1) over query windows", lambda: prod.max(axis=1))
        sims = step("[flat] gather", lambda: mx[flat])
        starts = step("starts (cumsum)", lambda: np.concatenate(([0], np.cumsum(lengths)[:-1]))[lengths > 0])
        step("np.maximum.reduceat per record", lambda: np.maximum.reduceat(sims, starts))
        step("bare matrix @ q", lambda: matrix @ q)
    gc.unfreeze()
    return {"same": t_same, "fresh": t_fresh, "bare": t_bare, "steps": steps, "records": {n: len(setups[n][1]) for n in sizes}}


# -- 2. embedding throughput ----------------------------------------------------------------------


def bench_throughput(short: list[str], windows: list[str], reps: int) -> dict:
    from eggshell.search.embed import Encoder

    encs = {"default threads": Encoder(), "threads=1": Encoder(threads=1)}
    for e in encs.values():
        e.load()
    res: dict[tuple[str, str], list[float]] = {}
    for _ in range(reps):
        for name, e in encs.items():
            for kind, texts in (("short", short), ("record", windows)):
                t = time.perf_counter()
                e.embed(texts)
                res.setdefault((name, kind), []).append(len(texts) / (time.perf_counter() - t))
    q: list[float] = []
    e = encs["default threads"]
    for _ in range(max(reps * 5, 15)):
        t = time.perf_counter()
        e.embed([w.text for w in e.windows(QUERY)])
        q.append(time.perf_counter() - t)
    return {"rates": res, "query_ms": med_ms(q), "query_p90_ms": p90_ms(q)}


# -- the 10k-turn data root (used by 4 and 5) ------------------------------------------------------


def fill_cache(enc, data_root: str, texts: list[str], sample: int, rng: np.random.Generator) -> dict:
    """Put a vector for every window of texts into data_root's cache, as egg-index would.

    `sample` windows are embedded for real; every other window gets a real vector plus noise.
    Written in batches of semantic.EMBED_BATCH, one segment each, as SemanticIndex.ensure does.
    """
    from eggshell.search.semantic import EMBED_BATCH, MAX_WINDOWS
    from eggshell.search.vectors import VectorCache, vectors_root

    t0 = time.perf_counter()
    wins = list(dict.fromkeys(w.text for t in texts for w in enc.windows(t)[:MAX_WINDOWS]))
    t1 = time.perf_counter()
    picks = sorted(random.Random(5).sample(range(len(wins)), min(sample, len(wins))))
    base = enc.embed([wins[i] for i in picks])
    t2 = time.perf_counter()
    noise = rng.standard_normal((len(wins), DIM)).astype(np.float32) * np.float32(0.35 / np.sqrt(DIM))
    vecs = base[np.arange(len(wins)) % len(base)] + noise
    vecs[picks] = base
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    cache = VectorCache(vectors_root(data_root), enc.model_id, enc.dim)
    for i in range(0, len(wins), EMBED_BATCH):
        cache.put(wins[i : i + EMBED_BATCH], vecs[i : i + EMBED_BATCH])
    return {"windows": len(wins), "tokenize_s": t1 - t0, "embed_s": t2 - t1, "sample": len(picks), "put_s": time.perf_counter() - t2}


def prepare_turns(root: str, n: int, sample: int, embed_all: bool, enc) -> dict:
    """A project store of n turns and a data root whose cache covers their texts."""
    from eggshell.search.local import Provider
    from eggshell.search.rank import Settings
    from eggshell.search.searcher import Searcher
    from eggshell.graph.store import Store

    data_root = os.path.join(root, "data-%d" % n)
    store = os.path.join(root, "work-%d.egg" % n)
    recs = make_records(n, seed=11, tools=(1, 1), out_chars=(250, 700))
    info: dict = {"data_root": data_root, "store": store, "records": recs}
    if not os.path.exists(store):
        t = time.perf_counter()
        build_store(store, recs)
        info["build_s"] = time.perf_counter() - t
    t = time.perf_counter()
    searcher = Searcher([Store.open(store)])
    searcher._refresh()  # noqa: SLF001 - the lexical index, built once as a warm Searcher has it
    info["load_s"] = time.perf_counter() - t
    texts = [c["text"] for c in searcher.candidates]
    info["texts"] = texts
    info["chars"] = statistics.median(len(x) for x in texts)
    done = os.path.join(data_root, "bench-filled")
    if os.path.exists(done):
        with open(done) as f:
            info["fill"] = json.load(f)
        info["fill"]["reused"] = True
        return info
    if embed_all:
        p = Provider(Settings(mode="hybrid"), data_root)
        t = time.perf_counter()
        p.index([{"id": str(i), "text": x} for i, x in enumerate(texts)],
                progress=lambda a, b: print("\r  embedding windows %d/%d" % (a, b), end="", flush=True))
        print()
        wins = len(p._index().cache)  # noqa: SLF001
        info["fill"] = {"windows": wins, "embed_s": time.perf_counter() - t, "sample": wins, "real": True}
    else:
        info["fill"] = fill_cache(enc, data_root, texts, sample, np.random.default_rng(2))
    with open(done, "w") as f:
        json.dump(info["fill"], f)
    return info


# -- 3. memory of a warm provider (a child process) -----------------------------------------------


def rss_child(data_root: str) -> int:
    """Run in a fresh process: a hybrid Provider answering queries over the records in
    data_root/texts.json (decoded as egg-index decodes a request); print JSON."""
    from eggshell.search.local import Provider
    from eggshell.search.rank import Settings

    s0 = proc_status()
    with open(os.path.join(data_root, "texts.json"), encoding="utf-8") as f:
        texts, queries, new = json.load(f)
    p = Provider(Settings(mode="hybrid"), data_root)
    s1 = proc_status()
    p._index().encoder.load()  # noqa: SLF001
    s2 = proc_status()
    times = []
    for q in queries:
        t = time.perf_counter()
        r = p.rank(q, texts)
        times.append((time.perf_counter() - t, r.timings_ms))
    s3 = proc_status()
    before = len(p._index().cache)  # noqa: SLF001
    # An index request for turns saved since (as egg-index gets them): new windows are embedded.
    p.index([{"id": str(i), "text": t} for i, t in enumerate(new)])
    s4 = proc_status()
    idx = p._index()  # noqa: SLF001
    print(json.dumps({"start": s0, "texts": s1, "model": s2, "warm": s3, "indexed": s4, "new_windows": len(idx.cache) - before, "windows": before, "matrix_mb": idx.cache.matrix().nbytes / 1e6,
                      "text_mb": sum(len(t) for t in texts) / 1e6, "first_s": times[0][0], "first_ms": times[0][1],
                      "warm_ms": [x[1] for x in times[1:]], "queries": len(queries)}))
    return 0


def bench_rss(enc, root: str, n: int) -> dict:
    data_root = os.path.join(root, "data-rss-%d" % n)
    fill = None
    if not os.path.exists(os.path.join(data_root, "bench-filled")):
        recs = make_records(n, seed=13, tools=(2, 3), out_chars=(700, 1000))
        texts = [record_text(r) for r in recs]
        fill = fill_cache(enc, data_root, texts, 64, np.random.default_rng(3))
        with open(os.path.join(data_root, "texts.json"), "w", encoding="utf-8") as f:
            new = [record_text(r) for r in make_records(12, seed=29, tools=(2, 3), out_chars=(700, 1000))]
            json.dump([texts, [QUERY] + prompts_for(recs, 1, 3)[:1], new], f)
        with open(os.path.join(data_root, "bench-filled"), "w") as f:
            json.dump(fill, f)
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--rss-child", data_root],
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit("bench_retrieval: the memory child failed:\n%s" % p.stderr[-3000:])
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["fill"] = fill
    return out


# -- 4. cold start of egg-index -------------------------------------------------------------------


def bench_cold(data_root: str, texts: list[str], queries: list[str], runs: int, env: dict) -> dict:
    """Spawn egg-index through the client egg-query uses; time the first answer, then warm ones.

    --trace makes the child record its own timings (lexical, semantic, total), so the rest of
    the first answer's time is start-up: the interpreter, imports, JSON both ways."""
    from eggshell.search.provider import ProviderClient

    trace = os.path.join(data_root, "bench-trace.jsonl")
    argv = [os.path.join(REPO, "bin", "egg-index"), "--mode", "hybrid", "--trace", trace]
    cands_all = [{"id": "t%d" % i, "text": t} for i, t in enumerate(texts)]
    variants = {"%d candidates" % len(cands_all): cands_all, "100 candidates": cands_all[:100]}
    env = dict(env, EGGSHELL_DATA_ROOT=data_root)
    cold: dict[str, list[float]] = {k: [] for k in variants}
    inside: dict[str, list[dict]] = {k: [] for k in variants}
    warm: list[float] = []
    errors: list[str] = []
    for r in range(runs):
        for name, cands in variants.items():
            if os.path.exists(trace):
                os.unlink(trace)
            client = ProviderClient(argv, deadline_s=300, env=env, log=errors.append)
            try:
                res = client.query(queries[r % len(queries)], cands, 8)
                if res.related is None:
                    raise SystemExit("bench_retrieval: egg-index failed: %s\n%s" % (res.error, "\n".join(errors[-20:])))
                cold[name].append(res.elapsed_ms / 1000)
                with open(trace, encoding="utf-8") as f:
                    inside[name].append(json.loads(f.readline())["timings_ms"])
                if r == runs - 1 and cands is cands_all:
                    for q in queries[1:3]:
                        res = client.query(q, cands, 8)
                        warm.append(res.elapsed_ms / 1000)
            finally:
                client.close()
    return {"cold": cold, "inside": inside, "warm": warm, "errors": errors}


# -- 5. the prompt path -----------------------------------------------------------------------------


def bench_prompt(info: dict, queries: list[str], budget_s: float, max_n: int) -> dict:
    from eggshell.config import Config
    from eggshell.search.local import Provider
    from eggshell.search.rank import Settings
    from eggshell.search.matcher import in_process
    from eggshell.search.searcher import Searcher, semantic_depth
    from eggshell.graph.store import Store

    cfg = Config()
    logs: list[str] = []
    sem = in_process(cfg, info["data_root"], semantic_depth(cfg.top_k), logs.append)
    sem_t: list[float] = []

    def timed_semantic(text, candidates, k):
        t = time.perf_counter()
        r = sem(text, candidates, k)
        sem_t.append(time.perf_counter() - t)
        return r

    searcher = Searcher([Store.open(info["store"])], cfg.mode, timed_semantic)
    provider = Provider(Settings(mode="hybrid"), info["data_root"], logs.append)
    texts = info["texts"]
    # Warm both: the first query loads the model and the cache and fills the memo.
    t = time.perf_counter()
    searcher.search(queries[0], cfg.top_k, cfg.min_coverage)
    first_search = time.perf_counter() - t
    t = time.perf_counter()
    provider.rank(queries[0], texts)
    first_rank = time.perf_counter() - t
    sem_t.clear()
    t_search: list[float] = []
    t_rank: list[float] = []
    parts: dict[str, list[float]] = {}
    passed: list[int] = []
    hits: list[int] = []
    start = time.perf_counter()
    i = 0
    while i < max_n and (i < 3 or time.perf_counter() - start < budget_s):
        q = queries[i % len(queries)]
        t = time.perf_counter()
        h = searcher.search(q, cfg.top_k, cfg.min_coverage)
        t_search.append(time.perf_counter() - t)
        hits.append(len(h))
        t = time.perf_counter()
        r = provider.rank(q, texts)
        t_rank.append(time.perf_counter() - t)
        for k, v in r.timings_ms.items():
            parts.setdefault(k, []).append(v / 1000)
        passed.append(len(r.semantic))
        i += 1
    if r.error or logs:
        print("  provider reported: %s" % (r.error or logs[-1]))
    semantic_side = list(sem_t)
    return {"first_search": first_search, "first_rank": first_rank, "search": t_search, "rank": t_rank, "semantic_side": semantic_side,
            "parts": parts, "passed": statistics.median(passed), "hits": statistics.median(hits),
            "profile": lambda: searcher.search(queries[1], cfg.top_k, cfg.min_coverage)}


def bench_hook(root: str, info: dict, queries: list[str], runs: int, env: dict) -> dict:
    """The real UserPromptSubmit hook: `bin/egg-hook codex`, a fresh process per prompt as Codex
    runs it, over a project whose store holds the same turns; wall time and the trace's timings."""
    import shutil

    proj = os.path.join(root, "proj-%d" % len(info["texts"]))
    os.makedirs(os.path.join(proj, ".eggs"), exist_ok=True)
    if not os.path.exists(os.path.join(proj, ".eggs", "work.egg")):
        shutil.copyfile(info["store"], os.path.join(proj, ".eggs", "work.egg"))
    with open(os.path.join(proj, ".eggshell.toml"), "w") as f:
        f.write('egg = ".eggs/work.egg"\n')
    trace = os.path.join(info["data_root"], "semantic", "matcher-trace.jsonl")
    env = dict(env, EGGSHELL_DATA_ROOT=info["data_root"])
    walls, inside = [], []
    for r in range(runs):
        payload = {"cwd": proj, "model": "m", "permission_mode": "bypassPermissions", "transcript_path": "/dev/null",
                   "session_id": "bench-hook-%d" % r, "turn_id": "bench-turn-%d" % r, "hook_event_name": "UserPromptSubmit",
                   "prompt": queries[r % len(queries)]}
        t = time.perf_counter()
        p = subprocess.run([os.path.join(REPO, "bin", "egg-hook"), "codex"], input=json.dumps(payload), capture_output=True,
                           text=True, env=env, timeout=600, cwd=proj)
        walls.append(time.perf_counter() - t)
        if p.returncode != 0 or "hookSpecificOutput" not in p.stdout:
            raise SystemExit("bench_retrieval: egg-hook gave no handoff: rc=%s out=%.300r err=%.2000r" % (p.returncode, p.stdout, p.stderr))
        with open(trace, encoding="utf-8") as f:
            inside.append(json.loads(f.readlines()[-1])["timings_ms"])
    return {"wall": walls, "inside": inside}


# -- main -------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000", help="stored windows for the ratio (default %(default)s)")
    ap.add_argument("--records", type=int, default=10_000, help="stored turns for the prompt path and memory (default %(default)s)")
    ap.add_argument("--reps", type=int, default=15, help="repetitions of each ratio measurement (default %(default)s)")
    ap.add_argument("--budget", type=float, default=6.0, help="seconds per prompt-path measurement, at least 3 queries (default %(default)s)")
    ap.add_argument("--sample", type=int, default=64, help="windows embedded for real when not --embed-all (default %(default)s)")
    ap.add_argument("--embed-all", action="store_true", help="embed every record for real (slow: minutes)")
    ap.add_argument("--keep", metavar="DIR", help="keep the data roots in DIR and reuse them on the next run")
    ap.add_argument("--hook-runs", type=int, default=1, help="runs of the real UserPromptSubmit hook in [5], 0 to skip (default %(default)s)")
    ap.add_argument("--profile", action="store_true", help="print the prompt-path profile even when the target is met")
    ap.add_argument("--skip", default="", help="comma-separated measurements to skip (1-5)")
    ap.add_argument("--rss-child", metavar="DATA_ROOT", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rss_child:
        return rss_child(a.rss_child)
    skip = {int(x) for x in a.skip.split(",") if x}
    sizes = [int(x) for x in a.sizes.split(",")]
    t_start = time.perf_counter()
    tmp = tempfile.TemporaryDirectory(prefix="eggshell-bench-")
    root = os.path.abspath(a.keep) if a.keep else tmp.name
    os.makedirs(root, exist_ok=True)
    # Nothing may touch the user's data or caches: every location points into the run's directory.
    os.environ["EGGSHELL_DATA_ROOT"] = os.path.join(root, "data-default")
    for var, sub in (("XDG_CACHE_HOME", "xdg-cache"), ("HF_HOME", "hf"), ("FASTEMBED_CACHE_PATH", "fastembed")):
        os.environ[var] = os.path.join(tmp.name, sub)
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "lib"))

    from eggshell.search.embed import Encoder

    enc = Encoder()
    t = time.perf_counter()
    enc.load()
    print("model %s, %d dimensions, loaded in %.2f s; %d CPUs; data under %s" % (enc.model_id, enc.dim, time.perf_counter() - t, os.cpu_count() or 0, root), flush=True)
    failed: list[str] = []
    report: list[str] = []

    def say(line: str = "") -> None:
        print(line, flush=True)
        report.append(line)

    if 1 not in skip:
        print("\n[1] semantic ranking per query vs a bare product (rows x %d float32 @ %d)" % (DIM, DIM), flush=True)
        r = bench_ratio(enc, sizes, a.reps, root)
        say("[1] SemanticIndex.scores, warm, query embedding excluded; median of %d interleaved runs" % a.reps)
        say("    %9s %8s %12s %14s %7s %16s %7s" % ("windows", "records", "bare (ms)", "same str (ms)", "ratio", "fresh str (ms)", "ratio"))
        for n in sizes:
            b, s, f = med_ms(r["bare"][n]), med_ms(r["same"][n]), med_ms(r["fresh"][n])
            say("    %9d %8d %12.3f %14.3f %6.1fx %16.3f %6.1fx" % (n, r["records"][n], b, s, s / b, f, f / b))
        n = sizes[-1]
        ratio = med_ms(r["same"][n]) / med_ms(r["bare"][n])
        say("    target: under %.0fx at %d windows (in-process hook path): %.1fx %s" % (TARGET_RATIO, n, ratio, "met" if ratio < TARGET_RATIO else "MISSED"))
        if ratio >= TARGET_RATIO:
            failed.append("[1] ratio %.1fx at %d windows" % (ratio, n))
        say("    steps of scores() at %d windows (medians; sum differs from the total by call overhead):" % n)
        for name, xs in r["steps"].items():
            say("      %-44s %8.3f ms" % (name, med_ms(xs)))

    if 2 not in skip:
        print("\n[2] embedding throughput", flush=True)
        recs = make_records(200, seed=17, tools=(2, 2), out_chars=(900, 1000))
        short = [" ".join(r["prompt"].split()[:10]) for r in recs[:128]]
        wins = [w.text for r in recs for w in enc.windows(r["tools"][0]["output"] + r["tools"][1]["output"]) if len(enc._tok.encode(w.text, add_special_tokens=False).ids) >= 200][:16]  # noqa: SLF001
        toks = statistics.mean(len(enc._tok.encode(w, add_special_tokens=False).ids) for w in wins)  # noqa: SLF001
        stoks = statistics.mean(len(enc._tok.encode(w, add_special_tokens=False).ids) for w in short)  # noqa: SLF001
        r = bench_throughput(short, wins, 3)
        say("[2] Encoder.embed throughput, texts per second, median of 3 interleaved runs")
        say("    %-18s %22s %26s" % ("", "short (%d x %.0f tokens)" % (len(short), stoks), "record-sized (%d x %.0f tokens)" % (len(wins), toks)))
        for name in ("default threads", "threads=1"):
            say("    %-18s %22.0f %26.1f" % (name, statistics.median(r["rates"][(name, "short")]), statistics.median(r["rates"][(name, "record")])))
        say("    one query (%d words), windows + embed, default threads: median %.1f ms, p90 %.1f ms" % (len(QUERY.split()), r["query_ms"], r["query_p90_ms"]))

    need_turns = not ({4, 5} <= skip)
    info = None
    if need_turns:
        print("\n[setup] %d stored turns with a filled vector cache" % a.records, flush=True)
        info = prepare_turns(root, a.records, a.sample, a.embed_all, enc)
        f = info["fill"]
        print("  store %s; searchable text median %d chars; %d windows; %s" % (
            "built in %.1f s" % info["build_s"] if "build_s" in info else "reused", info["chars"], f["windows"],
            "reused" if f.get("reused") else ("all embedded for real in %.1f s" % f["embed_s"] if f.get("real") else
                                              "windows cut in %.1f s, %d embedded for real in %.1f s, the rest derived, written in %.1f s" % (f["tokenize_s"], f["sample"], f["embed_s"], f["put_s"]))), flush=True)
        print("  Store.open + Searcher index build (lexical): %.1f s" % info["load_s"], flush=True)
        queries = prompts_for(info["records"], 8, 19)

    if 5 not in skip:
        print("\n[5] prompt path at %d stored turns" % a.records, flush=True)
        r = bench_prompt(info, queries, a.budget, 3 * len(queries))
        say("[5] prompt path, warm, %d stored turns (searchable text median %d chars, %d windows, %s)" % (
            a.records, info["chars"], info["fill"]["windows"], "all embedded for real" if info["fill"].get("real") else "vectors derived from %d real embeddings" % info["fill"]["sample"]))
        say("    first query (loads model and cache, fills the memo): Searcher.search %.2f s, Provider.rank %.2f s" % (r["first_search"], r["first_rank"]))
        ms, mr = med_ms(r["search"]), med_ms(r["rank"])
        say("    Searcher.search, in-process semantic side (hook path): median %7.1f ms  p90 %7.1f ms  (%d queries; semantic side %.1f ms of it)" % (
            ms, p90_ms(r["search"]), len(r["search"]), med_ms(r["semantic_side"])))
        say("    Provider.rank, hybrid (egg-index):                      median %7.1f ms  p90 %7.1f ms  (%d queries)" % (mr, p90_ms(r["rank"]), len(r["rank"])))
        say("      its parts: " + ", ".join("%s %.1f ms" % (k, med_ms(v)) for k, v in r["parts"].items()))
        say("      semantic matches at or above the threshold per query: median %d; hits returned: median %d" % (r["passed"], r["hits"]))
        worst = max(ms, mr)
        say("    target: median under %.0f ms: %s" % (TARGET_PROMPT_MS, "met" if worst < TARGET_PROMPT_MS else "MISSED (%.0fx over)" % (worst / TARGET_PROMPT_MS)))
        if worst >= TARGET_PROMPT_MS:
            failed.append("[5] prompt path median %.0f ms (Searcher.search %.0f ms, Provider.rank %.0f ms)" % (worst, ms, mr))
        if worst >= TARGET_PROMPT_MS or a.profile:
            say("    profile of one Searcher.search (its semantic side is a Provider.rank, so this covers both):")
            for line in profile_summary(r["profile"]).splitlines():
                say(line)

    if 5 not in skip and a.hook_runs:
        print("\n[5] the real hook", flush=True)
        r = bench_hook(root, info, queries, a.hook_runs, env)
        ins = {k: statistics.median(t[k] for t in r["inside"]) for k in r["inside"][0]}
        say("    the real UserPromptSubmit hook (bin/egg-hook codex: a fresh process per prompt, so nothing is warm), %d stored turns:" % a.records)
        say("      wall median %.2f s over %d run%s; its trace: %s (the rest is start-up, Store.open, handoff)" % (
            statistics.median(r["wall"]), len(r["wall"]), "" if len(r["wall"]) == 1 else "s", ", ".join("%s %.2f s" % (k, v / 1000) for k, v in ins.items())))

    if 4 not in skip:
        print("\n[4] cold start of egg-index to the first answer", flush=True)
        r = bench_cold(info["data_root"], info["texts"], queries, 3, env)
        say("[4] bin/egg-index --mode hybrid, spawned by ProviderClient, cache pre-filled; median of %d runs" % len(next(iter(r["cold"].values()))))
        for name, xs in r["cold"].items():
            ins = {k: statistics.median(t[k] for t in r["inside"][name]) for k in r["inside"][name][0]}
            say("    cold start to first answer, %-18s %6.2f s  (in the child: lexical %.2f s, semantic %.2f s incl. model and cache load;"
                " start-up and JSON %.2f s)" % (name + ":", statistics.median(xs), ins["lexical"] / 1000, ins["semantic"] / 1000,
                                                 statistics.median(xs) - ins["total"] / 1000))
        if r["warm"]:
            say("    then warm queries on the same child, %d candidates: median %.0f ms (%d queries, JSON both ways included)" % (
                len(info["texts"]), med_ms(r["warm"]), len(r["warm"])))

    if 3 not in skip:
        print("\n[3] resident memory of a warm provider", flush=True)
        r = bench_rss(enc, root, a.records)
        mb = lambda kb: kb / 1024  # noqa: E731
        say("[3] a fresh process: hybrid Provider over %d records / %d windows (a vector matrix of %.1f MB, %.1f MB of record text)" % (
            a.records, r["windows"], r["matrix_mb"], r["text_mb"]))
        say("    VmRSS after imports %.0f MB; after decoding the record texts %.0f MB; after loading the model %.0f MB;" % (
            mb(r["start"]["VmRSS"]), mb(r["texts"]["VmRSS"]), mb(r["model"]["VmRSS"])))
        say("    warm, after %d queries, %.0f MB (peak %.0f MB); after an index request embedding %d new windows %.0f MB (peak %.0f MB)" % (
            r["queries"], mb(r["warm"]["VmRSS"]), mb(r["warm"]["VmHWM"]), r["new_windows"], mb(r["indexed"]["VmRSS"]), mb(r["indexed"]["VmHWM"])))
        say("    first query there (reads the cache, cuts every record into windows): %.2f s (%s)" % (
            r["first_s"], ", ".join("%s %.0f ms" % kv for kv in r["first_ms"].items())))
        say("    then Provider.rank at %d windows: %s" % (r["windows"], "; ".join(", ".join("%s %.0f ms" % kv for kv in x.items()) for x in r["warm_ms"])))

    say()
    say("whole benchmark: %.0f s" % (time.perf_counter() - t_start))
    if failed:
        say("targets missed: " + "; ".join(failed))
    tmp.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
