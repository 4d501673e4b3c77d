"""Whether turns handed to an embedder are still live: their stores' tombstones, read without loading the stores.

The Stop hook hands a saved turn's text to a detached provider to embed ahead of the next
prompt (runtime/turnflow._pre_index), and `egg index` embeds every turn; either may still be
at work (loading the model takes seconds) when `egg forget` and `egg compact --purge` run.
A vector written after the purge would keep the forgotten text in the cache for good
(red team IV, merge_resurrects_purged_text). So each index item names its store, its turn
and its roots (records.index_items), and the embedder asks `Gate.open()` right before each
write, under the vector cache's lock that a purge holds too: a forgotten item writes
nothing. Tombstones are appended and survive a purge and a merge, so they are all that
is read: the file is scanned for tombstone lines only, from where the last look ended.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field

from eggshell.graph import eggfile as ef

_MARK = b'\n{"forget":'


@dataclass
class Seen:
    """One store's tombstones as read so far: the roots and turns they name, and where the reading stopped (inode, bytes)."""

    ino: int = -1
    end: int = 0
    roots: set[str] = field(default_factory=set)
    turns: set[tuple[str, str]] = field(default_factory=set)


@dataclass(frozen=True)
class Item:
    """What of an index item the gate checks: its store, its (session, turn) Atom ids, its roots."""

    store: str
    turn: tuple[str, str]
    roots: tuple[str, ...]


def item_of(d: dict) -> Item | None:
    """The gate's view of a provider index item, or None when it names no store (nothing to check)."""
    store, turn, roots = d.get("store"), d.get("turn"), d.get("roots")
    if not isinstance(store, str) or not isinstance(turn, list) or len(turn) != 2 or not isinstance(roots, list):
        return None
    if not all(isinstance(x, str) for x in [*turn, *roots]):
        return None
    return Item(store, (turn[0], turn[1]), tuple(roots))


class Tombstones:
    """What each store's tombstones forget, as last read; each look reads only what was appended since."""

    def __init__(self):
        self._seen: dict[str, Seen] = {}

    def of(self, path: str) -> Seen | None:
        """The store's tombstones now (None: the store is gone or unreadable), reading all of it after a rewrite."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None  # gone (deleted, replaced by a link): nothing of it is embedded
        try:
            st = os.fstat(fd)
            s = self._seen.get(path)
            if s is None or s.ino != st.st_ino or st.st_size < s.end:
                s = self._seen[path] = Seen(st.st_ino)
            if st.st_size > s.end:
                with mmap.mmap(fd, st.st_size, prot=mmap.PROT_READ) as m:
                    s.end = _scan(m, max(s.end - 1, 0), st.st_size, s)
            return s
        except (OSError, ValueError):
            return None
        finally:
            os.close(fd)

    def live(self, items: list[Item]) -> list[bool]:
        """Whether each item is live now: its store there, and no tombstone naming its turn or one of its roots."""
        seen = {p: self.of(p) for p in dict.fromkeys(it.store for it in items)}
        return [(s := seen[it.store]) is not None and it.turn not in s.turns and s.roots.isdisjoint(it.roots) for it in items]


class Gate:
    """`open()`: every item is still live (Tombstones.live).

    Asked before every batch a long `egg index` writes: the items are checked again only
    when a store gained tombstones (or went) since the last look."""

    def __init__(self, items: list[Item], tombstones: Tombstones | None = None):
        self.items = items
        self.stores = list(dict.fromkeys(it.store for it in items))
        self.tombstones = tombstones or Tombstones()
        self._count: dict[str, int] | None = None  # tombstones each store had when the items were last checked
        self._ok = False

    def open(self) -> bool:
        now = {}
        for path in self.stores:
            s = self.tombstones.of(path)
            if s is None:
                self._count = None
                return False
            now[path] = len(s.roots) + len(s.turns)
        if now != self._count:
            self._ok = all(self.tombstones.live(self.items))
            self._count = now
        return self._ok


class Unchanged:
    """`open()`: none of these stores gained a tombstone, was rewritten or came or went since `mark()`.

    A searcher marks it before it reads its stores, so the candidates it embeds at query time
    (or the warm manager between requests) are known live while it stays open: a turn
    forgotten meanwhile is not cached by a query that read it a moment before."""

    def __init__(self, paths: list[str], tombstones: Tombstones | None = None):
        self.paths = list(dict.fromkeys(paths))
        self.tombstones = tombstones or Tombstones()
        self._base: tuple | None = None

    def _now(self) -> tuple:
        out = []
        for p in self.paths:
            s = self.tombstones.of(p)
            out.append(None if s is None else (s.ino, len(s.roots) + len(s.turns)))
        return tuple(out)

    def mark(self) -> None:
        self._base = self._now()

    def open(self) -> bool:
        return self._base is not None and self._now() == self._base


def _scan(m, start: int, end: int, s: Seen) -> int:
    """Add the tombstones whose lines start in m[start:end] (a line starts after a newline); where the next look starts."""
    at = m.find(_MARK, start, end)
    while at >= 0:
        stop = m.find(b"\n", at + 1, end)
        if stop < 0:
            return at + 1  # a line still being written: the next look reads it whole
        try:
            rec = ef.parse_record(m[at + 1 : stop])
        except (ef.RecordError, ValueError):
            rec = None
        if isinstance(rec, ef.Forget):
            s.roots.update(rec.roots)
            s.turns.update(rec.turns)
        at = m.find(_MARK, stop, end)
    return m.rfind(b"\n", start, end) + 1 or start  # from the last line start: a tombstone being written there is read next time
