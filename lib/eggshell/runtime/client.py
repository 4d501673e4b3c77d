"""The hook's side of the warm manager: find it, ask it, or start it; never wait past a deadline.

A hook is a short process the host waits for, so every step here is bounded by the
deadline the hook was given: connecting, sending, and reading the reply. The manager
listens on a Unix socket in `<data root>/run/` (a directory only the owner can enter), one
JSON object per line each way. Nothing here imports more than the standard library and
ujson: this module is on the path of every tool call.

What a hook sends is a chat's prompts and tool output, so it talks only to a manager it
has verified (`reach`): the socket's directory (and run/) is this user's alone (lstat: a
symlink is refused, not followed; no other user's link on the way, paths.foreign_link), the socket inode is this user's, and the process
listening on it runs as this user (SO_PEERCRED), all before a byte is sent. The manager
then says hello from its accept thread at once. A manager that is stopped (SIGSTOP: its
state in /proc, seen at once) or said no hello for a whole budget (hung) is noted in run/
(UNRESPONSIVE), so the hooks after it answer cold at once instead of each waiting out its
budget; one that is only slow (a busy machine) is waited for like any answer. Every
refusal says why and what fixes it.
"""

from __future__ import annotations

import os
import socket
import stat
import sys
import time

import ujson

from eggshell.errors import EggshellError

SOCKET = "manager.sock"
LOCK = "manager.lock"
LOG = "manager.log"
UNRESPONSIVE = "manager.unresponsive"  # pid of a manager that accepted a hook and did not say hello
REFUSED = "manager.refused"  # why the last manager started would not serve (it exited)
HELLO = b'{"hello":1}\n'
HELLO_S = 0.3  # the accept thread says hello at once: after this long, look at the process (stopped? gone?)
STOPPED, GONE = ("T", "t"), (None, "Z", "X")  # states in /proc/PID/stat (None: no such process)
RETRY_S = 10.0  # a manager marked unresponsive (not stopped) is tried again after this long
REFUSED_S = 60.0  # after a manager refused to serve, none is started again for this long


def run_dir(data_root: str) -> str:
    return os.path.join(data_root, "run")


MAX_SOCKET_BYTES = 100  # AF_UNIX paths hold 108 bytes on Linux (104 on macOS)


def socket_path(data_root: str) -> str:
    """The manager's socket: in the data root's run/, or when that path is too long for a
    Unix socket, in a private per-user directory under $XDG_RUNTIME_DIR or the system's
    temporary directory ($TMPDIR as Eggshell was started, else /tmp), named by a hash of
    the data root."""
    p = os.path.join(run_dir(data_root), SOCKET)
    if len(os.fsencode(p)) <= MAX_SOCKET_BYTES:
        return p
    import hashlib

    # Not tempfile.gettempdir(): Eggshell's processes point TMPDIR into the data root
    # (__main__.private_tmp), whose long path is why we are here.
    env = os.environ
    base = env.get("XDG_RUNTIME_DIR") or env.get("EGGSHELL_SYSTEM_TMPDIR") or env.get("TMPDIR") or "/tmp"
    name = hashlib.sha256(os.fsencode(os.path.abspath(data_root))).hexdigest()[:24]
    return os.path.join(base, "eggshell-%d" % os.getuid(), name + ".sock")


class Connection:
    """One request/reply exchange (and the ack after it) with the manager."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buf = b""

    def send(self, obj: dict, deadline: float) -> bool:
        try:
            self.sock.settimeout(max(0.001, deadline - time.monotonic()))
            self.sock.sendall((ujson.dumps(obj, ensure_ascii=False, escape_forward_slashes=False) + "\n").encode("utf-8"))
            return True
        except (OSError, ValueError, OverflowError):
            return False

    def receive(self, deadline: float) -> dict | None:
        """The next line as an object, or None at the deadline, on EOF or on garbage."""
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                self.sock.settimeout(left)
                chunk = self.sock.recv(65536)
            except OSError:
                return None
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            obj = ujson.loads(line)
        except ValueError:
            return None
        return obj if isinstance(obj, dict) else None

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class NoManager(EggshellError):
    """Why a hook answers without the manager: `str(e)` for the log ('' when there is nothing
    to say: none runs), `start` whether starting one could help."""

    def __init__(self, why: str, start: bool, busy: bool = False):
        super().__init__(why)
        self.start = start
        self.busy = busy  # it runs and may answer later: only this caller stopped waiting


def unsafe_dir(path: str) -> str | None:
    """Why `path` must not hold the manager's socket, or None: a directory only this user can enter.

    Another user who made, or can write to, the directory could listen there and receive
    every prompt and tool output a hook sends; so could one who owns a link on the way to it
    (paths.foreign_link: the data root's or $XDG_RUNTIME_DIR's parents). Its mode is never
    changed here or by the manager: one open to others is refused with the chmod that fixes it.
    """
    from eggshell.paths import foreign_link

    why = foreign_link(path)
    if why is not None:
        return why
    try:
        st = os.lstat(path)
    except OSError as e:
        return "%s cannot be examined (%s)" % (path, e.strerror)
    if not stat.S_ISDIR(st.st_mode):
        return "%s is %s, not a directory" % (path, "a symlink" if stat.S_ISLNK(st.st_mode) else "a file")
    if st.st_uid != os.geteuid():
        return "%s belongs to uid %d, not to this user (uid %d)" % (path, st.st_uid, os.geteuid())
    if st.st_mode & 0o077:
        return "%s has mode %04o: other users can enter it (it must be 0700: `chmod 700 %s`)" % (
            path, stat.S_IMODE(st.st_mode), path)
    return None


def not_a_socket(path: str) -> str | None:
    """Why the manager cannot listen at `path` (something else is there), or None."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return "%s cannot be examined (%s)" % (path, e.strerror)
    if stat.S_ISSOCK(st.st_mode):
        return None if st.st_uid == os.geteuid() else "%s is a socket of uid %d, not of this user: remove it" % (path, st.st_uid)
    kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a symlink" if stat.S_ISLNK(st.st_mode) else "a file"
    return "%s is %s, not the manager's socket: remove it (rm -r %s); the next hook starts a manager" % (path, kind, path)


def peer(s: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a connected Unix socket (SO_PEERCRED: what
    the kernel recorded when it connected, or for a listener, when it listened); Linux only."""
    raw = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(raw[0:4], sys.byteorder, signed=True), int.from_bytes(raw[4:8], sys.byteorder)


def stopped(pid: int) -> bool:
    """The process is stopped (SIGSTOP: `T`; held by a debugger: `t`), not just passing through
    a tracer: a process run under strace is in state `t` at every traced syscall, often most
    of the time, and on a loaded machine the tracer itself may wait its turn for longer than
    any number of looks. So the state must hold for 4 looks over 15 ms (`T`) or 20 over 100 ms
    (`t`), and the process must not have run meanwhile: its context switches did not move."""
    state = proc_state(pid)
    ran = switches(pid)
    looks, apart = (4, 0.005) if state == "T" else (20, 0.005)
    for i in range(looks):
        if state not in STOPPED:
            return False
        time.sleep(apart)
        state = proc_state(pid)
    return state in STOPPED and switches(pid) == ran


def switches(pid: int) -> int | None:
    """How many times the process's main thread was switched in or out (None if unknown): a
    stopped process does not move it, a traced one moves it at every syscall it makes."""
    try:
        with open("/proc/%d/status" % pid, "rb") as f:
            fields = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
        return int(fields[b"voluntary_ctxt_switches"]) + int(fields[b"nonvoluntary_ctxt_switches"])
    except (OSError, KeyError, ValueError):
        return None


def proc_state(pid: int) -> str | None:
    """A process's state letter from /proc (R, S, D, T stopped, t traced, Z zombie...), None if gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return f.read().rpartition(b")")[2].split()[0].decode("ascii")
    except (OSError, IndexError, UnicodeDecodeError):
        return None


def _path_trouble(data_root: str) -> NoManager | None:
    """Why no byte may go to the socket path, before connecting (None: connect)."""
    run = run_dir(data_root)
    path = socket_path(data_root)
    missing = False
    for d in dict.fromkeys((run, os.path.dirname(path))):
        if not os.path.lexists(d):
            missing = True  # none has run here yet
            continue
        why = unsafe_dir(d)
        if why is not None:  # no manager started either: it would refuse the same directory
            return NoManager("not talking to the manager: %s; fix or remove it (a manager makes it anew, 0700)" % why,
                             start=False)
    if missing:
        return NoManager("", start=True)
    if _still_unresponsive(run):
        return NoManager("", start=False)  # said when it was noted
    why = not_a_socket(path)
    if why is not None:
        return NoManager("not talking to the manager: %s" % why, False)
    return None


def reach(data_root: str, deadline: float, hello: bool = True, hung_after: float | None = None) -> Connection:
    """A verified connection to this data root's manager, its hello read; else raises NoManager.

    `hello=False` for a message that wants no answer (a nudge): it is verified and sent at
    once, and waits in the socket for the manager to read it. A manager silent until
    `hung_after` (default `deadline`) is taken for hung; one silent only until an earlier
    `deadline` (a caller that waits less: PostToolUse) is just busy (NoManager.busy).
    """
    hung_after = deadline if hung_after is None else hung_after
    trouble = _path_trouble(data_root)
    if trouble is not None:
        raise trouble
    path = socket_path(data_root)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(max(0.001, min(0.5, deadline - time.monotonic())))
        s.connect(path)
    except OSError:
        s.close()
        raise NoManager("", start=True) from None  # nothing listens (a manager that exited or was killed)
    try:
        pid, uid = peer(s)
    except (OSError, AttributeError) as e:
        s.close()
        raise NoManager("not talking to the manager: cannot tell who listens on %s (%s)" % (path, e), False) from None
    if uid != os.geteuid():
        s.close()
        raise NoManager("not talking to the manager: the process listening on %s (pid %d) runs as uid %d, not as this user "
                        "(uid %d); nothing was sent. End it and remove the socket" % (path, pid, uid, os.geteuid()), False)
    if stopped(pid):
        s.close()
        raise _stopped(data_root, pid)
    conn = Connection(s)
    if not hello:
        return conn
    greeting = conn.receive(min(deadline, time.monotonic() + HELLO_S))
    if greeting is None:  # not at once: stopped since, gone, or only slow (a busy machine, a long GIL hold)
        state = proc_state(pid)
        if state in STOPPED and stopped(pid):
            conn.close()
            raise _stopped(data_root, pid)
        if state in GONE:
            conn.close()
            raise NoManager("", start=True)  # it died with this connection queued: start a new one
        greeting = conn.receive(deadline)  # running: wait for it as for any answer
    if greeting is None and time.monotonic() < hung_after:
        conn.close()
        raise NoManager("", start=False, busy=True)
    if greeting is None or "hello" not in greeting:
        conn.close()
        _mark_unresponsive(data_root, pid)
        raise NoManager("the manager (pid %d) accepted but said nothing within the hook's budget (hung); answering without it "
                        "for %.0f s: `egg doctor` shows its state" % (pid, RETRY_S), True)
    return conn


def _stopped(data_root: str, pid: int) -> NoManager:
    _mark_unresponsive(data_root, pid)
    return NoManager("the manager (pid %d) is stopped; answering without it until it runs again: `kill -CONT %d`, or end it "
                     "(`kill %d`: the next hook starts a new one)" % (pid, pid, pid), False)


def connect(data_root: str, deadline: float) -> Connection | None:
    """A verified connection to this data root's manager, or None (see `reach` for why not)."""
    try:
        return reach(data_root, deadline)
    except NoManager:
        return None


def _mark_unresponsive(data_root: str, pid: int) -> None:
    """Note (in run/, owner only) that this manager did not answer: the next hooks do not wait for it."""
    try:
        fd = os.open(os.path.join(run_dir(data_root), UNRESPONSIVE), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, b"%d\n" % pid)
        finally:
            os.close(fd)
    except OSError:
        pass


def unresponsive(run: str) -> tuple[int, float] | None:
    """(pid, when noted) of a manager noted unresponsive, or None."""
    p = os.path.join(run, UNRESPONSIVE)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        return int(os.read(fd, 32) or b"x"), os.fstat(fd).st_mtime
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def _still_unresponsive(run: str) -> bool:
    """Whether a manager noted unresponsive is still to be skipped: stopped, or noted RETRY_S ago or less.

    A manager that runs again removes the note itself (its accept loop); one that died
    leaves it, and it is dropped here.
    """
    got = unresponsive(run)
    if got is None:
        return False
    pid, when = got
    state = proc_state(pid)
    if state in STOPPED and stopped(pid):
        return True
    if state in GONE or time.time() - when > RETRY_S:
        try:
            os.unlink(os.path.join(run, UNRESPONSIVE))
        except OSError:
            pass
        return False
    return True


def refused(run: str) -> tuple[str, float] | None:
    """(why, when) the last manager started here refused to serve, or None."""
    try:
        with open(os.path.join(run, REFUSED), encoding="utf-8", errors="replace") as f:
            return f.read().strip(), os.fstat(f.fileno()).st_mtime
    except OSError:
        return None


def request(data_root: str, obj: dict, timeout: float = 2.0) -> dict | None:
    """One request and its reply (for `egg` commands and tests); None if no manager answers."""
    deadline = time.monotonic() + timeout
    c = connect(data_root, deadline)
    if c is None:
        return None
    try:
        if not c.send(obj, deadline):
            return None
        return c.receive(deadline)
    finally:
        c.close()


def source_stamp() -> tuple:
    """When this package's files last changed: a reinstall makes a running manager retire."""
    import eggshell

    root = os.path.dirname(os.path.abspath(eggshell.__file__))  # the whole package, every folder
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                try:
                    out.append(os.stat(os.path.join(d, f)).st_mtime_ns)
                except OSError:
                    pass
    return (len(out), max(out, default=0))


def lib_dir() -> str:
    """The directory holding this eggshell package (the checkout's lib/, or site-packages): what a
    spawned manager must import, and nothing under it (lib/eggshell on the path would shadow
    top-level modules named config, errors, paths or log)."""
    import eggshell

    return os.path.dirname(os.path.dirname(os.path.abspath(eggshell.__file__)))


def spawn(data_root: str, env: dict | None = None) -> bool:
    """Start a manager in the background, detached from this hook; False if it could not be.

    A second manager started at the same moment finds the lock held and exits at once,
    so racing hooks may both call this. A manager that refused to serve (it says why in
    run/REFUSED) is not started again for REFUSED_S: no hook starts one that exits at once.
    """
    import subprocess

    why = refused(run_dir(data_root))
    if why is not None and time.time() - why[1] < REFUSED_S:
        return False

    lib = lib_dir()
    e = dict(os.environ if env is None else env)
    e["EGGSHELL_DATA_ROOT"] = data_root
    e["PYTHONPATH"] = lib + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    try:
        from eggshell.paths import private_dir

        private_dir(run_dir(data_root))
        with open(os.devnull, "rb") as null_in, open(os.devnull, "wb") as null_out:
            subprocess.Popen([sys.executable, "-m", "eggshell", "egg-manager", "serve"], stdin=null_in, stdout=null_out,
                             stderr=null_out, start_new_session=True, close_fds=True, env=e, cwd="/")
        return True
    except (OSError, ValueError, subprocess.SubprocessError):
        return False
