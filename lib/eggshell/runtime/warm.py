"""What answering a hook needs loaded: stores, search indexes, reuse workspaces, the model.

One class serves both paths. A hook process with no manager makes one (`warm=False`),
answers one event and exits: stores are read once per event, and prompts are ranked
lexically because loading the model would cost a second. The warm manager keeps one for
its lifetime: stores only read what was appended, the workspace grows by each commit's
new edges, and the model stays loaded. The answers are the same code either way.

Between the two: a manager that exits leaves a snapshot of its stores, workspaces and
lexical indexes per read set (`<data root>/run/snapshots/`), and a cold hook starts from
it. Reading 10,000 turns from their `.egg` takes seconds; unpickling them about one. A
snapshot is only a head start: each Store it holds re-reads what was appended to its
file since (or all of it, if the file was replaced), so a stale snapshot costs time,
never correctness, and one written by other code (a reinstall) is ignored.
"""

from __future__ import annotations

import contextlib
import os
import pickle
from typing import Callable, ContextManager

from eggshell.errors import EggshellError
from eggshell.config import Config
from eggshell.reuse.engine import LiveWorkspace, Workspace
from eggshell.reuse.freshness import Cache
from eggshell.runtime.client import source_stamp
from eggshell.search.rank import Settings
from eggshell.search.searcher import Searcher
from eggshell.graph.store import Store

# Windows a warm prompt embeds for stored turns not embedded yet: a store's first turns, else only
# those of turns this manager saved itself and has not embedded yet (their opening first); a backlog
# (`egg import`, a pull) is embedded in the background. Each costs about 0.1 s on one core: with 16,
# four chats right after a 10,000-turn import waited 3.1 s a prompt (p99 9.3 s), with 4, 1.5 s
# (p99 3.4 s; bench_chats --backlog, 6 Dec 2026); a realistic turn has 3.6 windows, and the
# follow-ups of the four real CLIs (tests/e2e/test_followup.py) still get their prior turn.
QUERY_WINDOWS = 4
MODEL_THREADS = 1  # the manager's model runs on the thread that asks, so a low-priority one embeds at low priority
WARM_LOCK_S = 0.05  # a warm commit's wait for a store lock held elsewhere: the worker serves hooks; the journal keeps the turn
BACKFILL_WINDOWS = 4  # windows embedded per step of the manager: a prompt waits at most for one step
# How fast a cold process reads at best (4 Dec 2026, bench_scale: a snapshot 38 to 50 MB/s, a store
# with its workspace and indexes about 15 MB/s): what it cannot read within its deadline even at
# these rates it does not start on, and answers at once without memory, while the manager loads.
SNAPSHOT_MB_S = 50.0
STORE_MB_S = 15.0
# Past this many MB of stores, a cold prompt ranks from their on-disk search index
# (search/turnindex.py) and reads only the turns it hands over. Measured with fresh hook processes
# (6 Dec 2026, /work/an/p30/cold_threshold.py, realistic turns): reading the store itself took
# 0.55 s at 30 turns, 0.73 s at 100, 1.16 s at 300 (2.7 MB) and 1.7 to 2.2 s at 1,000 (8.7 MB);
# from the index 0.52 to 0.73 s at each of those sizes and 0.7 s at 10,000. The whole read is
# worth its wait while it stays near a second: its handoff may add work of turns the search did
# not rank (the engine's matching over every stored call), the index's holds what was ranked.
INDEXED_PAST_MB = 2.5
INDEX_MB_S = 6.0  # how fast a process brings a search index up to date (bench, 6 Dec 2026: 78 MB in 12 s)
INDEX_STEP_BYTES = 1 << 19  # one step of the manager's index upkeep (about 65 turns: 0.15 s, what a prompt may wait for)


class TooLargeCold(EggshellError):
    """A cold hook's stores (or their snapshot) cannot be read within its deadline: it answers
    without memory now instead of at the deadline (a 100,000-turn store: 10 s for nothing)."""


class NotGrown(EggshellError):
    """The tool worker has no workspace for these stores yet: the main worker answers (and builds it)."""


class Grown:
    """Resources as the manager's main worker last brought them up to date, read and never changed.

    What the manager's tool worker answers tool events from while the main worker searches,
    saves or embeds: the reuse workspace of each read set, without reading the stores (only the
    main worker does, and it grows every workspace after each commit). Only while each store
    file is exactly what the workspace was grown from: anything appended, replaced or removed
    since (another process's commit, a forget, a compaction) sends the answer to the main
    worker, which reads it first.

    A read set the main worker has no workspace for yet (the first tool call of a project
    since the manager started) is the one exception: the main worker may be inside a long job
    (a provider that hangs while it embeds saved turns holds it for its whole deadline), and
    the tool call must not wait for it. The tool worker then reads the stores itself, through
    Store readers of its own that no other thread touches, and asks the main worker (`want`)
    to build its workspace when it is free; once that one is current, the tool worker's copy
    is dropped.
    """

    unlocked = contextlib.nullcontext  # the tool worker holds the lock for its whole answer

    def __init__(self, res: "Resources", want: Callable[[tuple[str, ...]], None] = lambda read: None):
        self.res = res
        self.want = want  # asks the main worker to build the workspace of a read set, soon
        self._own: dict[tuple[str, ...], LiveWorkspace] = {}  # read set -> the tool worker's interim workspace

    @property
    def freshness(self):
        return self.res.freshness

    def workspace(self, read: tuple[str, ...], staged=()) -> Workspace:
        live = self.res._live.get(read)
        if live is not None:
            if self.res._grown.get(read) != tuple(_on_disk(p) for p in read):
                raise NotGrown(read)
            self._own.pop(read, None)  # the main worker's is current: no second copy
            return live.current(staged, grow=False)
        own = self._own.get(read)
        if own is None:
            own = self._own[read] = LiveWorkspace([self._reader(p) for p in read])
            self.want(read)
        return own.current(staged)

    def _reader(self, path: str) -> Store:
        s = Store.open(path)
        s.lock_timeout = WARM_LOCK_S  # read only, but never waits long on a lock held elsewhere
        return s

    def ledger(self):
        return self.res.ledger()


def _on_disk(path: str) -> tuple:
    """(file identity, size) as a Store that has read all of it records them ((None, 0): no file)."""
    try:
        st = os.stat(path)
    except OSError:
        return (None, 0)
    return ((st.st_dev, st.st_ino), st.st_size)


class Resources:
    def __init__(self, data_root: str, bin_dir: str, *, warm: bool, log: Callable[[str], None] = lambda m: None,
                 unlocked: Callable[[], ContextManager] = contextlib.nullcontext,
                 background: Callable[..., object] = lambda fn, *args: fn(*args),
                 note: Callable[[str], None] = lambda m: None):
        self.data_root = data_root
        self.note = note  # what is no failure but worth knowing (a long rebuild): the manager's own log
        self.bin_dir = bin_dir
        self.warm = warm
        self.log = log
        self.unlocked = unlocked  # entered around long work that reads only the stores and what Grown never reads
        self._background = background  # runs fn(*args) for backfill, at a priority below the hooks' (the manager's)
        self._pending: dict[str, dict] = {}  # text of a saved turn to embed -> its index item, oldest first
        self._tombstones = None  # graph/tombstones.Tombstones, made when a saved turn is first pending
        self._stores: dict[str, Store] = {}
        self._live: dict[tuple[str, ...], LiveWorkspace] = {}
        self._grown: dict[tuple[str, ...], tuple] = {}  # read set -> what its workspace was last grown from (Grown)
        self._searchers: dict[tuple, Searcher] = {}
        self._closers: list[Callable[[], None]] = []
        self._counts: dict[str, tuple[int, int]] = {}
        self._views: dict = {}  # path -> records.TurnKeys, for turn_count
        self._tried: set[tuple[str, ...]] = set()
        self.freshness = Cache()  # the freshness checks' file reads, by (path, stat): a warm check is a stat
        self._ledger = None  # the trust ledger as last read (trust.load re-reads it only when it changed)
        self.deadline: float | None = None  # cold, while answering: reading what cannot finish by then raises TooLargeCold
        self._indexed: dict[tuple[str, ...], object] = {}  # read set -> search.indexed.IndexedSearcher (cold, big stores)
        self._turn_indexes: dict[str, object] = {}  # store path -> its search.turnindex.TurnIndex (the manager's upkeep)
        self._unindexable: dict[str, tuple] = {}  # store path -> its stamp when its index could not serve it
        self._embedder_at = float("-inf")  # when this process last started the background embedder

    # -- snapshots ----------------------------------------------------------------------

    def _snapshot_path(self, read: tuple[str, ...]) -> str:
        from eggshell.core.hashing import hexdigest

        return os.path.join(self.data_root, "run", "snapshots", hexdigest("eggshell.snapshot", *read)[:24] + ".pickle")

    def save_snapshots(self) -> int:
        """Write one snapshot per read set (the manager does this as it exits); how many."""
        from eggshell.paths import private_dir

        n = 0
        for read, live in self._live.items():
            lexical = {}
            for key, s in self._searchers.items():
                if key[0] == read:
                    c = Searcher(s.stores, trace=s.trace, settings=s.settings)
                    c.views, c.by_id, c.candidates = s.views, s.by_id, s.candidates
                    c._bm25, c._passages, c._stamp = s._bm25, s._passages, s._stamp
                    c._live, c._index = s._live, s._index  # so a cold hook extends them too
                    lexical[key[:-1] + (False,)] = c
            blob = {"stamp": source_stamp(), "read": read, "stores": {p: self._stores[p] for p in read if p in self._stores},
                    "live": live, "searchers": lexical}
            path = self._snapshot_path(read)
            private_dir(os.path.dirname(path))
            tmp = "%s.%d.tmp" % (path, os.getpid())
            try:
                with open(tmp, "wb") as f:
                    pickle.dump(blob, f, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(tmp, path)
                n += 1
            except Exception as e:  # a full disk: the next cold hook reads the stores instead
                self.log("snapshot %s: %s: %s" % (path, type(e).__name__, e))
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        return n

    def _adopt(self, read: tuple[str, ...]) -> None:
        """A cold process starts from the last manager's snapshot of these stores, if there is one."""
        if self.warm or read in self._tried or read in self._live:
            return
        self._tried.add(read)
        path = self._snapshot_path(read)
        if not os.path.exists(path):
            return
        self._in_time(path, SNAPSHOT_MB_S, "its snapshot")
        from eggshell.runtime.client import unsafe_dir
        snaps = os.path.dirname(path)
        why = unsafe_dir(os.path.dirname(snaps)) or unsafe_dir(snaps)
        if why is not None:  # unpickling runs code: only ever what this user's own manager wrote
            self.log("snapshot %s: %s; reading the stores instead" % (path, why))
            return
        try:
            with open(path, "rb") as f:
                blob = pickle.load(f)
            if blob.get("stamp") != source_stamp() or tuple(blob.get("read", ())) != read:
                return  # written by other code: ignore it
        except Exception as e:
            self.log("snapshot %s unreadable (%s: %s); reading the stores instead" % (path, type(e).__name__, e))
            return
        for p, st in blob["stores"].items():
            self._stores.setdefault(p, st)
        if all(self._stores.get(p) is st for p, st in blob["stores"].items()):
            self._live[read] = blob["live"]
            for key, s in blob["searchers"].items():
                self._searchers.setdefault(key, s)

    def _in_time(self, path: str, mb_s: float, what: str) -> None:
        """Raise TooLargeCold when reading `path` at `mb_s` cannot end before the deadline (if any)."""
        if self.deadline is None:
            return
        import time

        try:
            st = os.stat(path)
        except OSError:
            return  # a missing file is the reader's to report
        # What is stored, not the apparent size: a sparse tail (a crash, a `truncate`) is not read (store.read_until_nul).
        size = min(st.st_size, getattr(st, "st_blocks", st.st_size // 512 + 1) * 512)
        need = size / (mb_s * 1e6)
        left = self.deadline - time.monotonic()
        if need > left:
            raise TooLargeCold("%s of %s is %.0f MB: reading it takes %.0f s or more, and %.1f s are left; answered "
                               "without memory while the manager loads it" % (what, path, size / 1e6, need, max(0.0, left)))

    def store(self, path: str) -> Store:
        """The store at `path`, current: a cached one reads only what was appended."""
        s = self._stores.get(path)
        if s is None:
            self._in_time(path, STORE_MB_S, "the store")
            s = self._stores[path] = Store.open(path)
        else:
            s.refresh()
        s.note = self.log  # what a write changes besides the store (a mode tightened) goes to the hook log
        s.lock_timeout = WARM_LOCK_S if self.warm else Store.lock_timeout  # (a snapshot's Store is the manager's)
        s.data_root = self.data_root  # the commits it writes are vouched for in this data root's trust ledger
        return s

    def ledger(self):
        """The trust ledger (trust.py): which stored commits are this user's own, so may complete a call."""
        from eggshell.graph import trust

        self._ledger = trust.load(self.data_root, self._ledger)
        return self._ledger

    def turn_count(self, path: str) -> int:
        """How many turns a store holds (counted again only when it has grown)."""
        from eggshell.graph.records import TurnKeys

        s = self.store(path)
        stamp = s.stamp()
        got = self._counts.get(path)
        if got is None or got[0] != stamp:
            with self.unlocked():
                keys = self._views.get(path)
                if keys is None or keys.stale(s.graph):
                    keys = self._views[path] = TurnKeys(s.graph)
                n = keys.update()  # only what was committed since: a full read costs a 100,000-turn store seconds
            got = self._counts[path] = (stamp, n)
        return got[1]

    def counts(self, path: str) -> dict | None:
        """{"turns", "embedded", "searchable"} of a store this process has loaded (None: not loaded),
        for `egg status`: how many of its turns the semantic side can rank by all their windows
        (None when no searcher over it ranks with the model, or none has ranked yet)."""
        if path not in self._stores:
            return None
        from eggshell.graph import trust

        out: dict = {"turns": self.turn_count(path), "embedded": None, "searchable": None,
                     "trust": trust.describe(path, self._stores[path].graph, self.ledger())}
        for key, s in self._searchers.items():
            provider = getattr(s.semantic, "provider", None)
            if path not in key[0] or provider is None or not s.views:
                continue
            texts = [c["text"] for v, c in zip(s.views, s.candidates) if v.store == path and c["text"]]
            done = provider.embedded(texts)
            if done is not None and (out["embedded"] is None or done > out["embedded"]):
                out["embedded"], out["searchable"] = done, len(texts)
        return out

    def workspace(self, read: tuple[str, ...], staged=()) -> Workspace:
        indexed = self._indexed.get(read)
        if indexed is not None:  # cold over big stores: the turns the prompt's search read, not every turn
            from eggshell.reuse.engine import workspace

            return workspace(indexed.graphs(), staged)
        self._adopt(read)
        live = self._live.get(read)
        if live is None:
            live = self._live[read] = LiveWorkspace([self.store(p) for p in read])
        return self._current(read, live, staged)

    def _current(self, read: tuple[str, ...], live: LiveWorkspace, staged=()) -> Workspace:
        """Grow a live workspace (reading its stores) and note what from, for Grown."""
        ws = live.current(staged)
        self._grown[read] = tuple((s._ident, s._offset) for s in live.stores)
        return ws

    def _stored_bytes(self, read: tuple[str, ...]) -> int:
        total = 0
        for p in read:
            try:
                st = os.stat(p)
            except OSError:
                continue
            total += min(st.st_size, getattr(st, "st_blocks", st.st_size // 512 + 1) * 512)
        return total

    def _indexed_searcher(self, cfg: Config, read: tuple[str, ...]):
        """Cold, over stores too big to read in time: an IndexedSearcher from their on-disk indexes,
        brought up to date if little was appended since; None when the stores are small enough to read.
        Raises TooLargeCold when an index is missing or far behind (the manager builds it)."""
        got = self._indexed.get(read)
        if got is not None or self.warm or self.deadline is None:
            return got
        if self._stored_bytes(read) <= INDEXED_PAST_MB * 1e6:
            return None
        import sqlite3
        import time

        from eggshell.graph.commitindex import AppendStore, TooMuchToRead
        from eggshell.graph.store import EggError
        from eggshell.search.indexed import IndexedSearcher
        from eggshell.search.postings import IndexDamaged
        from eggshell.search.turnindex import NotIndexed, TurnIndex

        pairs: list = []
        try:
            for p in read:
                most = int(max(0.0, (self.deadline - time.monotonic()) / 3) * INDEX_MB_S * 1e6)  # the rest answers
                store = AppendStore.open(p, self.data_root, most=most)
                self._closers.append(store.close)
                ix = TurnIndex(self.data_root, p)
                self._closers.append(ix.close)
                ix.update(store, most=most)
                pairs.append((store, ix))
        except (TooMuchToRead, NotIndexed, IndexDamaged, EggError, OSError, sqlite3.Error) as e:
            raise TooLargeCold("the stores are too big to read within the budget and their search index cannot serve "
                               "them now (%s); answered without memory while the manager brings it up to date" % e) from None
        trace = os.path.join(self.data_root, "semantic", "matcher-trace.jsonl")
        s = self._indexed[read] = IndexedSearcher(pairs, Settings.from_config(cfg), trace=trace, log=self.note)
        return s

    def index_step(self, step: int = INDEX_STEP_BYTES) -> int:
        """Bring the on-disk search index of each store this manager reads a step closer to it
        (search/turnindex.py): what a cold hook ranks from once the manager is gone. Turns indexed."""
        import sqlite3

        from eggshell.graph.store import EggError
        from eggshell.search.postings import IndexDamaged
        from eggshell.search.turnindex import NotIndexed, TurnIndex

        done = 0
        for path, s in list(self._stores.items()):
            stamp = s.stamp()
            if self._unindexable.get(path) == stamp or done:
                continue
            try:
                ix = self._turn_indexes.get(path)
                if ix is not None and ix.dropped():  # `egg forget` or a purge removed it: a new one
                    ix.close()
                    ix = None
                if ix is None:
                    ix = self._turn_indexes[path] = TurnIndex(self.data_root, path)
                    self._closers.append(ix.close)
                with self.unlocked():
                    from eggshell.graph import commitindex

                    # the commit index first: a cold hook reads the turns it hands over through it
                    behind = commitindex.catch_up(self.data_root, s, step)
                    done += ix.update(s, step=step) + (1 if behind else 0)
            except NotIndexed:
                self._unindexable[path] = stamp  # tombstones or unions: cold hooks read the store itself
            except (IndexDamaged, EggError, OSError, sqlite3.Error) as e:
                self._unindexable[path] = stamp
                self.log("search index of %s: %s: %s; tried again when the store changes" % (path, type(e).__name__, e))
        return done

    def searcher(self, cfg: Config, read: tuple[str, ...]) -> Searcher:
        """A Searcher over these stores; warm, it ranks with the model too (when the config says so).
        Cold, over stores too big to read in time, one that ranks from their on-disk indexes."""
        indexed = self._indexed_searcher(cfg, read)
        if indexed is not None:
            return indexed
        self._adopt(read)
        key = (read, cfg.mode, cfg.model, cfg.threshold, cfg.bm25_k1, cfg.bm25_b, cfg.semantic_matcher, cfg.top_k, self.warm)
        s = self._searchers.get(key)
        if s is None:
            semantic = None
            if self.warm:
                from eggshell.search import matcher
                from eggshell.search.searcher import semantic_depth

                semantic, close = matcher.choose(cfg, self.data_root, self.bin_dir, semantic_depth(cfg.top_k), self.log,
                                                 prefer_in_process=True)
                self._closers.append(close)
            import os

            trace = os.path.join(self.data_root, "semantic", "matcher-trace.jsonl")
            s = self._searchers[key] = Searcher([self.store(p) for p in read], semantic=semantic, trace=trace,
                                                settings=Settings.from_config(cfg))
            s.unlocked = self.unlocked
            s.log = self.note
            provider = getattr(semantic, "provider", None)
            if provider is not None:
                provider.query_embed_limit = QUERY_WINDOWS
                provider.query_embed_first = lambda: self._pending  # a backlog is the background's, never a prompt's
                provider.threads = MODEL_THREADS
        return s

    def backfill(self, limit: int = BACKFILL_WINDOWS) -> int:
        """Embed up to `limit` windows of stored turns that have none yet; how many were embedded.

        A store saved elsewhere (merged, copied, or recorded before the model was installed)
        can hold thousands of turns never embedded: a prompt embeds only a few of them, and
        the manager calls this between requests until nothing is left, so no hook waits
        behind a long embedding run.
        """
        done = found = 0
        for s in self._searchers.values():
            provider = getattr(s.semantic, "provider", None)
            if provider is None or done >= limit:
                continue
            s._refresh()  # never embed a turn forgotten (or a store deleted) since the last prompt
            idx = provider._index()
            gate = self._pending_gate() if self._pending else None  # none forgotten since it was saved (graph/tombstones)
            if self._pending:  # just saved turns first
                with self.unlocked():
                    self._background(idx.ensure, list(self._pending), None, limit - done, None, gate)
                if idx.embedded < limit - done:
                    self._pending.clear()  # all their windows are cached now
                done += idx.embedded
            if s.candidates and done < limit:
                from eggshell.search.semantic import SCAN_STEP

                before = idx.complete_count()
                # A step looks up SCAN_STEP texts at most and embeds their windows only when no more
                # than that many are not embedded (a store's first turns); a backlog goes to the
                # embedder process, so a prompt waits for one short step at most.
                with self.unlocked():
                    self._background(idx.ensure, [c["text"] for c in s.candidates], None, limit - done, None, s.write_gate(),
                                     (), SCAN_STEP, True)
                done += idx.embedded
                found += max(0, idx.complete_count() - before)  # found complete (embedded elsewhere): more steps to come
                if idx.backlog and idx.missing and not self._pending:  # (its own new turns are embedded here, first)
                    self._start_embedder(provider, [st.path for st in s.stores])
            from eggshell.search.background import shipped, texts

            if done < limit and shipped(idx.encoder.model_id) is None:  # a model without shipped background vectors (search/background.py)
                with self.unlocked():
                    self._background(idx.ensure, list(texts()), None, limit - done, None, None)
                done += idx.embedded
        return done + found

    def _start_embedder(self, provider, stores: list[str]) -> None:
        """A backlog of stored turns without vectors: start the background embedder (runtime/embedder.py)
        unless one runs, at most every embedder.SPAWN_EVERY_S."""
        import time

        from eggshell.runtime import embedder

        now = time.monotonic()
        if now - self._embedder_at < embedder.SPAWN_EVERY_S or embedder.progress(self.data_root) is not None:
            return
        self._embedder_at = now
        st = provider.settings
        if embedder.spawn(self.data_root, stores, st.model, st.model_dir, st.cache_dir):
            self.note("a backlog of stored turns without vectors: the background embedder was started")

    def refresh(self) -> None:
        """Bring every search index up to date now (the manager calls this after a turn is saved).

        A prompt usually comes seconds after the previous turn's Stop: rebuilding then, not
        inside the next prompt's budget, is what keeps a warm prompt fast.
        """
        for s in self._searchers.values():
            s._refresh()
        self.grow()
        for path in list(self._counts):
            self.turn_count(path)  # what SessionStart says

    def index(self, items: list[dict]) -> None:
        """Embed newly saved turns soon, so the next prompt only embeds itself (warm only): `backfill`
        does it a few windows at a time, first of all, so no request waits behind a long run."""
        for i in items:
            self._pending.setdefault(i["text"], i)

    def _pending_gate(self):
        """Drop the pending turns a tombstone hides now; the gate the rest are written through
        (a turn `egg forget` names after it was saved is never embedded, nor one forgotten meanwhile)."""
        from eggshell.graph.tombstones import Gate, Tombstones, item_of

        if self._tombstones is None:
            self._tombstones = Tombstones()
        named = {t: item_of(i) for t, i in self._pending.items()}
        checked = [(t, x) for t, x in named.items() if x is not None]
        for (t, _), ok in zip(checked, self._tombstones.live([x for _, x in checked])):
            if not ok:
                del self._pending[t]
        rest = [x for t, x in checked if t in self._pending]
        return Gate(rest, self._tombstones).open if rest else None

    def grow(self) -> None:
        """Extend every reuse workspace by what was committed (cheap): what Grown answers from."""
        for read, live in self._live.items():
            self._current(read, live)

    def close(self) -> None:
        for c in self._closers:
            try:
                c()
            except Exception:
                pass
        self._closers.clear()
