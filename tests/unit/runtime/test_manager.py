"""egg-manager (manager.py, client.py) through the real egg-hook: one warm process per data root.

What this proves, each with real hook processes and a manager of its own per test:
  1. the first hook answers and starts one manager, which serves later hooks (its request
     count grows, its pid stays); four hooks racing with no manager leave exactly one;
  2. run/ is 0700 and manager.sock 0600; a second `egg-manager serve` exits 0 at once
     and the first keeps serving;
  3. a covered call is denied with the same reason through the manager and without it;
  4. delivery keys are recorded only after the hook acknowledges its reply (no ack, no keys;
     the same request again gets the same context; with the ack the keys are recorded);
  5. an open turn's tool results reach the .egg while it runs (as an interrupted turn);
     the Stop adds the answer and empties the journal;
  6. a manager killed with SIGKILL mid-turn loses nothing: hooks still answer, a new one
     starts, the whole turn reaches the store, the socket works again;
  7. a stopped (SIGSTOP) manager costs no hook its budget: the first sees it is stopped and
     answers cold at once (the same denial), notes it in run/ so the next ones do not even try,
     `egg doctor` names it and the fix; the Stop's seal is journaled at once, and after SIGCONT
     the manager drops the note, saves the turn and serves again;
  8. an idle manager exits by itself, removes its socket and leaves no process;
  9. a configured provider program dies with a manager killed with SIGKILL;
 10. a hook that cannot append to the journal (full disk: RLIMIT_FSIZE) answers {} in its
     budget and changes nothing; the next hooks record the turn;
 11. a corrupt per-chat state file never stops a hook, and the turn is recorded;
 12. two chats writing one .egg at once: all their turns land whole, and fsck passes;
 13. a provider program that never answers (stall.py) never blocks the agent: the prompt, and the
     tool and Stop hooks queued behind its query on the worker, each answer within their budget;
     the turn is saved once the provider's 15 s deadline has passed;
 14. a manager killed with SIGKILL inside a provider query: the waiting hook still answers one JSON
     object within its budget, the provider dies with it, the next hooks start a new manager and
     the turn (its prompt journaled before) is saved whole;
 15. a manager killed with SIGKILL at instants spread over the save of long turns (30 tool results
     of ~50 KB each; seeded delays after the Stop, before, during and after the commit): each time a
     new manager empties the journal, every turn is stored once with all its calls and its answer,
     and fsck passes.
And two regressions: a sealed turn whose save failed is tried again by the next passes
of the same manager (not only by the next manager), and an answer request with no
budget left (0) is not answered (0 once read as the 10 s default).

Every test uses a short private data root (a Unix socket path must fit in 108 bytes) and
at teardown stops its manager and kills whatever process still carries its data root.
The hooks and managers run a copy of bin/ and lib/ taken when this module starts: a
manager retires when its package's files change (manager.source_stamp), so edits made
to the checkout during the run would otherwise replace managers mid-test.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from eggshell.runtime import client
from eggshell.reuse.delivery import Deliveries
from eggshell.runtime import turnflow as codex
from eggshell.runtime.journal import Journal
from eggshell.runtime.manager import SETTLE_EVERY_S
from eggshell.search.matcher import PROVIDER_DEADLINE_S
from eggshell.paths import Paths
from eggshell.graph.records import turn_views
from eggshell.graph.store import Store
from helpers import alive, parent_pid, pids_by_data_root, proc_state, proc_text, read_bytes, wait_for
from helpers import REPO
from helpers.hook_env import Env, one_json_object
from helpers.managed import (PROVIDERS, RG, RG_ANSWER, RG_OUT, SLACK, WAIT, ManagedEnv, big_output, checkout, denial, env, gone,  # noqa: F401 (fixtures)
                             pre_tool, provider_child, stall_provider, use_provider)


# -- 1. one manager, started by the first hook, serves the later ones ------------------------------


def test_the_first_hook_starts_one_manager_that_serves_later_hooks(env):
    assert not os.path.exists(env.sock)
    reply, _ = env.hook(env.prompt("where is parse_config defined?", "t1"))
    assert reply == {}  # answered (cold, nothing stored yet) by the hook itself
    first = env.wait_manager()
    assert first["data_root"] == env.data and first["pid"] == env.pidfile()
    assert env.managers() == [first["pid"]]
    env.hook(env.tool(RG, RG_OUT, "t1", "c1"))
    env.hook(env.tool("ls src", "config.py\n", "t1", "c2"))
    env.hook(env.stop(RG_ANSWER, "t1"))
    second = env.ping()
    assert second["pid"] == first["pid"]
    assert second["requests"] - first["requests"] == 4  # three hooks and this ping, each one connection
    assert env.managers() == [first["pid"]]


def test_racing_hooks_leave_exactly_one_manager(env):
    payloads = [env.prompt("question %d" % i, "t%d" % i, session_id="race-%d" % i) for i in range(4)]
    procs = [env.hook_proc() for _ in payloads]  # each starts and waits for its payload on stdin
    for p, payload in zip(procs, payloads):  # then all four go at once
        p.stdin.write(json.dumps(payload))
        p.stdin.close()
    for p in procs:
        out, err = p.stdout.read(), p.stderr.read()
        assert p.wait(timeout=60) == 0, err
        assert isinstance(one_json_object(out), dict)
    status = env.wait_manager()
    assert wait_for(lambda: env.managers() == [status["pid"]], WAIT), (env.managers(), status)
    assert env.pidfile() == status["pid"]
    assert env.ping()["pid"] == status["pid"]


# -- 2. a private socket, and one manager per data root -------------------------------------------


def test_the_socket_is_private_and_a_second_manager_exits_at_once(env):
    env.hook(env.prompt("hello", "t1"))
    first = env.wait_manager()
    assert stat.S_IMODE(os.stat(env.run).st_mode) == 0o700
    st = os.stat(env.sock)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    r = env.python("egg-manager", "serve")
    assert r.returncode == 0, r.stderr
    assert env.pidfile() == first["pid"] and env.managers() == [first["pid"]]
    assert os.stat(env.sock).st_ino == st.st_ino  # the second one did not replace the socket
    again = env.ping()
    assert again is not None and again["pid"] == first["pid"]
    env.hook(env.tool("ls", "a\n", "t1", "c1"))
    assert env.ping()["requests"] == again["requests"] + 2  # still serving hooks


# -- 3. warm equals cold ---------------------------------------------------------------------


def test_a_covered_call_is_denied_alike_with_and_without_the_manager(env):
    env.record_chat1()
    pid = env.wait_manager()["pid"]
    before = env.ping()["requests"]
    env.hook(env.prompt("bake some bread", "u2", session_id="s2"))
    warm, _ = env.hook(pre_tool(env, "rg -n parse_config ./src", "s2", "u2"))
    assert env.ping()["requests"] - before == 3  # both hooks asked the manager
    env.hook(env.prompt("bake some bread", "u3", session_id="s3"), EGGSHELL_MANAGER="off")
    cold, _ = env.hook(pre_tool(env, "rg -n parse_config ./src", "s3", "u3"), EGGSHELL_MANAGER="off")
    assert env.ping()["requests"] - before == 4  # ... and these two did not
    reason = denial(warm)
    assert reason is not None, warm
    assert "rg -n parse_config src" in reason and RG_OUT.strip() in reason
    assert denial(cold) == reason
    assert env.ping()["pid"] == pid


# -- 4. delivery only after the ack --------------------------------------------------------------


def test_delivery_is_recorded_only_after_the_hook_acknowledges(env):
    env.record_chat1()
    payload = env.prompt("where is parse_config defined?", "t4", session_id="s4")
    step = codex.record(payload, env.paths)  # the hook's durable step, in this process
    assert step is not None and step.answer_needed
    chat = Deliveries(env.paths.state_dir, "s4")

    def ask(ack: bool) -> dict:
        deadline = time.monotonic() + 10.0
        conn = client.connect(env.data, deadline)
        assert conn is not None
        try:
            assert conn.send({"op": "answer", "cap": 48000, "payload": payload, "step": step.to_json(), "budget": 5}, deadline)
            got = conn.receive(deadline)
            assert got is not None and isinstance(got.get("reply"), dict), got
            if ack:  # as the hook does; a manager with nothing to record may have closed already
                conn.send({"op": "ack"}, deadline)
            return got["reply"]
        finally:
            conn.close()

    first = ask(ack=False)
    ctx = first["context"]  # the manager answers host-neutrally; the hook formats it
    assert RG_ANSWER in ctx and RG_OUT.strip() in ctx
    env.ping()  # the manager has moved on
    assert chat.load().delivered == frozenset()
    second = ask(ack=True)
    assert second == first  # nothing was taken as delivered: the same context again
    assert wait_for(lambda: chat.load().delivered, WAIT), env.manager_log()
    third = ask(ack=True)
    assert RG_OUT.strip() not in json.dumps(third)  # delivered once: not sent to this chat again


# -- 5. an open turn reaches the store -------------------------------------------------------------


def test_an_open_turns_observations_reach_the_store_before_its_stop(env):
    env.hook(env.prompt("where is parse_config defined?", "t1"))
    env.hook(env.tool(RG, RG_OUT, "t1", "c-rg"))

    def interrupted():
        v = env.view("sess-1", "t1")
        return v is not None and [t.use_id for t in v.tools] == ["c-rg"] and v.answer is None

    assert wait_for(interrupted, WAIT), env.manager_log()
    path = env.journal_path("sess-1", "t1")
    assert os.path.exists(path)  # still open: it stays queued
    (v,) = [v for v in env.views() if v.turn == "t1"]
    assert v.tools[0].outcome == RG_OUT and v.prompt == "where is parse_config defined?"
    env.hook(env.stop(RG_ANSWER, "t1"))
    assert wait_for(lambda: (v := env.view("sess-1", "t1")) is not None and v.answer == RG_ANSWER, WAIT), env.manager_log()
    (v,) = [v for v in env.views() if v.turn == "t1"]  # one turn, now whole (not a second, interrupted copy)
    assert [t.use_id for t in v.tools] == ["c-rg"] and v.answer == RG_ANSWER
    assert wait_for(lambda: not os.path.exists(path), WAIT)


def test_egg_find_just_after_a_stop_shows_the_turn_whole(env):
    """A reader run right after a chat ends (the user's `egg find`, an e2e test) has the manager save
    the sealed turns first: it must not see the open turn's partial commit without its answer."""
    env.hook(env.prompt("where is parse_config defined?", "t1"))
    env.hook(env.tool(RG, RG_OUT, "t1", "c-rg"))
    assert wait_for(lambda: (v := env.view("sess-1", "t1")) is not None and v.answer is None, WAIT), env.manager_log()
    # The Stop's seal, journaled as its hook does, minus the nudge: the manager's settler has not looked yet.
    codex._seal(Journal(env.paths.journal_dir), "sess-1", "t1", RG_ANSWER, "Stop")
    r = subprocess.run([sys.executable, "-m", "eggshell", "egg", "find", "parse_config defined"], env=dict(env.proc_env(), PYTHONPATH=env.lib),
                       cwd=env.project, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "=> " + RG_ANSWER in r.stdout, (r.stdout, r.stderr, env.manager_log())
    assert "not shown yet" not in r.stderr, r.stderr
    assert not Journal(env.paths.journal_dir).files()  # saved whole, so it left the queue
    assert client.request(env.data, {"op": "settle", "budget": "x"}, 5.0) == {"settled": True, "queued_turns": 0}


# -- 6. a manager killed mid-turn loses nothing ----------------------------------------------------


def test_a_manager_killed_mid_turn_loses_nothing(env):
    env.hook(env.prompt("where is parse_config defined?", "t1"))
    env.hook(env.tool(RG, RG_OUT, "t1", "c1"))
    old = env.wait_manager()["pid"]
    os.kill(old, signal.SIGKILL)
    assert wait_for(lambda: not alive(old), WAIT)
    r1, _ = env.hook(env.tool("sed -n 1,5p src/config.py", "def parse_config(path):\n    return {}\n", "t1", "c2"))
    r2, _ = env.hook(env.stop(RG_ANSWER, "t1"))
    assert isinstance(r1, dict) and r2 == {}
    new = env.wait_manager()["pid"]
    assert new != old and alive(new)

    def whole():
        v = env.view("sess-1", "t1")
        return v is not None and [t.use_id for t in v.tools] == ["c1", "c2"] and v.answer == RG_ANSWER

    assert wait_for(whole, WAIT), env.manager_log()
    assert wait_for(lambda: not Journal(env.paths.journal_dir).files(), WAIT)
    conn = client.connect(env.data, time.monotonic() + 2.0)
    assert conn is not None
    conn.close()
    # Both hooks after the kill may have started one; the later finds the lock held and exits.
    assert wait_for(lambda: env.managers() == [new], WAIT), env.managers()


# -- 7. a stopped manager never blocks the agent ---------------------------------------------------


def test_a_stopped_manager_never_blocks_the_agent(env):
    env.record_chat1()
    pid = env.wait_manager()["pid"]
    env.hook(env.prompt("bake some bread", "u1", session_id="ctl"))
    control, _ = env.hook(pre_tool(env, "rg -n parse_config ./src", "ctl", "u1"), EGGSHELL_BUDGET_S="1")
    assert denial(control), control  # a running manager denies this call within the same budget
    env.hook(env.prompt("bake some bread", "t1"))
    env.hook(env.tool("ls src", "config.py\n", "t1", "c1"))
    os.kill(pid, signal.SIGSTOP)
    try:
        assert wait_for(lambda: proc_state(pid) == "T", WAIT)
        # the first hook sees it is stopped (SO_PEERCRED's pid, /proc/PID/stat) and answers cold at once
        reply, took = env.hook(pre_tool(env, "rg -n parse_config ./src", "sess-1", "t1"), EGGSHELL_BUDGET_S="20")
        assert denial(reply) == denial(control) and took < 10, (reply, took)  # not the 20 s budget waited out
        assert "the manager (pid %d) is stopped" % pid in env.log_text() and "kill -CONT %d" % pid in env.log_text()
        assert client.unresponsive(env.run)[0] == pid  # noted for the hooks after it (owner only)
        assert stat.S_IMODE(os.stat(os.path.join(env.run, client.UNRESPONSIVE)).st_mode) == 0o600
        reply, took = env.hook(env.stop("it is in src/config.py", "t1"), EGGSHELL_BUDGET_END_S="2")
        assert reply == {} and took < 2 + SLACK, took
        said = [line for line in env.log_text().splitlines() if "is stopped;" in line]
        assert len(said) == 1, said  # the next hooks go cold without trying, and without a word
        events = Journal(env.paths.journal_dir).read("sess-1", "t1")
        assert [e["event"] for e in events] == ["prompt", "tool", "stop"] and events[-1]["answer"] == "it is in src/config.py"
        assert env.view("sess-1", "t1") is None or env.view("sess-1", "t1").answer is None  # saved only by the manager
        doctor = env.python("egg", "doctor")
        assert ("FAIL warm manager: pid %d is stopped (state T in /proc/%d/stat)" % (pid, pid)) in doctor.stdout, doctor.stdout
        assert "`kill -CONT %d`" % pid in doctor.stdout
        assert env.managers() == [pid]  # no replacement was started while it holds the data root
    finally:
        os.kill(pid, signal.SIGCONT)
    assert wait_for(lambda: (v := env.view("sess-1", "t1")) is not None and v.answer == "it is in src/config.py", WAIT), \
        env.manager_log()
    assert wait_for(lambda: client.unresponsive(env.run) is None, WAIT)  # running again: it dropped the note itself
    before = env.ping()["requests"]
    env.hook(env.prompt("bake some bread", "t2"))
    assert env.ping()["pid"] == pid and env.ping()["requests"] > before + 1  # the hooks use it again


# -- 8. idle exit ------------------------------------------------------------------------------


def test_an_idle_manager_exits_and_leaves_nothing(env):
    env.extra["EGGSHELL_MANAGER_IDLE"] = "2"
    env.hook(env.prompt("hello", "t1"))
    pid = env.wait_manager()["pid"]
    env.hook(env.prompt("hello again", "t2"))  # answered by the manager: it loads the store
    # no more requests from here (a ping would count as activity)
    assert wait_for(lambda: not alive(pid), WAIT), env.manager_log()
    assert not os.path.exists(env.sock)
    assert wait_for(lambda: not pids_by_data_root(env.data), 5.0), pids_by_data_root(env.data)
    # it left a snapshot for the next cold hook, readable by the owner only
    snaps = os.path.join(env.data, "run", "snapshots")
    (snap,) = os.listdir(snaps)
    assert snap.endswith(".pickle") and stat.S_IMODE(os.stat(os.path.join(snaps, snap)).st_mode) == 0o600


# -- 9. a provider child dies with the manager -----------------------------------------------------


def test_a_provider_program_dies_with_a_killed_manager(env):
    os.makedirs(os.path.dirname(env.paths.global_config), exist_ok=True)
    with open(env.paths.global_config, "w", encoding="utf-8") as f:
        f.write("semantic_matcher = [%s, %s]\n" % (json.dumps(sys.executable), json.dumps(os.path.join(PROVIDERS, "good.py"))))
    env.record_chat1()  # the provider ranks stored turns: there must be some
    pid = env.wait_manager()["pid"]
    env.hook(env.prompt("where is parse_config defined?", "t2", session_id="s2"))

    def provider():
        kids = [p for p in pids_by_data_root(env.data)
                if b"good.py" in proc_text(p, "cmdline") and parent_pid(p) == pid]
        return kids[0] if kids else None

    child = wait_for(provider, WAIT)
    assert child, "the manager started no provider; log:\n%s" % env.manager_log()
    os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: not alive(child), 5.0), "provider %d outlived its manager" % child
    assert wait_for(lambda: not alive(pid), 5.0)


# -- 10. a full disk -------------------------------------------------------------------------


def test_a_hook_that_cannot_journal_answers_and_changes_nothing(env):
    env.hook(env.prompt("where is parse_config defined?", "t1"))
    env.hook(env.tool(RG, RG_OUT, "t1", "c1"))
    env.wait_manager()
    assert wait_for(lambda: env.view("sess-1", "t1") is not None, WAIT), env.manager_log()  # the open turn is saved so far
    path = env.journal_path("sess-1", "t1")
    journal, egg = read_bytes(path), read_bytes(env.egg)
    limit = len(journal)

    def full_disk():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    reply, took = env.hook(env.tool("ls src", "config.py\n", "t1", "c-full"), preexec_fn=full_disk)
    assert reply == {} and took < 10 + SLACK
    assert "File too large" in env.log_text()  # the append failed (EFBIG), and the hook said so in its log
    assert read_bytes(path) == journal
    assert read_bytes(env.egg) == egg
    env.hook(env.tool("cat src/config.py", "def parse_config(path):\n", "t1", "c3"))
    env.hook(env.stop(RG_ANSWER, "t1"))

    def whole():
        v = env.view("sess-1", "t1")
        return v is not None and [t.use_id for t in v.tools] == ["c1", "c3"] and v.answer == RG_ANSWER

    assert wait_for(whole, WAIT), env.manager_log()


# -- 11. a corrupt chat state ----------------------------------------------------------------


def test_a_corrupt_chat_state_never_stops_a_hook(env):
    name = hashlib.sha256("s11".encode()).hexdigest()[:32]
    path = os.path.join(env.paths.state_dir, "chats", name + ".json")
    assert Deliveries(env.paths.state_dir, "s11").path == path
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as f:
        f.write(b"\x00{not json at all\xff")
    s = dict(session_id="s11")
    reply, _ = env.hook(env.prompt("where is parse_config defined?", "t1", **s))
    assert isinstance(reply, dict)
    env.hook(env.tool(RG, RG_OUT, "t1", "c1", **s))
    env.hook(env.stop(RG_ANSWER, "t1", **s))
    assert wait_for(lambda: (v := env.view("s11", "t1")) is not None and v.answer == RG_ANSWER and len(v.tools) == 1,
                    WAIT), env.manager_log()


# -- 12. two chats on one .egg at once -------------------------------------------------------------


def test_two_chats_writing_one_egg_at_once(env):
    errors: list[BaseException] = []

    def chat(session: str) -> None:
        try:
            s = dict(session_id=session)
            for i in range(5):
                turn = "%s-t%d" % (session, i)
                env.hook(env.prompt("step %d of %s: where is parse_config?" % (i, session), turn, **s))
                env.hook(env.tool("rg -n parse_config src/%s_%d" % (session, i), "hit %s %d\n" % (session, i), turn, turn + "-a", **s))
                env.hook(env.tool("ls src/%s_%d" % (session, i), "file %s %d\n" % (session, i), turn, turn + "-b", **s))
                env.hook(env.stop("answer %s %d" % (session, i), turn, **s))
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=chat, args=(s,)) for s in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors

    def all_saved():
        got = {(v.session, v.turn): v for v in env.views() if v.answer is not None}
        return len(got) == 10 and got

    got = wait_for(all_saved, WAIT)
    assert got, (sorted((v.session, v.turn, v.answer) for v in env.views()), env.manager_log())
    assert len(env.views()) == 10
    for (session, turn), v in got.items():
        i = int(turn.rsplit("t", 1)[1])
        assert v.answer == "answer %s %d" % (session, i)
        assert [t.use_id for t in v.tools] == [turn + "-a", turn + "-b"]
        assert [t.outcome for t in v.tools] == ["hit %s %d\n" % (session, i), "file %s %d\n" % (session, i)]
    assert wait_for(lambda: not Journal(env.paths.journal_dir).files(), WAIT)
    r = env.python("egg", "fsck", env.egg)
    assert r.returncode == 0, r.stdout + r.stderr


# -- regressions ---------------------------------------------------------------------------------


def test_a_sealed_turn_whose_save_failed_is_retried(env):
    eggs = os.path.dirname(env.egg)
    with open(eggs, "w") as f:  # the store cannot be written for a while: its directory is a file
        f.write("in the way\n")
    env.hook(env.prompt("where is parse_config defined?", "t1"))
    env.hook(env.tool(RG, RG_OUT, "t1", "c1"))
    env.hook(env.stop(RG_ANSWER, "t1"))
    pid = env.wait_manager()["pid"]
    assert wait_for(lambda: "save queue:" in env.log_text(), WAIT)  # the manager tried, failed, kept the file
    os.unlink(eggs)  # the store can be written again; the sealed journal file does not change
    # one of the next passes (every SETTLE_EVERY_S) of this same manager saves it
    assert wait_for(lambda: (v := env.view("sess-1", "t1")) is not None and v.answer == RG_ANSWER, 3 * SETTLE_EVERY_S + 1), \
        env.manager_log()
    assert wait_for(lambda: not os.path.exists(env.journal_path("sess-1", "t1")), WAIT)
    assert env.ping()["pid"] == pid


def test_a_request_with_no_budget_left_is_not_answered(env):
    env.record_chat1()
    payload = env.prompt("where is parse_config defined?", "t5", session_id="s5")
    step = codex.record(payload, env.paths)

    def ask(budget: float) -> dict | None:
        deadline = time.monotonic() + 5.0
        conn = client.connect(env.data, deadline)
        assert conn is not None
        try:
            assert conn.send({"op": "answer", "cap": 48000, "payload": payload, "step": step.to_json(), "budget": budget},
                             deadline)
            return conn.receive(deadline)
        finally:
            conn.close()

    assert ask(0.0) is None  # the hook that sent budget 0 has already answered without memory
    got = ask(5.0)  # the same request with time left is answered
    assert got is not None and RG_ANSWER in got["reply"]["context"]


def test_a_data_root_too_long_for_a_unix_socket_gets_a_short_private_one(tmp_path):
    from eggshell.runtime import client

    long_root = os.path.join(str(tmp_path), "d" * 120)
    p = client.socket_path(long_root)
    assert len(os.fsencode(p)) <= client.MAX_SOCKET_BYTES + 30 and p.endswith(".sock")
    assert p == client.socket_path(long_root + "/") or p == client.socket_path(long_root)
    assert client.socket_path(long_root + "x") != p  # one per data root
    short = os.path.join(str(tmp_path), "data")
    assert client.socket_path(short) == os.path.join(short, "run", "manager.sock")
    # and a real manager serves there
    env = dict(os.environ, EGGSHELL_DATA_ROOT=long_root, EGGSHELL_MANAGER_IDLE="30", PYTHONPATH=os.path.join(REPO, "lib"))
    proc = subprocess.Popen([sys.executable, "-m", "eggshell", "egg-manager", "serve"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        status = wait_for(lambda: client.request(long_root, {"op": "ping"}, timeout=1.0), timeout=15)
        assert status and status["pid"] == proc.pid
        assert stat.S_IMODE(os.stat(os.path.dirname(p)).st_mode) == 0o700 and stat.S_IMODE(os.stat(p).st_mode) == 0o600
    finally:
        client.request(long_root, {"op": "stop"}, timeout=2.0)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and not os.path.exists(p)


# -- a provider that hangs, and kills at any instant ----------------------------------------------


def test_a_hung_provider_never_blocks_the_agent(env):
    stall_provider(env)
    env.record_chat1()  # a stored turn: the prompt below has a candidate to ask the provider about
    pid = env.wait_manager()["pid"]
    s = dict(session_id="s2")
    t0 = time.monotonic()
    reply, took = env.hook(env.prompt("where is parse_config defined?", "t2", **s), EGGSHELL_BUDGET_S="2")
    assert took < 2 + SLACK, (reply, took)
    child = provider_child(env, pid, "stall.py")
    assert child, "the prompt started no provider; log:\n%s" % env.manager_log()
    assert "the manager gave no answer within the budget" in env.log_text()
    # the worker is inside the provider's query (15 s): these queue behind it, and still answer in time
    reply, took = env.hook(env.tool(RG, RG_OUT, "t2", "c2", **s), EGGSHELL_BUDGET_S="2")
    assert reply == {} and took < 2 + SLACK, (reply, took)
    reply, took = env.hook(env.stop(RG_ANSWER, "t2", **s))
    assert reply == {} and took < 2 + SLACK, (reply, took)
    assert alive(child) and time.monotonic() - t0 < PROVIDER_DEADLINE_S, "the provider was not stalled through these hooks"
    # once the provider's deadline passes it is killed, the query goes on lexically, and the turn is saved
    assert wait_for(lambda: (v := env.view("s2", "t2")) is not None and v.answer == RG_ANSWER
                    and [t.use_id for t in v.tools] == ["c2"], 30.0), env.manager_log()
    assert not alive(child)
    assert "no reply within %.1fs" % PROVIDER_DEADLINE_S in env.log_text()
    assert env.ping()["pid"] == pid


def test_a_manager_killed_during_a_search(env):
    stall_provider(env)
    env.record_chat1()
    old = env.wait_manager()["pid"]
    s = dict(session_id="s2")
    t0 = time.monotonic()
    hook = env.hook_proc()  # the default budget: 10 s
    hook.stdin.write(json.dumps(env.prompt("where is parse_config defined?", "t2", **s)))
    hook.stdin.close()
    child = wait_for(lambda: provider_child(env, old, "stall.py"), WAIT)
    assert child, "the prompt started no provider; log:\n%s" % env.manager_log()
    time.sleep(0.5)  # the query is written: the worker waits for its reply
    assert hook.poll() is None, "the hook did not wait for the manager"
    os.kill(old, signal.SIGKILL)
    assert hook.wait(timeout=10 + SLACK) == 0, hook.stderr.read()
    took = time.monotonic() - t0
    one_json_object(hook.stdout.read())
    hook.stdout.close()
    hook.stderr.close()
    assert took < 10 + SLACK, took
    assert wait_for(lambda: gone(env, old), WAIT)  # a loaded machine may take seconds to reap them
    assert wait_for(lambda: not alive(child), WAIT), "provider %d outlived its manager" % child
    events = Journal(env.paths.journal_dir).read("s2", "t2")
    assert [e["event"] for e in events] == ["prompt"]  # journaled before the manager was asked
    r1, _ = env.hook(env.tool(RG, RG_OUT, "t2", "c2", **s))
    r2, _ = env.hook(env.stop(RG_ANSWER, "t2", **s))
    assert isinstance(r1, dict) and r2 == {}
    new = env.wait_manager()["pid"]
    assert new != old and alive(new)
    assert wait_for(lambda: (v := env.view("s2", "t2")) is not None and v.answer == RG_ANSWER
                    and [t.use_id for t in v.tools] == ["c2"], WAIT), env.manager_log()
    assert wait_for(lambda: not Journal(env.paths.journal_dir).files(), WAIT)


KILL_TURNS = 5  # turns whose save is cut by a kill, each at its own instant (after UNDISTURBED turns saved undisturbed)
KILL_CALLS = 30
UNDISTURBED = 2  # turns saved with no kill first: the second times the window the kills fall in


def test_a_manager_killed_at_any_instant_of_a_save_loses_nothing(env):
    use_provider(env, "false")  # what is tested is saving: no model to load on the worker
    s = dict(session_id="kill")
    journal = Journal(env.paths.journal_dir)
    assert env.hook(env.ev("SessionStart", source="startup", **s))[0] is not None  # starts the manager
    rng = random.Random(1729)
    slots = list(range(KILL_TURNS))
    rng.shuffle(slots)  # each kill in its own slice of the window, in a random order, at a random point of it
    window = None  # how long after the Stop's reply the kills come: a little more than an undisturbed save here
    landed = []  # (delay, where the kill came: before the save wrote, during it, after it had removed the journal)
    for i in range(KILL_TURNS + UNDISTURBED):
        turn = "k%d" % i
        pid = env.wait_manager()["pid"]
        env.hook(env.prompt("long turn %d: read every log" % i, turn, **s))  # the manager loads the store to answer
        for j in range(KILL_CALLS):  # the PostToolUse hook's durable step, in this process (30 hooks would take seconds)
            assert codex.record(env.tool("cat logs/%d.log" % j, big_output(i, j), turn, "%s-c%d" % (turn, j), **s), env.paths)
        size = os.path.getsize(env.egg) if os.path.exists(env.egg) else 0
        env.hook(env.stop("answer %d" % i, turn, **s))  # seals the turn and nudges the manager: it saves ~1.5 MB now
        if i < UNDISTURBED:  # saved undisturbed, and timed: the first save of a store also makes it, so the
            t0 = time.monotonic()  # window is the second's, a save like those the kills cut (a first-save window let every kill land after)
            assert wait_for(lambda: not os.path.exists(env.journal_path("kill", turn)) and os.path.exists(env.egg), WAIT, 0.001), \
                env.manager_log()
            window = 1.2 * (time.monotonic() - t0)
            continue
        delay = window * (slots[i - UNDISTURBED] + rng.random()) / KILL_TURNS
        time.sleep(delay)
        queued = os.path.exists(env.journal_path("kill", turn))
        grown = os.path.exists(env.egg) and os.path.getsize(env.egg) > size
        os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: gone(env, pid), 5.0)
        torn = grown and not read_bytes(env.egg).endswith(b"\n")  # cut mid-line: the next commit trims the tail
        landed.append((round(delay, 3), "after" if not queued else "during (torn)" if torn else "during" if grown else "before"))
        assert isinstance(env.hook(env.ev("SessionStart", source="resume", **s))[0], dict)  # starts a new manager
        assert wait_for(lambda: not journal.files(), WAIT), (landed, journal.files(), env.manager_log())
    views = env.views()
    assert len(views) == KILL_TURNS + UNDISTURBED, (len(views), landed)  # one per turn: no second, partial copy
    for i in range(KILL_TURNS + UNDISTURBED):
        turn = "k%d" % i
        v = env.view("kill", turn)
        assert v is not None and v.answer == "answer %d" % i and v.prompt == "long turn %d: read every log" % i, (turn, landed)
        assert [t.use_id for t in v.tools] == ["%s-c%d" % (turn, j) for j in range(KILL_CALLS)], (turn, landed)
        assert [t.outcome for t in v.tools] == [big_output(i, j) for j in range(KILL_CALLS)], (turn, landed)
    r = env.python("egg", "fsck", env.egg)
    assert r.returncode == 0, r.stdout + r.stderr
    assert any(w != "after" for _, w in landed), (window, landed)  # some kill came before its turn had left the queue


def test_egg_status_counts_a_store_the_manager_holds_without_reading_it_again(env):
    """At 100,000 turns `egg status` read the whole store (a minute, gigabytes); the manager has it loaded."""
    env.record_chat1()
    env.wait_manager()
    status = lambda: subprocess.run([sys.executable, "-m", "eggshell", "egg", "status"], env=dict(env.proc_env(), PYTHONPATH=env.lib),  # noqa: E731
                                    cwd=env.project, capture_output=True, text=True, timeout=60)
    r = status()
    assert r.returncode == 0, r.stderr
    store = [ln for ln in r.stdout.splitlines() if ln.startswith("store")]
    assert store and "(1 turn)" in store[0], r.stdout
    assert "embedded: not counted yet" in r.stdout or "embedded: all 1 turn" in r.stdout, r.stdout  # the manager's count
    client.request(env.data, {"op": "stop"}, 2.0)
    assert wait_for(lambda: env.ping(0.5) is None, WAIT)
    r = status()
    assert r.returncode == 0 and "(1 turn)" in r.stdout and "embedded: not counted (no manager holds this store" in r.stdout, r.stdout
