"""Semantic scores: texts cut into windows, embedded once into the shared cache, ranked by cosine.

A record's score is its best window's cosine with the best query window. Window
vectors live in the shared cache (vectors.py), so a text embedded at save time is
never embedded again; query windows are embedded fresh and not cached, so prompts
do not grow the cache. Scoring is one matrix product over the cache's rows.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .embed import Encoder

MAX_WINDOWS = 16  # per record: one huge tool output cannot stall search
EMBED_BATCH = 256  # windows per cache segment: a crash loses at most this many
MEMO_LIMIT = 200_000
NO_SCORE = -np.inf


class SemanticIndex:
    def __init__(self, encoder: Encoder, cache_root: str, log: Callable[[str], None] = lambda m: None):
        self.encoder = encoder
        self.cache_root = cache_root
        self.log = log
        self._cache = None
        self._rows: dict[str, np.ndarray] = {}  # record text -> cache rows of its windows

    @property
    def cache(self):
        if self._cache is None:
            from .vectors import VectorCache

            self.encoder.load()
            self._cache = VectorCache(self.cache_root, self.encoder.model_id, self.encoder.dim, log=self.log)
        return self._cache

    def _windows(self, text: str) -> list[str]:
        return [w.text for w in self.encoder.windows(text)[:MAX_WINDOWS]]

    def ensure(self, texts: list[str], progress: Callable[[int, int], None] | None = None) -> list[np.ndarray]:
        """Cache rows for each text's windows, embedding (in batches) what the cache lacks."""
        cache = self.cache
        if len(self._rows) > MEMO_LIMIT:
            self._rows.clear()
        todo = [t for t in dict.fromkeys(texts) if t not in self._rows]
        if todo:
            cache.refresh()
            wins = {t: self._windows(t) for t in todo}
            unique = list(dict.fromkeys(w for ws in wins.values() for w in ws))
            rows = cache.lookup(unique) if unique else np.zeros(0, dtype=np.int64)
            missing = [w for w, r in zip(unique, rows) if r < 0]
            for i in range(0, len(missing), EMBED_BATCH):
                batch = missing[i : i + EMBED_BATCH]
                cache.put(batch, self.encoder.embed(batch))
                if progress:
                    progress(min(i + EMBED_BATCH, len(missing)), len(missing))
            if missing:
                rows = cache.lookup(unique)
            where = dict(zip(unique, rows.tolist()))
            for t, ws in wins.items():
                self._rows[t] = np.asarray([where[w] for w in ws], dtype=np.int64)
        return [self._rows[t] for t in texts]

    def scores(self, query: str, texts: list[str]) -> np.ndarray:
        """Cosine of each text's best window with the best query window; -inf for blank texts."""
        out = np.full(len(texts), NO_SCORE, dtype=np.float32)
        qwin = self._windows(query)
        if not qwin or not texts:
            return out
        rows = self.ensure(texts)
        qv = self.encoder.embed(qwin)
        matrix = self.cache.matrix()
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        flat = np.concatenate(rows) if lengths.sum() else np.zeros(0, dtype=np.int64)
        if not len(flat):
            return out
        if len(flat) * 2 >= len(matrix):
            sims = (matrix @ qv.T).max(axis=1)[flat]  # one product over every stored window
        else:
            sims = (matrix[flat] @ qv.T).max(axis=1)  # the candidates are a small part of the cache
        has = lengths > 0
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[has]
        out[has] = np.maximum.reduceat(sims, starts)
        return out
