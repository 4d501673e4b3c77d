"""A search that honours ignore files is verified by them too (red-team round IV §10).

Requirements: `rg` leaves out what `.gitignore`, `.ignore`, `.rgignore` (in the directory it
walks, in its parents up to the project root) and `.git/info/exclude` name, though its walk
skips dot files; a recorded `rg` whose ignore files changed since is never denied; with
nothing changed it still is.
"""

from __future__ import annotations

import os

import pytest

from helpers.fresh import age, chat1, denied, git, pre, project, write

RG = "a.txt:alpha line one\na.txt:alpha line two\na.txt:alpha line three\n"  # what rg printed (rg need not be installed)


def ignoring_gen(tmp_path):
    env = project(tmp_path)
    write(env, ".gitignore", ".eggs/\ngen/\n")
    write(env, "src/gen/out.txt", "alpha generated\n")
    write(env, "gen/out.txt", "alpha generated\n")
    git(env, "add", ".gitignore")
    git(env, "commit", "-qm", "ignore gen")
    age(env, ".gitignore", "gen/out.txt", "src/gen/out.txt")
    git(env, "status", "--porcelain")
    return env


def unignore(env):
    write(env, ".gitignore", ".eggs/\n")
    age(env, ".gitignore")


def ignore_a(name):
    def mutate(env):
        write(env, name, "a.txt\n")
        age(env, name)
    return mutate


def exclude_a(env):
    with open(os.path.join(env.project, ".git", "info", "exclude"), "a") as f:
        f.write("a.txt\n")


CASES = [
    ("rg alpha", unignore),
    ("rg alpha src", unignore),  # a parent's .gitignore
    ("rg alpha", ignore_a(".ignore")),
    ("rg alpha", ignore_a(".rgignore")),
    ("rg -n alpha .", exclude_a),
]


@pytest.mark.parametrize("command,mutate", CASES)
def test_a_changed_ignore_file_is_not_denied(tmp_path, command, mutate):
    env = ignoring_gen(tmp_path)
    chat1(env, command, output=RG)
    mutate(env)
    assert denied(pre(env, command)) is None


@pytest.mark.parametrize("command", ["rg alpha", "rg alpha src"])
def test_unchanged_ignore_files_are_still_denied(tmp_path, command):
    env = ignoring_gen(tmp_path)
    chat1(env, command, output=RG)
    assert denied(pre(env, command)) is not None
