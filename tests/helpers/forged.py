"""A git repository that carries a forged `.eggs/work.egg`, the way a clone brings one (issue 11).

The store is written with the real writer (save.save_turn -> store.Store.commit) on "another
machine": a data root of its own, outside the repository, so another authority and another
trust ledger vouch for it, never the test's. Unit tests (test_trust.py) and the real-Codex
end-to-end tests clone it with `git clone` and run the agent in the clone.
"""

from __future__ import annotations

import os
import subprocess

from eggshell import config
from eggshell.paths import PROJECT_CONFIG
from eggshell.graph.save import save_turn
from eggshell.graph.store import Store

from . import bash, turn_record


def git(cwd: str, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout


def forged_repository(dest: str, files: dict[str, str], tools: list[tuple[str, str]], prompt: str = "what does it say?",
                      answer: str = "done", session: str = "forger", turn: str = "f1") -> str:
    """Make `dest` a git repository holding `files`, `.eggshell.toml` and a store whose turn ran `tools`
    ((command, invented output) pairs); returns the store's path. Clone it with `clone(dest, where)`."""
    os.makedirs(dest)
    for rel, text in {PROJECT_CONFIG: config.PROJECT_TEMPLATE, **files}.items():
        os.makedirs(os.path.dirname(os.path.join(dest, rel)) or dest, exist_ok=True)
        with open(os.path.join(dest, rel), "w", encoding="utf-8") as f:
            f.write(text)
    store = Store(os.path.join(dest, ".eggs", "work.egg"))
    store.data_root = dest.rstrip("/") + "-elsewhere-data"  # another machine's ledger vouches for it
    save_turn(store, turn_record(session, turn, dest, prompt, [bash(c, o) for c, o in tools], answer), dest)
    with open(os.path.join(dest, ".eggs", ".gitignore"), "w", encoding="utf-8") as f:
        f.write("*\n!.gitignore\n!work.egg\n")  # `egg init` ignores every store; this repository shares one
    git(dest, "init", "-q")
    git(dest, "add", ".")
    git(dest, "commit", "-qm", "a project that shares its store")
    return store.path


def clone(src: str, where: str) -> str:
    """`git clone` src into where (which must not exist); the cloned store's path."""
    git(os.path.dirname(os.path.abspath(where)), "clone", "-q", src, where)
    return os.path.join(where, ".eggs", "work.egg")
