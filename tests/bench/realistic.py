"""Realistic turns for the scale benchmarks, and a store of N of them built quickly.

A turn is what a coding agent records: a question about the project, two or three tool
calls (a search with a dozen matches, a file read of 40 to 80 lines of source, a test run
with its report), each output a few hundred bytes to a few KB of text that looks like the
real thing and differs from turn to turn, and an answer of a few sentences. The calls read
a real `src/` of MODULES files in the project, and each carries the fingerprint its
PostToolUse hook would have taken, so a PreToolUse over a covered call really checks it.

`build(path, n, data_root, proj)` writes n such turns the way compaction writes a store (one
write, not n fsyncs: 100,000 turns in minutes instead of hours) and vouches for every commit
in the data root's trust ledger, as the hooks would have.
"""

from __future__ import annotations

import os
import random
import time

from eggshell.core.identity import content_hex
from eggshell.core.values import walk
from eggshell.graph import eggfile as ef
from eggshell.graph import trust
from eggshell.graph.store import Graph, write_compact
from eggshell.graph.turns import compile_turn, parse_turn
from eggshell.reuse import fingerprint

MODULES = 200
_WORDS = ("config", "parser", "header", "session", "cache", "token", "render", "index", "query", "commit", "store",
          "journal", "window", "budget", "handler", "client", "server", "socket", "record", "schema", "loader",
          "plugin", "retry", "timeout", "encode", "decode", "stream", "buffer", "offset", "digest", "ledger", "trust",
          "profile", "merge", "union", "forget", "snapshot", "vector", "matrix", "score", "rank", "filter")
_VERBS = ("parse", "load", "build", "check", "apply", "read", "write", "flush", "open", "close", "merge", "split", "resolve")
_ASKS = ("why does {t} fail after the change to {m}?", "where is {f} defined and who calls it?",
         "what does {f} do with an empty {w}?", "fix the {w} bug in {m}: {t} is red",
         "is {f} still used anywhere, and can {w} be removed?", "how does {m} handle a {w} timeout?")


def _ident(r: random.Random) -> str:
    return "%s_%s" % (r.choice(_VERBS), r.choice(_WORDS))


def module(m: int) -> str:
    return "src/%s/%s_%d.py" % (_WORDS[m % len(_WORDS)], _WORDS[(m * 7) % len(_WORDS)], m)


def source(m: int) -> str:
    """The text of module m (what a read of it shows)."""
    r = random.Random(m)
    lines = ['"""The %s of %s."""' % (_WORDS[m % len(_WORDS)], _WORDS[(m * 3) % len(_WORDS)]), "", "import os", ""]
    while len(lines) < 80:
        f = _ident(r)
        lines += ["def %s(%s, %s=None):" % (f, r.choice(_WORDS), r.choice(_WORDS)),
                  "    if %s is None:" % r.choice(_WORDS),
                  "        return %s(%s)" % (_ident(r), r.choice(_WORDS)),
                  "    %s = %s.%s(%d)" % (r.choice(_WORDS), r.choice(_WORDS), _ident(r), r.randint(0, 999)),
                  "    return %s" % r.choice(_WORDS), ""]
    return "\n".join(lines[:80]) + "\n"


def write_sources(proj: str) -> None:
    for m in range(MODULES):
        p = os.path.join(proj, module(m))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(source(m))
    time.sleep(fingerprint.RACY_NS / 1e9 + 0.1)  # older than the racy window, as files a chat reads usually are


def record(i: int, cwd: str = ".") -> dict:
    """Turn i: a prompt, two or three calls with real-looking output, an answer."""
    r = random.Random(i * 7919 + 17)
    m = r.randrange(MODULES)
    f, w = _ident(r), r.choice(_WORDS)
    t = "test_%s_%d" % (f, r.randrange(50))
    prompt = r.choice(_ASKS).format(t=t, m=module(m), f=f, w=w)
    hits = "".join("%s:%d:    %s = %s(%s)  # %s\n" % (module(r.randrange(MODULES)), r.randint(1, 400), r.choice(_WORDS), f,
                                                      r.choice(_WORDS), r.choice(_WORDS)) for _ in range(r.randint(4, 16)))
    lo = r.randint(1, 40)
    text = source(m).splitlines(keepends=True)
    tools = [{"name": "Bash", "id": "c%d-1" % i, "input": {"command": "rg -n %s src" % f}, "output": hits},
             {"name": "Bash", "id": "c%d-2" % i, "input": {"command": "sed -n %d,%dp %s" % (lo, lo + 40, module(m))},
              "output": "".join(text[lo - 1:lo + 40])}]
    if r.random() < 0.5:
        n = r.randint(5, 60)
        report = ["============================= test session starts ==============================",
                  "platform linux -- Python 3.11.7, pytest-8.3.4, pluggy-1.5.0", "collected %d items" % n, ""]
        report += ["tests/test_%s.py %s" % (w, "." * r.randint(3, 30)) for _ in range(r.randint(2, 6))]
        if r.random() < 0.5:
            report += ["", "_" * 20 + " %s " % t + "_" * 20, "",
                       "    def %s():" % t, ">       assert %s(%s) == %d" % (f, w, r.randint(0, 9)),
                       "E       AssertionError: assert None == %d" % r.randint(0, 9), "",
                       "%s:%d: AssertionError" % (module(m), r.randint(1, 80)),
                       "=========================== short test summary info ============================",
                       "FAILED tests/test_%s.py::%s - AssertionError" % (w, t),
                       "========================= 1 failed, %d passed in %.2fs =========================" % (n - 1, r.random() * 9)]
        else:
            report += ["", "============================== %d passed in %.2fs ==============================" % (n, r.random() * 9)]
        tools.append({"name": "Bash", "id": "c%d-3" % i, "input": {"command": "python -m pytest -q tests/test_%s.py" % w},
                      "output": "\n".join(report) + "\n"})
    answer = ("%s is defined in %s and called from %d places. %s The %s path returns early when %s is None, "
              "which is why %s sees None." % (f, module(m), hits.count("\n"),
                                              "The test fails because the fixture passes no %s." % w if len(tools) > 2 else "",
                                              w, r.choice(_WORDS), t))
    return {"session": "s-%d" % (i // 10), "turn": "t-%d" % i, "cwd": cwd, "prompt": prompt, "tools": tools, "answer": answer}


def observed(rec: dict, proj: str, key: bytes | None, memo: dict) -> dict:
    """The record with each call's fingerprint, as its PostToolUse hook would have taken it (memoized per call)."""
    for t in rec["tools"]:
        k = (t["name"], t["input"]["command"])
        if k not in memo:
            memo[k] = fingerprint.observe(t["name"], t["input"], proj, proj, key, "2026-11-30T00:00:00.000000Z")
        t["observed"] = memo[k]
    return rec


def build(path: str, n: int, data_root: str, proj: str | None, start: int = 0, progress=None) -> None:
    """n realistic turns (from turn `start`) in one write, each commit vouched for in data_root's ledger."""
    key = fingerprint.key_of(os.path.join(data_root, "state"), create=True) if proj else None
    g = Graph(path)
    g.header = ef.Header("bench-authority", ef.VERSION, "2026-01-01T00:00:00.000000Z")
    memo: dict = {}
    ids = []
    for i in range(start, start + n):
        rec = record(i)
        c = compile_turn(parse_turn(observed(rec, proj, key, memo) if proj else rec))
        roots = tuple(content_hex(x) for x in c.roots)
        for x in c.roots:
            for node in walk(x):
                g.nodes.setdefault(content_hex(node), node)
        cm = ef.Commit("", "2026-%02d-%02dT%02d:%02d:%02d.%06dZ" % (1 + i // 2_000_000 % 12, 1 + i // 80_000 % 28, i // 3600 % 24,
                                                                    i // 60 % 60, i % 60, i % 1_000_000),
                       rec["session"], rec["turn"], roots, ())
        cm = ef.Commit(ef.commit_id(cm), cm.time, cm.session, cm.turn, cm.roots, cm.unions)
        g.commits[cm.id] = cm
        ids.append(cm.id)
        if progress and (i - start + 1) % 10000 == 0:
            progress(i - start + 1)
    write_compact(path, g.header, [g])
    trust.record(data_root, ids)
