"""Benchmark: hostile sizes still get an answer within the hook's budget (issue 10, section 6).

Each case is one real `egg-hook codex` process, as the host starts it, in a fresh project
whose store already holds one turn, with the manager off (the hook answers and saves by
itself) and on (a warm manager answers):

  prompt          UserPromptSubmit with a 1 MB prompt (matching sees its head and tail)
  output          PostToolUse with a 50 MB tool output (stored as its first 1 MiB characters
                  and a truncation line), then the Stop that saves the turn
  sparse-egg      the store followed by a 2 GB sparse region: a prompt, a tool event, the Stop
  sparse-journal  the turn's journal followed by a 2 GB sparse region: a tool event, the Stop
  read-list       a project config whose `read` lists 100,000 stores (refused by name)
  floor           a small PostToolUse, for the machine's speed under the same load

Prints the wall time of each; exits 1 if any prompt or tool event takes longer than its
10 s budget or a Stop longer than 2 s plus its save.

    python tests/bench/bench_budgets.py [--cases prompt,output,...] [--manager off,on]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "lib"))
sys.path.insert(0, HERE)

from bench_hook import hook_env  # noqa: E402
from eggshell import config  # noqa: E402
from eggshell.runtime.journal import Journal  # noqa: E402

HOOK = os.path.join(REPO, "bin", "egg-hook")
EGG = os.path.join(REPO, "bin", "egg")
BUDGET_S = 10.0
STOP_S = 10.0  # the Stop's reply has 2 s; with the manager off the hook then saves the turn before it exits
CASES = ("floor", "prompt", "output", "sparse-egg", "sparse-journal", "read-list")


class Project:
    def __init__(self, root: str, manager: str):
        self.root = root
        prefix = os.path.join(root, "prefix")
        os.makedirs(os.path.join(prefix, "share", "eggshell"))
        os.symlink(sys.prefix, os.path.join(prefix, "share", "eggshell", "venv"))
        self.proj = os.path.join(root, "proj")
        os.makedirs(self.proj)
        with open(os.path.join(self.proj, ".eggshell.toml"), "w") as f:
            f.write(config.PROJECT_TEMPLATE)
        self.data = os.path.join(root, "data")
        self.env = hook_env(drop=("EGGSHELL_", "CODEX_"))
        self.env.update(EGGSHELL_PREFIX=prefix, EGGSHELL_DATA_ROOT=self.data, CODEX_HOME=os.path.join(root, "codex"),
                        EGGSHELL_MANAGER=manager)
        self.manager = manager
        self.egg = os.path.join(self.proj, ".eggs", "work.egg")

    def ev(self, event: str, turn: str, **kw) -> dict:
        return {"hook_event_name": event, "session_id": "s1", "cwd": self.proj, "turn_id": turn, **kw}

    def hook(self, payload: dict | str) -> tuple[float, str]:
        raw = payload if isinstance(payload, str) else json.dumps(payload)
        t = time.perf_counter()
        p = subprocess.run([HOOK, "codex"], input=raw, capture_output=True, text=True, env=self.env, cwd=self.proj, timeout=120)
        took = time.perf_counter() - t
        if p.returncode != 0 or not p.stdout.startswith("{"):
            raise SystemExit("egg-hook failed: rc=%s out=%r err=%r" % (p.returncode, p.stdout[:200], p.stderr[:500]))
        return took, p.stderr.strip()

    def turn(self, turn: str) -> None:
        self.hook(self.ev("UserPromptSubmit", turn, prompt="where is late_fee computed"))
        self.hook(self.ev("PostToolUse", turn, tool_name="Bash", tool_input={"command": "rg late_fee"},
                          tool_response="src/billing.py:42: late_fee = 3\n", tool_use_id="c-" + turn))
        self.hook(self.ev("Stop", turn, last_assistant_message="late_fee is in src/billing.py"))

    def settled(self) -> None:
        deadline = time.monotonic() + 30
        while Journal(os.path.join(self.data, "journal")).files() and time.monotonic() < deadline:
            time.sleep(0.1)

    def stop_manager(self) -> None:
        if self.manager != "off":
            subprocess.run([EGG, "--as", "egg-manager", "stop"], env=self.env, capture_output=True, timeout=60)


def sparse(path: str) -> None:
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) + 2**31)


def run_case(case: str, p: Project) -> list[tuple[str, float, float]]:
    """(what, seconds, limit) for each hook the case runs."""
    p.turn("t0")
    p.settled()
    if p.manager != "off":
        p.hook(p.ev("UserPromptSubmit", "warm", prompt="warm the manager up"))  # the manager loads the store and model
    out = []

    def timed(what, payload, limit=BUDGET_S):
        took, _ = p.hook(payload)
        out.append((what, took, limit))

    if case == "floor":
        timed("UserPromptSubmit small", p.ev("UserPromptSubmit", "t1", prompt="where is late_fee computed"))
        timed("PostToolUse small", p.ev("PostToolUse", "t1", tool_name="Bash", tool_input={"command": "ls"}, tool_response="a\n", tool_use_id="c1"))
    elif case == "prompt":
        timed("UserPromptSubmit 1 MB prompt", p.ev("UserPromptSubmit", "t1", prompt="late_fee " + "word7 " * 174763))
    elif case == "output":
        p.hook(p.ev("UserPromptSubmit", "t1", prompt="show the log"))
        timed("PostToolUse 50 MB output", p.ev("PostToolUse", "t1", tool_name="Bash", tool_input={"command": "cat big.log"},
                                               tool_response="log line late_fee\n" * ((50 << 20) // 18), tool_use_id="c1"))
        timed("Stop after it", p.ev("Stop", "t1", last_assistant_message="done"), STOP_S)
    elif case == "sparse-egg":
        sparse(p.egg)
        timed("UserPromptSubmit", p.ev("UserPromptSubmit", "t1", prompt="where is late_fee computed"))
        timed("PostToolUse", p.ev("PostToolUse", "t1", tool_name="Bash", tool_input={"command": "rg fee"}, tool_response="x\n", tool_use_id="c1"))
        timed("Stop", p.ev("Stop", "t1", last_assistant_message="a"), STOP_S)
    elif case == "sparse-journal":
        p.hook(p.ev("UserPromptSubmit", "t1", prompt="where is late_fee computed"))
        sparse(Journal(os.path.join(p.data, "journal")).turn_path("s1", "t1"))
        timed("PostToolUse", p.ev("PostToolUse", "t1", tool_name="Bash", tool_input={"command": "rg fee"}, tool_response="x\n", tool_use_id="c1"))
        timed("Stop", p.ev("Stop", "t1", last_assistant_message="a"), STOP_S)
    elif case == "read-list":
        cfg = os.path.join(p.proj, ".eggshell.toml")
        with open(cfg) as f:
            text = f.read()
        with open(cfg, "w") as f:
            f.write(text.replace('default = "work"', 'default = "work"\nread = [%s]' % ", ".join('".eggs/r%d.egg"' % i for i in range(100_000))))
        timed("UserPromptSubmit", p.ev("UserPromptSubmit", "t1", prompt="where is late_fee computed"))
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--manager", default="off,on")
    a = ap.parse_args(argv)
    failed = 0
    for manager in a.manager.split(","):
        for case in a.cases.split(","):
            root = tempfile.mkdtemp(prefix="eggshell-bench-budgets-")
            p = Project(root, manager)
            try:
                for what, took, limit in run_case(case, p):
                    bad = took > limit
                    failed += bad
                    print("manager %-3s  %-15s %-30s %6.2f s%s" % (manager, case, what, took, "  OVER %.0f s" % limit if bad else ""), flush=True)
            finally:
                p.stop_manager()
                shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
