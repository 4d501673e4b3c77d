"""Semantic scores: texts cut into windows, embedded once into the shared cache, ranked by cosine.

A record's score is its best window's cosine with the best query window. Window
vectors live in the shared cache (vectors.py), so a text embedded at save time is
never embedded again; query windows are embedded fresh and not cached, so prompts
do not grow the cache. Scoring is one matrix product over the cache's rows.
"""

from __future__ import annotations

import time
from array import array
from typing import Callable

import numpy as np

from eggshell.search.embed import Encoder

MAX_WINDOWS = 16  # per record: one huge tool output cannot stall search
EMBED_BATCH = 256  # windows per cache segment: a crash loses at most this many
MEMO_LIMIT = 200_000
QUERY_EMBED_LIMIT = 256  # windows a query may embed for records not indexed yet; the rest wait for `egg index`
# ... and the seconds it may spend on them: catch-up stops there, keeping what it embedded, so a
# provider's deadline is never spent on windows that are then lost (a child killed mid-batch).
QUERY_EMBED_BUDGET_S = 4.0
# Of a query's windows, the ones embedded: its opening. A pasted issue's later windows (logs,
# code, tracebacks) matched every record that held the like; measured on swe `related` (dev),
# hybrid R@5 rose with 1 window against 4 and 16 (docs/benchmarks.md, "Ranking, 6 Dec 2026").
QUERY_WINDOWS = 1
OPENING_WINDOWS = 2  # a record's opening: its first windows, where its request's title and description are
QUERY_BATCH = 32  # windows per cache segment at query time: each is stored as soon as it is made
# Texts a warm query looks up that no lookup has seen yet (a store's first turns: their windows
# are looked up and embedded at once); past that a query leaves them to the manager's background
# steps, each of which looks up SCAN_STEP texts at most. Windowing a text costs about 2 ms, so a
# query that looked up a backlog of 2,000 unembedded turns took 3.6 s (issue 30).
QUERY_SCAN = 8
SCAN_STEP = 32
NO_SCORE = -np.inf
_NO_ROWS = np.zeros(0, dtype=np.int64)


class SemanticIndex:
    def __init__(self, encoder: Encoder, cache_root: str, log: Callable[[str], None] = lambda m: None):
        self.encoder = encoder
        self.cache_root = cache_root
        self.log = log
        self._cache = None
        self._rows: dict[str, np.ndarray] = {}  # record text -> cache rows of its windows (complete only)
        self._spans: dict[str, array] = {}  # record text -> its windows' (start, end) offsets: windowing runs once per text
        self._seen: dict[str, float] = {}  # record text not complete -> when a lookup last found it so
        self.scanned = 0  # texts the last `ensure` looked up
        self.missing = 0  # windows those texts lacked
        self.backlog = False  # more texts were not complete than it looked up: only `first`'s were embedded
        self.query_embed_limit = QUERY_EMBED_LIMIT  # a warm manager lowers it and fills the rest while idle
        # Set by a warm manager: the texts of turns it saved itself and has not embedded yet. When
        # more windows are missing than a query may embed (a backlog: `egg import`, a pull), the
        # query embeds only theirs, and the backlog is left to the background (issue 30).
        self.query_embed_first: Callable[[], object] | None = None
        self.query_embed_budget_s = QUERY_EMBED_BUDGET_S
        self.embedded = 0  # windows the last `ensure` embedded
        self._flat: tuple[list[str], np.ndarray, np.ndarray] | None = None  # last candidates: their rows, flattened
        self._epoch = 0  # the cache's epoch the memos above belong to
        self.query_vectors: np.ndarray | None = None  # the last query's window vectors (scores)

    def _sync(self) -> bool:
        """Forget the row memos when the cache reloaded after a purge (its row numbers changed)."""
        if self.cache.epoch == self._epoch:
            return False
        self._rows.clear()
        self._seen.clear()
        self._flat = None
        self._epoch = self.cache.epoch
        return True

    @property
    def cache(self):
        if self._cache is None:
            from eggshell.search.vectors import VectorCache

            self.encoder.load()
            self._cache = VectorCache(self.cache_root, self.encoder.model_id, self.encoder.dim, log=self.log)
        return self._cache

    def _windows(self, text: str, most: int = MAX_WINDOWS) -> list[str]:
        if most != MAX_WINDOWS:
            return [w.text for w in self.encoder.windows(text)[:most]]
        spans = self._spans.get(text)
        if spans is None:
            ws = self.encoder.windows(text)[:most]
            if not all(hasattr(w, "start") for w in ws):
                return [w.text for w in ws]
            if len(self._spans) > MEMO_LIMIT:
                self._spans.clear()
            spans = self._spans[text] = array("I", [x for w in ws for x in (w.start, w.end)])
        return [text[spans[k]:spans[k + 1]] for k in range(0, len(spans), 2)]

    def complete_count(self) -> int:
        """How many texts are known to have every window cached."""
        return len(self._rows)

    def complete(self, texts: list[str]) -> int:
        """How many of these texts have every window cached, as the last lookups found (no lookup now)."""
        return sum(t in self._rows for t in texts)

    def query_windows(self, text: str) -> list[str]:
        """The query's first QUERY_WINDOWS windows: an issue's title and description come
        first, its pasted logs and code after; each window costs a model run per query."""
        return self._windows(text, QUERY_WINDOWS)

    def ensure(self, texts: list[str], progress: Callable[[int, int], None] | None = None, limit: int | None = None,
               budget_s: float | None = None, gate: Callable[[], bool] | None = None, first=None,
               scan: int | None = None, recheck: bool = False) -> list[np.ndarray]:
        """Cache rows for each text's windows, embedding (in batches) what the cache lacks.

        With `limit`, at most that many windows are embedded now; with `budget_s`, no new batch
        starts past that many seconds, and batches are small (QUERY_BATCH), each stored when
        made. A text whose windows are not all cached yet gets the rows it has (it is scored
        by them) and is completed by a later call. With `gate` (vectors.VectorCache.put), a
        batch is stored only while the gate is open, and embedding stops at the first it is not.
        With `scan`, at most that many texts not complete are looked up (the others get no rows
        now): `first`'s (a collection of texts), then the newest no lookup has seen (a query), or
        with `recheck` the texts looked at longest ago (a background step). That is a backlog
        (`backlog`): only `first`'s windows are embedded then (up to `limit`). Fewer texts not
        complete (a store's first turns) have their missing windows embedded up to `limit`, as
        without `scan`. `missing` is how many windows the texts looked up lack, before `limit`.
        """
        cache = self.cache
        cache.check_purge()
        self._sync()
        if len(self._rows) > MEMO_LIMIT:
            self._rows.clear()
        todo = [t for t in dict.fromkeys(texts) if t not in self._rows]
        partial: dict[str, np.ndarray] = {}
        self.backlog = scan is not None and len(todo) > scan
        if self.backlog:
            seen, firsts = self._seen, (first or ())
            own = [t for t in todo if t in firsts]
            if recheck:
                rest = sorted((t for t in todo if t not in firsts), key=lambda t: seen.get(t, 0.0))
            else:
                rest = [t for t in reversed(todo) if t not in seen and t not in firsts]
            todo = own + rest[:max(0, scan - len(own))]
            partial = dict.fromkeys(texts, _NO_ROWS)
        self.scanned = len(todo)
        self.missing = 0
        if todo:
            cache.refresh()
            if self._sync():  # a purge ran just now: every memo is void, start again
                return self.ensure(texts, progress, limit, budget_s, gate, first, scan, recheck)
            wins = {t: self._windows(t) for t in todo}
            unique = list(dict.fromkeys(w for ws in wins.values() for w in ws))
            rows = cache.lookup(unique) if unique else np.zeros(0, dtype=np.int64)
            missing = [w for w, r in zip(unique, rows) if r < 0]
            self.missing = len(missing)
            if self.backlog or (limit is not None and len(missing) > limit):
                if self.backlog:
                    own = {w for t in todo if t in (first or ()) for w in wins[t]}
                    missing = [w for w in missing if w in own]
                elif limit >= QUERY_EMBED_LIMIT:
                    self.log("%d windows of earlier turns are not embedded yet; embedding %d now (run `egg index` to do the rest)" % (len(missing), limit))
                missing = missing[:limit]
            size = EMBED_BATCH if budget_s is None else QUERY_BATCH
            started = time.monotonic()
            done = 0
            for i in range(0, len(missing), size):
                if budget_s is not None and done and time.monotonic() - started >= budget_s:
                    self.log("embedded %d of %d missing windows within %g s; the rest wait for the next query or `egg index`"
                             % (done, len(missing), budget_s))
                    break
                batch = missing[i : i + size]
                if gate is not None and not gate():
                    break  # forgotten meanwhile: nothing more of it is embedded
                got = cache.put(batch, self.encoder.embed(batch), gate=gate)
                if gate is not None and (got < 0).any():
                    break
                done += len(batch)
                if progress:
                    progress(min(i + size, len(missing)), len(missing))
            self.embedded = done
            if missing:
                rows = cache.lookup(unique)
            where = dict(zip(unique, rows.tolist()))
            now = time.monotonic()
            if len(self._seen) > MEMO_LIMIT:
                self._seen.clear()
            for t, ws in wins.items():
                r = np.asarray([where[w] for w in ws if where[w] >= 0], dtype=np.int64)
                if len(r) == len(ws):
                    self._rows[t] = r
                    self._seen.pop(t, None)
                else:
                    partial[t] = r
                    self._seen[t] = now
        return [self._rows[t] if t in self._rows else partial[t] for t in texts]

    def _flat_rows(self, texts: list[str], gate: Callable[[], bool] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(all rows of the candidates' windows, the count per candidate), kept while they are the same."""
        if self._flat is not None and self._flat[0] == texts:
            return self._flat[1], self._flat[2]
        first = self.query_embed_first() if self.query_embed_first is not None else None
        rows = self.ensure(texts, limit=self.query_embed_limit, budget_s=self.query_embed_budget_s, gate=gate, first=first,
                           scan=QUERY_SCAN if first is not None else None)
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        flat = np.concatenate(rows) if lengths.sum() else np.zeros(0, dtype=np.int64)
        if all(t in self._rows for t in texts):  # complete: safe to reuse for the next query
            self._flat = (list(texts), flat, lengths)
        return flat, lengths

    def cached_scores(self, qv: np.ndarray, texts: list[str]) -> np.ndarray:
        """Like `scores`, for query window vectors already made, from cached windows only: nothing
        is embedded (-inf for a text none of whose windows is cached)."""
        out = np.full(len(texts), NO_SCORE, dtype=np.float32)
        rows = self.ensure(texts, limit=0)
        matrix = self.cache.matrix()
        for n, r in enumerate(rows):
            if len(r):
                out[n] = float((matrix[r] @ qv.T).max())
        return out

    def scores(self, query: str, texts: list[str], gate: Callable[[], bool] | None = None) -> np.ndarray:
        """Cosine of each text's best window with the best query window; -inf for blank texts.
        `gate`: the candidates' windows are cached only while it is open (ensure)."""
        return self.window_scores(query, texts, gate)[0]

    def window_scores(self, query: str, texts: list[str], gate: Callable[[], bool] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(each text's best-window cosine, the best of its first OPENING_WINDOWS): a record's
        opening is its request's title and description, which a long query's own opening is
        compared with (rank.OPENING_SHARE). -inf for blank texts in both."""
        out = np.full(len(texts), NO_SCORE, dtype=np.float32)
        opening = np.full(len(texts), NO_SCORE, dtype=np.float32)
        self.query_vectors = None
        qwin = self.query_windows(query)
        if not qwin or not texts:
            return out, opening
        self.cache.check_purge()  # purged rows leave this process's memory before the next answer
        self._sync()
        flat, lengths = self._flat_rows(texts, gate)
        qv = self.encoder.embed(qwin)
        self.query_vectors = qv  # the last query's windows: the background is scored against them (local.Provider)
        matrix = self.cache.matrix()
        if not len(flat):
            return out, opening
        if len(flat) * 2 >= len(matrix):
            sims = (matrix @ qv.T).max(axis=1)[flat]  # one product over every stored window
        else:
            sims = (matrix[flat] @ qv.T).max(axis=1)  # the candidates are a small part of the cache
        has = lengths > 0
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[has]
        out[has] = np.maximum.reduceat(sims, starts)
        first = sims[starts]
        for k in range(1, OPENING_WINDOWS):  # the next windows of texts that have them
            more = lengths[has] > k
            first[more] = np.maximum(first[more], sims[starts[more] + k])
        opening[has] = first
        return out, opening
