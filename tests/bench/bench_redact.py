"""Benchmark: what redaction at capture costs a PostToolUse hook (redact.py, issue 10 §3).

Measured, each the median of --runs (CPU time of this process where it says so, which the
shared machine's other load disturbs less than wall time):
1. Import: `import eggshell.core.redact` in a fresh interpreter (-X importtime), and the first
   call on a text that compiles every rule (a process compiles only the rules whose trigger
   occurs, once).
2. Per text, warm (rules compiled): redact_text on a 4 KB and a 100 KB slice of the standard
   library's source, a 1 MB slice, and a whole PostToolUse payload with a 1 MB output;
   reported per event and in MB/s.
3. The cap: a 50 MB output is scanned up to redact.SCAN_CAP characters and the rest withheld;
   the time it takes is the bound on any payload.
4. Per event in a fresh process, as a hook runs it: hooks/codex._redact on a PostToolUse payload
   after the hook's own imports (so importing `re`, compiling the triggered rules and scanning).
5. The hook: wall time of a real `egg-hook codex` PostToolUse process (EGGSHELL_MANAGER=off,
   the journal write and the cold answer included) with a 4 KB and a 1 MB output, with
   redaction and with hooks/codex._redact replaced by a no-op (the same entry point, so the
   difference is redaction alone).
6. With --detect-secrets PY (a Python with detect-secrets installed, never the shared venv):
   its import time and its time per 100 KB of the same text (SecretsCollection.scan_file, the
   filtered path), for the library decision in docs/privacy.md.

    python tests/bench/bench_redact.py [--runs 9] [--detect-secrets /tmp/ds-venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
LIB = os.path.join(REPO, "lib")
sys.path.insert(0, LIB)

from eggshell.core import redact  # noqa: E402

HOOK_ENTRY = """import sys
from eggshell.stages import hook
%s
sys.exit(hook.main(["codex"]))
"""
# Byte code is cached as in an installed venv (this environment may say PYTHONDONTWRITEBYTECODE).
PY_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
PY_ENV.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), "eggshell-bench-pycache"))
NO_REDACTION = "from eggshell.runtime import turnflow as codex; codex._redact = lambda payload, rules: None"


def stdlib_text(n: int) -> str:
    """n characters of the standard library's source (the false-positive corpus)."""
    root = sysconfig.get_paths()["stdlib"]
    parts, size = [], 0
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in ("site-packages", "__pycache__"))
        for name in sorted(names):
            if name.endswith(".py"):
                try:
                    with open(os.path.join(d, name), encoding="utf-8") as f:
                        parts.append(f.read())
                except (OSError, UnicodeDecodeError):
                    continue
                size += len(parts[-1])
                if size >= n:
                    return "".join(parts)[:n]
    return ("".join(parts) * (n // max(1, size) + 1))[:n]


def cpu_ms(fn, runs: int) -> float:
    ts = []
    for _ in range(runs):
        t = time.process_time()
        fn()
        ts.append(time.process_time() - t)
    return statistics.median(ts) * 1000


def import_ms() -> tuple[float, float]:
    """(import eggshell.core.redact, first redact_text compiling every rule) in a fresh interpreter, ms."""
    probe = ("import time, sys; t=time.process_time(); from eggshell.core import redact; a=time.process_time()-t; "
             "s=' '.join(str(r[2]) for r in redact._RULES); t=time.process_time(); redact.redact_text(s); "
             "print(a*1000, (time.process_time()-t)*1000)")
    env = dict(PY_ENV, PYTHONPATH=LIB)
    subprocess.run([sys.executable, "-c", "import eggshell.stages.hook, eggshell.runtime.turnflow, eggshell.core.redact"], env=env, check=True)  # byte code
    out = [tuple(map(float, subprocess.run([sys.executable, "-c", probe], env=env, check=True, capture_output=True,
                                           text=True).stdout.split())) for _ in range(5)]
    return statistics.median(x[0] for x in out), statistics.median(x[1] for x in out)


FRESH_PROBE = """import json, sys, time
from eggshell.stages import hook
from eggshell.runtime import turnflow as codex
payload = json.loads(sys.stdin.read())
t = time.process_time()
codex._redact(payload, None)
print((time.process_time() - t) * 1000, "re" in sys.modules)
"""


def fresh_ms(text: str, runs: int) -> float:
    """CPU ms of redacting one PostToolUse payload in a fresh hook process: importing `re`, compiling
    the rules the text triggers, scanning; median of `runs` processes (all of a hook's imports done first)."""
    payload = json.dumps({"hook_event_name": "PostToolUse", "session_id": "s", "cwd": "/p", "tool_name": "Bash",
                          "tool_input": {"command": "cat src/m.py"}, "tool_response": text})
    env = dict(PY_ENV, PYTHONPATH=LIB)
    out = [float(subprocess.run([sys.executable, "-c", FRESH_PROBE], input=payload, env=env, check=True, capture_output=True,
                                text=True).stdout.split()[0]) for _ in range(runs)]
    return statistics.median(out)


def run_hook(payload: dict, entry: str, env: dict, cwd: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one hook process (CPU: user + system of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", entry], input=json.dumps(payload), capture_output=True, text=True, env=env, cwd=cwd,
                       timeout=120)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0 or not r.stdout.startswith("{"):
        raise SystemExit("egg-hook failed: %r %r" % (r.stdout, r.stderr))
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def bench_hook(runs: int, outputs: dict) -> dict:
    """label -> ((wall, CPU) with redaction, (wall, CPU) without), median ms; each run its own turn, the two alternating."""
    d = tempfile.mkdtemp(prefix="bench-redact-")
    try:
        proj, data = os.path.join(d, "proj"), os.path.join(d, "data")
        os.makedirs(proj)
        with open(os.path.join(proj, ".eggshell.toml"), "w") as f:
            f.write('egg = ".eggs/work.egg"\nmode = "lexical"\n')
        env = {k: v for k, v in PY_ENV.items() if not k.startswith("EGGSHELL_")}
        env.update(EGGSHELL_DATA_ROOT=data, EGGSHELL_MANAGER="off", PYTHONPATH=LIB)
        base = {"cwd": proj, "session_id": "bench", "transcript_path": "/dev/null", "model": "m"}
        out = {}
        for label, text in outputs.items():
            times: dict = {True: [], False: []}
            for i in range(runs):
                for redacting in (True, False):
                    turn = "%s-%d-%s" % (label, i, redacting)
                    run_hook(dict(base, turn_id=turn, hook_event_name="UserPromptSubmit", prompt="read the sources"), HOOK_ENTRY % "", env, proj)
                    ev = dict(base, turn_id=turn, hook_event_name="PostToolUse", tool_name="Bash", tool_input={"command": "cat src/m.py"},
                              tool_response=text, tool_use_id="c")
                    times[redacting].append(run_hook(ev, HOOK_ENTRY % ("" if redacting else NO_REDACTION), env, proj))
            out[label] = tuple((statistics.median(t[0] for t in times[r]) * 1000, statistics.median(t[1] for t in times[r]) * 1000)
                               for r in (True, False))
        return out
    finally:
        shutil.rmtree(d, ignore_errors=True)


DS_PROBE = """import os, sys, time, tempfile
t = time.perf_counter()
from detect_secrets import SecretsCollection
from detect_secrets.settings import default_settings
imp = (time.perf_counter() - t) * 1000
text = sys.stdin.read()
d = tempfile.mkdtemp(); p = os.path.join(d, "out.txt")
open(p, "w").write(text)
with default_settings():
    SecretsCollection().scan_file(p)
    ts = []
    for _ in range(3):
        t = time.process_time(); c = SecretsCollection(); c.scan_file(p); ts.append(time.process_time() - t)
print(imp, sorted(ts)[1] * 1000)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--detect-secrets", metavar="PY", help="a Python interpreter with detect-secrets installed")
    a = ap.parse_args()

    imp, first = import_ms()
    print("import eggshell.core.redact: %.1f ms; first call compiling all %d rules: %.1f ms" % (imp, len(redact._RULES), first))

    texts = {"4 KB": stdlib_text(4_000), "100 KB": stdlib_text(100_000), "1 MB": stdlib_text(1_000_000)}
    redact.redact_text(texts["1 MB"])  # compile what the corpus triggers
    for label, t in texts.items():
        ms = cpu_ms(lambda: redact.redact_text(t), a.runs)
        print("redact_text %-6s %8.2f ms CPU  (%.0f MB/s)" % (label, ms, len(t) / 1e6 / (ms / 1000) if ms else float("inf")))
    payload = {"hook_event_name": "PostToolUse", "session_id": "s", "cwd": "/p", "tool_name": "Bash",
               "tool_input": {"command": "cat big.py"}, "tool_response": {"stdout": texts["1 MB"], "stderr": ""}}
    ms = cpu_ms(lambda: redact.redact_payload(json.loads(json.dumps(payload))), a.runs)
    print("redact_payload, PostToolUse with a 1 MB output: %.1f ms CPU (json round trip of the test included)" % ms)

    big = texts["1 MB"] * 50
    t = time.process_time()
    out = redact.redact_payload({"tool_response": big})
    print("a 50 MB output: %.2f s CPU; %d of %d characters scanned and kept (SCAN_CAP), the rest withheld"
          % (time.process_time() - t, len(out["tool_response"]), len(big)))

    for label in ("4 KB", "100 KB", "1 MB"):
        print("redaction in a fresh hook process, PostToolUse with a %-6s output: %.1f ms CPU" % (label, fresh_ms(texts[label], a.runs)))
    print("    (plain output with no trigger word: %.2f ms CPU)" % fresh_ms("ok\n3 files changed\n", a.runs))
    for label, (w, wo) in bench_hook(a.runs, {"4 KB": texts["4 KB"], "1 MB": texts["1 MB"]}).items():
        print("egg-hook PostToolUse, %-4s output: with redaction %6.1f ms wall %6.1f ms CPU; without %6.1f ms wall %6.1f ms CPU "
              "(CPU %+.1f ms)" % (label, w[0], w[1], wo[0], wo[1], w[1] - wo[1]))

    if a.detect_secrets:
        r = subprocess.run([a.detect_secrets, "-c", DS_PROBE], input=texts["100 KB"], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            print("detect-secrets probe failed: %s" % r.stderr.strip().splitlines()[-1:])
        else:
            ds_imp, ds_100k = map(float, r.stdout.split())
            ours = cpu_ms(lambda: redact.redact_text(texts["100 KB"]), a.runs)
            print("detect-secrets: import %.0f ms, 100 KB %.0f ms CPU; redact.py: import %.1f ms, 100 KB %.1f ms CPU"
                  % (ds_imp, ds_100k, imp, ours))
    return 0


if __name__ == "__main__":
    sys.exit(main())
