"""warm.Resources snapshots: a cold hook may start from the last manager's state, never be misled by it.

A snapshot is a head start, not a source of truth: the answers from it equal the answers
from reading the stores, turns saved after it was written are seen, a store replaced
since is read again, and a snapshot from other code is ignored.
"""

from __future__ import annotations

import json
import os

import pytest

from helpers.hooks import answer_here
from eggshell.stages import hook
from eggshell.graph.store import compact
from eggshell.runtime.warm import Resources
from helpers.hook_env import Env  # noqa: F401 - the same isolated environment as the hook tests

RG = "rg -n parse_config src"
RG_OUT = "src/config.py:1:def parse_config(path):\n"


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    e.write_config('mode = "lexical"\n')  # what a cold hook ranks with
    e.record_turn("where is parse_config defined?", [(RG, RG_OUT)], "in src/config.py", session="chat-1", turn="t1")
    return e


def ask(env, res, session: str, prompt: str = "where is parse_config defined", command: str = "rg -n parse_config ./src"):
    """The replies to a prompt and a proposed call in a new chat."""
    p = answer_here("codex", json.dumps(env.prompt(prompt, turn="u-" + session, session_id=session)), env.paths, res)
    q = answer_here("codex", json.dumps(env.ev("PreToolUse", session=session, turn_id="u-" + session, tool_name="Bash",
                                                tool_input={"command": command}, tool_use_id="c1")), env.paths, res)
    return p, q


def snapshot(env) -> Resources:
    warm = Resources(env.data, env.paths.bin_dir, warm=True)
    ask(env, warm, "warm-chat")
    assert warm.save_snapshots() == 1
    return warm


@pytest.fixture
def opened(monkeypatch):
    """The paths Store.open read from scratch (a snapshot's stores are not opened again)."""
    from eggshell.graph.store import Store

    seen: list[str] = []
    real = Store.open.__func__

    def spy(cls, path):
        seen.append(path)
        return real(cls, path)

    monkeypatch.setattr(Store, "open", classmethod(spy))
    return seen


def test_a_cold_start_from_a_snapshot_answers_as_one_from_the_stores(env, opened):
    snapshot(env)
    opened.clear()
    from_snapshot = Resources(env.data, env.paths.bin_dir, warm=False)
    a = ask(env, from_snapshot, "chat-a")
    assert env.egg not in opened  # it started from the snapshot
    for f in os.listdir(os.path.join(env.data, "run", "snapshots")):
        os.unlink(os.path.join(env.data, "run", "snapshots", f))
    from_stores = Resources(env.data, env.paths.bin_dir, warm=False)
    b = ask(env, from_stores, "chat-b")
    assert env.egg in opened
    assert a == b and a[1]["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_turns_saved_after_the_snapshot_are_seen(env):
    snapshot(env)
    env.record_turn("what does run.py do?", [("cat src/run.py", "def run_all():\n    return main()\n")], "it runs main", session="chat-1", turn="t2")
    cold = Resources(env.data, env.paths.bin_dir, warm=False)
    _, q = ask(env, cold, "chat-c", "what does run.py do", "cat src/run.py")
    assert cold._live and q["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_a_store_replaced_since_is_read_again(env):
    snapshot(env)
    compact(env.egg)  # a new file under the same name
    env.record_turn("list the sources", [("ls src", "config.py\n")], "one file", session="chat-1", turn="t3")
    cold = Resources(env.data, env.paths.bin_dir, warm=False)
    _, q = ask(env, cold, "chat-d", "list the sources", "ls src")
    assert q["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_a_snapshot_from_other_code_is_ignored(env, monkeypatch, opened):
    snapshot(env)
    opened.clear()
    monkeypatch.setattr("eggshell.runtime.warm.source_stamp", lambda: (0, 0))
    cold = Resources(env.data, env.paths.bin_dir, warm=False)
    _, q = ask(env, cold, "chat-e")
    assert q["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert env.egg in opened  # read from the store, not from the snapshot


def test_a_damaged_snapshot_is_logged_and_ignored(env):
    snapshot(env)
    d = os.path.join(env.data, "run", "snapshots")
    for f in os.listdir(d):
        with open(os.path.join(d, f), "wb") as fh:
            fh.write(b"not a pickle")
    logged: list[str] = []
    _, q = ask(env, Resources(env.data, env.paths.bin_dir, warm=False, log=logged.append), "chat-f")
    assert q["hookSpecificOutput"]["permissionDecision"] == "deny" and "unreadable" in logged[0]


CHILD = r"""
import json, sys
from helpers.hooks import answer_here
from eggshell.paths import Paths
from eggshell.graph.store import Store
from eggshell.runtime.warm import Resources
prefix, data, cfg, codex, bin_dir, egg, pre = sys.argv[1:8]
opened = []
real = Store.open.__func__
Store.open = classmethod(lambda cls, p: (opened.append(p), real(cls, p))[1])
paths = Paths(prefix, data, cfg, codex, bin_dir)
res = Resources(data, bin_dir, warm=False)
for payload in json.loads(pre):
    reply = answer_here("codex", json.dumps(payload), paths, res)
print(json.dumps({"reply": reply, "opened": egg in opened}))
"""


@pytest.mark.parametrize("seed", ["1", "2"])
def test_a_snapshot_read_by_another_process_matches_its_values(env, seed):
    """Hashes of strings and bytes differ per process: a snapshot must not carry them over."""
    import subprocess
    import sys

    snapshot(env)
    # the very Work stored (an equal Value built in the new process) and the very prompt
    payloads = [env.prompt("where is parse_config defined?", turn="u-x", session_id="chat-x"),
                env.ev("PreToolUse", session="chat-x", turn_id="u-x", tool_name="Bash",
                       tool_input={"command": RG}, tool_use_id="c1")]
    p = env.paths
    out = subprocess.run([sys.executable, "-c", CHILD, p.prefix, p.data_root, p.global_config, p.codex_home, p.bin_dir, env.egg,
                          json.dumps(payloads)], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["opened"] is False  # it started from the snapshot
    assert got["reply"]["hookSpecificOutput"]["permissionDecision"] == "deny"
