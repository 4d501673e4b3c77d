"""A hostile project cannot hang the tool hook or lose its result (red-team round IV §1).

Requirements: a FIFO (or any file that is not a regular file) planted where the fingerprint
reads a git file (`.git/HEAD`, `.git/index`, a `commondir` reached through a `.git` file) or
a project file is never opened in a way that blocks: the PostToolUse hook answers within its
budget, the tool event is journaled, and its fingerprint is unknown (never verified). A
fingerprint that takes too long is given up on: the event is journaled all the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pytest

from eggshell.reuse import fingerprint as fpm
from eggshell.runtime import turnflow
from eggshell.runtime.journal import Journal
from helpers.hook_env import EGG_HOOK, Env


def git(project: str, *args: str) -> None:
    subprocess.run(["git", "-C", project, "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True, capture_output=True)


def hook(env: Env, payload: dict, timeout: float = 10) -> tuple[subprocess.CompletedProcess, float]:
    """egg-hook codex as its own process (a hang must not hang the test run)."""
    t = time.monotonic()
    p = subprocess.run([EGG_HOOK, "codex"], input=json.dumps(payload), capture_output=True, text=True, env=env.proc_env(),
                       cwd=env.project, timeout=timeout)
    return p, time.monotonic() - t


def plant_worktree_fifo(env: Env) -> None:
    gd = os.path.join(str(env.tmp), "gd")
    os.makedirs(gd)
    with open(os.path.join(gd, "HEAD"), "w") as f:
        f.write("ref: refs/heads/main\n")
    os.mkfifo(os.path.join(gd, "commondir"))
    with open(os.path.join(env.project, ".git"), "w") as f:
        f.write("gitdir: %s\n" % gd)


def plant(env: Env, where: str) -> None:
    if where == "commondir":
        plant_worktree_fifo(env)
        return
    git(env.project, "init", "-q")
    git(env.project, "add", "a.txt")
    git(env.project, "commit", "-qm", "a")
    path = os.path.join(env.project, ".git", where)
    os.remove(path)
    os.mkfifo(path)


@pytest.mark.parametrize("where", ["HEAD", "index", "commondir"])
def test_a_fifo_in_git_neither_hangs_the_hook_nor_loses_the_result(tmp_path, where):
    env = Env(tmp_path)
    with open(os.path.join(env.project, "a.txt"), "w") as f:
        f.write("alpha\n")
    plant(env, where)
    p, _ = hook(env, env.prompt("read a", "t1", session_id="s1"))
    assert p.returncode == 0
    p, secs = hook(env, env.tool("cat a.txt", "alpha\n", "t1", "c1", session_id="s1"))
    assert p.returncode == 0 and secs < 6
    (ev,) = [e for e in Journal(env.paths.journal_dir).read("s1", "t1") if e.get("event") == "tool"]
    assert ev["output"] == "alpha\n" and "observed" in ev


@pytest.mark.parametrize("name", [".git/HEAD", ".git/index", ".git/refs/heads/main", ".git/packed-refs", "a.txt"])
def test_no_file_the_fingerprint_reads_is_opened_blocking(tmp_path, name):
    """A FIFO anywhere the probe reads: a read of it answers at once (None: not a regular file)."""
    proj = str(tmp_path / "p")
    os.makedirs(proj)
    with open(os.path.join(proj, "a.txt"), "w") as f:
        f.write("alpha\n")
    git(proj, "init", "-q", "-b", "main")
    git(proj, "add", "a.txt")
    git(proj, "commit", "-qm", "a")
    path = os.path.join(proj, name)
    if os.path.exists(path):
        os.remove(path)
    os.mkfifo(path)
    box: dict = {}

    def work():
        box["fp"] = fpm.observe("Bash", {"command": "cat a.txt"}, proj, proj, b"k" * 32, "now")
        box["check"] = fpm.check(box["fp"], fpm.Probe(proj, b"k" * 32), ".")

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(5)
    if t.is_alive():
        with open(path, "wb"):  # let the blocked open go, so the thread ends
            pass
        pytest.fail("the fingerprint blocked on a FIFO at %s" % name)
    assert fpm.read_regular(path, 10) is None
    assert box["check"][0] in (fpm.VERIFIED, fpm.UNKNOWN) and (name != "a.txt" or box["check"][0] == fpm.UNKNOWN)


def test_a_slow_fingerprint_is_given_up_and_the_event_journaled(tmp_path, monkeypatch):
    env = Env(tmp_path)
    with open(os.path.join(env.project, "a.txt"), "w") as f:
        f.write("alpha\n")
    env.respond(env.prompt("read a", "t1", session_id="s1"))

    def slow(*a, **k):
        time.sleep(30)
        return {}

    monkeypatch.setattr(fpm, "observe", slow)
    t = time.monotonic()
    env.respond(env.tool("cat a.txt", "alpha\n", "t1", "c1", session_id="s1"))
    assert time.monotonic() - t < turnflow.OBSERVE_SECONDS + 10  # given up long before the 30 s fingerprint ends
    (ev,) = [e for e in Journal(env.paths.journal_dir).read("s1", "t1") if e.get("event") == "tool"]
    assert ev["output"] == "alpha\n"
    assert fpm.check(ev["observed"], fpm.Probe(env.project)) == (fpm.UNKNOWN, [])
