"""BM25 over term lists: the lexical half of retrieval, pure and in memory.

A hit must also cover enough of the query (by idf weight) to count: BM25 alone
rewards a single shared generic word, and handing an agent an unrelated turn costs
more than handing it nothing.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Scored:
    index: int  # position of the document in the indexed list
    score: float
    coverage: float  # idf-weighted share of the query's distinct terms the document holds


K1 = 1.2
B = 0.75


class BM25:
    def __init__(self, docs: list[list[str]], k1: float = K1, b: float = B):
        self.k1, self.b = k1, b
        self.tfs = [Counter(d) for d in docs]
        self.lens = [len(d) for d in docs]
        self.n = len(docs)
        self.avgdl = (sum(self.lens) / self.n) if self.n else 0.0
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        self.df = df
        self.postings: dict[str, list[int]] = {}
        for i, tf in enumerate(self.tfs):
            for t in tf:
                self.postings.setdefault(t, []).append(i)

    def idf(self, term: str) -> float:
        n = self.df.get(term, 0)
        return math.log(1.0 + (self.n - n + 0.5) / (n + 0.5))

    def search(self, query: list[str], top_k: int = 8, min_coverage: float = 0.0) -> list[Scored]:
        """Documents by descending score (ties: earlier document first)."""
        q = list(dict.fromkeys(query))
        if not q or not self.n or top_k < 1:
            return []
        idf = {t: self.idf(t) for t in q}
        total = sum(idf.values()) or 1.0
        scores: dict[int, float] = {}
        held: dict[int, float] = {}
        for t in q:
            for i in self.postings.get(t, ()):
                f = self.tfs[i][t]
                norm = self.k1 * (1 - self.b + self.b * self.lens[i] / (self.avgdl or 1.0))
                scores[i] = scores.get(i, 0.0) + idf[t] * f * (self.k1 + 1) / (f + norm)
                held[i] = held.get(i, 0.0) + idf[t]
        out = [Scored(i, s, held[i] / total) for i, s in scores.items() if s > 0 and held[i] / total >= min_coverage]
        out.sort(key=lambda x: (-x.score, x.index))
        return out[:top_k]


def is_anchor(term: str) -> bool:
    """A term that names one thing exactly: an identifier, path, version or hash.

    It has an internal `_ / . :`, or mixes letters with digits. Plain words and plain
    numbers are not anchors (a year or "notes." would otherwise take the pinned slots).
    """
    inner = term.strip("_/.:-")
    if any(c in "_/.:" for c in inner):
        return True
    return any(c.isdigit() for c in term) and any(c.isalpha() for c in term)


def anchor_ranking(bm25: BM25, query: list[str], limit: int) -> list[Scored]:
    """Documents ranked by the query's anchor terms alone (idf over all documents)."""
    anchors = [t for t in dict.fromkeys(query) if is_anchor(t)]
    if not anchors or limit < 1:
        return []
    return bm25.search(anchors, limit)


RRF_K = 60


def rrf(*rankings: list[int], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: sum of 1/(k + rank) over the lists holding each index.

    Ties go to the index seen first (in list order), so the result is deterministic.
    """
    score: dict[int, float] = {}
    first: dict[int, int] = {}
    pos = 0
    for ranking in rankings:
        for rank, i in enumerate(ranking, 1):
            score[i] = score.get(i, 0.0) + 1.0 / (k + rank)
            if i not in first:
                first[i] = pos
                pos += 1
    return sorted(score.items(), key=lambda kv: (-kv[1], first[kv[0]]))


def select(n: int, top_k: int, anchors: list[int], ranking: list[int]) -> list[int]:
    """Anchors first, then the ranking: unique, each < n, at most top_k."""
    out: list[int] = []
    seen: set[int] = set()
    for i in [*anchors, *ranking]:
        if len(out) >= top_k:
            break
        if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n and i not in seen:
            seen.add(i)
            out.append(i)
    return out
