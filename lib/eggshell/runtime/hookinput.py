"""A hook's payload read from stdin within its budget.

Why: a host that never closes the hook's stdin (a crashed parent holding the pipe, a plugin
bug) made `sys.stdin.read()` wait forever, and the agent with it. Here stdin is read until
end of input or the deadline, whichever comes first; a payload that is complete JSON and then
sits idle is taken without waiting for the end of input, so a host that forgets to close the
pipe still gets its turn journaled. Only `os`, `select` and `time`: every hook imports this.
"""

from __future__ import annotations

import os

CHUNK = 1 << 20
IDLE_S = 0.05  # a pipe quiet this long, with a whole JSON object read, is taken as the payload


def read(fd: int, deadline: float) -> tuple[bytes, str | None]:
    """(the bytes read, None) at end of input or once a whole JSON object sat idle;
    (the bytes read so far, why) when the deadline passed first."""
    import select
    import time

    chunks: list = []
    try:
        poll = select.poll()
        poll.register(fd, select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR)
    except (OSError, ValueError, AttributeError):  # no poll here (or not this fd): read as before
        return _read_all(fd), None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"".join(chunks), ("stdin was not closed within the hook's budget (%d bytes read); "
                                      "answered without memory" % sum(map(len, chunks)))
        if not poll.poll(max(1, int(min(left, IDLE_S) * 1000))):
            if chunks and _whole_json(chunks):
                return b"".join(chunks), None
            continue
        b = os.read(fd, CHUNK)
        if not b:
            return b"".join(chunks), None
        chunks.append(b)


def _whole_json(chunks: list) -> bool:
    if not chunks[-1].rstrip().endswith(b"}"):
        return False
    import ujson

    try:
        return isinstance(ujson.loads(b"".join(chunks)), dict)
    except (ValueError, RecursionError):
        return False


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        b = os.read(fd, CHUNK)
        if not b:
            return b"".join(chunks)
        chunks.append(b)
