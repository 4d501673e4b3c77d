"""What an agent CLI's interactive screen shows, read through a pseudo-terminal.

A SessionStart hook's `systemMessage` is for the user, and only the interactive UIs show it:
Codex 0.169 as `↳ Hook · TEXT` under the working line, Claude Code 2.1.328 as
`SessionStart:startup says: TEXT`. `codex exec` prints only `hook: SessionStart Completed`,
and `claude -p` prints nothing of it (observed; docs/hooks.md). So a test of what the user is
told runs the interactive CLI on a terminal of its own and reads the screen.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import termios
import time
from typing import Mapping, Sequence

COLUMNS, ROWS = 400, 60  # wide enough that a one-line message is drawn on one line
_ESCAPES = re.compile(rb"\x1b\[[0-9;?>=<]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[@-Z\\-_]|\x1b[()][0-9A-Za-z]")


def flat(text: str) -> str:
    """`text` without whitespace: a terminal UI draws spaces as cursor moves, so screen text is compared without them."""
    return re.sub(r"\s+", "", text)


def screen_until(argv: Sequence[str], cwd: str, env: Mapping[str, str], wanted: str, timeout: float = 60.0) -> tuple[bool, str]:
    """Run `argv` on a pseudo-terminal until its screen shows `wanted` (compared by `flat`) or
    `timeout` seconds pass; (whether it did, the screen's text without escape sequences). The
    process group is killed either way: the interactive CLI would wait for the user forever.
    Cursor-position queries are answered, as a terminal would, so the UI draws."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: its own session, the pty as its terminal
        try:
            os.chdir(cwd)
            os.execvpe(argv[0], list(argv), dict(env, TERM="xterm-256color", COLUMNS=str(COLUMNS), LINES=str(ROWS)))
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    raw, text, found = b"", "", False
    want = flat(wanted)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not found:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                continue
            try:
                data = os.read(fd, 1 << 16)
            except OSError:  # the child exited: its terminal is gone
                break
            if not data:
                break
            if b"\x1b[6n" in data:
                os.write(fd, b"\x1b[1;1R")
            raw += data
            text = _ESCAPES.sub(b"", raw).decode("utf-8", "replace")
            found = want in flat(text)
    finally:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)
    return found, text
