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
import errno
import os
import stat
import sys
import time as _time
import uuid
from array import array
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator


from eggshell.errors import EggshellError
from eggshell.graph import eggfile as ef
from eggshell.graph import ignorefile
from eggshell.core.identity import content_hex, resolve_key
from eggshell.paths import EGGS_DIR, foreign_link, fsync_dir, fsync_fd, private_dir, refusal, untrusted
from eggshell.core.values import Apply, Atom, Op, Ref, ShapeError, Value, union_admissible, walk

LOCK_TIMEOUT_S = 30.0


class EggError(EggshellError):
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
    # Tombstones (`egg forget`): a forgotten root leaves root_ids for `hidden`, so every
    # reader of root_ids stops seeing it; its nodes stay until `egg compact --purge`.
    forgets: dict[str, ef.Forget] = field(default_factory=dict)
    hidden: dict[str, ef.Commit] = field(default_factory=dict)  # forgotten root id -> first commit holding it
    generation: int = 0  # bumped when roots that were live are forgotten: incremental readers rebuild
    forgotten_roots: set[str] = field(default_factory=set)
    forgotten_turns: set[tuple[str, str]] = field(default_factory=set)  # (session Atom id, turn Atom id)
    _pins: dict[str, set[str]] | None = None  # All id -> ids of the Receipt roots pinning it (built once needed)

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

    def ingest(self, numbered: Iterable[tuple[int, bytes]], apply: bool = True) -> int:
        """Add complete lines (with their 1-based numbers); any order.

        Raises EggError naming the first bad line; on error (or with apply=False, a check
        only) the graph is unchanged.

        A node whose children are already known is built as its line is read (a writer puts
        children first), so its record is garbage at once; only the others wait for a second
        pass. Holding every record until the end left a 10,000-turn store's load with 200 MB
        of freed memory scattered between the nodes kept, which the process never gave back.
        """
        where = self.path
        header = self.header
        raw: dict[str, tuple[ef.NodeRecord, int]] = {}  # records waiting for a child not read yet
        built: dict[str, Value] = {}  # nodes new to the graph, built as they were read
        built_at = array("I")  # the line each of `built` was read from, in the same order
        known = self.nodes

        def get(i: str) -> Value | None:
            return built.get(i) or known.get(i)
        commits: list[tuple[ef.Commit, int]] = []
        unlinks: list[tuple[ef.Unlink, int]] = []
        forgets: list[ef.Forget] = []
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
                have = built.get(rec.id)
                if have is not None:
                    if _record_of(rec.id, have) != rec:
                        at = built_at[list(built).index(rec.id)]
                        raise EggError("%s:%d: node %s differs from line %d with the same id" % (where, n, rec.id[:12], at))
                    continue
                have = known.get(rec.id)
                if have is not None:
                    if _record_of(rec.id, have) != rec:
                        raise EggError("%s:%d: node %s differs from the stored node with the same id" % (where, n, rec.id[:12]))
                elif prior is None and all(get(c) is not None for _, c in rec.args):
                    built[rec.id] = _build(rec, get, where, n)
                    built_at.append(n)
                elif prior is None:
                    raw[rec.id] = (rec, n)
            elif isinstance(rec, ef.Commit):
                commits.append((rec, n))
            elif isinstance(rec, ef.Forget):
                forgets.append(rec)  # it may name roots a purge removed: nothing to resolve
            else:
                unlinks.append((rec, n))
        if count and header is None:
            raise EggError("%s: has no eggshell header line" % where)
        resolved = _resolve(raw, get, where)
        if built:
            built.update(resolved)
            resolved = built

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
        if not apply:
            return count
        # Everything checked: apply.
        self.header = header
        self.nodes.update(resolved)
        fresh: dict[str, ef.Commit] = {}
        for c, _ in sorted(commits, key=lambda cn: (cn[0].time, cn[1])):
            if c.id in self.commits:
                continue
            self.commits[c.id] = c
            for r in c.roots:
                if r not in self.root_ids:
                    fresh.setdefault(r, c)  # a forgotten root committed again is looked at again
            for a, b in c.unions:
                self._union_event(_pair_key(a, b), c.time, 1)
        for u, _ in unlinks:
            if u.id not in self.unlinks:
                self.unlinks[u.id] = u
                self._union_event(_pair_key(*u.pair), u.time, 0)
        self._apply(fresh, [f for f in forgets if f.id not in self.forgets])
        self.lines += count
        return count

    def _apply(self, fresh: dict[str, ef.Commit], forgets: list[ef.Forget]) -> None:
        """Add new roots and tombstones: a forgotten root goes to `hidden`, never to root_ids."""
        for f in forgets:
            self.forgets[f.id] = f
            self.forgotten_roots.update(f.roots)
            self.forgotten_turns.update(f.turns)
        forgetting = bool(self.forgotten_roots or self.forgotten_turns)
        if forgetting:
            self._note_pins(fresh)
        gone = self.hides([(r, self.nodes[r]) for r in fresh]) if fresh and forgetting else set()
        for r, c in fresh.items():
            if r in gone:
                self.hidden.setdefault(r, c)
            else:
                self.hidden.pop(r, None)  # an All a live turn pins again
                self.root_ids[r] = c
        if forgets:
            now = self.hides([(r, self.nodes[r]) for r in self.root_ids])
            for r in [r for r in self.root_ids if r in now]:
                self.hidden[r] = self.root_ids.pop(r)
            if now:
                self.generation += 1

    def _note_pins(self, fresh) -> None:
        if self._pins is None:
            self._pins = {}
            fresh = [*self.root_ids, *self.hidden, *fresh]
        for r in fresh:
            for a in _pinned_alls(self.nodes[r]):
                self._pins.setdefault(a, set()).add(r)

    def hides(self, items: list[tuple[str, Value]]) -> set[str]:
        """Which of these roots (id, Value) the tombstones forget, the receipts among them counted.

        A root is forgotten when a tombstone names it or its turn (a tool or answer Outcome
        through its Occurrence, a Receipt directly); a turn's All (which names no turn) when
        every Receipt pinning it is forgotten, so a forgotten turn's later commits stay hidden.
        """
        if not self.forgotten_roots and not self.forgotten_turns:
            return set()
        out: set[str] = set()
        alls: list[str] = []
        batch: dict[str, set[str]] = {}
        for rid, v in items:
            for a in _pinned_alls(v):
                batch.setdefault(a, set()).add(rid)
            if rid in self.forgotten_roots:
                out.add(rid)
            elif isinstance(v, Apply) and v.op is Op.ALL:
                alls.append(rid)
            elif self.forgotten_turns and turn_key(v) in self.forgotten_turns:
                out.add(rid)
        pins = self._pins or {}
        for rid in alls:
            by = pins.get(rid, set()) | batch.get(rid, set())
            if by and all(p in out or p in self.hidden for p in by):
                out.add(rid)
        return out

    def forgotten(self) -> set[str]:
        """Ids of the nodes only forgotten roots reach: what `egg compact --purge` removes."""
        if not self.hidden:
            return set()
        live = _reach([self.nodes[r] for r in self.root_ids])
        return _reach([self.nodes[r] for r in self.hidden]) - live

    def _union_event(self, pair: tuple[str, str], when: str, kind: int) -> None:
        # Latest time wins; at equal times an unlink wins, so line order never matters.
        prior = self.union_events.get(pair)
        if prior is None or (when, -kind) > (prior[0], -prior[1]):
            self.union_events[pair] = (when, kind)


def turn_key(v: Value) -> tuple[str, str] | None:
    """(session Atom id, turn Atom id) of a turn's root: an Outcome through its first Occurrence, a Receipt."""
    if not isinstance(v, Apply):
        return None
    if v.op is Op.RECEIPT and len(v.args) >= 2:
        return content_hex(v.args[0].target), content_hex(v.args[1].target)
    from eggshell.graph.turns import occurrence_turn, occurrences

    occ = next(occurrences(v), None)
    return tuple(content_hex(x) for x in occurrence_turn(occ)) if occ is not None else None


def _pinned_alls(v: Value) -> list[str]:
    """The Alls a Receipt pins (its turn's decomposition)."""
    if not (isinstance(v, Apply) and v.op is Op.RECEIPT):
        return []
    return [content_hex(r.target) for r in v.args if isinstance(r.target, Apply) and r.target.op is Op.ALL]


def _reach(values: Iterable[Value]) -> set[str]:
    seen: set[str] = set()
    stack = list(values)
    while stack:
        v = stack.pop()
        h = content_hex(v)
        if h in seen:
            continue
        seen.add(h)
        if isinstance(v, Apply):
            stack.extend(r.target for r in v.args)
    return seen


def _record_of(nid: str, v: Value) -> ef.NodeRecord:
    """The record a stored Value was read from (to compare a repeated line against)."""
    if isinstance(v, Atom):
        return ef.NodeRecord(nid, v.data, None, ())
    return ef.NodeRecord(nid, None, v.op, tuple((r.auth, content_hex(r.target)) for r in v.args))


def _build(rec: ef.NodeRecord, get: Callable[[str], Value | None], where: str, n: int) -> Value:
    """The Value of a node record whose children `get` holds, its shape and id checked."""
    if rec.op is None:
        v: Value = Atom(rec.atom)
    else:
        try:
            v = Apply(rec.op, tuple(Ref(a, get(c)) for a, c in rec.args))
        except ShapeError as e:
            raise EggError("%s:%d: invalid operator application: %s" % (where, n, e)) from None
    if content_hex(v) != rec.id:
        raise EggError("%s:%d: node id does not match its content (the line was altered)" % (where, n))
    return v


def _resolve(raw: dict[str, tuple[ef.NodeRecord, int]], known: Callable[[str], Value | None], where: str) -> dict[str, Value]:
    """Build Values for raw node records, children first, checking ids and shapes."""
    out: dict[str, Value] = {}

    def get(i: str) -> Value | None:
        return out.get(i) or known(i)

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
            if rec.op is not None and not expanded:
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
            on_path.discard(nid)
            out[nid] = _build(rec, get, where, n)
    return out


class Store:
    """One `.egg` file on disk and the Graph read from it so far.

    A long-lived Store reads only what was appended since its last read, so a
    warm process stays current cheaply; a replaced file (compaction) is reloaded.
    """

    lock_timeout = LOCK_TIMEOUT_S  # how long a commit waits for another writer (the warm manager: barely, it retries later)
    data_root: str | None = None  # whose trust ledger vouches for this store's commits (trust.py); None: the environment's

    def __init__(self, path: str):
        self.path = path
        self.graph = Graph(path)
        self._offset = 0
        self._ident: tuple[int, int] | None = None
        self._sig = b""  # the last bytes read: if they changed, the file was replaced
        self.torn = False  # bytes follow the last complete line: a torn write, or damage
        self.tail_len = 0  # bytes of an incomplete last line (up to a NUL byte)
        self.nul_at: int | None = None  # where a NUL byte (a zero-filled or sparse tail) starts
        self.epoch = 0  # counts fresh starts (a replaced or deleted file): part of stamp()

    @staticmethod
    def note(msg: str) -> None:
        """Say what a write changed besides the store (a mode tightened): stderr, unless a process
        that logs elsewhere (a hook, the manager: warm.Resources) sets its own."""
        print("eggshell: note: %s" % msg, file=sys.stderr, flush=True)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("note", None)  # a process's logger is not part of a snapshot
        return state

    @classmethod
    def open(cls, path: str) -> "Store":
        """Read a store; a missing file is an empty store (it is created by the first commit)."""
        s = cls(path)
        s.refresh()
        return s

    def __repr__(self) -> str:
        return "Store(%r, %d commits)" % (self.path, len(self.graph.commits))

    @property
    def offset(self) -> int:
        """How far the file has been read and validated: the end of its last complete line read."""
        return self._offset

    @property
    def ident(self) -> tuple[int, int] | None:
        """(device, inode) of the file read, None before it exists."""
        return self._ident

    def stamp(self) -> tuple:
        """Changes whenever what readers see may have: a fresh start, a commit, a tombstone that hid something."""
        return (self.path, self.epoch, len(self.graph.commits), self.graph.generation)

    def _start_over(self) -> None:
        self.graph = Graph(self.path)
        self._offset = 0
        self._ident = None
        self._sig = b""
        self.epoch += 1

    # -- reading -------------------------------------------------------------------

    def refresh(self) -> int:
        """Read what was appended since the last read; returns the number of new lines."""
        check_path(self.path)
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            if self._ident is not None or self.graph.lines:
                self._start_over()  # the user deleted it: what it held is no longer served
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
            self._start_over()  # replaced (compacted, purged) or shrunk: start over
        self._ident = ident
        f.seek(self._offset)
        data, self.nul_at = read_until_nul(f, self._offset)
        end = data.rfind(b"\n") + 1
        self.tail_len = len(data) - end
        self.torn = end < len(data) or self.nul_at is not None
        if end == 0:
            return 0
        count = self.graph.ingest(enumerate(_lines(data, end), self.graph.lines + 1))
        start = self._offset
        self._offset += end
        self._sig = (self._sig + data[max(0, end - 256):end])[-256:]
        self._took(start, data if end == len(data) else data[:end])
        return count

    def _took(self, start: int, data: bytes) -> None:
        """Called with the complete lines just read and validated (an AppendStore indexes them)."""

    # -- writing -------------------------------------------------------------------

    def commit(
        self,
        roots: Iterable[Value],
        unions: Iterable[tuple[Value, Value]] = (),
        *,
        session: str = "",
        turn: str = "",
        when: str | None = None,
        within: str | None = None,
    ) -> ef.Commit | None:
        """Append the roots and unions not yet stored; None (nothing written) on a replay.

        `within` is the project root the store belongs to: no directory from there down to
        the file may be a symbolic link when the write happens (see _open_parent).
        """
        roots = list(roots)
        unions = list(unions)
        for a, b in unions:
            if not union_admissible(a, b):
                raise EggError("%s: union %s = %s would change Exact provenance; refused" % (self.path, content_hex(a)[:12], content_hex(b)[:12]))
        with self._locked(within) as f:
            g = self.graph
            lines: list[bytes] = []
            if g.header is None:
                g_header = ef.Header(str(uuid.uuid4()), ef.VERSION, now_iso())
                lines.append(ef.header_line(g_header))
            fresh = dict((content_hex(r), r) for r in roots)
            fresh = {rid: r for rid, r in fresh.items() if rid not in g.root_ids}
            gone = g.hides(list(fresh.items()))  # a forgotten turn's text is never written again
            new_root_ids = [rid for rid in fresh if rid not in gone]
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
            self._vouch([c.id])
            return c

    def _vouch(self, ids: list[str]) -> None:
        """Record in the trust ledger that this user wrote these commits here: only they may complete a call.

        The store already holds them: a ledger that cannot be written costs their standing
        (advice only until `egg trust`), never the turn."""
        from eggshell.graph import trust
        from eggshell.paths import from_env

        root = self.data_root or from_env().data_root
        try:
            trust.record(root, ids)
        except (OSError, trust.TrustError) as e:
            self.note("%s: the trust ledger of %s was not written (%s); these turns are advice only until `egg trust %s`"
                      % (self.path, root, e, self.path))

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

    def forget(self, roots: Iterable[str], turns: Iterable[tuple[str, str]] = (), *, when: str | None = None) -> ef.Forget | None:
        """Append a tombstone for these root ids and (session, turn) Atom id pairs; None if all are forgotten already."""
        with self._locked() as f:
            g = self.graph
            new_roots = sorted(set(roots) - g.forgotten_roots)
            new_turns = sorted(set(turns) - g.forgotten_turns)
            if not new_roots and not new_turns:
                return None
            t = ef.Forget("", when or now_iso(), tuple(new_roots), tuple(new_turns))
            t = ef.Forget(ef.forget_id(t), t.time, t.roots, t.turns)
            self._append(f, [ef.forget_line(t)])
            return t

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

    def _locked(self, within: str | None = None):
        return _Locked(self, within)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_parent(path: str, within: str | None) -> int:
    """A descriptor of the directory holding `path`, reached without following a symbolic link.

    The turn's prompt resolved its store's absolute path; the commit comes later, and a
    directory swapped for a link meanwhile must not send the turn elsewhere. So from
    `within` (the project root: the user's own way to it may go through links) each
    component is opened relative to the one above with O_NOFOLLOW, and missing ones are
    made 0700. A store outside `within` (a global egg) is reached from its directory's
    parent. The directory must be one nobody else can write (paths.untrusted), and the way to
    `within` (or to that parent) may go only through links of yours or root's (paths.foreign_link).
    """
    d = os.path.dirname(os.path.abspath(path))
    base = os.path.abspath(within) if within else None
    outside = base is None or os.path.commonpath([base, d]) != base
    if outside:
        base = os.path.dirname(d)
    why = foreign_link(base)
    if why is not None:
        raise EggError("%s: %s" % (path, why))
    if outside:
        new_eggs = ignorefile.missing_eggs_dir(base)
        try:
            private_dir(base)
            if new_eggs is not None:
                ignorefile.write_at(new_eggs)  # as _child_dir does for a .eggs/ it makes
        except OSError as e:
            raise EggError("%s: cannot create directory %s: %s" % (path, base, e.strerror)) from None
    parts = [] if d == base else os.path.relpath(d, base).split(os.sep)
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise EggError("%s: cannot open directory %s: %s" % (path, base, e.strerror)) from None
    try:
        for i, part in enumerate(parts):
            child = _child_dir(fd, part, path, os.path.join(base, *parts[:i + 1]))
            os.close(fd)
            fd = child
        why = untrusted(os.fstat(fd))
        if why is not None:
            raise EggError(refusal(d, why, "stores and their directories", "700"))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _child_dir(fd: int, name: str, path: str, shown: str) -> int:
    """The directory `name` inside the open directory `fd` (made 0700 if missing), never a link.

    A `.eggs/` made here gets its `.gitignore` before any store goes in (graph/ignorefile);
    if that file cannot be written the directory is removed again, so a later try makes
    both rather than leave an un-ignored `.eggs/` behind."""
    try:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            try:
                os.mkdir(name, 0o700, dir_fd=fd)
                made = True
            except FileExistsError:
                made = False
            fsync_fd(fd)
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            if made and name == EGGS_DIR:
                _ignored(fd, child, name, path)
            return child
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise EggError("%s: %s is a symbolic link or not a directory (was it replaced after the turn began?); Eggshell "
                           "writes a store only through real directories, so nothing was written" % (path, shown)) from None
        raise EggError("%s: cannot open directory %s: %s" % (path, shown, e.strerror)) from None


def _ignored(parent_fd: int, child_fd: int, name: str, path: str) -> None:
    """Write the `.gitignore` of the `.eggs/` just made (open as `child_fd`); on failure remove it again and refuse."""
    try:
        ignorefile.write_into(child_fd)
    except OSError as e:
        os.close(child_fd)
        try:
            os.rmdir(name, dir_fd=parent_fd)
        except OSError:
            pass
        raise EggError("%s: cannot write %s/%s (%s), which keeps the store out of git; nothing was written"
                       % (path, name, ignorefile.NAME, e.strerror or e)) from None


def _open_in(dir_fd: int, path: str, flags: int) -> int:
    """Open the file named by `path`'s last component inside `dir_fd`, never through a link."""
    try:
        return os.open(os.path.basename(path), flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise EggError("%s: is a symbolic link; Eggshell refuses symlinked paths (use the real path)" % path) from None
        if e.errno == errno.EEXIST:
            raise
        raise EggError("%s: cannot open: %s" % (path, e.strerror)) from None


def _own(path: str, fd: int, note) -> None:
    """Refuse a store (or lock) file someone else owns or can write; make a loose one 0600 (with a note)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise EggError("%s: is not a regular file" % path)
    why = untrusted(st, mine_only=True)
    if why is not None:
        raise EggError(refusal(path, why, "stores and their directories", "600"))
    if st.st_mode & 0o077:
        os.fchmod(fd, 0o600)
        if note is not None:
            note("%s: was mode %04o (others could read every recorded turn); set to 0600" % (path, st.st_mode & 0o7777))


class _Locked:
    """Context manager: lock, open for append, trim a torn tail, catch up; yields the file."""

    def __init__(self, store: Store, within: str | None = None):
        self.store = store
        self.within = within
        self.dir_fd = None
        self.lock_f = None
        self.f = None

    def __enter__(self):
        try:
            return self._enter()
        except BaseException:
            if self.dir_fd is not None:  # whichever way it failed (a lock never granted, too)
                os.close(self.dir_fd)
                self.dir_fd = None
            raise

    def _enter(self):
        path = self.store.path
        check_path(path)
        lock_path = path + ".lock"
        check_path(lock_path)
        self.dir_fd = _open_parent(path, self.within)
        lfd = _open_in(self.dir_fd, lock_path, os.O_RDWR | os.O_CREAT)
        try:
            _own(lock_path, lfd, None)
        except BaseException:
            os.close(lfd)
            raise
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
            try:
                fd, created = _open_in(self.dir_fd, path, os.O_RDWR | os.O_CREAT | os.O_EXCL), True
            except FileExistsError:
                fd, created = _open_in(self.dir_fd, path, os.O_RDWR), False
            self.f = os.fdopen(fd, "r+b")
            _own(path, fd, self.store.note)
            if created:
                fsync_fd(self.dir_fd)
            self.store._read_from(self.f)  # validate first: a damaged file is never changed
            _settle_tail(self.f, self.store)
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
        if self.dir_fd is not None:
            os.close(self.dir_fd)
            self.dir_fd = None
        return False


READ_CHUNK = 16 << 20


def _lines(data: bytes, end: int) -> Iterator[bytes]:
    """The lines of data[:end] (which ends with a newline) one at a time: a list of them all
    held a second copy of the file for the whole load."""
    start = 0
    while start < end:
        stop = data.index(b"\n", start)
        yield data[start:stop]
        start = stop + 1


def read_until_nul(f, start: int) -> tuple[bytes, int | None]:
    """The bytes from `start` up to the end or the first NUL byte, and where that NUL is.

    No record holds a NUL byte (JSON escapes it), so one marks a zero-filled or sparse tail
    (a crash on some filesystems, a file extended by truncate): reading stops there instead
    of loading gigabytes of zeros.
    """
    parts: list[bytes] = []
    pos = start
    while True:
        chunk = f.read(READ_CHUNK)
        if not chunk:
            return b"".join(parts), None
        i = chunk.find(b"\0")
        if i >= 0:
            parts.append(chunk[:i])
            return b"".join(parts), pos + i
        parts.append(chunk)
        pos += len(chunk)


def only_zeros(fd: int, start: int, end: int) -> bool:
    """Whether [start, end) holds nothing but NUL bytes; holes are skipped unread."""
    pos = start
    while pos < end:
        try:
            data_at = os.lseek(fd, pos, os.SEEK_DATA)
            hole_at = min(os.lseek(fd, data_at, os.SEEK_HOLE), end)
        except OSError as e:
            if e.errno == errno.ENXIO:
                return True  # only a hole is left
            data_at, hole_at = pos, end  # no sparse support: read it all
        while data_at < hole_at:
            chunk = os.pread(fd, min(READ_CHUNK, hole_at - data_at), data_at)
            if not chunk:
                return True
            if chunk.strip(b"\0"):
                return False
            data_at += len(chunk)
        pos = hole_at
    return True


def _settle_tail(f, store: "Store") -> None:
    """Make the file end on a complete line before appending; only ever under the lock.

    After `_read_from`, `store._offset` is the end of the last complete line. What follows is
    kept when it is one complete, valid record that only lost its newline (the newline is
    added); dropped when it is a torn write or zeros up to the end (a crash); and refused,
    unchanged, when data follows zeros (damage for `egg fsck` to report, not to trim).
    """
    size = f.seek(0, os.SEEK_END)
    start = store._offset
    if start >= size:
        return
    fd = f.fileno()
    if store.nul_at is not None and not only_zeros(fd, store.nul_at, size):
        raise EggError("%s: damaged: NUL bytes from byte %d, then data before the end (%d bytes); the file was not "
                       "changed; `egg fsck %s` says more" % (store.path, store.nul_at, size, store.path))
    keep = start
    if store.tail_len:
        line = os.pread(fd, store.tail_len, start)
        if complete_record(store, line):
            keep = start + len(line)
    if keep < size:
        f.truncate(keep)
    if keep > start:
        f.seek(keep)
        f.write(b"\n")  # a complete record that lost only its newline: kept
    f.flush()
    os.fsync(fd)
    if keep > start:
        store._read_from(f)


def complete_record(store: "Store", line: bytes) -> bool:
    """Whether a last line without its newline is a whole record that fits the file."""
    try:
        ef.parse_record(line)
        store.graph.ingest([(store.graph.lines + 1, line)], apply=False)
        return True
    except (ef.RecordError, EggError):
        return False


def write_compact(path: str, header: ef.Header, graphs: list[Graph], *, purge: bool = False) -> int:
    """Write the union of graphs as a fresh file, atomically replacing `path`.

    Only reachable nodes are written, each once, children before parents; commits,
    unlinks and tombstones keep their ids, so the result loads to the same roots and
    unions. With `purge` (one graph) forgotten roots are left out: a commit keeps only
    the live roots it first holds (so it gets a new id, and one left empty goes), a
    union or unlink goes with a side only forgotten roots reached, and the tombstones
    stay (ids only), so an old copy merged back in stays forgotten.
    Returns the number of lines written.
    """
    check_path(path)
    d = os.path.dirname(os.path.abspath(path))
    new_eggs = ignorefile.missing_eggs_dir(d)
    private_dir(d)
    if new_eggs is not None:
        ignorefile.write_at(new_eggs)  # a .eggs/ made here is git-ignored as a hook's is (graph/ignorefile)
    commits: dict[str, ef.Commit] = {}
    unlinks: dict[str, ef.Unlink] = {}
    forgets: dict[str, ef.Forget] = {}
    nodes: dict[str, Value] = {}
    for g in graphs:
        commits.update(g.commits)
        unlinks.update(g.unlinks)
        forgets.update(g.forgets)
        nodes.update(g.nodes)
    if purge:
        (g,) = graphs
        commits, unlinks = _purged(g)
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
    for t in sorted(forgets.values(), key=lambda t: (t.time, t.id)):
        lines.append(ef.forget_line(t))
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


def _purged(g: Graph) -> tuple[dict[str, ef.Commit], dict[str, ef.Unlink]]:
    """The commits and unlinks of a graph without its forgotten roots (see write_compact).

    Each live root is kept once, in the first commit holding it, unless that commit is a
    forgotten turn's (an All another turn pins too): then in the commit of a live Receipt
    pinning it, so no commit line keeps a forgotten turn's session and turn ids.
    """
    gone = g.forgotten()
    home = {r: c.id for r, c in g.root_ids.items()}
    moved: dict[str, list[str]] = {}
    of_forgotten = {c.id for c in g.commits.values()
                    if (content_hex(Atom.text(c.session)), content_hex(Atom.text(c.turn))) in g.forgotten_turns}
    for r, c in g.root_ids.items():
        if c.id in of_forgotten:
            pins = [p for p in (g._pins or {}).get(r, ()) if p in g.root_ids]
            home[r] = g.root_ids[pins[0]].id if pins else ""
            moved.setdefault(home[r], []).append(r)
    commits: dict[str, ef.Commit] = {}
    for c in g.commits.values():
        roots = tuple(moved.get(c.id, []) + [r for r in c.roots if home.get(r) == c.id])
        unions = tuple(p for p in c.unions if p[0] not in gone and p[1] not in gone)
        if not roots and not unions:
            continue
        if (roots, unions) != (c.roots, c.unions):
            c = _commit(c.time, c.session, c.turn, roots, unions)
        commits[c.id] = c
    if moved.get(""):  # only in a hand-made store: what Eggshell commits there, live, is an All a live Receipt pins
        c = _commit(min(g.root_ids[r].time for r in moved[""]), "", "", tuple(moved[""]), ())
        commits[c.id] = c
    unlinks = {i: u for i, u in g.unlinks.items() if u.pair[0] not in gone and u.pair[1] not in gone}
    return commits, unlinks


def _commit(time: str, session: str, turn: str, roots: tuple[str, ...], unions: tuple[tuple[str, str], ...]) -> ef.Commit:
    c = ef.Commit("", time, session, turn, roots, unions)
    return ef.Commit(ef.commit_id(c), time, session, turn, roots, unions)


def compact(path: str, *, purge: bool = False, before: Callable[[Graph], None] | None = None) -> tuple[int, int]:
    """Rewrite a store without orphan nodes or duplicate lines (and with `purge`, without forgotten roots), under its lock.

    `before(graph)` runs under the lock ahead of the rewrite, while the forgotten text is
    still there to find elsewhere (the purge of the data root). Returns (lines before,
    lines after). A damaged file is refused, never repaired.
    """
    s = Store(path)
    with s._locked():
        if s.graph.header is None:
            raise EggError("%s: no such store (or it is empty)" % path)
        before_lines = s.graph.lines
        if before is not None:
            before(s.graph)
        after = write_compact(path, s.graph.header, [s.graph], purge=purge)
        if purge:
            _carry_trust(s, Store.open(path))
    return before_lines, after


def _carry_trust(old: Store, new: Store) -> None:
    """A purge gives a commit that lost forgotten roots a new id: it stays vouched for (trust.py) when
    all it holds was in vouched-for commits before, never because it looks like one (same time, turn)."""
    from eggshell.graph import trust
    from eggshell.paths import from_env

    ledger = trust.load(old.data_root or from_env().data_root)
    own = [c for i, c in old.graph.commits.items() if ledger.owns(i)]
    roots, unions = {r for c in own for r in c.roots}, {u for c in own for u in c.unions}
    new.data_root = old.data_root
    new._vouch([i for i, c in new.graph.commits.items()
                if i not in old.graph.commits and roots.issuperset(c.roots) and unions.issuperset(c.unions)])


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
