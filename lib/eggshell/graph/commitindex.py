"""A store opened only to append to (egg-save, `egg keep`), whose cost stays flat in the file's size.

To commit a turn a process must know which of its nodes and roots the file already holds.
A full `Store` learns that by reading the whole file: a fresh `egg-save` adding 10 turns
cost 24 times more on a 10,000-turn file than on a 100-turn one. An `AppendStore` instead
keeps, under the data root's cache, a disposable sqlite index of where each node and commit
line sits and which roots are committed, plus how far it has read: the file's size, device,
inode and a digest of the 256 bytes before that point. Opening checks those against the
file and reads only what other writers appended since (the same incremental read a warm
`Store` does); a node it needs (a shared Atom such as a tool name) is read from its line.

The index is never authority. A node is read from the file and checked against its id
like any other line, and a commit validates what it appends exactly as a full Store does.
An index that does not fit the file (replaced by a compaction, shrunk, its tail changed)
is rebuilt from one full read. A store with tombstones (`egg forget`), unions or unlinks
is written through a full read, as before: replaying those needs every root. The index
holds ids and offsets only, never recorded text; a purge removes it (`drop`).
"""

from __future__ import annotations

import errno
import hashlib
import os
import sqlite3
import stat

import ujson

from eggshell.core.identity import content_hex
from eggshell.errors import EggshellError
from eggshell.core.values import Apply, Atom, Ref, ShapeError, Value
from eggshell.graph import eggfile as ef
from eggshell.graph.store import EggError, Graph, Store
from eggshell.paths import private_dir, untrusted

SCHEMA = "1"  # bumped when the tables change: an index of another schema is rebuilt
SIG_BYTES = 256  # as Store._sig: the bytes before the read point that must not change


def index_path(data_root: str, store_path: str) -> str:
    """Where the index of one store lives: keyed by the store's real path, never beside it."""
    key = hashlib.sha256(os.path.realpath(os.path.abspath(store_path)).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(data_root, "cache", "commit-index", key + ".sqlite")


def drop(data_root: str, store_path: str) -> None:
    """Remove a store's index (a purge rewrote the store: no id of what it removed stays here)."""
    for suffix in ("", "-journal"):
        try:
            os.unlink(index_path(data_root, store_path) + suffix)
        except FileNotFoundError:
            pass


class TooMuchToRead(EggshellError):
    """Opening the store would read more of it than the caller can afford (AppendStore.open's `most`)."""


class _Partial(EggshellError):
    """An index-backed view was asked for all it holds (a tombstone's replay): read the file in full."""


def open_private_db(path: str, wal: bool = False) -> sqlite3.Connection:
    """A disposable cache database of this user's, in a private directory of the data root.

    Anything odd in its place (a link, another user's file, not a database) is removed and a
    new one made: a cache is rebuilt from the stores, never trusted over them. `wal`: readers
    never wait for a writer (the search index, which hooks read while a save writes)."""
    d = os.path.dirname(path)
    private_dir(d)
    st = os.lstat(d)
    why = untrusted(st, mine_only=True) if stat.S_ISDIR(st.st_mode) else "it is not a directory"
    if why is not None:
        raise OSError(errno.EPERM, "%s: %s" % (d, why))
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or untrusted(st, mine_only=True) is not None:
            os.unlink(path)  # disposable: anything odd in its place is removed, never opened
    except FileNotFoundError:
        pass

    def connect() -> sqlite3.Connection:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        os.close(fd)
        db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
        try:
            db.execute("pragma schema_version").fetchone()  # reads the header: a file that is no database fails here
            if wal:
                db.execute("pragma journal_mode=wal")
                db.execute("pragma synchronous=normal")
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    try:
        return connect()
    except sqlite3.OperationalError:
        raise  # busy or locked by another process: the caller goes on without it; never removed for that
    except sqlite3.DatabaseError:  # not a database (damaged, truncated): disposable, so made anew
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                os.unlink(path + suffix)
            except FileNotFoundError:
                pass
        return connect()


class _Index:
    """The sqlite file: nodes(id, off, len), commits(id, off, len), roots(id, the commit first holding it), meta(k, v)."""

    def __init__(self, path: str):
        self.path = path
        self.db = open_private_db(path)
        self.db.executescript(
            "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v) WITHOUT ROWID;"
            "CREATE TABLE IF NOT EXISTS nodes(id BLOB PRIMARY KEY, off INTEGER, len INTEGER) WITHOUT ROWID;"
            "CREATE TABLE IF NOT EXISTS commits(id BLOB PRIMARY KEY, off INTEGER, len INTEGER) WITHOUT ROWID;"
            "CREATE TABLE IF NOT EXISTS roots(id BLOB PRIMARY KEY, hold BLOB) WITHOUT ROWID;"
        )

    def meta(self) -> dict:
        return dict(self.db.execute("SELECT k, v FROM meta"))

    def last_commit_fits(self, pread) -> bool:
        """Whether the last commit line indexed is still that commit at that place (`pread(off, n)`
        reads the file): an inode can be reused by a compaction's new file of the same size and tail."""
        row = self.db.execute("SELECT id, off, len FROM commits ORDER BY off DESC LIMIT 1").fetchone()
        return row is None or last_line_is(pread, row[1], row[2], row[0].hex())

    def at(self, table: str, hex_id: str) -> tuple[int, int] | None:
        row = self.db.execute("SELECT off, len FROM %s WHERE id = ?" % table, (bytes.fromhex(hex_id),)).fetchone()
        return row if row is None else (row[0], row[1])

    def root(self, hex_id: str) -> str | None:
        row = self.db.execute("SELECT hold FROM roots WHERE id = ?", (bytes.fromhex(hex_id),)).fetchone()
        return None if row is None else row[0].hex()

    def write(self, meta: dict, nodes=(), commits=(), roots=(), reset: bool = False) -> None:
        """One transaction: the rows of what was read and the point read to, together or not at all."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            if reset:
                for t in ("meta", "nodes", "commits", "roots"):
                    db.execute("DELETE FROM %s" % t)
            db.executemany("INSERT OR IGNORE INTO nodes VALUES (?, ?, ?)", nodes)
            db.executemany("INSERT OR IGNORE INTO commits VALUES (?, ?, ?)", commits)
            db.executemany("INSERT OR IGNORE INTO roots VALUES (?, ?)", roots)
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta.items())
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.db.close()


class _Lazy:
    """A Graph mapping (nodes, commits, root_ids) that holds what this process read or wrote
    and asks the index for the rest; it cannot list itself (that needs the whole file)."""

    def __init__(self, fetch):
        self.mem: dict = {}
        self.fetch = fetch  # id -> value from the file, or None when the index has no such id

    def get(self, key, default=None):
        v = self.mem.get(key)
        if v is None:
            v = self.fetch(key)
            if v is None:
                return default
            self.mem[key] = v
        return v

    def __contains__(self, key) -> bool:
        return self.get(key) is not None

    def __getitem__(self, key):
        v = self.get(key)
        if v is None:
            raise KeyError(key)
        return v

    def __setitem__(self, key, value) -> None:
        self.mem[key] = value

    def setdefault(self, key, value):
        have = self.get(key)
        if have is None:
            self.mem[key] = have = value
        return have

    def update(self, other) -> None:
        self.mem.update(other)

    def pop(self, key, *default):
        raise _Partial()

    def __iter__(self):
        raise _Partial()

    def __len__(self) -> int:
        raise _Partial()

    def items(self):
        raise _Partial()


def whole_lines(pread, start: int, end: int, step: int | None) -> bytes:
    """The bytes [start, end) of a file, or with `step` about that many of them, cut after a newline
    (at least one whole line, however long): what one step of an index's upkeep reads."""
    if step is None or end - start <= step:
        return pread(start, end - start)
    want = step
    while True:
        data = pread(start, min(want, end - start))
        cut = data.rfind(b"\n") + 1
        if cut or start + len(data) >= end:
            return data[:cut] if cut else data
        want *= 2  # one line longer than the step (a tool output of a megabyte): read on to its end


def last_line_is(pread, off: int, n: int, commit_id: str) -> bool:
    """Whether the file holds the line of commit `commit_id` at [off, off+n), newline-ended."""
    raw = pread(off, n + 1)
    if len(raw) != n + 1 or raw[-1:] != b"\n":
        return False
    try:
        rec = ef.parse_record(raw[:-1])
    except ef.RecordError:
        return False
    return isinstance(rec, ef.Commit) and rec.id == commit_id


def _rows(data: bytes, start: int) -> tuple[list, list, list, dict, bool, int]:
    """(node rows, commit rows, root rows, header meta, whether a tombstone, unlink or union was met,
    lines read) of the complete lines [start, start+len(data)); nothing past a tombstone."""
    nodes, commits, roots, meta, plain, pos, count = [], [], [], {}, False, start, 0
    for line in data.split(b"\n")[:-1]:
        n = len(line)
        if line.startswith(b'{"node":"') and line[73:74] == b'"':  # as every writer puts it: the id, without parsing the rest
            nodes.append((bytes.fromhex(line[9:73].decode("ascii")), pos, n))
            pos += n + 1
            count += 1
            continue
        d = ujson.loads(line)
        if "node" in d:
            nodes.append((bytes.fromhex(d["node"]), pos, n))
        elif "commit" in d:
            if d.get("unions"):
                plain = True
                break
            cid = bytes.fromhex(d["commit"])
            commits.append((cid, pos, n))
            roots.extend((bytes.fromhex(r), cid) for r in d["roots"])
        elif "magic" in d:
            meta.update(authority=d["authority"], version=d["version"], created=str(d.get("created", "")))
        else:  # a tombstone or an unlink
            plain = True
            break
        pos += n + 1
        count += 1
    if plain:
        return [], [], [], meta, True, count
    return nodes, commits, roots, meta, False, count


def catch_up(data_root: str, store: Store, step: int | None = None) -> int:
    """Bring the commit index of `store` up to what it has read, without building a Value.

    For a process that holds a whole Store (the warm manager): it read and validated the file up
    to `store.offset`, so indexing those lines needs only their ids and places. Cold processes then
    find the index current (a cold prompt reads the turns it hands over through it). `step`: about
    this many bytes at most, whole lines, the rest on the next call. Bytes indexed (0: current, or
    the file holds what only a whole read replays)."""
    if store.ident is None:
        return 0
    ix = _Index(index_path(data_root, store.path))
    fd = None
    try:
        fd = os.open(store.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != tuple(store.ident):
            return 0  # replaced since it was read: the Store reads it again first
        end = store.offset
        m = ix.meta()

        def sig(at: int) -> str:
            return hashlib.sha256(os.pread(fd, min(at, SIG_BYTES), max(0, at - SIG_BYTES))).hexdigest()

        same = m.get("schema") == SCHEMA and (m.get("dev"), m.get("ino")) == tuple(store.ident) and m.get("size", -1) >= 0
        if same and m["size"] > end:
            return 0  # ahead of what this process has read (an egg-save appended since): never moved back
        fits = same and sig(m["size"]) == m.get("sig") and ix.last_commit_fits(lambda off, n: os.pread(fd, n, off))
        if fits and m.get("plain"):
            return 0
        start = m["size"] if fits else 0
        if start >= end:
            return 0
        data = whole_lines(lambda off, n: os.pread(fd, n, off), start, end, step)
        nodes, commits, roots, meta, plain, count = _rows(data, start)
        at = start + len(data)
        meta.update(schema=SCHEMA, dev=st.st_dev, ino=st.st_ino, size=at, lines=(int(m.get("lines", 0)) if fits else 0) + count,
                    sig=sig(at), plain=int(plain))
        ix.write(meta, nodes, commits, roots, reset=not fits or plain)
        return len(data)
    finally:
        if fd is not None:
            os.close(fd)
        ix.close()


class AppendStore(Store):
    """A Store for processes that only commit: its Graph knows every id the file holds but
    loads a node only when a commit needs it (see the module docstring). Reading its roots
    or listing its nodes is not what it is for (a full `Store` is)."""

    def __init__(self, path: str, data_root: str):
        super().__init__(path)
        self.data_root = data_root  # also whose trust ledger vouches for the commits
        self._index: _Index | None = None
        self._plain: tuple[int, int] | None = None  # (dev, ino) of a file holding what the index cannot replay
        self._reading = False  # inside a read: an index found not to fit makes it read the file whole (_stale)
        self._fd: int | None = None

    @classmethod
    def open(cls, path: str, data_root: str | None = None, most: int | None = None) -> "AppendStore":
        """`most`: the bytes this may read; past that (no index, one that does not fit, or much
        appended since) it raises TooMuchToRead instead of reading them (a cold hook's deadline)."""
        from eggshell.paths import from_env

        s = cls(path, data_root or from_env().data_root)
        try:
            s._index = _Index(index_path(s.data_root, path))
            s._resume(s._index.meta())
        except (OSError, sqlite3.Error) as e:
            s._lose_index(e)
        if most is not None:
            try:
                size = os.stat(path).st_size
            except OSError:
                size = 0
            if size - s._offset > most:
                s.close()
                raise TooMuchToRead("%s: %d bytes to read before it can be used (%d at most here)" % (path, size - s._offset, most))
        s.refresh()
        return s

    def __getstate__(self) -> dict:
        raise TypeError("an AppendStore holds an open index; snapshot a full Store instead")

    # -- the index fits the file, or it is not used --------------------------------------

    def _resume(self, m: dict) -> None:
        """Take up where the index left off if it still describes this file; else start plain."""
        if m.get("schema") != SCHEMA:
            return
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return
        if (st.st_dev, st.st_ino) != (m.get("dev"), m.get("ino")) or st.st_size < m.get("size", -1):
            return
        if m.get("plain"):
            self._plain = (st.st_dev, st.st_ino)  # still the file that holds tombstones or unions: read it in full
            return
        size = m["size"]
        sig = self._pread(max(0, size - SIG_BYTES), min(size, SIG_BYTES))
        if hashlib.sha256(sig).hexdigest() != m.get("sig"):
            return
        if not self._index.last_commit_fits(self._pread):
            return  # another file under a reused inode (a compaction) whose size and tail happen to agree
        g = Graph(self.path)
        g.header = ef.Header(m["authority"], int(m["version"]), m["created"])
        g.nodes = _Lazy(self._node)
        g.commits = _Lazy(self._commit)
        g.root_ids = _Lazy(self._root)
        g.lines = int(m["lines"])
        self.graph = g
        self._offset, self._ident, self._sig = size, (st.st_dev, st.st_ino), sig

    def _lose_index(self, e: BaseException) -> None:
        """The index is disposable: one that cannot be used costs speed, never a commit."""
        if self._index is not None:
            try:
                self._index.close()
            except sqlite3.Error:
                pass
        self._index = None
        self.note("%s: its commit index cannot be used (%s); committing through a full read" % (self.path, e))

    def _start_over(self) -> None:
        super()._start_over()  # a plain Graph: what follows reads the whole file
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _read_from(self, f) -> int:
        self._reading = True
        try:
            n = super()._read_from(f)
        except _Partial:  # a tombstone to replay needs every root, or the index turned out not to fit the file
            n = -1
        finally:
            self._reading = False
        if n < 0 or (self._plain == self._ident and isinstance(self.graph.nodes, _Lazy)):
            self._start_over()  # the file holds what only a full read replays: read everything
            n = super()._read_from(f)
        return n

    def __repr__(self) -> str:
        return "AppendStore(%r)" % self.path

    def _took(self, start: int, data: bytes) -> None:
        """Index the complete lines [start, start+len(data)) just read (and validated)."""
        if self._index is None or self._plain == self._ident:
            return
        nodes, commits, roots, meta, plain, _ = _rows(data, start)
        reset = start == 0 or plain
        if plain:
            self._plain = self._ident
        meta.update(schema=SCHEMA, dev=self._ident[0], ino=self._ident[1], size=start + len(data), lines=self.graph.lines,
                    sig=hashlib.sha256(self._sig[-SIG_BYTES:]).hexdigest(), plain=int(plain))
        try:
            self._index.write(meta, nodes, commits, roots, reset=reset)
        except (OSError, sqlite3.Error) as e:
            self._lose_index(e)

    def commit_ids(self) -> list[str]:
        """The ids of every commit in the file (from the index when it serves; else from the full read)."""
        if isinstance(self.graph.commits, _Lazy):
            return [row[0].hex() for row in self._index.db.execute("SELECT id FROM commits")]
        return list(self.graph.commits)

    # -- what the index points at, read from the file ------------------------------------

    def _pread(self, off: int, n: int) -> bytes:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        return os.pread(self._fd, n, off)

    def _line(self, table: str, hex_id: str):
        if self._index is None:
            return None
        at = self._index.at(table, hex_id)
        if at is None:
            return None
        rec = None
        try:
            rec = ef.parse_record(self._pread(*at))
        except ef.RecordError:
            pass
        if getattr(rec, "id", None) != hex_id:
            self._stale("line at byte %d is not record %s" % (at[0], hex_id[:12]))
        return rec

    def _node(self, nid: str) -> Value | None:
        rec = self._line("nodes", nid)
        if rec is None:
            return None
        try:
            if rec.op is None:
                v = Atom(rec.atom)
            else:
                v = Apply(rec.op, tuple(Ref(a, self.graph.nodes[c]) for a, c in rec.args))
        except (KeyError, ShapeError):
            v = None
        if v is None or content_hex(v) != nid:
            self._stale("node %s does not match its id" % nid[:12])
        return v

    def _commit(self, cid: str) -> ef.Commit | None:
        return self._line("commits", cid)

    def _root(self, rid: str) -> ef.Commit | None:
        cid = self._index.root(rid) if self._index is not None else None
        c = None if cid is None else self.graph.commits.get(cid)
        if cid is not None and (c is None or rid not in c.roots):
            self._stale("root %s is not in the commit it is indexed under" % rid[:12])
        return c

    def _stale(self, why: str) -> None:
        path = self._index.path if self._index else "?"
        try:
            os.unlink(path)
        except OSError:
            pass
        if self._reading:  # found while reading (another file under a reused inode): read it whole, index nothing now
            self.note("%s: its commit index did not fit the file (%s); it was removed and is rebuilt on the next run" % (self.path, why))
            self._index.close()
            self._index = None
            raise _Partial()
        raise EggError("%s: its commit index %s does not fit the file (%s; was the file edited in place?). The index "
                       "was removed and is rebuilt on the next run; this run wrote nothing more" % (self.path, path, why))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._index is not None:
            self._index.close()
            self._index = None
