"""Where things live, from the environment; computed, never global.

    $EGGSHELL_PREFIX                      default ~/.local
    $EGGSHELL_DATA_ROOT                   default $PREFIX/share/eggshell/data
    $PREFIX/config/eggshell/config.toml   the user's global config
    $CODEX_HOME                           default ~/.codex
"""

from __future__ import annotations

import errno
import os
from collections import namedtuple
from collections.abc import Mapping

PROJECT_CONFIG = ".eggshell.toml"


class Paths(namedtuple("Paths", "prefix data_root global_config codex_home bin_dir")):
    """Where things live: prefix, data_root, global_config, codex_home, and bin_dir (where
    the egg commands are, for registering hooks).

    Immutable like the project's dataclasses; a namedtuple because every hook process builds
    one, and importing `dataclasses` (or `typing`) costs a hook a fifth of its start-up.
    """

    __slots__ = ()

    @property
    def journal_dir(self) -> str:
        return os.path.join(self.data_root, "journal")

    @property
    def state_dir(self) -> str:
        """Per-chat state (what each chat has been given); safe to delete."""
        return os.path.join(self.data_root, "state")

    @property
    def log_file(self) -> str:
        return os.path.join(self.data_root, "logs", "hook.log")


def from_env(env: Mapping[str, str] | None = None) -> Paths:
    env = os.environ if env is None else env
    home = env.get("HOME") or os.path.expanduser("~")
    prefix = env.get("EGGSHELL_PREFIX") or os.path.join(home, ".local")
    return Paths(
        prefix=prefix,
        data_root=env.get("EGGSHELL_DATA_ROOT") or os.path.join(prefix, "share", "eggshell", "data"),
        global_config=os.path.join(prefix, "config", "eggshell", "config.toml"),
        codex_home=env.get("CODEX_HOME") or os.path.join(home, ".codex"),
        bin_dir=env.get("EGGSHELL_BIN") or os.path.join(prefix, "bin"),
    )


def find_project(start: str) -> str | None:
    """The nearest directory at or above `start` holding `.eggshell.toml`, if any."""
    d = os.path.abspath(start)
    while True:
        if os.path.isfile(os.path.join(d, PROJECT_CONFIG)):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def private_dir(path: str) -> str:
    """Create a directory, and any missing parents, readable by the owner only."""
    missing = []
    d = os.path.abspath(path)
    while not os.path.isdir(d):
        missing.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    for m in reversed(missing):
        try:
            os.mkdir(m, 0o700)
        except FileExistsError:
            pass
    return path


def write_all(fd: int, data: bytes) -> None:
    """Write every byte or raise: os.write may write only part (a nearly full disk, a size limit).

    A write that makes no progress raises ENOSPC rather than looping or returning quietly.
    """
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.ENOSPC, "%s (a write of %d bytes made no progress)" % (os.strerror(errno.ENOSPC), len(view)))
        view = view[n:]


def fsync_dir(d: str) -> None:
    """Make a directory's entries (a created or renamed file) durable."""
    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as e:  # some filesystems refuse fsync on directories
        if e.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)
