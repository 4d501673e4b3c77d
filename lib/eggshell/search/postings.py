"""BM25 postings in SQLite: the in-memory index's statistics and postings, kept on disk.

Part of the search side's state on disk (issue 30: search/turnindex.py keeps two of these per
store in one file, under table prefixes): a disposable cache of the `.egg` stores that any
process opens in milliseconds, rebuilt from them when missing, foreign or damaged; the stores
stay the only authority.

Why not FTS5: its bm25() has its own idf (negative for common terms, then clamped) and no
query-term weight, and Python's sqlite3 cannot read a document's term counts back cheaply; the
product's ranking would change. This keeps exactly what `search/rank.BM25` keeps (per term its
document frequency and its (document, count) pairs; per document its length) and scores it with
the same function (`rank.score_query`), so the two rank alike by construction, and tests check it.

Layout (one SQLite file; the schema maps one to one onto PostgreSQL tables):

    meta(k, v)                  schema version, document count, total length, the lengths blob
    term(term, df)              documents holding the term
    post(term, seg, data)       the term's pairs within one segment: uint32 document, count, ...
    seg(seg, first, last)       the documents each segment holds (added by one `extend`)
    gone(i)                     the documents removed

A save appends one segment: a row per distinct term of its documents, whatever the index's size,
so adding ten turns writes kilobytes. A term's postings are its segments' rows in order; `merge`
folds neighbouring segments together in one pass so a search reads few rows per term.
Measured by tests/bench/bench_postings.py at 10,000 realistic turns (docs/benchmarks.md): 31 MB
against a 78 MB store, 23 ms to add a save of ten turns, 1.7 s to fold 1,001 segments into 8, a
question in 3.4 ms unmerged and 1.2 ms merged (0.7 ms in memory), the same top ten throughout.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from typing import Iterable

from eggshell.errors import EggshellError
from eggshell.search.rank import B, DEFAULT_TOP_K, K1, Scored, score_query

SCHEMA = 1
_TABLES = """
create table {p}meta(k text primary key, v) without rowid;
create table {p}term(term text primary key, df integer not null) without rowid;
create table {p}post(term text not null, seg integer not null, data blob not null, primary key(term, seg)) without rowid;
create table {p}seg(seg integer primary key, first integer not null, last integer not null);
create table {p}gone(i integer primary key);
"""


def connect(path: str) -> sqlite3.Connection:
    """A connection as every index file of the search side is opened: autocommit (each change is an
    explicit transaction), a write-ahead log so readers never wait for a writer."""
    db = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    db.execute("pragma journal_mode=wal")
    db.execute("pragma synchronous=normal")
    return db


class IndexDamaged(EggshellError, ValueError):
    """An index file that is not one of ours, of another schema, or inconsistent: rebuild it from the stores."""


class DiskBM25:
    """BM25 over documents of terms, kept in an SQLite file; document i is the i-th ever added.

    `extend`, `remove` and `search` behave as `rank.BM25`'s (same statistics, same scores); each
    change is one transaction, so a crash leaves the index as it was before or after it.
    """

    def __init__(self, path: str, k1: float = K1, b: float = B, *, db: sqlite3.Connection | None = None, prefix: str = ""):
        """`db`: a connection to share with other tables of the same file (search/turnindex.py), whose
        transactions then hold this index's changes too; `prefix` names this index's tables in it."""
        self.path, self.k1, self.b, self.prefix = path, k1, b, prefix
        t = self._t = {x: prefix + x for x in ("meta", "term", "post", "seg", "gone")}
        try:
            fresh = db is None and (not os.path.exists(path) or os.path.getsize(path) == 0)
            self.db = db if db is not None else connect(path)
            if not fresh:
                fresh = self.db.execute("select 1 from sqlite_master where type = 'table' and name = ?", (t["meta"],)).fetchone() is None
            if fresh:
                with self._tx():
                    for statement in filter(str.strip, _TABLES.format(p=prefix).split(";")):
                        self.db.execute(statement)
                    self.db.executemany("insert into %s values (?, ?)" % t["meta"],
                                        [("schema", SCHEMA), ("n", 0), ("total", 0), ("lens", b"")])
            got = dict(self.db.execute("select k, v from %s" % t["meta"]))
        except sqlite3.DatabaseError as e:
            raise IndexDamaged("%s: not a postings index (%s); remove it and it is rebuilt from the stores" % (path, e)) from None
        if got.get("schema") != SCHEMA or not isinstance(got.get("lens"), bytes) or len(got["lens"]) % 4:
            raise IndexDamaged("%s: a postings index of another schema (%r) or damaged; remove it and it is rebuilt from the stores"
                               % (path, got.get("schema")))
        self._norm = None
        self._stamp = None

    # -- statistics ---------------------------------------------------------------------------

    def _meta(self, k: str):
        return self.db.execute("select v from %s where k = ?" % self._t["meta"], (k,)).fetchone()[0]

    @property
    def n(self) -> int:
        return int(self._meta("n"))

    @property
    def avgdl(self) -> float:
        n = self.n
        return (int(self._meta("total")) / n) if n else 0.0

    def lens(self):
        import numpy as np

        return np.frombuffer(self._meta("lens"), dtype=np.uint32)

    def df(self, term: str) -> int:
        row = self.db.execute("select df from %s where term = ?" % self._t["term"], (term,)).fetchone()
        return int(row[0]) if row else 0

    def pairs(self, term: str):
        """The term's (document, count) pairs in document order, flat, as one uint32 array."""
        import numpy as np

        rows = self.db.execute("select data from %s where term = ? order by seg" % self._t["post"], (term,)).fetchall()
        return np.frombuffer(b"".join(r[0] for r in rows), dtype=np.uint32)

    def segments(self) -> int:
        return int(self.db.execute("select count(*) from %s" % self._t["seg"]).fetchone()[0])

    # -- changes ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _tx(self):
        if self.db.in_transaction:  # inside the owner's transaction (a shared connection): it commits
            yield
            return
        self.db.execute("begin immediate")
        try:
            yield
        except BaseException:
            self.db.execute("rollback")
            raise
        self.db.execute("commit")

    def extend(self, docs: Iterable[list[str]]) -> None:
        """Add documents at the end, as one new segment."""
        import numpy as np
        from collections import Counter

        docs = list(docs)
        if not docs:
            return
        with self._tx():
            lens = self.lens()
            first = len(lens)
            per_term: dict[str, list[int]] = {}
            for k, d in enumerate(docs):
                for t, f in Counter(d).items():
                    per_term.setdefault(t, []).extend((first + k, f))
            seg = (self.db.execute("select coalesce(max(seg), -1) + 1 from %s" % self._t["seg"]).fetchone()[0])
            self.db.execute("insert into %s values (?, ?, ?)" % self._t["seg"], (seg, first, first + len(docs) - 1))
            self.db.executemany("insert into %s values (?, ?, ?)" % self._t["post"],
                                ((t, seg, np.array(p, dtype=np.uint32).tobytes()) for t, p in per_term.items()))
            self.db.executemany("insert into %s values (?, ?) on conflict(term) do update set df = df + excluded.df" % self._t["term"],
                                ((t, len(p) // 2) for t, p in per_term.items()))
            added = np.array([len(d) for d in docs], dtype=np.uint32)
            self._set_stats(self.n + len(docs), int(self._meta("total")) + int(added.sum()), np.concatenate([lens, added]))

    def remove(self, i: int, doc: list[str]) -> None:
        """Take document i (whose terms are `doc`) out: never found again, and the statistics are the others'."""
        import numpy as np

        lens = self.lens()
        if not 0 <= i < len(lens):
            return
        row = self.db.execute("select seg from %s where first <= ? and ? <= last" % self._t["seg"], (i, i)).fetchone()
        if row is None or self.db.execute("select 1 from %s where i = ?" % self._t["gone"], (i,)).fetchone():
            return
        with self._tx():
            self.db.execute("insert into %s values (?)" % self._t["gone"], (i,))
            for t in set(doc):
                got = self.db.execute("select data from %s where term = ? and seg = ?" % self._t["post"], (t, row[0])).fetchone()
                if got is None:
                    continue
                a = np.frombuffer(got[0], dtype=np.uint32).reshape(-1, 2)
                keep = a[a[:, 0] != i]
                if len(keep) == len(a):
                    continue
                if len(keep):
                    self.db.execute("update %s set data = ? where term = ? and seg = ?" % self._t["post"], (keep.tobytes(), t, row[0]))
                else:
                    self.db.execute("delete from %s where term = ? and seg = ?" % self._t["post"], (t, row[0]))
                self.db.execute("update %s set df = df - 1 where term = ?" % self._t["term"], (t,))
                self.db.execute("delete from %s where term = ? and df <= 0" % self._t["term"], (t,))
            lens = lens.copy()
            total = int(self._meta("total")) - int(lens[i])
            lens[i] = 0
            self._set_stats(self.n - 1, total, lens)

    def clear(self) -> None:
        """Remove every document: an empty index, as a new file holds (a rebuild starts here)."""
        with self._tx():
            for x in ("term", "post", "seg", "gone"):
                self.db.execute("delete from %s" % self._t[x])
            import numpy as np

            self._set_stats(0, 0, np.zeros(0, dtype=np.uint32))

    def merge(self, most: int = 8) -> int:
        """Fold neighbouring segments together until at most `most` remain, in one pass over the
        rows of the smallest run that must go; how many segments there are after. Rankings do
        not change; a search reads fewer rows per term."""
        segs = self.db.execute("select seg, first, last from %s order by seg" % self._t["seg"]).fetchall()
        k = len(segs) - max(most, 1) + 1  # segments to fold into one
        if k < 2:
            return len(segs)
        sizes = [last - first + 1 for _, first, last in segs]
        run = [sum(sizes[j:j + k]) for j in range(len(segs) - k + 1)]
        j = min(range(len(run)), key=lambda x: (run[x], -x))  # the smallest run, the newest of equals
        lo, hi = segs[j][0], segs[j + k - 1][0]
        with self._tx():
            rows = self.db.execute("select term, data from %s where seg between ? and ? order by term, seg" % self._t["post"], (lo, hi)).fetchall()
            self.db.execute("delete from %s where seg between ? and ?" % self._t["post"], (lo, hi))
            folded: dict[str, list[bytes]] = {}
            for term, data in rows:
                folded.setdefault(term, []).append(data)
            self.db.executemany("insert into %s values (?, ?, ?)" % self._t["post"], ((t, lo, b"".join(parts)) for t, parts in folded.items()))
            self.db.execute("delete from %s where seg between ? and ?" % self._t["seg"], (lo + 1, hi))
            self.db.execute("update %s set last = ? where seg = ?" % self._t["seg"], (segs[j + k - 1][2], lo))
        return len(segs) - k + 1

    def _set_stats(self, n: int, total: int, lens) -> None:
        self.db.executemany("update %s set v = ? where k = ?" % self._t["meta"], [(n, "n"), (total, "total"), (lens.astype("uint32").tobytes(), "lens")])
        self._norm = None

    # -- search -------------------------------------------------------------------------------

    def search(self, query: list[str], top_k: int = DEFAULT_TOP_K, min_coverage: float = 0.0) -> list[Scored]:
        """As rank.BM25.search: documents by descending score, ties by earlier document; none when
        no document holds `min_coverage` of the query."""
        n = self.n
        if not n:
            return []
        stamp = self.db.execute("pragma data_version").fetchone()[0]  # moves when another connection commits
        if self._norm is None or self._stamp != stamp or self.db.in_transaction:
            import numpy as np

            lens = self.lens().astype(np.float64)
            avgdl = int(self._meta("total")) / n
            self._norm = self.k1 * (1 - self.b + self.b * lens / (avgdl or 1.0))
            self._stamp = stamp
        return score_query(query, top_k, min_coverage, n, self.df, self.pairs, self._norm, self.k1)

    def close(self) -> None:
        self.db.close()
