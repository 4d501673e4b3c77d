"""A call's own working directory is part of what it read (red-team round IV §12).

Requirements: Codex's `exec_command {"cmd", "workdir"}` and `shell {"command": ["bash",
"-lc", ...], "workdir"}` run where `workdir` says; a call recorded in sub/ read sub/'s files,
so the same command proposed at the project root (no workdir, `.`, or the root's absolute
path) is never denied with sub/'s output; proposed in sub/ again, it still is.
"""

from __future__ import annotations

import os

import pytest

from eggshell.reuse import fingerprint
from helpers.fresh import age, chat1, denied, pre, project, write

SUB = "SUB FILE CONTENT\n"


def recorded_in_sub(tmp_path, form: str):
    env = project(tmp_path)
    write(env, "sub/a.txt", SUB)
    age(env, "sub/a.txt")
    if form == "exec_command":
        chat1(env, "cat a.txt", {"tool_name": "exec_command", "cmd": "cat a.txt", "workdir": "sub"}, workdir="sub")
    else:
        chat1(env, "cat a.txt", {"tool_name": "shell", "command": ["bash", "-lc", "cat a.txt"], "workdir": "sub"}, workdir="sub")
    return env


def proposal(form: str, workdir: str | None) -> tuple[str, dict]:
    inp = {"cmd": "cat a.txt"} if form == "exec_command" else {"command": ["bash", "-lc", "cat a.txt"]}
    if workdir is not None:
        inp["workdir"] = workdir
    return form, inp


@pytest.mark.parametrize("form", ["exec_command", "shell"])
@pytest.mark.parametrize("workdir", [None, ".", "ROOT"])
def test_a_call_recorded_in_a_subdirectory_is_not_denied_at_the_top(tmp_path, form, workdir):
    env = recorded_in_sub(tmp_path, form)
    tool, inp = proposal(form, env.project if workdir == "ROOT" else workdir)
    reason = denied(pre(env, "cat a.txt", inp, tool=tool))
    assert reason is None or SUB.strip() not in reason


@pytest.mark.parametrize("form", ["exec_command", "shell"])
def test_the_same_call_in_the_same_subdirectory_is_still_denied(tmp_path, form):
    env = recorded_in_sub(tmp_path, form)
    tool, inp = proposal(form, "sub")
    reason = denied(pre(env, "cat a.txt", inp, tool=tool))
    assert reason is not None and SUB.strip() in reason


def test_the_fingerprint_is_taken_where_the_call_ran(tmp_path):
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "sub"))
    fp = fingerprint.observe("exec_command", {"cmd": "cat a.txt", "workdir": "sub"}, root, root, None, "now")
    assert fp["cwd"] == "sub" and ["a", "sub/a.txt"] in fp["in"]
    assert fingerprint.check(fp, fingerprint.Probe(root), ".")[0] == fingerprint.UNKNOWN


@pytest.mark.parametrize("inp,shown", [
    ({"cmd": "cat a.txt", "workdir": "sub"}, "cd sub && cat a.txt"),
    ({"cmd": "cat a.txt", "workdir": "my dir"}, "cd 'my dir' && cat a.txt"),
    ({"cmd": "cat a.txt", "workdir": "."}, "cat a.txt"),
    ({"cmd": "cat a.txt"}, "cat a.txt"),
])
def test_the_call_is_shown_where_it_ran(inp, shown):
    """What a handoff, `egg show` and search show of the call includes its workdir: `cd sub && cat a.txt`.
    (Matching still compares the command alone; the fingerprint's cwd keeps sub/'s output from the top.)"""
    from eggshell.graph.records import command_of
    from eggshell.reuse.intrinsic import canonical_tool_work

    assert command_of(canonical_tool_work("exec_command", inp)) == shown
