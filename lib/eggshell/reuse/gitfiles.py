"""Git's own files, read without running git: where a repository is, what HEAD and a ref hold,
the index, a branch's upstream, and the revision names a git command's operand spells.

Kept apart from fingerprint.py (which decides what a call read) because it is knowledge about
git's layout, read on every PostToolUse hook: so only `os`, `stat`, `struct`, no `re`. A
repository is data a stranger may have made (a tarball, a PR branch): every file is opened
without blocking and without following a final link, and read only when it is a regular file
(`read_regular`), so a FIFO planted as `.git/HEAD` answers at once instead of hanging the hook.
"""

from __future__ import annotations

import os
import stat as _stat
import struct

PACKED_CAP = 1 << 20  # bytes of packed-refs read
_ENTRY = struct.Struct(">10I20sH")  # a git index entry's fixed part


def read_regular(path: str, limit: int, follow: bool = False) -> bytes | None:
    """Up to `limit` bytes of a regular file; None for anything else or on error.

    Opened without blocking and (unless `follow`) without following a final link, then
    checked by `fstat`: a FIFO, device or socket planted where a file was expected (a
    hostile `.git/HEAD`) would otherwise hang the hook that reads it, and lose its event.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not _stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, left = [], limit
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_text(path: str, limit: int = 4096) -> str | None:
    """A small git file's text (HEAD, a ref, `commondir`, a `.git` file), stripped; None if unreadable."""
    data = read_regular(path, limit)
    if data is None:
        return None
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None


def find_git(root: str) -> tuple[str, str, str] | None:
    d = root
    while True:
        dot = os.path.join(d, ".git")
        try:
            st = os.lstat(dot)
        except OSError:
            st = None
        if st is not None:
            gitdir = dot
            if _stat.S_ISREG(st.st_mode):  # a worktree or submodule: "gitdir: PATH"
                line = read_text(dot)
                if line is None or not line.startswith("gitdir:"):
                    return None
                gitdir = os.path.normpath(os.path.join(d, line[7:].strip()))
            common = gitdir
            try:
                os.lstat(os.path.join(gitdir, "commondir"))
            except OSError:
                pass  # the usual case: no linked worktree
            else:
                text = read_text(os.path.join(gitdir, "commondir"))
                if text is None:
                    return None  # a commondir that cannot be read (not a file): no repository known
                common = os.path.normpath(os.path.join(gitdir, text))
            return d, gitdir, common
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def read_head(gitdir: str, common: str) -> str | None:
    """The commit HEAD names (hex), read from HEAD, a loose ref or packed-refs; None if unborn."""
    head = read_text(os.path.join(gitdir, "HEAD"))
    if head is None or not head.startswith("ref:"):
        return head if head is not None and is_hex(head) else None
    return resolve(gitdir, common, head[4:].strip(), None)


def resolve(gitdir: str, common: str, ref: str, packed: bytes | None) -> str | None:
    """The object id a ref holds (loose, per worktree then common, or in `packed`, the
    packed-refs bytes, read here when None), symbolic refs followed; None if none."""
    for _ in range(5):
        if ".." in ref.split("/") or ref.startswith("/") or "\0" in ref:
            return None
        path = next((os.path.join(b, ref) for b in (gitdir, common) if os.path.lexists(os.path.join(b, ref))), None)
        if path is None and packed is None:
            packed = read_regular(os.path.join(common, "packed-refs"), PACKED_CAP) or b""
        text = read_text(path) if path else packed_in(packed, ref)
        if text is None or not text.startswith("ref:"):
            return text if text is not None and is_hex(text) else None
        ref = text[4:].strip()
    return None


def packed_in(data: bytes, ref: str) -> str | None:
    """The id packed-refs holds for `ref`, or None."""
    want = b" " + ref.encode("utf-8", "surrogateescape") + b"\n"
    at = data.find(want)
    if at < 0:
        return None
    start = data.rfind(b"\n", 0, at) + 1
    h = data[start:at].decode("ascii", "replace")
    return h if is_hex(h) else None


def is_hex(s: str) -> bool:
    return len(s) in (40, 64) and all(c in "0123456789abcdef" for c in s)


class Index:
    """Entries of a git index (v2, v3), looked up without parsing all of it.

    Entries are sorted by path, 8-byte aligned from offset 12, and each spells its whole
    path: a path is found with one `bytes.find` and checked at its entry's offset, and a
    directory's entries are the run that starts at its first one.
    """

    def __init__(self, data: bytes = b"", mtime_ns: int = 0):
        self.data = data
        self.mtime_ns = mtime_ns  # an entry changed at or after this may be racily clean (git's rule)

    def _at(self, s: int):
        """(path, blob hex, stat tuple, next entry's offset, path offset) of the entry at `s`, or None."""
        d = self.data
        if s < 12 or (s - 12) % 8 or s + 62 > len(d):
            return None
        f = _ENTRY.unpack_from(d, s)
        p = s + (64 if f[11] & 0x4000 else 62)
        e = d.find(b"\0", p)
        if e < 0 or (f[11] & 0xFFF) not in (e - p, 0xFFF) or f[6] >> 12 not in (0o10, 0o12, 0o16):
            return None
        return d[p:e], f[10].hex(), (f[0], f[1], f[2], f[3], f[5], f[9]), s + ((e - s + 8) & ~7), p

    def _starting(self, p: int):
        """The entry whose path starts at offset `p` (a `find` hit), or None (a hit inside another path)."""
        for s in (p - 62, p - 64):
            e = self._at(s)
            if e is not None and e[4] == p:
                return e
        return None

    def lookup(self, rel: str):
        """(blob hex, (ctime s, ctime ns, mtime s, mtime ns, ino, size)) of a tracked path, or None."""
        if not self.data:
            return None
        want = rel.encode("utf-8", "surrogateescape")
        at = self.data.find(want + b"\0", 12)
        while at >= 0:
            e = self._starting(at)
            if e is not None and e[0] == want:
                return e[1], e[2]
            at = self.data.find(want + b"\0", at + 1)
        return None

    def under(self, rel: str, budget) -> dict | None:
        """{path: (blob, stat)} of the tracked entries under a directory ("": all); None past the budget
        (a fingerprint.Budget: its `spend`)."""
        out: dict = {}
        if not self.data:
            return out
        prefix = (rel.rstrip("/") + "/").encode("utf-8", "surrogateescape") if rel else b""
        e = self._at(12)
        if prefix:
            at = self.data.find(prefix, 12)
            e = None
            while at >= 0:
                e = self._starting(at)
                if e is not None and e[0].startswith(prefix):
                    break
                e, at = None, self.data.find(prefix, at + 1)
        while e is not None and e[0].startswith(prefix):
            if not budget.spend():
                return None
            out[e[0].decode("utf-8", "surrogateescape")] = (e[1], e[2])
            e = self._at(e[3])
        return out


def upstream(config: bytes, branch: str) -> str | None:
    """`REMOTE/BRANCH` of a branch's upstream from a git config's `[branch "NAME"]` section; None if unset."""
    text = config.decode("utf-8", "replace")
    want = '[branch "%s"]' % branch
    remote = merge = None
    inside_section = False
    for line in text.splitlines():
        t = line.strip()
        if t.startswith("["):
            inside_section = t == want
            continue
        if inside_section and "=" in t:
            k, _, v = t.partition("=")
            k, v = k.strip().lower(), v.strip()
            if k == "remote":
                remote = v
            elif k == "merge":
                merge = v
    if not remote or not merge or not merge.startswith("refs/heads/"):
        return None
    return merge[len("refs/heads/"):] if remote == "." else "%s/%s" % (remote, merge[len("refs/heads/"):])


def rev_names(word: str) -> list | None:
    """The ref names a revision operand spells (`a..b`, `^x`, `x~2`, `x:path`), HEAD left out;
    None for what needs more than refs (`x@{1}`, `:/text`, a name git would refuse)."""
    word = word.split(":", 1)[0] if not word.startswith(":") else ""
    names = []
    for part in word.replace("...", "..").split(".."):
        part = part.lstrip("^")
        if "@{" in part:
            return None
        for c in "~^":
            part = part.split(c, 1)[0]
        if part in ("", "@", "HEAD"):
            continue
        if part.startswith(("-", "/")) or part.endswith(("/", ".lock")) or ".." in part or any(c in part for c in " \t\0\\*?[") or \
                len(part) > 200:
            return None
        names.append(part)
    return names


def is_abbrev(name: str) -> bool:
    """An object id, whole or abbreviated: it names the same commit for ever."""
    return 4 <= len(name) <= 64 and all(c in "0123456789abcdef" for c in name)
