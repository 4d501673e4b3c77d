"""Where things live, from the environment; computed, never global.

    $EGGSHELL_PREFIX                      default ~/.local
    $EGGSHELL_DATA_ROOT                   default $PREFIX/share/eggshell/data
    $PREFIX/config/eggshell/config.toml   the user's global config
    $CODEX_HOME                           default ~/.codex

And the one rule for every path Eggshell writes under (the data root, the socket directory,
the stores; docs/security.md): no other user's symlink on the way (foreign_link), no chmod
of a directory Eggshell did not make (private_dir, private_problem, check_data_root), and a
project's stores only under its .eggs/ (project_store_problem).
"""

from __future__ import annotations

import errno
import os
import stat
from collections import namedtuple
from collections.abc import Mapping

from eggshell.errors import EggshellError

PROJECT_CONFIG = ".eggshell.toml"
EGGS_DIR = ".eggs"  # a project's stores: the only place its own config may point writes at


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
    home_id = file_ident(home or os.environ.get("HOME") or os.path.expanduser("~"))
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


def file_ident(path: str) -> tuple[int, int] | None:
    """(device, inode) of what `path` names now, None when nothing: tells a file from its replacement."""
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
    """Why Eggshell must not record into the store at `path`: another user's link on the way to it
    (foreign_link), a symbolic link, not a regular file, or a store, lock or directory someone
    else could have written (`untrusted`); None if none.

    Checked when a turn's prompt arrives (nothing is journaled for a store it may not write)
    and again, on open descriptors, when the turn is committed (store._Locked).
    """
    d = os.path.dirname(os.path.abspath(path))
    why = foreign_link(d)  # another user's link, even the directory itself, is named with its owner
    if why is not None:
        return why
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
    """Create a directory, and any missing parents, readable by the owner only.

    Only what it creates gets a mode (0700, from the start); an existing directory is left as
    it is: Eggshell never changes the mode of a directory it did not make (check_data_root,
    private_problem). Callers writing under a path someone else could redirect check it
    first (foreign_link)."""
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


MAX_LINKS = 40  # the links one lookup may follow (Linux's limit; past it the kernel says ELOOP)


def walk(start: str, name: str) -> tuple[str, list] | None:
    """(real path, [(link, target), ...]) of `name` resolved from the real directory `start`,
    one lstat a component as os.path.realpath does: the one walk of links Eggshell has. A read's
    fingerprint records the links it met (a retargeted link is a changed input: reuse/fingerprint.py),
    and foreign_link checks whose they are before anything is written under a path.

    `name` may be absolute (then `start` is not used). The links come in the order they were
    followed, each as its own path (its real parent joined with its name) and its target as
    readlink gives it. Like os.path.realpath (not strict), the rest of the path past a
    component that does not exist is joined as written, so an absent file or a dangling link's
    target still has the real path it would be created at. None: a loop, or more than
    MAX_LINKS links, or a link that cannot be read (it changed while it was read).
    """
    done = "/" if name.startswith("/") else start
    todo = [c for c in reversed(name.split("/")) if c not in ("", ".")]
    met: list = []
    missing = False
    while todo:
        c = todo.pop()
        if c in ("", "."):
            continue
        if c == "..":
            done = os.path.dirname(done)
            continue
        path = os.path.join(done, c)
        if not missing:
            try:
                st = os.lstat(path)
            except OSError:
                missing = True
            else:
                if stat.S_ISLNK(st.st_mode):
                    if len(met) >= MAX_LINKS:
                        return None
                    try:
                        target = os.readlink(path)
                    except OSError:
                        return None
                    met.append((path, target))
                    if target.startswith("/"):
                        done = "/"
                    todo.extend(reversed(target.split("/")))
                    continue
        done = path
    return done, met


def foreign_link(path: str) -> str | None:
    """Why nothing may be written under `path`: a symbolic link along it that another user owns
    (the refusal names the link, its owner and the fix); None when every link on the way is
    yours or root's.

    The one rule for every path Eggshell writes under: the data root, the manager's socket
    directory, the stores. Whoever owns a link can point it anywhere, at any time: a data
    root reached through another user's link would have Eggshell fill (and chmod) a
    directory of their choosing. A link of yours or root's (/tmp -> /private/tmp, your own
    ~/data -> /big/disk/data) is followed. The path is resolved by `walk`, one lstat a
    component (hooks call this at every event), and each link it met is checked for its owner;
    a loop is left for the open to refuse (ELOOP).
    """
    got = walk(os.sep, os.path.abspath(path))
    me = os.geteuid()
    for link, target in got[1] if got is not None else ():
        try:
            owner = os.lstat(link).st_uid
        except OSError:
            continue  # gone meanwhile: the open that follows finds out
        if owner not in (me, 0):
            return ("%s: refused: it is a symbolic link owned by %s, not by you or root, so its owner can point it "
                    "anywhere (it points to %s). Eggshell writes only through links of yours or root's: remove it "
                    "(`rm %s`) and use a directory of yours" % (link, _user(owner), target, link))
    return None


def private_problem(path: str, what: str, kind: str) -> str | None:
    """Why the existing directory `path` is not yours alone (0700), with the fix; None if it is, or is missing.

    Eggshell makes its directories 0700 (private_dir) and changes the mode of none it did not
    make: one that others may enter is refused, and the message says which chmod fixes it.
    `what` names it in the message ("the data root"), `kind` in the refusal of another's ("data roots").
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return "%s: refused: %s is not a directory; move it aside" % (path, what)
    if st.st_uid != os.geteuid():
        return refusal(path, "another user owns it (owner %s, mode %04o)" % (_user(st.st_uid), st.st_mode & 0o7777),
                       kind, "700")
    if st.st_mode & 0o077:
        return ("%s: refused: others can read or enter it (mode %04o); %s is kept private, and Eggshell changes the mode of "
                "no directory it did not make: if it is yours alone to use, `chmod 700 %s`" % (
                    path, st.st_mode & 0o7777, what, path))
    return None


def project_store_problem(root: str, value: str) -> str | None:
    """Why a project's config may not name `value` as a store: it is not a relative path under
    `<root>/.eggs/` reached through real directories; None if it is.

    A project file comes with the repository, so whoever wrote the repository wrote it: a
    store named `.git/hooks/post-checkout` would have Eggshell create a file git runs. So
    no absolute path (nor `~`), no `..` (even one that comes back), nothing outside `.eggs/`,
    and no symbolic link on the way or at the store itself (lstat of each existing component).
    """
    if value.startswith("~") or os.path.isabs(value):
        return "is an absolute path"
    if ".." in value.split("/"):
        return "goes through '..'"
    rel = os.path.normpath(value)
    parts = rel.split(os.sep)
    if parts[0] != EGGS_DIR or len(parts) < 2:
        return "is outside %s/" % EGGS_DIR
    d = root
    for part in parts:
        d = os.path.join(d, part)
        try:
            st = os.lstat(d)
        except OSError:
            return None  # missing from here on: Eggshell makes it, 0700, without following links
        if stat.S_ISLNK(st.st_mode):
            return "goes through a symbolic link, %s (to %s)" % (d, os.readlink(d))
    return None


def check_data_root(data_root: str) -> None:
    """Refuse (UnsafePath) a data root reached through another user's link, someone else's, or open to others.

    It holds every journaled prompt and output. Missing, it is fine: Eggshell makes it 0700.
    A few lstats and one stat when it is fine (hooks call this at every event); nothing is
    written into a refused one, and its mode is never changed (private_problem).
    """
    why = foreign_link(data_root) or private_problem(data_root, "the data root", "data roots")
    if why is not None:
        raise UnsafePath(why + ", or set EGGSHELL_DATA_ROOT to a directory of yours")


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


def remove_files_in(d: str) -> int:
    """Remove the files directly in directory `d` (a cache of copies: snapshots, search indexes); how many went."""
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return 0
    n = 0
    for name in names:
        try:
            os.unlink(os.path.join(d, name))
            n += 1
        except (FileNotFoundError, IsADirectoryError):
            pass
    return n
