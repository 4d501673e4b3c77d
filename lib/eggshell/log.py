"""Owner-only appends: the journal, the quarantine and traces, hook.log, and stderr lines.

`append_whole` writes a line whole or not at all under the file's lock, so two processes
appending to one file (eight hooks, the manager) never interleave; a torn line left by a
crash is skipped by readers and the next append starts fresh. hook.log's lines are short
single O_APPEND writes without the lock: a log must never wait. Nothing here knows what
the lines mean.
"""

from __future__ import annotations

import os
import sys
import time

from eggshell import paths as _paths
from eggshell.paths import write_all

LOCK_WAIT_S = 2.0


def _lock(fd: int) -> bool:
    """Take the file's lock, waiting at most LOCK_WAIT_S (an appender holds it for one write)."""
    import fcntl
    import time

    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False  # append anyway: a torn line is skipped, the next starts fresh
            time.sleep(0.002)
        except OSError:
            return False


def _truncate(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError:
        pass  # the partial line stays; readers skip it and the next append starts a fresh line


def append_whole(fd: int, line: bytes, name: str, sync: bool = True) -> None:
    """Append one line to an O_APPEND file (and fsync it), whole or not at all; raises OSError.

    Under the file's lock: a write cut short is truncated away, since no one appended since.
    A crash may still tear a line: the next append then starts on a fresh line.
    """
    locked = _lock(fd)
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        line = b"\n" + line  # a crash tore the last line: keep this one whole
    try:
        write_all(fd, line)
        if sync:
            os.fsync(fd)
    except OSError as e:
        if locked:
            _truncate(fd, size)
        raise OSError(e.errno, "%s: not written: %s" % (name, e.strerror or e)) from None


def log_failure(paths: _paths.Paths, event: str, exc: BaseException) -> bool:
    """One line in hook.log; False when even that could not be written (a full disk)."""
    try:
        import traceback

        _paths.private_dir(os.path.dirname(paths.log_file))
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:]).replace("\n", " | ")
        line = "%s %s %s: %s [%s]\n" % (when, event, type(exc).__name__, exc, tb)
        fd = os.open(paths.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            _paths.write_all(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
        return True
    except Exception:
        return False


def warn(prog: str, msg: str) -> None:
    """One line on stderr, named by the program the user ran."""
    print("%s: %s" % (prog, msg), file=sys.stderr, flush=True)


def utc_now() -> str:
    """Now in UTC with microseconds (2026-12-01T20:00:00.123456Z), as journal events carry it.

    From `time`, not `datetime`: importing datetime is about 5 ms of every hook's start-up."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%06dZ" % int((t % 1) * 1e6)
