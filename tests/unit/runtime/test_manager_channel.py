"""The hook<->manager channel: who a hook talks to, and what it does when the manager cannot answer.

Another local user must never receive a chat's prompts or tool output, nor change a reply,
through the manager's socket; and a manager that cannot answer must cost the hooks little
and never crash-loop. Each with real hooks, a real manager, and a real second uid (`nobody`):
  1. a listener another user made in the fallback socket directory (a long data root, no
     XDG_RUNTIME_DIR) gets no connection and no byte; every reply is the cold one; no manager
     starts, and one started by hand refuses to listen there;
  2. a listener of another uid on a socket in our own 0700 directory (bound by us, listening as
     `nobody`: only SO_PEERCRED tells) gets no byte, and no reply changes;
  3. the manager drops a client of another uid before reading a byte (its socket modes loosened
     by hand, as a mistake would);
  4. a manager that accepts and says nothing (hung) costs one hook its budget, and the hooks after
     it nothing (they do not even connect), for RETRY_S;
  5. a directory at the socket path: hooks answer cold, start no manager, and say why; a manager
     started by hand refuses without a traceback, notes why, and no hook starts another for a while;
  6. a store lock held by another process never stalls the manager: hooks keep getting warm
     answers, the turn stays journaled and is saved once the lock is free; `egg doctor` names the
     holder;
  7. a directory that is a symlink, another user's, or open to others is never used;
  8. a tool event is answered (warm, by the tool worker) while the main worker is stuck in a
     search: journal-and-acknowledge never queues behind search or saving; and never from a
     workspace its store file has moved past;
  9. the lock the two workers share lets a waiting tool answer in first, and inside the main
     worker's long read-only phases.
A stopped (SIGSTOP) manager is test_manager.py's test 7.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from eggshell.runtime import client
from eggshell.runtime.journal import Journal
from eggshell.paths import Paths, private_dir
from eggshell.search.matcher import PROVIDER_DEADLINE_S
from helpers import alive, wait_for
from helpers.managed import (RG, RG_ANSWER, RG_OUT, SLACK, WAIT, ManagedEnv, checkout, denial, env, pre_tool,  # noqa: F401 (fixtures)
                             provider_child, stall_provider)

NOBODY = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups")
INJECTED = "INJECTED BY ANOTHER USER"

needs_nobody = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv (a second uid)")

# A listener run as another user: it acts like a manager (says hello, reads one request, answers
# with injected context) and records every connection and byte it got in its stats file.
LISTENER = r"""
import json, os, socket, sys
mode, path, stats, stop = sys.argv[1:5]
if mode == "bind":
    os.makedirs(os.path.dirname(path), mode=0o777, exist_ok=True)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o777)
else:  # a socket another process bound and passed on: listening here makes this process its peer
    s = socket.socket(fileno=int(mode))
s.listen(16)
got = {"uid": os.geteuid(), "connections": 0, "bytes": 0}
def save():
    with open(stats + ".tmp", "w") as f:
        json.dump(got, f)
    os.replace(stats + ".tmp", stats)
save()
s.settimeout(0.1)
while not os.path.exists(stop):
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    got["connections"] += 1
    c.settimeout(2.0)
    try:
        c.sendall(b'{"hello":1}\n')
        data = b""
        while b"\n" not in data:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
        got["bytes"] += len(data)
        ctx = {"hookEventName": "UserPromptSubmit", "additionalContext": "INJECTED BY ANOTHER USER"}
        c.sendall((json.dumps({"reply": {"hookSpecificOutput": ctx}}) + "\n").encode())
    except OSError:
        pass
    c.close()
    save()
"""


class Listener:
    """LISTENER as `nobody`, in a scratch directory only it and we use."""

    def __init__(self, scratch: str, path: str, fd: int | None = None):
        """Binding `path` itself, or listening on the bound socket `fd`."""
        self.stats = os.path.join(scratch, "stats.json")
        self.stop = os.path.join(scratch, "stop")
        mode = "bind" if fd is None else str(fd)
        self.proc = subprocess.Popen([*NOBODY, "/usr/bin/python3", "-c", LISTENER, mode, path, self.stats, self.stop],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=() if fd is None else (fd,))
        assert wait_for(lambda: os.path.exists(self.stats), WAIT), self.proc.stderr.read() if self.proc.poll() is not None else ""
        assert self.got()["uid"] == 65534

    def got(self) -> dict:
        with open(self.stats) as f:
            return json.load(f)

    def close(self) -> dict:
        open(self.stop, "w").close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.got()


@pytest.fixture
def scratch():
    """A directory `nobody` may write: sticky and open to all, like /tmp."""
    d = tempfile.mkdtemp(prefix="egt-", dir="/tmp")
    os.chmod(d, 0o1777)
    try:
        yield d
    finally:
        subprocess.run(["rm", "-rf", d])


class LongEnv(ManagedEnv):
    """A data root too long for a Unix socket, no XDG_RUNTIME_DIR, and TMPDIR a scratch directory:
    the socket falls back to TMPDIR/eggshell-UID/<hash>.sock (this test's own, not the machine's /tmp)."""

    def __init__(self, tmp, checkout: str, tmpdir: str):
        self.tmpdir = tmpdir
        super().__init__(tmp, checkout)
        shutil.rmtree(self.data, ignore_errors=True)
        self.data = os.path.join(self.data + "-" + "d" * 100, "data")
        os.makedirs(self.data, mode=0o700)
        self.paths = Paths(self.paths.prefix, self.data, self.paths.global_config, self.paths.codex_home, self.paths.bin_dir)

    def proc_env(self) -> dict:
        env = super().proc_env()
        env.pop("XDG_RUNTIME_DIR", None)
        env["TMPDIR"] = self.tmpdir
        return env

    @property
    def sock(self) -> str:
        old = dict(os.environ)
        try:
            os.environ.pop("XDG_RUNTIME_DIR", None)
            os.environ["TMPDIR"] = self.tmpdir
            tempfile.tempdir = None
            return client.socket_path(self.data)
        finally:
            os.environ.clear()
            os.environ.update(old)
            tempfile.tempdir = None

    def shutdown(self) -> None:
        super().shutdown()
        shutil.rmtree(os.path.dirname(self.data), ignore_errors=True)


def record_chat1_cold(env: ManagedEnv) -> None:
    """Chat 1 (s1/t1) searched for parse_config and answered, saved by the hooks themselves (no manager)."""
    for payload in (env.prompt("where is parse_config defined?", "t1", session_id="s1"), env.tool(RG, RG_OUT, "t1", "c-rg", session_id="s1"),
                    env.stop(RG_ANSWER, "t1", session_id="s1")):
        env.hook(payload, EGGSHELL_MANAGER="off")
    assert env.view("s1", "t1") is not None and env.view("s1", "t1").answer == RG_ANSWER


def doctor(env: ManagedEnv) -> str:
    """`egg doctor` in the project, in the hooks' environment."""
    r = subprocess.run([sys.executable, "-m", "eggshell", "egg", "doctor"], env=dict(env.proc_env(), PYTHONPATH=env.lib),
                       cwd=env.project, capture_output=True, text=True, timeout=60)
    return r.stdout + r.stderr


def cold_replies(env: ManagedEnv, session: str) -> list[dict]:
    """A new chat's prompt and covered call, each answered cold in the hook (no manager)."""
    off = dict(EGGSHELL_MANAGER="off")
    return [env.hook(env.prompt("where is parse_config defined?", "u1", session_id=session), **off)[0],
            env.hook(pre_tool(env, "rg -n parse_config ./src", session, "u1"), **off)[0]]


def managed_replies(env: ManagedEnv, session: str) -> list[dict]:
    """The same chat through hooks that may use a manager."""
    return [env.hook(env.prompt("where is parse_config defined?", "u1", session_id=session))[0],
            env.hook(pre_tool(env, "rg -n parse_config ./src", session, "u1"))[0]]


def assert_cold_and_untouched(env: ManagedEnv, got: list[dict], want: list[dict]) -> None:
    assert got == want  # the cold answers, not the listener's
    assert RG_OUT.strip() in got[0]["hookSpecificOutput"]["additionalContext"] and denial(got[1])
    assert INJECTED not in json.dumps(got)


# -- 1. another user's directory at the fallback path ------------------------------------------------


@needs_nobody
def test_a_listener_in_a_fallback_directory_another_user_made_receives_nothing(tmp_path, checkout, scratch):
    env = LongEnv(tmp_path, checkout, scratch)
    try:
        sock = env.sock
        assert len(os.fsencode(os.path.join(env.data, "run", "manager.sock"))) > client.MAX_SOCKET_BYTES
        assert sock.startswith(os.path.join(scratch, "eggshell-%d" % os.getuid()) + "/")
        record_chat1_cold(env)
        listener = Listener(scratch, sock)  # nobody makes the directory first, and listens
        assert os.stat(os.path.dirname(sock)).st_uid == 65534
        want = cold_replies(env, "control")
        got = managed_replies(env, "attacked")
        env.hook(env.tool("ls src", "config.py\n", "u1", "c2", session_id="attacked"))
        env.hook(env.stop("done", "u1", session_id="attacked"))
        assert listener.got() == {"uid": 65534, "connections": 0, "bytes": 0}
        assert_cold_and_untouched(env, got, want)
        assert "belongs to uid 65534, not to this user" in env.log_text()
        assert not env.managers()  # a manager could not listen there: none was started
        # one started by hand refuses (it does not crash, and leaves the listener's socket alone)
        ino = os.lstat(sock).st_ino
        r = env.python("egg-manager", "serve")  # its stderr goes to run/manager.log
        said = open(os.path.join(env.run, client.LOG)).read()
        assert r.returncode == 1 and "not serving" in said and "belongs to uid 65534" in said and "Traceback" not in said, said
        assert os.lstat(sock).st_ino == ino
        assert "belongs to uid 65534" in open(os.path.join(env.run, client.REFUSED)).read()
        assert listener.close() == {"uid": 65534, "connections": 0, "bytes": 0}
        # nothing of the chat reached the listener's directory either
        assert sorted(os.listdir(os.path.dirname(sock))) == [os.path.basename(sock)]
    finally:
        env.shutdown()


# -- 2. a socket in our own directory, listened on by another uid ---------------------------------


@needs_nobody
def test_a_listener_of_another_uid_in_our_private_directory_receives_nothing(env, scratch):
    """Directory and socket inode are ours (0700, 0600): only the peer's credentials show who listens."""
    record_chat1_cold(env)
    run = private_dir(env.run)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(env.sock)
    os.chmod(env.sock, 0o600)
    st = os.lstat(env.sock)
    assert st.st_uid == os.geteuid() and stat.S_IMODE(os.lstat(run).st_mode) == 0o700
    listener = Listener(scratch, env.sock, fd=s.fileno())
    s.close()  # nobody's process holds it now
    want = cold_replies(env, "control")
    got = managed_replies(env, "attacked")
    assert listener.got()["bytes"] == 0
    assert_cold_and_untouched(env, got, want)
    assert "runs as uid 65534, not as this user" in env.log_text() and "nothing was sent" in env.log_text()
    assert not env.managers()
    out = doctor(env)
    assert "FAIL warm manager: not talking to the manager: the process listening on %s" % env.sock in out, out
    assert listener.close()["bytes"] == 0


# -- 3. the manager drops another uid's client -------------------------------------------------------


NOBODY_CLIENT = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5.0)
s.connect(sys.argv[1])
try:
    s.sendall(b'{"op":"ping"}\n')
except OSError:
    pass
got = b""
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
except OSError:
    pass
sys.stdout.write(repr(got))
"""


@needs_nobody
def test_the_manager_drops_a_client_of_another_uid_before_reading(env):
    env.hook(env.prompt("hello", "t1"))
    pid = env.wait_manager()["pid"]
    before = env.ping()["requests"]
    modes = {p: stat.S_IMODE(os.stat(p).st_mode) for p in (env.data, env.run, env.sock)}
    try:  # a mistake opens the way in: only the manager's own check is left
        os.chmod(env.data, 0o711)
        os.chmod(env.run, 0o711)
        os.chmod(env.sock, 0o666)
        r = subprocess.run([*NOBODY, "/usr/bin/python3", "-c", NOBODY_CLIENT, env.sock], capture_output=True, text=True, timeout=30)
    finally:
        for p, m in modes.items():
            os.chmod(p, m)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "b''"  # no hello, no status: the connection was closed unread
    assert wait_for(lambda: "dropped a connection from pid" in env.log_text() and "uid 65534" in env.log_text(), WAIT), env.log_text()
    status = env.ping()
    assert status["pid"] == pid and status["requests"] == before + 1  # it served on; the dropped one was no request


# -- 4. a hung manager --------------------------------------------------------------------------------


SILENT = r"""
import os, socket, sys, portalocker
path, count, lock = sys.argv[1:4]
held = [open(lock, "a")]
portalocker.lock(held[0], portalocker.LOCK_EX)  # the data root's manager lock, as a real one holds it
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
s.listen(16)
n = 0
with open(count + ".tmp", "w") as f:
    f.write("0")
os.replace(count + ".tmp", count)  # listening: a hook that connects now is accepted
while True:
    c, _ = s.accept()
    n += 1
    held.append(c)  # accepted, never answered: a manager whose every thread is stuck
    with open(count, "w") as f:
        f.write(str(n))
"""


def fake_manager(env, script: str):
    """A stand-in manager process listening at the socket (holding the manager lock), and the
    file it counts its accepted connections in."""
    private_dir(env.run)
    count = os.path.join(env.tmp, "accepted")
    p = subprocess.Popen([sys.executable, "-c", script, env.sock, count, os.path.join(env.run, client.LOCK)],
                         env=dict(os.environ, EGGSHELL_DATA_ROOT=env.data))
    assert wait_for(lambda: os.path.exists(count), WAIT)  # listening, not only bound (a connect between is refused)
    return p, count


def test_a_manager_that_accepts_and_says_nothing_costs_one_hook_its_budget_once(env):
    """Running but silent (every thread stuck): the first hook waits for it as for any answer, no
    longer; the hooks after it answer cold at once, without connecting, for RETRY_S."""
    record_chat1_cold(env)
    silent, count = fake_manager(env, SILENT)
    try:
        reply, took = env.hook(env.prompt("where is parse_config defined?", "u1", session_id="hung"), EGGSHELL_BUDGET_S="3")
        assert reply == {} and took < 3 + SLACK, (reply, took)
        assert "accepted but said nothing within the hook's budget (hung)" in env.log_text()
        noted = client.unresponsive(env.run)
        assert noted is not None and noted[0] == silent.pid
        reply, took = env.hook(pre_tool(env, "rg -n parse_config ./src", "hung", "u1"), EGGSHELL_BUDGET_S="20")
        assert denial(reply) and RG_OUT.strip() in denial(reply), reply  # the cold answer
        assert took < 10.0, took  # not its 20 s budget spent waiting
        assert open(count).read() == "1"  # the second hook did not even connect
        out = doctor(env)
        assert ("FAIL warm manager: pid %d accepted a hook" % silent.pid) in out and "kill %d" % silent.pid in out, out
    finally:
        silent.kill()
        silent.wait()
    # it is gone (its socket left behind, as a killed manager leaves it): the note is dropped, and
    # the next hook starts a real manager
    env.hook(env.prompt("bake some bread", "t9", session_id="after"))
    assert client.unresponsive(env.run) is None
    env.wait_manager()


BUSY = SILENT.replace("    held.append(c)  # accepted, never answered: a manager whose every thread is stuck",
                      "    try:\n"
                      "        c.sendall(b'{\"hello\":1}\\n')  # alive and greeting, its workers busy: no answer comes\n"
                      "    except OSError:\n"
                      "        pass  # a hook that stopped waiting before this accept (a loaded machine): as a manager, live on\n"
                      "    held.append(c)")


def test_a_post_tool_use_never_waits_behind_a_busy_manager_and_keeps_its_result(env):
    """PostToolUse journals its result before it asks; what it may get back is advice. A manager
    that greets at once but is too busy to answer costs it EGGSHELL_TOOL_WAIT_S, not its budget,
    and is not taken for hung (the next hooks still ask it). PreToolUse, whose answer may save a
    whole tool call, still waits for it (its budget here: 2 s)."""
    record_chat1_cold(env)
    env.hook(env.prompt("where is parse_config defined?", "b1", session_id="busy"), EGGSHELL_MANAGER="off")  # a journaled turn
    busy, count = fake_manager(env, BUSY)
    try:
        reply, took = env.hook(env.tool("rg -n parse_config src", RG_OUT, "b1", "call-b1", session_id="busy"), EGGSHELL_BUDGET_S="20")
        assert reply == {} and took < 0.3 + SLACK, (reply, took)  # not its 20 s budget
        assert [e["output"] for e in Journal(env.paths.journal_dir).read("busy", "b1") if e.get("event") == "tool"] == [RG_OUT]
        assert client.unresponsive(env.run) is None and "hung" not in env.log_text()
        reply, took = env.hook(pre_tool(env, "rg -n parse_config ./src", "busy", "b1"), EGGSHELL_BUDGET_S="2")
        assert reply == {} and 2.0 <= took < 2 + SLACK, (reply, took)  # waited its whole (short) budget for the answer
        assert open(count).read() == "2"  # both asked it
    finally:
        busy.kill()
        busy.wait()


# -- 5. a directory at the socket path ---------------------------------------------------------------


def test_a_directory_at_the_socket_path_answers_cold_and_never_crash_loops(env):
    record_chat1_cold(env)
    private_dir(env.run)
    os.mkdir(env.sock, 0o700)
    want = cold_replies(env, "control")
    got = managed_replies(env, "blocked")
    assert got == want and denial(got[1])
    assert ("%s is a directory, not the manager's socket: remove it (rm -r %s)" % (env.sock, env.sock)) in env.log_text()
    assert not env.managers()
    assert not os.path.exists(os.path.join(env.run, client.LOG))  # no manager ran, so none crashed
    out = doctor(env)
    assert "FAIL warm manager: not talking to the manager: %s is a directory" % env.sock in out, out
    # a manager started by hand refuses, says why, and no hook starts another for REFUSED_S
    r = env.python("egg-manager", "serve")  # its stderr goes to run/manager.log
    said = open(os.path.join(env.run, client.LOG)).read()
    assert r.returncode == 1 and "not serving" in said and "is a directory" in said and "Traceback" not in said, said
    assert "is a directory" in open(os.path.join(env.run, client.REFUSED)).read()
    os.rmdir(env.sock)  # fixed; but a manager that refused a moment ago is not started again at once
    assert client.spawn(env.data, env.proc_env()) is False
    old = time.time() - client.REFUSED_S - 1
    os.utime(os.path.join(env.run, client.REFUSED), (old, old))
    env.hook(env.prompt("bake some bread", "t9", session_id="after"))  # starts one now
    env.wait_manager()
    assert not os.path.exists(os.path.join(env.run, client.REFUSED))  # it serves: the refusal is gone


# -- 6. a store lock held elsewhere -----------------------------------------------------------------


HOLD = r"""
import sys, time, portalocker
f = open(sys.argv[1], "a")
portalocker.lock(f, portalocker.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def test_a_store_lock_held_elsewhere_never_stalls_the_manager(env):
    env.record_chat1()
    pid = env.wait_manager()["pid"]
    holder = subprocess.Popen([sys.executable, "-c", HOLD, env.egg + ".lock"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        s = dict(session_id="s2")
        env.hook(env.prompt("bake some bread", "t2", **s))
        env.hook(env.tool("ls src", "config.py\n", "t2", "c1", **s))
        env.hook(env.stop("bread is baked", "t2", **s))  # the manager tries to save it now, and every few seconds
        for i in range(3):  # spread over more than a settle pass: a stalled worker would hold each past its budget
            time.sleep(1.5)
            chat = dict(session_id="s3-%d" % i, EGGSHELL_BUDGET_S="20")
            env.hook(env.prompt("bake some bread", "u", session_id=chat["session_id"]), EGGSHELL_BUDGET_S="20")
            reply, took = env.hook(pre_tool(env, "rg -n parse_config ./src", chat["session_id"], "u"), EGGSHELL_BUDGET_S="20")
            assert denial(reply) and took < 10.0, (reply, took, env.log_text())
        assert os.path.exists(env.journal_path("s2", "t2"))  # not saved, not lost
        assert env.view("s2", "t2") is None
        assert "waiting for the lock %s.lock (another process holds it)" % env.egg in env.log_text()
        said = [line for line in env.log_text().splitlines() if "waiting for the lock" in line]
        assert len(said) == 1, said  # said once, not on every pass
        out = doctor(env)
        assert ("FAIL store lock %s.lock is held by pid %d" % (env.egg, holder.pid)) in out, out
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    assert wait_for(lambda: (v := env.view("s2", "t2")) is not None and v.answer == "bread is baked", WAIT), env.log_text()
    assert env.ping()["pid"] == pid


# -- 7. directories that are not this user's alone ------------------------------------------------


@needs_nobody
@pytest.mark.parametrize("case", ["symlink", "other uid", "open to others", "a file"])
def test_a_socket_directory_not_ours_alone_is_never_used(env, case, scratch):
    """run/ itself (the socket's directory for a short data root): never followed, never trusted."""
    real = os.path.join(scratch, "elsewhere")
    os.mkdir(real, 0o700)
    if case == "symlink":
        os.symlink(real, env.run)
    elif case == "other uid":
        os.mkdir(env.run, 0o700)
        os.chown(env.run, 65534, 65534)
    elif case == "open to others":
        os.mkdir(env.run)
        os.chmod(env.run, 0o777)
    else:
        open(env.run, "w").close()
    reply, _ = env.hook(env.prompt("hello", "t1"))
    assert reply == {}
    assert env.run in env.log_text() and "not talking to the manager" in env.log_text()
    assert not env.managers()
    assert os.listdir(real) == []  # nothing was made or written through the link
    with pytest.raises(client.NoManager) as e:
        client.reach(env.data, time.monotonic() + 2.0)
    assert not e.value.start and env.run in str(e.value)


# -- 8. journal-and-acknowledge never waits behind a search -----------------------------------------


def test_a_tool_event_is_answered_while_the_main_worker_is_stuck_in_a_search(env):
    """A provider that never answers holds the main worker inside a prompt's search for 15 s; a
    covered call proposed meanwhile is still denied, warm, within its budget (the tool worker)."""
    stall_provider(env)
    env.record_chat1()
    pid = env.wait_manager()["pid"]
    t0 = time.monotonic()
    env.hook(env.prompt("where is parse_config defined?", "t2", session_id="s2"), EGGSHELL_BUDGET_S="2")
    child = wait_for(lambda: provider_child(env, pid, "stall.py"), WAIT)
    assert child, "the prompt started no provider; log:\n%s" % env.manager_log()
    reply, took = env.hook(pre_tool(env, "rg -n parse_config ./src", "s2", "t2"), EGGSHELL_BUDGET_S="5")
    assert alive(child) and time.monotonic() - t0 < PROVIDER_DEADLINE_S, "the search was not stalled through the hook"
    reason = denial(reply)
    assert reason and "rg -n parse_config src" in reason and RG_OUT.strip() in reason, (reply, took, env.manager_log())
    assert took < 5.0, took  # answered, not after waiting out its budget
    assert "PreToolUse TimeoutError" not in env.log_text()
    reply, _ = env.hook(env.tool("ls src", "config.py\n", "t2", "c2", session_id="s2"), EGGSHELL_BUDGET_S="5")
    assert isinstance(reply, dict) and "PostToolUse TimeoutError" not in env.log_text()


def test_the_tool_worker_never_answers_from_a_workspace_its_store_has_moved_past(tmp_path):
    """Another process's commit, or the file removed: the main worker reads the store first."""
    from eggshell.runtime.warm import Grown, NotGrown, Resources
    from helpers.hook_env import Env

    e = Env(tmp_path)
    e.write_config('mode = "lexical"\n')
    e.record_turn("where is parse_config defined?", [(RG, RG_OUT)], RG_ANSWER, session="chat-1", turn="t1")
    res = Resources(e.data, e.paths.bin_dir, warm=True)
    read = (e.egg,)
    res.workspace(read)  # the main worker builds it
    grown = Grown(res)
    before = len(grown.workspace(read).corpus.candidates)
    e.record_turn("list the tests", [("ls tests", "test_a.py\n")], "one test", session="chat-2", turn="t2")  # a hook, by itself
    with pytest.raises(NotGrown):
        grown.workspace(read)
    res.grow()
    assert len(grown.workspace(read).corpus.candidates) > before
    os.unlink(e.egg)
    with pytest.raises(NotGrown):
        grown.workspace(read)


def test_a_read_set_the_main_worker_has_not_built_is_answered_by_the_tool_worker_itself(tmp_path):
    """The main worker may be held by a long job (a hung provider embedding saved turns) before any
    hook of a project reached it: the tool worker reads the stores through its own readers, asks
    for the main worker's workspace, and drops its copy once that one is current."""
    from eggshell.runtime.warm import Grown, Resources
    from helpers.hook_env import Env

    e = Env(tmp_path)
    e.write_config('mode = "lexical"\n')
    e.record_turn("where is parse_config defined?", [(RG, RG_OUT)], RG_ANSWER, session="chat-1", turn="t1")
    res = Resources(e.data, e.paths.bin_dir, warm=True)
    wanted = []
    grown = Grown(res, want=wanted.append)
    read = (e.egg,)
    before = len(grown.workspace(read).corpus.candidates)
    assert wanted == [read] and before > 0 and read not in res._live
    assert not res._stores, "the tool worker's readers are its own, not the main worker's"
    e.record_turn("list the tests", [("ls tests", "test_a.py\n")], "one test", session="chat-2", turn="t2")
    assert len(grown.workspace(read).corpus.candidates) > before  # its own copy grows itself
    assert wanted == [read], "asked once"
    res.workspace(read)  # the main worker, when free
    assert len(grown.workspace(read).corpus.candidates) == len(res.workspace(read).corpus.candidates)
    assert read not in grown._own


# -- 9. the lock the two workers share --------------------------------------------------------------


def test_a_waiting_tool_answer_goes_before_the_main_worker_takes_the_lock_again():
    from eggshell.runtime.manager import StateLock

    lock, order = StateLock(), []
    tool_waiting, tool_done = threading.Event(), threading.Event()

    def tool():
        tool_waiting.set()
        with lock.held(urgent=True):
            order.append("tool")
        tool_done.set()

    with lock.held():
        order.append("main")
        t = threading.Thread(target=tool)
        t.start()
        assert tool_waiting.wait(10)
        time.sleep(0.1)  # the tool worker is blocked on the lock now (a longer wait changes nothing)
        assert order == ["main"]
        with lock.released():  # a long read-only phase: the tool answer runs in it
            assert tool_done.wait(10)
            order.append("main, released")
        order.append("main again")
    t.join(10)
    assert order == ["main", "tool", "main, released", "main again"]
    with lock.released():  # not held by this thread: nothing to let go, no error
        order.append("unheld")
    assert order[-1] == "unheld"


def test_the_main_worker_waits_while_a_tool_answer_is_queued_for_the_lock():
    from eggshell.runtime.manager import StateLock

    lock, order = StateLock(), []
    inside, go = threading.Event(), threading.Event()

    def hold_as_tool():
        with lock.held(urgent=True):
            inside.set()
            go.wait(10)
            order.append("tool 1")

    def tool_2():
        with lock.held(urgent=True):
            order.append("tool 2")

    def main():
        with lock.held():
            order.append("main")

    t1 = threading.Thread(target=hold_as_tool)
    t1.start()
    assert inside.wait(10)
    t2, m = threading.Thread(target=tool_2), threading.Thread(target=main)
    t2.start()
    time.sleep(0.1)
    m.start()
    time.sleep(0.1)
    go.set()
    for t in (t1, t2, m):
        t.join(10)
    assert order == ["tool 1", "tool 2", "main"]


def test_a_traced_process_is_not_taken_for_stopped_but_a_sigstopped_one_is():
    """Under strace a process is in state `t` for an instant at every syscall: one look at
    /proc said "stopped", and hooks (and `egg-manager stop`) gave up on a manager that ran."""
    import shutil

    busy = "import os, signal\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)\nwhile True:\n    os.stat('/')\n"
    strace = shutil.which("strace")
    assert strace, "strace is installed by .ci/run"
    # its own process group, so the tracer and its busy tracee are ended together: a tracee left
    # behind spins on a core for good (two such loops slowed a whole CI run and its benchmarks)
    traced = subprocess.Popen([strace, "-f", "-qq", "-o", os.devnull, sys.executable, "-c", busy], process_group=0)
    plain = subprocess.Popen([sys.executable, "-c", "import time\ntime.sleep(60)\n"])
    child = None
    try:
        # the tracee once it runs Python, not strace's fork before its exec
        assert wait_for(lambda: [c for c in _children(traced.pid) if _runs_python(c)], WAIT)
        child = [c for c in _children(traced.pid) if _runs_python(c)][0]
        seen = {client.proc_state(child) for _ in range(2000)}  # often holds "t": one look could say "stopped"
        assert not any(client.stopped(child) for _ in range(20)), seen  # several looks do not
        # the tracer stopped: its tracee is held in `t` and runs no more, as under a debugger (the
        # tracee ignores SIGHUP, which the kernel sends when a stop orphans their process group)
        os.kill(traced.pid, signal.SIGSTOP)
        assert wait_for(lambda: client.stopped(child), WAIT), client.proc_state(child)
        os.kill(traced.pid, signal.SIGCONT)
        assert wait_for(lambda: not client.stopped(child), WAIT)
        plain.send_signal(signal.SIGSTOP)
        assert wait_for(lambda: client.proc_state(plain.pid) == "T", WAIT)
        assert client.stopped(plain.pid)
    finally:
        try:
            os.killpg(traced.pid, signal.SIGKILL)  # the tracer and the tracee: a tracer killed alone leaves it running
        except ProcessLookupError:
            pass
        for p in (traced, plain):
            p.kill()
            p.wait()
        if child is not None:
            assert wait_for(lambda: not os.path.exists("/proc/%d" % child) or client.proc_state(child) == "Z", WAIT), "the tracee outlived the test"


def _runs_python(pid: int) -> bool:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().startswith(sys.executable.encode())
    except OSError:
        return False


def _children(pid: int) -> list[int]:
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []
