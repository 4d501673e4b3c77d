"""The hook's side of the warm manager: find it, ask it, or start it; never wait past a deadline.

A hook is a short process the host waits for, so every step here is bounded by the
deadline the hook was given: connecting, sending, and reading the reply. The manager
listens on a Unix socket in `<data root>/run/` (a directory only the owner can enter), one
JSON object per line each way. Nothing here imports more than the standard library and
ujson: this module is on the path of every tool call.
"""

from __future__ import annotations

import os
import socket
import sys
import time

import ujson

SOCKET = "manager.sock"
LOCK = "manager.lock"
LOG = "manager.log"


def run_dir(data_root: str) -> str:
    return os.path.join(data_root, "run")


MAX_SOCKET_BYTES = 100  # AF_UNIX paths hold 108 bytes on Linux (104 on macOS)


def socket_path(data_root: str) -> str:
    """The manager's socket: in the data root's run/, or when that path is too long for a
    Unix socket, in a private per-user directory under $XDG_RUNTIME_DIR or /tmp, named by
    a hash of the data root."""
    p = os.path.join(run_dir(data_root), SOCKET)
    if len(os.fsencode(p)) <= MAX_SOCKET_BYTES:
        return p
    import hashlib

    # Not tempfile.gettempdir(): Eggshell's processes point TMPDIR into the data root
    # (__main__.private_tmp), whose long path is why we are here.
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
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


def connect(data_root: str, deadline: float) -> Connection | None:
    """A connection to this data root's manager, or None when none is listening."""
    path = socket_path(data_root)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(max(0.001, min(0.5, deadline - time.monotonic())))
        s.connect(path)
    except OSError:
        s.close()
        return None
    return Connection(s)


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


def spawn(data_root: str, env: dict | None = None) -> bool:
    """Start a manager in the background, detached from this hook; False if it could not be.

    A second manager started at the same moment finds the lock held and exits at once,
    so racing hooks may both call this.
    """
    import subprocess

    lib = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    e = dict(os.environ if env is None else env)
    e["EGGSHELL_DATA_ROOT"] = data_root
    e["PYTHONPATH"] = lib + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    try:
        from .paths import private_dir

        private_dir(run_dir(data_root))
        with open(os.devnull, "rb") as null_in, open(os.devnull, "wb") as null_out:
            subprocess.Popen([sys.executable, "-m", "eggshell", "egg-manager", "serve"], stdin=null_in, stdout=null_out,
                             stderr=null_out, start_new_session=True, close_fds=True, env=e, cwd="/")
        return True
    except (OSError, ValueError, subprocess.SubprocessError):
        return False
