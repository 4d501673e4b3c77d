"""The `.gitignore` in a `.eggs/` directory: stores stay out of git by default.

A store holds every recorded prompt and tool output, and an agent's usual `git add -A &&
git push` would publish whatever git does not ignore. A repository may ship `.eggshell.toml`
without `.eggs/.gitignore` (or vendor another project's config into a subdirectory), so the
first turn a hook saves there, not only `egg init`, makes the directory. The rule: whenever
Eggshell creates a `.eggs/` directory it writes a `.gitignore` into it before any store; a
`.eggs/` that already exists is left as it is, since a team may share its stores through git
on purpose (docs/scale.md, docs/privacy.md). `egg init` writes INIT_TEXT, which git shows
(`!.gitignore`) so the project commits it and says how to share; a directory made on the
way to a store gets AUTO_TEXT, which hides itself too: a repository the user never set up
is left with nothing new for `git add -A`. Either is created with O_EXCL and O_NOFOLLOW,
so nothing already there (a link a repository planted included) is ever written through.
"""

from __future__ import annotations

import errno
import os

from eggshell.paths import EGGS_DIR, fsync_fd, write_all

NAME = ".gitignore"
INIT_TEXT = """# Eggshell stores hold your prompts and tool outputs: private by default.
# To share a store through git, delete the `*` line below and add this line to the
# repository's .gitattributes so concurrent appends merge cleanly:
#     *.egg merge=union
*
!.gitignore
"""
AUTO_TEXT = """# Eggshell made this directory for its stores, which hold your prompts and tool outputs:
# git ignores all of it, this file too. To share a store through git, see `egg init` and docs/scale.md.
*
"""


def write_into(dir_fd: int, text: str = AUTO_TEXT) -> bool:
    """Create `.gitignore` holding `text` in the open directory `dir_fd`; False if a file or link of that name is there."""
    try:
        fd = os.open(NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    except FileExistsError:
        return False
    try:
        write_all(fd, text.encode("utf-8"))
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(NAME, dir_fd=dir_fd)  # a half-written file would keep a later try from writing it whole
        except OSError:
            pass
        raise
    os.close(fd)
    fsync_fd(dir_fd)
    return True


def write_at(eggs_dir: str, text: str = AUTO_TEXT) -> bool:
    """Create `.gitignore` in the directory `eggs_dir` (never through a link); False if one is there."""
    try:
        dfd = os.open(eggs_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise OSError(e.errno, "is a symbolic link or not a directory", eggs_dir) from None
        raise
    try:
        return write_into(dfd, text)
    finally:
        os.close(dfd)


def missing_eggs_dir(d: str) -> str | None:
    """The `.eggs/` directory on the way to directory `d` (itself included) that does not exist yet, or None.

    Asked before creating `d`, so the caller knows whether the `.eggs/` it is about to
    make is new (write_at after) or one that was there (left alone)."""
    parts = os.path.abspath(d).split(os.sep)
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] == EGGS_DIR:
            eggs = os.sep.join(parts[: i + 1]) or os.sep
            return None if os.path.lexists(eggs) else eggs
    return None
