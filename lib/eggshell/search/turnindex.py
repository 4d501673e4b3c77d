"""The search side of one store on disk: what ranking its turns lexically needs, opened at once.

Why (issue 30): every process that searched a store read all of it first, so a cold hook on a
10,000-turn store waited out its whole budget and answered without memory. This index keeps,
in one SQLite file per store under the data root's cache, what the lexical ranking reads
(search/rank.py's statistics, kept by search/postings.DiskBM25) and where each turn's commits
sit in the store, so a process ranks from the index and then reads only the few turns it
hands over (through the commit index, graph/commitindex.py), whatever the store's size.

The index is a disposable cache of the store, never its authority:

- It is brought up to date from what was appended to the store since it was last updated,
  checked as the commit index is (the file's device, inode, size and the bytes before that
  point); a file replaced, shrunk or changed under it, an index of other code, or a damaged
  one is rebuilt from the store.
- It holds term statistics and byte offsets, never a turn's text; a turn it hands over is
  read back from the store and checked against its id like any other line.
- A store holding tombstones (`egg forget`) or persistent unions is not served from it: those
  change which turns live in ways only a whole read replays, so such a store is read in full
  as before. `egg forget` and a purge drop the index (`drop`), so a forgotten turn's terms do
  not stay here.

Tables (one file; a PostgreSQL schema can mirror them one to one):

    meta(k, v)                      schema, the code that wrote it, how far the store was read
    turn(key, doc, commits)         a turn (session NUL turn) -> its document, its commits' lines
    doc(doc, key, time)             a live document -> its turn and time (the latest turn)
    lterm(term, ldf)                lines holding each term (best-line statistics)
    t_*                             BM25 of each turn's searchable text (postings.DiskBM25)
    w_*                             BM25 of each turn's tool inputs (long queries)
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections import Counter
from typing import Callable, Iterable

import ujson

from eggshell.errors import EggshellError
from eggshell.graph import eggfile as ef
from eggshell.graph.commitindex import last_line_is, open_private_db, whole_lines
from eggshell.graph.records import LiveViews, TurnView, searchable_text, tool_inputs
from eggshell.graph.store import Graph
from eggshell.paths import file_ident, remove_files_in
from eggshell.search.postings import DiskBM25
from eggshell.search.rank import line_terms
from eggshell.search.terms import terms

SCHEMA = "2"
SIG_BYTES = 256  # as the commit index: the bytes before the read point that must not change
MERGE_PAST = 24  # segments a save may leave before they are folded into MERGE_TO (postings.DiskBM25.merge)
MERGE_TO = 8


class NotIndexed(EggshellError):
    """The index cannot serve this store now (tombstones or unions in it, or too far behind): read the store."""


def index_path(data_root: str, store_path: str) -> str:
    key = hashlib.sha256(os.path.realpath(os.path.abspath(store_path)).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(data_root, "cache", "search", key + ".sqlite")


def drop(data_root: str, store_path: str) -> None:
    """Remove a store's index (a tombstone or a purge: no term of a forgotten turn stays here)."""
    base = index_path(data_root, store_path)
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(base + suffix)
        except FileNotFoundError:
            pass


def drop_all(data_root: str) -> int:
    """Remove every store's index under this data root; how many files went."""
    return remove_files_in(os.path.join(data_root, "cache", "search"))


@functools.cache
def _code_stamp() -> str:
    """What decides an index's contents besides the store: tokenizing and what a turn's text is."""
    from eggshell.graph import records, turns
    from eggshell.search import rank, terms as terms_mod

    h = hashlib.sha256(SCHEMA.encode())
    for m in (records, turns, rank, terms_mod):
        with open(m.__file__, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:32]


_TABLES = (
    "create table if not exists meta(k text primary key, v) without rowid",
    "create table if not exists turn(key text primary key, doc integer, commits text not null) without rowid",
    "create table if not exists doc(doc integer primary key, key text not null, time text not null)",
    "create index if not exists doc_time on doc(time, doc)",
    "create table if not exists lterm(term text primary key, ldf integer not null) without rowid",
)


def _key(session: str, turn: str) -> str:
    return "%s\0%s" % (session, turn)


class TurnIndex:
    """The index of one store (see the module docstring); `update` brings it current, the rest reads."""

    def __init__(self, data_root: str, store_path: str):
        self.store_path = store_path
        self.path = index_path(data_root, store_path)
        self.db = open_private_db(self.path, wal=True)
        try:
            for t in _TABLES:
                self.db.execute(t)
            self.text = DiskBM25(self.path, db=self.db, prefix="t_")
            self.work = DiskBM25(self.path, db=self.db, prefix="w_")
        except Exception:
            self.db.close()
            raise
        self._fd: int | None = None
        self._file = file_ident(self.path)

    def dropped(self) -> bool:
        """Whether the file this opened was removed or replaced since (`egg forget`, a purge): reopen."""
        return file_ident(self.path) != self._file

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.db.close()

    # -- reading -------------------------------------------------------------------------------

    def meta(self) -> dict:
        return dict(self.db.execute("select k, v from meta"))

    def turns(self) -> int:
        """How many turns the store holds (as of the last update)."""
        return int(self.db.execute("select count(*) from doc").fetchone()[0])

    def line_stats(self) -> tuple[int, int]:
        m = self.meta()
        return int(m.get("nlines", 0)), int(m.get("ltotal", 0))

    def ldf(self, term: str) -> int:
        row = self.db.execute("select ldf from lterm where term = ?", (term,)).fetchone()
        return int(row[0]) if row else 0

    def docs(self) -> int:
        """Documents ever added (removed ones included): the range of document numbers."""
        return len(self.text.lens())

    def latest(self) -> tuple[str, int] | None:
        """(time, document) of the last turn recorded."""
        row = self.db.execute("select time, doc from doc order by time desc, doc desc limit 1").fetchone()
        return None if row is None else (row[0], int(row[1]))

    def commits_of(self, doc: int) -> list[tuple[int, int]] | None:
        row = self.db.execute("select t.commits from doc d join turn t on t.key = d.key where d.doc = ?", (doc,)).fetchone()
        return None if row is None else [tuple(x) for x in ujson.loads(row[0])]

    def graph(self, store, doc: int) -> Graph | None:
        """The part of `store` (a Store whose graph can fetch any node: graph/commitindex.AppendStore)
        that one indexed turn is made of: its commits and their roots, as a Graph the reuse engine
        and records.LiveViews read like a whole store's. None when the document is no turn now."""
        at = self.commits_of(doc)
        if at is None:
            return None
        self._open(store)
        return self._graph(store, at)

    def _open(self, store) -> None:
        """Read the very file `store` read (its device and inode), or none."""
        if self._fd is not None:
            st = os.fstat(self._fd)
            if (st.st_dev, st.st_ino) == tuple(store.ident or ()):
                return
            os.close(self._fd)
            self._fd = None
        fd = os.open(self.store_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != tuple(store.ident or ()):
            os.close(fd)
            raise NotIndexed("%s was replaced while it was read" % self.store_path)
        self._fd = fd

    def _pread(self, off: int, n: int) -> bytes:
        return os.pread(self._fd, n, off)

    def _graph(self, store, at: Iterable[tuple]) -> Graph:
        commits = []
        for off, n, cid in at:
            try:
                rec = ef.parse_record(self._pread(off, n))
            except ef.RecordError:
                rec = None
            if not isinstance(rec, ef.Commit) or not rec.id.startswith(cid):
                if not self.db.in_transaction:
                    self.db.execute("delete from meta")  # no longer fits: the next update rebuilds it
                raise NotIndexed("%s: the line at byte %d is not the commit indexed there (a rewritten file); its search "
                                 "index is rebuilt" % (self.store_path, off))
            commits.append((rec.time, off, rec))
        g = Graph(store.path)
        g.header = store.graph.header
        nodes = store.graph.nodes
        for _, _, c in sorted(commits, key=lambda x: (x[0], x[1])):  # as a full read applies them
            g.commits[c.id] = c
            for r in c.roots:
                if r not in g.root_ids:
                    g.nodes[r] = nodes[r]
                    g.root_ids[r] = c
        return g

    def view(self, store, doc: int) -> tuple[TurnView, Graph] | None:
        g = self.graph(store, doc)
        if g is None:
            return None
        views = LiveViews(g).current()
        return (views[-1], g) if views else None

    # -- bringing it up to date ------------------------------------------------------------------

    def fits(self, store) -> bool:
        """Whether the index describes a prefix of the file `store` has read (else it is rebuilt)."""
        m = self.meta()
        if m.get("schema") != SCHEMA or m.get("code") != _code_stamp() or store.ident is None:
            return False
        self._open(store)
        if (m.get("dev"), m.get("ino")) != tuple(store.ident) or int(m.get("size", -1)) > store.offset:
            return False
        size = int(m["size"])
        if hashlib.sha256(self._pread(max(0, size - SIG_BYTES), min(size, SIG_BYTES))).hexdigest() != m.get("sig"):
            return False
        last = ujson.loads(m["last"]) if m.get("last") else None  # an inode reused by a compaction's new file: its lines moved
        return last is None or last_line_is(self._pread, last[0], last[1], last[2])

    def behind(self, store) -> int:
        """Bytes of `store` not indexed yet (all of them when the index does not fit; 0 when it is ahead)."""
        if self.ahead(store):
            return 0
        return store.offset - int(self.meta().get("size", 0)) if self.fits(store) else store.offset

    def ahead(self, store) -> bool:
        """Whether the index describes more of the file than `store` has read (another process saved
        and indexed since): then it is left as it is, never moved back."""
        m = self.meta()
        return (m.get("schema") == SCHEMA and store.ident is not None and (m.get("dev"), m.get("ino")) == tuple(store.ident)
                and int(m.get("size", -1)) > store.offset)

    def update(self, store, most: int | None = None, step: int | None = None) -> int:
        """Index what `store` (a Store or AppendStore, refreshed) holds past what this index has seen;
        how many turns were added or re-derived. Raises NotIndexed when the store holds what only
        a whole read replays (tombstones, unions), or when more than `most` bytes are left to read.
        `step`: index about this many bytes at most, whole lines, and leave the rest for the next
        call (a turn whose commits fall in two steps is derived again in the second). One
        transaction, from reading where the index stands to writing where it stands after: two
        processes updating it at once do it one after the other."""
        if store.ident is None:
            return 0  # no file yet: nothing to index
        db = self.db
        db.execute("begin immediate")
        try:
            changed, plain = self._update(store, most, step)
            db.execute("commit")
        except NotIndexed:
            db.execute("rollback")
            raise
        except BaseException:
            db.execute("rollback")
            raise
        if plain:
            raise NotIndexed("%s holds tombstones or unions: it is read in full" % self.store_path)
        if changed and self.text.segments() > MERGE_PAST:
            self.text.merge(MERGE_TO)
            self.work.merge(MERGE_TO)
        return changed

    def _update(self, store, most: int | None, step: int | None) -> tuple[int, bool]:
        if self.ahead(store):
            return 0, False
        fits = self.fits(store)
        m = self.meta() if fits else {}
        if fits and m.get("plain"):
            return 0, True
        start, end = (int(m.get("size", 0)) if fits else 0), store.offset
        if fits and start == end:
            return 0, False
        if most is not None and end - start > most:
            raise NotIndexed("%s: %d bytes not indexed yet (%d at most here)" % (self.store_path, end - start, most))
        self._open(store)
        data = whole_lines(self._pread, start, end, step) if end > start else b""
        end = start + len(data)
        touched: dict[str, list[list]] = {}
        plain = False
        pos = start
        last = m.get("last") if fits else None
        for line in data.split(b"\n")[:-1]:
            n = len(line)
            if not line.startswith(b'{"node":'):
                d = ujson.loads(line)
                if "commit" in d:
                    if d.get("unions"):
                        plain = True
                        break
                    touched.setdefault(_key(d["session"], d["turn"]), []).append([pos, n, d["commit"][:16]])
                    last = ujson.dumps([pos, n, d["commit"]])
                elif "magic" not in d and "node" not in d:
                    plain = True  # a tombstone or an unlink
                    break
            pos += n + 1
        if not fits or plain:
            self._clear()
        try:
            changed = 0 if plain else self._index(store, touched)
        except NotIndexed:
            self._clear()  # a commit it holds is not where it says: nothing of it is kept, the next update rebuilds
            return 0, False
        sig = hashlib.sha256(self._pread(max(0, end - SIG_BYTES), min(end, SIG_BYTES))).hexdigest()
        self.db.executemany("insert or replace into meta values (?, ?)", {
            "schema": SCHEMA, "code": _code_stamp(), "dev": store.ident[0], "ino": store.ident[1], "size": end, "sig": sig,
            "plain": int(plain), "last": last or ""}.items())
        return changed, plain

    def _clear(self) -> None:
        for t in ("meta", "turn", "doc", "lterm"):
            self.db.execute("delete from %s" % t)
        self.text.clear()
        self.work.clear()

    def _index(self, store, touched: dict[str, list[list[int]]]) -> int:
        """Re-derive each touched turn from all its commits; its old document leaves, the new one is added."""
        db = self.db
        added: list[tuple[str, TurnView, list]] = []
        for key, new in touched.items():
            row = db.execute("select doc, commits from turn where key = ?", (key,)).fetchone()
            old = ujson.loads(row[1]) if row else []
            if row is not None and row[0] is not None:
                prior = LiveViews(self._graph(store, old)).current()
                if prior:
                    self._remove(int(row[0]), prior[-1])
            at = old + new
            views = LiveViews(self._graph(store, at)).current()
            db.execute("insert or replace into turn values (?, ?, ?)", (key, None, ujson.dumps(at)))
            if views:
                added.append((key, views[-1], at))
        added.sort(key=lambda x: (x[1].time, x[1].id))  # as a full build orders them (searcher.Searcher)
        first = self.docs()
        texts = [searchable_text(v) for _, v, _ in added]
        lines = [line_terms(t, terms) for t in texts]
        self.text.extend([[t for ts in ls for t in ts] for ls in lines])
        self.work.extend([terms(tool_inputs(v)) for _, v, _ in added])
        self._lines(lines, +1)
        for k, (key, v, _) in enumerate(added):
            db.execute("update turn set doc = ? where key = ?", (first + k, key))
            db.execute("insert into doc values (?, ?, ?)", (first + k, key, v.time))
        return len(added)

    def _remove(self, doc: int, view: TurnView) -> None:
        text = searchable_text(view)
        lines = line_terms(text, terms)
        self.text.remove(doc, [t for ts in lines for t in ts])
        self.work.remove(doc, terms(tool_inputs(view)))
        self._lines([lines], -1)
        self.db.execute("delete from doc where doc = ?", (doc,))

    def _lines(self, docs: list[list[list[str]]], sign: int) -> None:
        """Add (+1) or take out (-1) these documents' lines from the best-line statistics."""
        ldf: Counter = Counter()
        nlines = total = 0
        for ls in docs:
            for ts in ls:
                if ts:
                    nlines += 1
                    total += len(ts)
                    ldf.update(set(ts))
        if not nlines:
            return
        db = self.db
        db.executemany("insert into lterm values (?, ?) on conflict(term) do update set ldf = ldf + excluded.ldf",
                       ((t, sign * c) for t, c in ldf.items()))
        if sign < 0:
            db.executemany("delete from lterm where term = ? and ldf <= 0", ((t,) for t in ldf))
        m = self.meta()
        db.executemany("insert or replace into meta values (?, ?)",
                       [("nlines", int(m.get("nlines", 0)) + sign * nlines), ("ltotal", int(m.get("ltotal", 0)) + sign * total)])


def index_appended(store, start: int, warn: Callable[[str], None]) -> None:
    """Add what this process appended to `store` (an AppendStore, from byte `start`) to its search
    index, when the index was current before: a cold hook then ranks the new turns at once. An
    index that is missing or behind is left to the warm manager, which builds it a step at a time
    in the background, so a save costs what it appended. Never fails the save (a cache)."""
    import sqlite3

    from eggshell.graph.store import EggError
    from eggshell.search.postings import IndexDamaged

    if store.offset == start:
        return
    try:
        ix = TurnIndex(store.data_root, store.path)
        try:
            if ix.behind(store) <= store.offset - start:
                ix.update(store)
        finally:
            ix.close()
    except NotIndexed:
        pass  # tombstones or unions: such a store is read in full
    except (IndexDamaged, EggError, OSError, sqlite3.Error) as e:
        warn("note: the search index of %s was not updated (%s: %s); it is brought up to date later" % (store.path, type(e).__name__, e))
