"""Which recorded work is the user's own: only it may stand in for a call (a denial).

A `.egg` store travels: sharing one through git is a documented workflow, so a cloned
repository can carry `.eggs/work.egg` with any content at all (a `cat config/billing.toml`
whose "output" someone invented), in a file git made the user's own. Nothing in a store
can prove where its records were written: the header's `authority` is a uuid anyone who
has seen the store can copy, and a pull replaces the file's content while often keeping
its inode. So trust is not read from the store; it is kept beside it, in the data root:

    <data root>/trust/commits     one line per event: "+" or "-" and a commit id (64 hex)

Every commit this user's Eggshell writes appends "+ID" (store.Store.commit); `egg trust
FILE` appends "+ID" for each commit the file holds now, `egg untrust FILE` "-ID" (the
last line for an id wins). A commit id is the digest of the commit's own body, which
names its root ids, which are content digests: a "+ID" vouches for exactly the roots that
commit wrote, in whatever file they are found later (a compacted, merged or pulled copy).
A forged record has other content, so another id, and is not vouched for; copying an id
vouches only for what it already named.

A prior outcome is the user's own when its edge is staged work of the current turn (the
journal), or when the commit that first holds it in some store is vouched for. Anything
else is advice, labelled with the store it came from (`Judge`), and never denies. A
ledger that cannot be read as written (a line that is no record, a file someone else
could have written) vouches for nothing: reuse stays advisory and `egg doctor` says why.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Iterable

from eggshell.errors import EggshellError
from eggshell.paths import fsync_dir, private_dir, refusal, untrusted, write_all
from eggshell.core.standing import Standing

ID_CHARS = 64
LINE = ID_CHARS + 2  # sign, id, newline
_HEX = frozenset(b"0123456789abcdef")


def _clean(data: bytes) -> bool:
    """Whether the ledger is only whole records: each line a sign, 64 lowercase hex digits and a newline."""
    n, rest = divmod(len(data), LINE)
    return (not rest and data[LINE - 1::LINE] == b"\n" * n and not data[0::LINE].translate(None, b"+-")
            and not data.translate(None, b"0123456789abcdef+-\n"))


class TrustError(EggshellError):
    """The ledger cannot be used (damaged, or someone else could have written it); the message names it and the fix."""


def ledger_path(data_root: str) -> str:
    return os.path.join(data_root, "trust", "commits")


@dataclass(frozen=True, slots=True)
class Ledger:
    """The commit ids this user vouches for; `problem` says why it vouches for nothing."""

    path: str
    ids: frozenset[str]
    problem: str | None = None
    sig: tuple | None = None  # (inode, size, mtime) when read: a warm process re-reads only on change

    def owns(self, commit_id: str) -> bool:
        return self.problem is None and commit_id in self.ids


def _sig(st: os.stat_result) -> tuple:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def load(data_root: str, cached: Ledger | None = None) -> Ledger:
    """The ledger as it is now (`cached` again if the file has not changed since it was read)."""
    path = ledger_path(data_root)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return Ledger(path, frozenset())
    except OSError as e:
        return Ledger(path, frozenset(), "%s: cannot be read (%s)" % (path, e.strerror))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if cached is not None and cached.path == path and cached.sig == _sig(st):
            return cached
        why = _unsafe(path, st)
        if why is not None:
            return Ledger(path, frozenset(), why, _sig(st))
        try:
            data = f.read()
        except OSError as e:
            return Ledger(path, frozenset(), "%s: cannot be read (%s)" % (path, e.strerror))
    ids, problem = parse(data, path)
    return Ledger(path, ids, problem, _sig(st))


def _unsafe(path: str, st: os.stat_result) -> str | None:
    if not stat.S_ISREG(st.st_mode):
        return "%s: is not a regular file" % path
    why = untrusted(st, mine_only=True)
    return None if why is None else refusal(path, why, "trust ledgers", "600")


def parse(data: bytes, path: str) -> tuple[frozenset[str], str | None]:
    """(the ids vouched for, None) or (nothing, why the ledger is damaged).

    A line cut short (a crash while appending; the next append closes it with a newline)
    is ignored: it vouched for nothing yet. Any other line that is no record is damage.
    """
    if _clean(data):  # the usual case: whole records only, checked at C speed
        text = data.decode("ascii")
        if "-" not in text:
            return frozenset(text.replace("+", "").split()), None
        return _replay(text.split()), None
    lines = []
    for n, line in enumerate(data.split(b"\n"), 1):
        if line[:1] not in (b"+", b"-") or len(line) > LINE - 1 or not _HEX.issuperset(line[1:]):
            if not line:
                continue
            return frozenset(), ("%s:%d: damaged: not a trust record (expected + or - and a 64-hex commit id); "
                                 "nothing is trusted until it is fixed" % (path, n))
        if len(line) == LINE - 1:  # else torn
            lines.append(line.decode("ascii"))
    return _replay(lines), None


def _replay(lines: list[str]) -> frozenset[str]:
    """The ids vouched for after these records, in order: the last one for an id wins."""
    ids: set[str] = set()
    for line in lines:
        (ids.add if line[0] == "+" else ids.discard)(line[1:])
    return frozenset(ids)


def record(data_root: str, ids: Iterable[str], sign: str = "+") -> int:
    """Append one event per id (`+` vouch, `-` withdraw), fsynced; how many were written.

    Appends only (one write, O_APPEND), so concurrent writers never lose each other's lines
    and no lock is needed; a torn last line left by a crash is closed with a newline first.
    Raises OSError when the ledger cannot be written, TrustError when it must not be.
    """
    lines = [("%s%s\n" % (sign, i)).encode("ascii") for i in dict.fromkeys(ids)]
    n = len(lines)
    if not n:
        return 0
    path = ledger_path(data_root)
    d = os.path.dirname(path)
    private_dir(d)
    st = os.lstat(d)
    why = untrusted(st, mine_only=True) if stat.S_ISDIR(st.st_mode) else "it is not a directory"
    if why is not None:
        raise TrustError(refusal(d, why, "trust ledgers and their directories", "700"))
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        st = os.fstat(fd)
        why = _unsafe(path, st)
        if why is not None:
            raise TrustError(why)
        created = st.st_size == 0
        if st.st_size and os.pread(fd, 1, st.st_size - 1) != b"\n":
            lines.insert(0, b"\n")
        write_all(fd, b"".join(lines))
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(d)
    return n


def vouched(graph, ledger: Ledger) -> int:
    """How many of a store's commits the ledger vouches for."""
    return sum(1 for c in graph.commits if ledger.owns(c))


def describe(path: str, graph, ledger: Ledger) -> str:
    """One store's standing in a few words, for `egg status` and `egg doctor`."""
    return describe_commits(path, list(graph.commits), ledger)


def describe_commits(path: str, commit_ids: list[str], ledger: Ledger) -> str:
    """`describe` from the ids of a store's commits (a commit index lists them without reading the store)."""
    total = len(commit_ids)
    if ledger.problem is not None:
        return "not trusted (the trust ledger is damaged)"
    own = sum(1 for c in commit_ids if ledger.owns(c))
    if total == 0:
        return "trusted (empty; what Eggshell records into it is yours)"
    if own == total:
        return "trusted (all %d commit%s recorded here or trusted)" % (total, "" if total == 1 else "s")
    if own == 0:
        return "not trusted (none of its %d commit%s was recorded here: advice only; `egg trust %s` to rely on it)" % (
            total, "" if total == 1 else "s", path)
    return "partly trusted (%d of %d commits recorded here; the other %d came from elsewhere, e.g. a git pull: advice only; " \
           "`egg trust %s` to rely on them)" % (own, total, total - own, path)


def shown_path(path: str) -> str:
    """A store's path as the user knows it: relative to its project (the directory holding `.eggshell.toml`)."""
    from eggshell.paths import find_project

    root = find_project(os.path.dirname(os.path.abspath(path)))
    return os.path.relpath(path, root) if root else path


def origin_label(path: str, ledger: Ledger) -> str:
    if ledger.problem is not None:
        return "a store not verified: %s (the trust ledger cannot be read, so nothing is trusted; `egg doctor` says why)" % (
            shown_path(path))
    return "another store: %s (not recorded here; `egg trust` it to rely on it)" % shown_path(path)


OWN = Standing()


def judge(graphs: Iterable, ledger: Ledger, staged: Iterable = ()):
    """A standing.Judge for origin: OWN for the user's own work, else a label naming its store.

    `graphs` are the store.Graphs the workspace was built from (engine.Workspace.graphs);
    `staged` the current turn's journaled Values (always the user's own).
    """
    from eggshell.core.identity import content_hex

    graphs = tuple(graphs)
    staged = frozenset(staged)
    labels: dict[str, str] = {}

    def origin(owner, outcome) -> Standing:
        if owner in staged:
            return OWN
        h = content_hex(owner)
        holder = None
        for g in graphs:
            c = g.root_ids.get(h)
            if c is None:
                continue
            if ledger.owns(c.id):
                return OWN
            holder = holder or g.path
        if holder is None:
            return Standing(origin="another store (not found in the stores read; not recorded here)")
        if holder not in labels:
            labels[holder] = origin_label(holder, ledger)
        return Standing(origin=labels[holder])

    return origin


def own_unions(ws, ledger: Ledger):
    """The workspace with only the persistent unions the user's own commits declared.

    A union is identity for matching: one a foreign store declares (`cat .env.example` =
    `cat config/billing.toml`) could make the user's own trusted outcome complete a call it
    never answered. So unions count only from vouched-for commits (`egg union` writes one).
    """
    if not ws.unions:
        return ws
    from dataclasses import replace

    from eggshell.core.identity import content_hex

    trusted = {p for g in ws.graphs for i, c in g.commits.items() if c.unions and ledger.owns(i) for p in c.unions}
    keep = tuple(u for u in ws.unions if tuple(sorted((content_hex(u.left), content_hex(u.right)))) in trusted)
    return ws if len(keep) == len(ws.unions) else replace(ws, unions=keep)
