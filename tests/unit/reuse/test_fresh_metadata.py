"""A call that prints metadata is judged on the metadata it printed (red-team round IV §7).

Requirements: `ls -l`, `ls -la`, `stat`, `find -printf/-newer/-mtime/-perm`, `du` print a
file's mode, owner, size or times; after `chmod` or `touch` (the bytes unchanged, even with
the index refreshed by `git status` so the file is clean again) the old listing is never
denied as verified. A read of content only (`cat`, `ls` without -l) touched is still denied.
"""

from __future__ import annotations

import os
import time

import pytest

from helpers.fresh import chat1, denied, git, pre, project


def chmod(env, rel):
    os.chmod(os.path.join(env.project, rel), 0o600)


def chmod_x(env, rel):
    os.chmod(os.path.join(env.project, rel), 0o755)


def touch(env, rel):
    t = time.time() - 30
    os.utime(os.path.join(env.project, rel), (t, t))
    git(env, "status", "--porcelain")  # refreshes the index: the file is clean again


CASES = [
    ("ls -l a.txt", chmod, "a.txt"),
    ("ls -la a.txt", touch, "a.txt"),
    ("ls -l --time-style=full-iso src", touch, "src/app.py"),
    ("ls -la src", chmod, "src/app.py"),
    ("ls -li src", chmod, "src"),
    ("stat -c '%n %s %y' a.txt", touch, "a.txt"),
    ("stat a.txt", chmod, "a.txt"),
    ("stat -c '%n %y' src", touch, "src"),
    ("find src -printf '%p %m\\n'", chmod, "src/app.py"),
    ("find src -newer a.txt", touch, "src/app.py"),
    ("find src -mmin -1", touch, "src/app.py"),
    ("du --time src", touch, "src/app.py"),
    ("tree -pD src", chmod, "src/app.py"),
    ("ls -F src", chmod_x, "src/app.py"),  # `app.py*`: an executable is marked
]


@pytest.mark.parametrize("command,mutate,rel", CASES)
def test_changed_metadata_is_not_denied(tmp_path, command, mutate, rel):
    env = project(tmp_path)
    if command.startswith("tree") and not any(os.access(os.path.join(d, "tree"), os.X_OK) for d in os.environ["PATH"].split(":")):
        pytest.skip("no tree here")
    chat1(env, command)
    mutate(env, rel)
    assert denied(pre(env, command)) is None


@pytest.mark.parametrize("command", ["ls -l a.txt", "stat a.txt", "ls -la src", "find src -newer a.txt"])
def test_unchanged_metadata_is_still_denied(tmp_path, command):
    env = project(tmp_path)
    chat1(env, command)
    assert denied(pre(env, command)) is not None


@pytest.mark.parametrize("command", ["cat a.txt", "ls src"])
def test_a_content_read_touched_is_still_denied(tmp_path, command):
    env = project(tmp_path)
    chat1(env, command)
    touch(env, "a.txt" if command.startswith("cat") else "src/app.py")
    assert denied(pre(env, command)) is not None
