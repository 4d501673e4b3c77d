"""An append-only `.egg` store: load (from the start or a byte offset) and commit.

A commit takes a lock on a sibling `<file>.lock`, trims a torn last line left by a
crashed writer, catches up on what other writers appended, appends only the nodes
the file does not hold yet plus one commit line, then flushes and fsyncs. Its cost
depends on what is appended, not on the size of the file, because the store keeps
its byte offset and reads only what is new. Nothing is ever rewritten in place;
`compact` and `merge` write a new file and rename it over the old one atomically.
"""

from __future__ import annotations

import datetime as _dt
import os
import stat
import time as _time
import uuid
from dataclasses import dataclass, field
from typing import Iterable, Iterator


from . import eggfile as ef
from .identity import content_hex, resolve_key
from .paths import fsync_dir, private_dir
from .values import Apply, Atom, ShapeError, Value, union_admissible, walk

LOCK_TIMEOUT_S = 30.0


class EggError(Exception):
    """A `.egg` file that cannot be read or written; the message names file and line."""


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _pair_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def check_path(path: str) -> None:
    """Refuse symlinks: the file itself and the directory holding it must be real."""
    for p in (path, os.path.dirname(os.path.abspath(path))):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode):
            raise EggError("%s: is a symbolic link; Eggshell refuses symlinked paths (use the real path)" % p)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise EggError("%s: is not a regular file" % path)


@dataclass
class Graph:
    """What the records of one file say, validated; pure state, no I/O."""

    path: str
    header: ef.Header | None = None
    nodes: dict[str, Value] = field(default_factory=dict)
    commits: dict[str, ef.Commit] = field(default_factory=dict)
    root_ids: dict[str, ef.Commit] = field(default_factory=dict)  # root id -> first commit holding it
    union_events: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)  # pair -> (time, +1 add | 0 unlink)
    unlinks: dict[str, ef.Unlink] = field(default_factory=dict)
    lines: int = 0

    @property
    def authority(self) -> str | None:
        return self.header.authority if self.header else None

    def roots(self) -> list[Value]:
        return [self.nodes[i] for i in self.root_ids]

    def unions(self) -> list[tuple[Value, Value]]:
        """Persistent unions in force: the latest event for each pair is an add."""
        return [(self.nodes[a], self.nodes[b]) for (a, b), (_, kind) in sorted(self.union_events.items()) if kind == 1]

    def provenance(self, v: Value | str) -> ef.Commit | None:
        return self.root_ids.get(v if isinstance(v, str) else content_hex(v))

    def lookup(self, key: str) -> tuple[str, Value]:
        """A node by display key or unique id prefix; raises LookupError (unknown/ambiguous)."""
        nid = resolve_key(key, self.nodes)
        return nid, self.nodes[nid]

    def ingest(self, numbered: Iterable[tuple[int, bytes]]) -> int:
        """Add complete lines (with their 1-based numbers); two passes, any order.

        Raises EggError naming the first bad line; on error the graph is unchanged.
        """
        where = self.path
        header = self.header
        raw: dict[str, tuple[ef.NodeRecord, int]] = {}
        commits: list[tuple[ef.Commit, int]] = []
        unlinks: list[tuple[ef.Unlink, int]] = []
        count = 0
        for n, line in numbered:
            count += 1
            if not line.strip():
                raise EggError("%s:%d: empty line" % (where, n))
            try:
                rec = ef.parse_record(line)
            except ef.RecordError as e:
                raise EggError("%s:%d: %s" % (where, n, e)) from None
            if n == 1 and not isinstance(rec, ef.Header):
                raise EggError("%s:1: the first line must be the eggshell header; this is not an .egg file" % where)
            if isinstance(rec, ef.Header):
                if header is not None and rec.authority != header.authority:
                    raise EggError(
                        "%s:%d: a second store (authority %s) is mixed into this one (authority %s); "
                        "combine different stores with `egg merge A B -o C`" % (where, n, rec.authority, header.authority)
                    )
                header = header or rec
            elif isinstance(rec, ef.NodeRecord):
                prior = raw.get(rec.id)
                if prior is not None and prior[0] != rec:
                    raise EggError("%s:%d: node %s differs from line %d with the same id" % (where, n, rec.id[:12], prior[1]))
                have = self.nodes.get(rec.id)
                if have is None:
                    raw[rec.id] = (rec, n)
                elif _record_of(rec.id, have) != rec:
                    raise EggError("%s:%d: node %s differs from the stored node with the same id" % (where, n, rec.id[:12]))
            elif isinstance(rec, ef.Commit):
                commits.append((rec, n))
            else:
                unlinks.append((rec, n))
        if count and header is None:
            raise EggError("%s: has no eggshell header line" % where)
        resolved = _resolve(raw, self.nodes, where)
        known = self.nodes

        class _Both:  # a read-only view of known + resolved, without copying either
            def __contains__(self, i: str) -> bool:
                return i in resolved or i in known

            def __getitem__(self, i: str) -> Value:
                v = resolved.get(i)
                return v if v is not None else known[i]

        nodes = _Both()
        for c, n in commits:
            for i in list(c.roots) + [x for p in c.unions for x in p]:
                if i not in nodes:
                    raise EggError("%s:%d: commit refers to node %s, which is not in the file" % (where, n, i[:12]))
            for a, b in c.unions:
                if not union_admissible(nodes[a], nodes[b]):
                    raise EggError("%s:%d: persistent union %s = %s would change Exact provenance" % (where, n, a[:12], b[:12]))
        for u, n in unlinks:
            for i in u.pair:
                if i not in nodes:
                    raise EggError("%s:%d: unlink refers to node %s, which is not in the file" % (where, n, i[:12]))
        # Everything checked: apply.
        self.header = header
        self.nodes.update(resolved)
        for c, _ in sorted(commits, key=lambda cn: (cn[0].time, cn[1])):
            if c.id in self.commits:
                continue
            self.commits[c.id] = c
            for r in c.roots:
                self.root_ids.setdefault(r, c)
            for a, b in c.unions:
                self._union_event(_pair_key(a, b), c.time, 1)
        for u, _ in unlinks:
            if u.id not in self.unlinks:
                self.unlinks[u.id] = u
                self._union_event(_pair_key(*u.pair), u.time, 0)
        self.lines += count
        return count

    def _union_event(self, pair: tuple[str, str], when: str, kind: int) -> None:
        # Latest time wins; at equal times an unlink wins, so line order never matters.
        prior = self.union_events.get(pair)
        if prior is None or (when, -kind) > (prior[0], -prior[1]):
            self.union_events[pair] = (when, kind)


def _record_of(nid: str, v: Value) -> ef.NodeRecord:
    """The record a stored Value was read from (to compare a repeated line against)."""
    if isinstance(v, Atom):
        return ef.NodeRecord(nid, v.data, None, ())
    return ef.NodeRecord(nid, None, v.op, tuple((r.auth, content_hex(r.target)) for r in v.args))


def _resolve(raw: dict[str, tuple[ef.NodeRecord, int]], known: dict[str, Value], where: str) -> dict[str, Value]:
    """Build Values for raw node records, children first, checking ids and shapes."""
    from .values import Ref

    out: dict[str, Value] = {}

    def get(i: str) -> Value | None:
        return out.get(i) or known.get(i)

    for start in raw:
        if start in out:
            continue
        stack = [(start, False)]
        on_path: set[str] = set()
        while stack:
            nid, expanded = stack.pop()
            if nid in out:
                continue
            rec, n = raw[nid]
            if rec.op is None:
                v: Value = Atom(rec.atom)
            elif not expanded:
                on_path.add(nid)
                stack.append((nid, True))
                for _, child in rec.args:
                    if get(child) is not None:
                        continue
                    if child not in raw:
                        raise EggError("%s:%d: node refers to %s, which is not in the file" % (where, n, child[:12]))
                    if child in on_path:
                        raise EggError("%s:%d: node refers to itself through %s (a cycle)" % (where, n, child[:12]))
                    stack.append((child, False))
                continue
            else:
                on_path.discard(nid)
                try:
                    v = Apply(rec.op, tuple(Ref(a, get(c)) for a, c in rec.args))
                except ShapeError as e:
                    raise EggError("%s:%d: invalid operator application: %s" % (where, n, e)) from None
            if content_hex(v) != nid:
                raise EggError("%s:%d: node id does not match its content (the line was altered)" % (where, n))
            out[nid] = v
    return out


class Store:
    """One `.egg` file on disk and the Graph read from it so far.

    A long-lived Store reads only what was appended since its last read, so a
    warm process stays current cheaply; a replaced file (compaction) is reloaded.
    """

    lock_timeout = LOCK_TIMEOUT_S  # how long a commit waits for another writer (the warm manager: barely, it retries later)

    def __init__(self, path: str):
        self.path = path
        self.graph = Graph(path)
        self._offset = 0
        self._ident: tuple[int, int] | None = None
        self._sig = b""  # the last bytes read: if they changed, the file was replaced
        self.torn = False

    @classmethod
    def open(cls, path: str) -> "Store":
        """Read a store; a missing file is an empty store (it is created by the first commit)."""
        s = cls(path)
        s.refresh()
        return s

    def __repr__(self) -> str:
        return "Store(%r, %d commits)" % (self.path, len(self.graph.commits))

    # -- reading -------------------------------------------------------------------

    def refresh(self) -> int:
        """Read what was appended since the last read; returns the number of new lines."""
        check_path(self.path)
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return 0
        except OSError as e:
            raise EggError("%s: cannot open: %s" % (self.path, e.strerror)) from None
        with os.fdopen(fd, "rb") as f:
            return self._read_from(f)

    def _read_from(self, f) -> int:
        st = os.fstat(f.fileno())
        ident = (st.st_dev, st.st_ino)
        replaced = self._ident is not None and (ident != self._ident or st.st_size < self._offset)
        if not replaced and self._sig:
            f.seek(self._offset - len(self._sig))
            replaced = f.read(len(self._sig)) != self._sig  # an inode number can be reused
        if replaced:
            self.graph = Graph(self.path)  # replaced (compacted) or shrunk: start over
            self._offset = 0
            self._sig = b""
        self._ident = ident
        f.seek(self._offset)
        data = f.read()
        end = data.rfind(b"\n") + 1
        self.torn = end < len(data)
        if end == 0:
            return 0
        first = self.graph.lines + 1
        lines = data[:end].split(b"\n")[:-1]
        count = self.graph.ingest(zip(range(first, first + len(lines)), lines))
        self._offset += end
        self._sig = (self._sig + data[:end])[-256:]
        return count

    # -- writing -------------------------------------------------------------------

    def commit(
        self,
        roots: Iterable[Value],
        unions: Iterable[tuple[Value, Value]] = (),
        *,
        session: str = "",
        turn: str = "",
        when: str | None = None,
    ) -> ef.Commit | None:
        """Append the roots and unions not yet stored; None (nothing written) on a replay."""
        roots = list(roots)
        unions = list(unions)
        for a, b in unions:
            if not union_admissible(a, b):
                raise EggError("%s: union %s = %s would change Exact provenance; refused" % (self.path, content_hex(a)[:12], content_hex(b)[:12]))
        with self._locked() as f:
            g = self.graph
            lines: list[bytes] = []
            if g.header is None:
                g_header = ef.Header(str(uuid.uuid4()), ef.VERSION, now_iso())
                lines.append(ef.header_line(g_header))
            new_root_ids: list[str] = []
            for r in roots:
                rid = content_hex(r)
                if rid not in g.root_ids and rid not in new_root_ids:
                    new_root_ids.append(rid)
            new_unions: list[tuple[str, str]] = []
            current = {p for p, (_, k) in g.union_events.items() if k == 1}
            for a, b in unions:
                p = _pair_key(content_hex(a), content_hex(b))
                if p[0] != p[1] and p not in current and p not in new_unions:
                    new_unions.append(p)
            if not new_root_ids and not new_unions:
                return None
            wanted = [r for r in roots if content_hex(r) in new_root_ids] + [x for a, b in unions for x in (a, b)]
            lines.extend(self._node_lines(wanted))
            c = ef.Commit("", when or now_iso(), session, turn, tuple(new_root_ids), tuple(new_unions))
            c = ef.Commit(ef.commit_id(c), c.time, c.session, c.turn, c.roots, c.unions)
            lines.append(ef.commit_line(c))
            self._append(f, lines)
            return c

    def remove_union(self, a: Value, b: Value, *, when: str | None = None) -> ef.Unlink | None:
        """Append an unlink for a persistent union in force; None if it is not in force."""
        with self._locked() as f:
            p = _pair_key(content_hex(a), content_hex(b))
            ev = self.graph.union_events.get(p)
            if ev is None or ev[1] != 1:
                return None
            u = ef.Unlink("", when or now_iso(), p)
            u = ef.Unlink(ef.unlink_id(u), u.time, u.pair)
            self._append(f, [ef.unlink_line(u)])
            return u

    def _node_lines(self, values: Iterable[Value]) -> Iterator[bytes]:
        known = self.graph.nodes
        ids: dict[Value, str] = {}
        emitted: set[str] = set()
        for v in values:
            for node in walk(v):
                nid = content_hex(node)
                ids[node] = nid
                have = known.get(nid)
                if have is not None:
                    if have != node:  # a sha256 collision: never let a hash decide identity
                        raise EggError("%s: two different values share id %s; refusing to write" % (self.path, nid))
                    continue
                if nid in emitted:
                    continue
                emitted.add(nid)
                yield ef.node_line(nid, node, ids)

    def _append(self, f, lines: list[bytes]) -> None:
        data = b"".join(lines)
        f.seek(0, os.SEEK_END)
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
        # Read back through the normal path so the in-memory graph is exactly what a reader sees.
        self._read_from(f)

    # -- locking -------------------------------------------------------------------

    def _locked(self):
        return _Locked(self)


class _Locked:
    """Context manager: lock, open for append, trim a torn tail, catch up; yields the file."""

    def __init__(self, store: Store):
        self.store = store
        self.lock_f = None
        self.f = None

    def __enter__(self):
        path = self.store.path
        check_path(path)
        d = os.path.dirname(os.path.abspath(path))
        made_dir = not os.path.isdir(d)
        try:
            private_dir(d)
        except OSError as e:
            raise EggError("%s: cannot create directory %s: %s" % (path, d, e.strerror)) from None
        lock_path = path + ".lock"
        check_path(lock_path)
        try:
            lfd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as e:
            raise EggError("%s: cannot open lock file %s: %s" % (path, lock_path, e.strerror)) from None
        import portalocker  # imported here: its import costs readers (hooks) ~20 ms they need not pay

        self.lock_f = os.fdopen(lfd, "r+b")
        wait = self.store.lock_timeout
        deadline = _time.monotonic() + wait
        while True:
            try:
                portalocker.lock(self.lock_f, portalocker.LOCK_EX | portalocker.LOCK_NB)
                break
            except portalocker.LockException:
                if _time.monotonic() > deadline:
                    self.lock_f.close()
                    raise EggError("%s: timed out after %g s waiting for the lock %s (another process holds it)" % (path, wait, lock_path)) from None
                _time.sleep(0.005)
        try:
            created = not os.path.exists(path)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            self.f = os.fdopen(fd, "r+b")
            if created:
                os.fchmod(fd, 0o600)
                fsync_dir(d)
                if made_dir:
                    fsync_dir(os.path.dirname(d))
            self.store._read_from(self.f)  # validate first: a damaged file is never changed
            _trim_torn_tail(self.f)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self.f

    def __exit__(self, *exc):
        if self.f is not None:
            self.f.close()
        if self.lock_f is not None:
            import portalocker

            try:
                portalocker.unlock(self.lock_f)
            finally:
                self.lock_f.close()
        return False


def _trim_torn_tail(f) -> None:
    """Drop an incomplete last line (a writer died mid-append); only ever under the lock."""
    size = f.seek(0, os.SEEK_END)
    if size == 0:
        return
    back = min(size, 1 << 16)
    f.seek(size - 1)
    if f.read(1) == b"\n":
        return
    pos = size
    while pos > 0:
        start = max(0, pos - back)
        f.seek(start)
        chunk = f.read(pos - start)
        i = chunk.rfind(b"\n")
        if i >= 0:
            f.truncate(start + i + 1)
            os.fsync(f.fileno())
            return
        pos = start
    f.truncate(0)
    os.fsync(f.fileno())


def write_compact(path: str, header: ef.Header, graphs: list[Graph]) -> int:
    """Write the union of graphs as a fresh file, atomically replacing `path`.

    Only reachable nodes are written, each once, children before parents; commits and
    unlinks keep their ids, so the result loads to the same roots and unions.
    Returns the number of lines written.
    """
    check_path(path)
    d = os.path.dirname(os.path.abspath(path))
    private_dir(d)
    commits: dict[str, ef.Commit] = {}
    unlinks: dict[str, ef.Unlink] = {}
    nodes: dict[str, Value] = {}
    for g in graphs:
        commits.update(g.commits)
        unlinks.update(g.unlinks)
        nodes.update(g.nodes)
    lines = [ef.header_line(header)]
    ids: dict[Value, str] = {}
    written: set[str] = set()
    for c in sorted(commits.values(), key=lambda c: (c.time, c.id)):
        for rid in list(c.roots) + [x for p in c.unions for x in p]:
            for node in walk(nodes[rid]):
                nid = content_hex(node)
                ids[node] = nid
                if nid not in written:
                    written.add(nid)
                    lines.append(ef.node_line(nid, node, ids))
        lines.append(ef.commit_line(c))
    for u in sorted(unlinks.values(), key=lambda u: (u.time, u.id)):
        lines.append(ef.unlink_line(u))
    tmp = "%s.tmp-%d-%d" % (path, os.getpid(), _time.monotonic_ns())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(b"".join(lines))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(d)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return len(lines)


def compact(path: str) -> tuple[int, int]:
    """Rewrite a store without orphan nodes or duplicate lines, under its lock.

    Returns (lines before, lines after). A damaged file is refused, never repaired.
    """
    s = Store(path)
    with s._locked():
        if s.graph.header is None:
            raise EggError("%s: no such store (or it is empty)" % path)
        before = s.graph.lines
        after = write_compact(path, s.graph.header, [s.graph])
    return before, after


def merge(paths: list[str], out: str) -> int:
    """Write the union of several stores to `out` (which takes the first store's authority)."""
    graphs = []
    for p in paths:
        if not os.path.exists(p):
            raise EggError("%s: no such file" % p)
        graphs.append(Store.open(p).graph)
    header = next((g.header for g in graphs if g.header is not None), None)
    if header is None:
        raise EggError("nothing to merge: %s hold no stores" % ", ".join(paths))
    return write_compact(out, header, graphs)
