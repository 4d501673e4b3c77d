"""Where things live, from the environment; computed, never global.

    $EGGSHELL_PREFIX                      default ~/.local
    $EGGSHELL_DATA_ROOT                   default $PREFIX/share/eggshell/data
    $PREFIX/config/eggshell/config.toml   the user's global config
    $CODEX_HOME                           default ~/.codex
"""

from __future__ import annotations

import errno
import os
import stat
from collections import namedtuple
from collections.abc import Mapping

from eggshell.errors import EggshellError

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


class UnsafePath(EggshellError, ValueError):
    """A store or data root another local user could have written: Eggshell records nothing into it."""


def find_project(start: str, home: str | None = None) -> str | None:
    """The nearest directory at or above `start` holding `.eggshell.toml`, if any.

    The search goes no higher than the repository root (a directory holding `.git`), your
    home directory (`home`, default $HOME), or the first directory that is not yours,
    whichever comes first; that directory is still searched. A file someone planted higher
    up (in /tmp, above every project) is then never taken for this project's; one found is
    still only used if nobody else could have written it (config.read_file, `untrusted`).
    """
    me = os.geteuid()
    home_id = _ident(home or os.environ.get("HOME") or os.path.expanduser("~"))
    d = os.path.abspath(start)
    while True:
        if os.path.isfile(os.path.join(d, PROJECT_CONFIG)):
            return d
        try:
            st = os.stat(d)
        except OSError:
            return None
        if st.st_uid != me or (st.st_dev, st.st_ino) == home_id or os.path.lexists(os.path.join(d, ".git")):
            return None
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _ident(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def untrusted(st: os.stat_result, mine_only: bool = False) -> str | None:
    """Why another local user could have written this file or directory, or could change it; None if nobody can.

    It must be yours (or root's, unless `mine_only`: a store must be yours, since you write
    it), writable neither by every user nor by its group. A directory with the sticky bit
    (like /tmp) may be: nobody else can replace what you own in it. A group only you are in
    (your private group, which an umask of 002 makes files writable by) is you.
    """
    me = os.geteuid()
    mode = st.st_mode
    sticky_dir = stat.S_ISDIR(mode) and mode & stat.S_ISVTX
    if st.st_uid != me and (mine_only or st.st_uid != 0):
        why = "another user owns it"
    elif mode & stat.S_IWOTH and not sticky_dir:
        why = "every user can write it"
    elif mode & stat.S_IWGRP and not sticky_dir and not _own_group(st.st_gid):
        why = "group %s can write it" % _group(st.st_gid)
    else:
        return None
    return "%s (owner %s, mode %04o)" % (why, _user(st.st_uid), mode & 0o7777)


def _user(uid: int) -> str:
    import pwd

    try:
        return "%s (uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except KeyError:
        return "uid %d" % uid


def _group(gid: int) -> str:
    import grp

    try:
        return "%s (gid %d)" % (grp.getgrgid(gid).gr_name, gid)
    except KeyError:
        return "gid %d" % gid


def _own_group(gid: int) -> bool:
    """Whether `gid` is your private group: your primary group, named as you, with no other members."""
    import grp
    import pwd

    try:
        me, g = pwd.getpwuid(os.geteuid()), grp.getgrgid(gid)
    except KeyError:
        return False
    return gid == me.pw_gid and g.gr_name == me.pw_name and all(m == me.pw_name for m in g.gr_mem)


def store_problem(path: str) -> str | None:
    """Why Eggshell must not record into the store at `path`: a symbolic link, not a regular file, or
    a store, lock or directory someone else could have written (`untrusted`); None if none.

    Checked when a turn's prompt arrives (nothing is journaled for a store it may not write)
    and again, on open descriptors, when the turn is committed (store._Locked).
    """
    d = os.path.dirname(os.path.abspath(path))
    for p, mine_only in ((d, False), (path, True), (path + ".lock", True)):
        try:
            st = os.lstat(p)
        except OSError:  # missing, or in the way for now: the save finds out (and the turn waits in the journal)
            continue
        if stat.S_ISLNK(st.st_mode):
            return "%s: is a symbolic link; Eggshell writes stores only through real paths (use the real path)" % p
        if p != d and not stat.S_ISREG(st.st_mode):
            return "%s: is not a regular file" % p
        why = untrusted(st, mine_only)
        if why is not None:
            return refusal(p, why, "stores and their directories", "700" if p == d else "600")
    return None


def refusal(path: str, why: str, what: str, mode: str, fix: str | None = None) -> str:
    """The message refusing a file another user could write: the file, its owner and mode, and the fix
    (`chown` and `chmod MODE` of `fix`, by default the file itself)."""
    import pwd

    try:
        me = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        me = str(os.geteuid())
    fix = fix or path
    return ("%s: refused: %s. Eggshell uses %s only if nobody but you could have written them. If it is yours, "
            "make it yours alone (`chown %s %s && chmod %s %s`); if not, remove it" % (path, why, what, me, fix, mode, fix))


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


def secure_data_root(data_root: str) -> str | None:
    """Make an existing data root yours alone (0700); a note saying so, or None if it already was.

    It holds every journaled prompt and output. One stat when it is fine (hooks call this
    at each event); UnsafePath if it belongs to someone else: nothing is written into it.
    """
    try:
        st = os.stat(data_root)
    except FileNotFoundError:
        return None
    if st.st_uid != os.geteuid():
        raise UnsafePath(refusal(data_root, "another user owns it (owner %s, mode %04o)" % (_user(st.st_uid), st.st_mode & 0o7777),
                                 "data roots", "700") + ", or set EGGSHELL_DATA_ROOT to a directory of yours")
    if st.st_mode & 0o077 == 0:
        return None
    os.chmod(data_root, 0o700)
    return "%s: the data root was mode %04o (others could read the journal and chat state); set to 0700" % (
        data_root, st.st_mode & 0o7777)


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
        fsync_fd(fd)
    finally:
        os.close(fd)


def fsync_fd(fd: int) -> None:
    """fsync an open directory (or file); some filesystems refuse fsync on directories."""
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.EBADF):
            raise
