"""A git read naming another ref is verified by that ref too (red-team round IV §8).

Requirements: `git log main`, `git diff main`, `git show main:path`, ranges `feature..main`,
`main...feature`, a tag, a remote-tracking branch (loose or packed) recorded on branch
`feature`: when the named ref moves (HEAD does not), the old output is never denied; a
revision the fingerprint cannot read cheaply (`main@{1}`) is unknown; with nothing moved,
the call is still denied.
"""

from __future__ import annotations

import pytest

from eggshell.reuse import fingerprint
from helpers.fresh import chat1, denied, git, pre, project, write


def on_feature(tmp_path):
    env = project(tmp_path)
    git(env, "tag", "v1")
    git(env, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(env, "checkout", "-q", "-b", "feature")
    write(env, "b.txt", "beta on feature\n")
    git(env, "commit", "-qam", "feature")
    return env


def main_moves(env):
    git(env, "checkout", "-q", "main")
    write(env, "a.txt", "alpha changed on main\n")
    git(env, "commit", "-qam", "main moves on")
    git(env, "checkout", "-q", "feature")


def tag_moves(env):
    git(env, "tag", "-f", "v1", "feature")


def remote_moves(env):
    git(env, "update-ref", "refs/remotes/origin/main", "feature")


def remote_packed_moves(env):
    git(env, "pack-refs", "--all")
    git(env, "update-ref", "refs/remotes/origin/main", "feature")
    git(env, "pack-refs", "--all")


CASES = [
    ("git log --oneline main", main_moves),
    ("git diff main", main_moves),
    ("git diff --stat main -- a.txt", main_moves),
    ("git show main:a.txt", main_moves),
    ("git log --oneline feature..main", main_moves),
    ("git log --oneline main...feature", main_moves),
    ("git log --oneline main~1", main_moves),
    ("git log --oneline v1", tag_moves),
    ("git log --oneline origin/main", remote_moves),
    ("git log --oneline origin/main", remote_packed_moves),
]


@pytest.mark.parametrize("command,move", CASES)
def test_a_moved_named_ref_is_not_denied(tmp_path, command, move):
    env = on_feature(tmp_path)
    chat1(env, command)
    move(env)
    assert denied(pre(env, command)) is None


@pytest.mark.parametrize("command", ["git log --oneline main", "git diff main", "git log --oneline origin/main"])
def test_nothing_moved_is_still_denied(tmp_path, command):
    env = on_feature(tmp_path)
    chat1(env, command)
    assert denied(pre(env, command)) is not None


@pytest.mark.parametrize("word,names", [("main", ["main"]), ("a..b", ["a", "b"]), ("a...b", ["a", "b"]), ("^a", ["a"]),
                                        ("a~2", ["a"]), ("a^2", ["a"]), ("a:src/x.py", ["a"]), ("HEAD", []), ("HEAD~3", []),
                                        ("..main", ["main"]), ("a@{1}", None), ("@{u}", None), ("x y", None)])
def test_revision_words(word, names):
    assert fingerprint.rev_names(word) == names


def test_a_revision_that_cannot_be_read_is_unknown(tmp_path):
    env = on_feature(tmp_path)
    fp = fingerprint.observe("Bash", {"command": "git log main@{1}"}, env.project, env.project, None, "T")
    assert fingerprint.check(fp, fingerprint.Probe(env.project), ".")[0] == fingerprint.UNKNOWN


def with_upstream(tmp_path):
    env = project(tmp_path)
    git(env, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(env, "config", "branch.main.remote", "origin")
    git(env, "config", "branch.main.merge", "refs/heads/main")
    return env


def fetched(env):
    write(env, "c.txt", "new\n")
    git(env, "add", "c.txt")
    git(env, "commit", "-qm", "upstream moves")
    git(env, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(env, "reset", "-q", "--hard", "HEAD~1")  # HEAD back where it was: only the upstream moved


@pytest.mark.parametrize("command", ["git status src", "git status -sb src", "git status --branch --porcelain src"])
def test_git_status_after_a_fetch_is_not_denied(tmp_path, command):
    """`Your branch is behind 'origin/main' by 1 commit`: the upstream is an input of git status."""
    env = with_upstream(tmp_path)
    chat1(env, command)
    head = git(env, "rev-parse", "HEAD")
    fetched(env)
    assert git(env, "rev-parse", "HEAD") == head
    assert denied(pre(env, command)) is None


def test_git_status_with_nothing_moved_is_still_denied(tmp_path):
    env = with_upstream(tmp_path)
    chat1(env, "git status src")
    assert denied(pre(env, "git status src")) is not None
