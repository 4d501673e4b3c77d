"""A real git project for the freshness tests that drive the hooks: files aged out of the racy
window, a first chat that runs a command for real and records it, a second chat that proposes it.

Shared by the red-team regressions of freshness (tests/unit/reuse/test_fresh_*.py).
"""

from __future__ import annotations

import os
import subprocess
import time

from helpers.hook_env import Env

FILES = {"a.txt": "alpha line one\nalpha line two\nalpha line three\n", "b.txt": "beta line one\n",
         "src/app.py": "def main():\n    return 1\n", ".gitignore": ".eggs/\n"}


def git(env: Env, *args: str, cwd: str | None = None) -> str:
    return subprocess.run(["git", "-C", cwd or env.project, "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout


def write(env: Env, rel: str, text: str) -> None:
    path = os.path.join(env.project, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def age(env: Env, *rels: str) -> None:
    """Out of the racy window: a stat alone is trusted for these files."""
    old = time.time() - 60
    for rel in rels:
        os.utime(os.path.join(env.project, rel), (old, old))


def project(tmp_path) -> Env:
    env = Env(tmp_path)
    git(env, "init", "-q", "-b", "main")
    for rel, text in FILES.items():
        write(env, rel, text)
    git(env, "add", "-A")
    git(env, "commit", "-qm", "base")
    age(env, *FILES)
    git(env, "status", "--porcelain")  # refresh the index: the aged files are clean
    return env


def run(env: Env, command: str, workdir: str | None = None) -> str:
    p = subprocess.run(command, shell=True, cwd=os.path.join(env.project, workdir or ""), capture_output=True, text=True)
    return p.stdout + p.stderr


def chat1(env: Env, command: str, tool_input: dict | None = None, workdir: str | None = None, output: str | None = None) -> str:
    """A first chat runs `command` for real (in `workdir`; or it printed `output`); its hook records the call, the turn is saved."""
    out = run(env, command, workdir) if output is None else output
    inp = tool_input or {"command": command}
    env.respond(env.prompt("look around", "t-chat-1", session_id="chat-1"))
    p = env.tool(command, out, "t-chat-1", "c-1", session_id="chat-1")
    p["tool_input"] = inp
    if "tool_name" in inp:
        p["tool_name"] = inp.pop("tool_name")
    env.respond(p)
    assert env.respond(env.stop("I looked", "t-chat-1", session_id="chat-1")) == {}
    return out


def pre(env: Env, command: str, tool_input: dict | None = None, tool: str = "Bash") -> dict:
    turn = "u-" + os.urandom(6).hex()
    env.respond(env.prompt("bake some bread", turn=turn, session_id="chat-2"))
    return env.respond(env.ev("PreToolUse", session="chat-2", turn_id=turn, tool_name=tool,
                              tool_input=tool_input or {"command": command}, tool_use_id="p-" + turn))


def denied(reply: dict) -> str | None:
    out = reply.get("hookSpecificOutput", {})
    return out.get("permissionDecisionReason") if out.get("permissionDecision") == "deny" else None
