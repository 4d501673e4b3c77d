"""BM25 over term lists: the lexical half of retrieval, pure and in memory.

A hit must also cover enough of the query (by idf weight) to count: BM25 alone
rewards a single shared generic word, and handing an agent an unrelated turn costs
more than handing it nothing.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from eggshell.config import DEFAULT_TOP_K  # defined once, with the other defaults a user can set


@dataclass(frozen=True, slots=True)
class Scored:
    index: int  # position of the document in the indexed list
    score: float
    coverage: float  # idf-weighted share of the query's distinct terms this one holds (see BM25.search)


K1 = 1.2
UNSEEN_COUNTED = 3  # query terms no record holds that count against coverage, at most
FLOOR_TERMS = 8  # distinct query terms past which the coverage floor shrinks in proportion
B = 0.75
# Query-term saturation (Robertson's k3): a term a long query repeats (the pasted issue names
# its function five times) counts more, up to K3 + 1 times a term said once. Short queries say
# each term once, so they rank as before. Chosen on swe `related` (dev): lexical R@5 0.789 ->
# 0.828, hybrid 0.833 -> 0.867 (docs/benchmarks.md, "Ranking, 6 Dec 2026").
K3 = 5.0


def query_weights(query: list[str]) -> dict[str, float]:
    """Each distinct query term's weight, in query order: (K3 + 1) qtf / (K3 + qtf)."""
    counts = Counter(query)
    return {t: (K3 + 1) * counts[t] / (K3 + counts[t]) for t in dict.fromkeys(query)}


LEXICAL_DEPTH = 1000  # BM25 hits a search ranks and fuses: past the thousandth, a score adds nothing a reader sees


class BM25:
    """Okapi BM25 over documents of terms, in compact columns.

    Each term keeps one machine-word array (array('I')) of (document, count) pairs in
    document order, and each document its length; a search scores with numpy over the
    query terms' postings. A Counter per document and a list per term held a 100,000-turn
    store's index in millions of small objects, and two arrays per term (most terms are in
    one document: hashes, paths, ids) were 25 MB of array headers at 10,000 turns.
    """

    def __init__(self, docs: list[list[str]], k1: float = K1, b: float = B):
        self.k1, self.b = k1, b
        self.postings: dict[str, array] = {}  # term -> document, count, document, count, ... (documents ascending)
        self.lens = array("I")  # per document ever added (a removed one: 0), so an index is a position
        self.n = 0  # documents in the index now
        self.avgdl = 0.0
        self._total = 0
        self.removed: set[int] = set()
        self._norm = None  # k1 * (1 - b + b * len / avgdl) per document, made when asked
        self.extend(docs)

    def extend(self, docs: list[list[str]]) -> None:
        """Add documents at the end (a warm index grows by each saved turn, never rebuilt)."""
        post = self.postings
        for d in docs:
            i = len(self.lens)
            self.lens.append(len(d))
            self._total += len(d)
            for t, f in Counter(d).items():
                pairs = post.get(t)
                if pairs is None:
                    post[t] = array("I", (i, f))
                else:
                    pairs.append(i)
                    pairs.append(f)
        self.n += len(docs)
        self.avgdl = (self._total / self.n) if self.n else 0.0
        self._norm = None

    @staticmethod
    def _at(pairs: array, i: int) -> int:
        """Where document i's pair is, or would go (a pair index: its entries are 2k and 2k + 1)."""
        lo, hi = 0, len(pairs) // 2
        while lo < hi:
            mid = (lo + hi) // 2
            if pairs[2 * mid] < i:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def remove(self, i: int, doc: list[str]) -> None:
        """Take document i (whose terms are `doc`) out: it is never found again, and the statistics
        (document count, average length, document frequencies) are those of the others."""
        if i in self.removed:
            return
        self.removed.add(i)
        for t in set(doc):
            pairs = self.postings.get(t)
            at = self._at(pairs, i) if pairs is not None else 0
            if pairs is None or 2 * at >= len(pairs) or pairs[2 * at] != i:
                continue
            del pairs[2 * at : 2 * at + 2]
            if not pairs:
                del self.postings[t]
        self._total -= self.lens[i]
        self.lens[i] = 0
        self.n -= 1
        self.avgdl = (self._total / self.n) if self.n else 0.0
        self._norm = None

    def df(self, term: str) -> int:
        pairs = self.postings.get(term)
        return 0 if pairs is None else len(pairs) // 2

    def tf(self, i: int, term: str) -> int:
        """How often document i holds term (0: not at all)."""
        pairs = self.postings.get(term)
        if pairs is None:
            return 0
        at = self._at(pairs, i)
        return pairs[2 * at + 1] if 2 * at < len(pairs) and pairs[2 * at] == i else 0

    def idf(self, term: str) -> float:
        n = self.df(term)
        return math.log(1.0 + (self.n - n + 0.5) / (n + 0.5))

    def search(self, query: list[str], top_k: int = DEFAULT_TOP_K, min_coverage: float = 0.0) -> list[Scored]:
        """Documents by descending score (ties: earlier document first), at most top_k; none
        when no document holds `min_coverage` of the query (see `score_query`)."""
        if not self.n:
            return []
        import numpy as np  # here, not at the top: a cold hook that never searches does not pay for it

        if self._norm is None:
            lens = np.array(self.lens, dtype=np.float64)
            self._norm = self.k1 * (1 - self.b + self.b * lens / (self.avgdl or 1.0))
        return score_query(query, top_k, min_coverage, self.n, self.df,
                           lambda t: np.array(self.postings[t], dtype=np.uint32),  # a copy: the array may grow later
                           self._norm, self.k1)


def score_query(query: list[str], top_k: int, min_coverage: float, n: int, df, pairs, norm, k1: float = K1) -> list[Scored]:
    """Okapi BM25 of every document holding a query term, with the query-term weight and the
    coverage gate: the one scoring rule of the in-memory index (BM25) and of any index that keeps
    the same statistics elsewhere. `df(term)`: documents holding it (0: none); `pairs(term)`: its
    postings, a uint32 array of document, count, document, count, ...; `norm`: per document
    k1 * (1 - b + b * len / avgdl), indexed by document. Best first, ties by earlier document."""
    weight = query_weights(query)
    q = list(weight)
    if not q or not n or top_k < 1:
        return []
    counts = {t: df(t) for t in q}
    idf = {t: math.log(1.0 + (n - c + 0.5) / (c + 0.5)) for t, c in counts.items()}
    # Coverage is an idf share of the query's terms. A term no record holds says the query
    # is about something memory lacks ("configure the kubernetes cluster" against records
    # that share only "tests"), so it counts; but only UNSEEN_COUNTED of them do, or a
    # pasted issue's hundred words no record has push the record it names under the floor.
    unseen = [v for t, v in idf.items() if not counts[t]][:UNSEEN_COUNTED]
    total = sum(v for t, v in idf.items() if counts[t]) + sum(unseen) or 1.0
    # One record answers a part of a long query (a pasted issue names a file, a traceback
    # and ten symptoms; the record holds the file and two of them), so the share a relevant
    # record holds falls as the query grows. The floor is there for short queries, where a
    # record holding one generic word is noise; past FLOOR_TERMS terms it shrinks.
    min_coverage *= min(1.0, FLOOR_TERMS / len(q))
    held_terms = [t for t in q if counts[t]]
    if not held_terms:
        return []
    import numpy as np

    scores = np.zeros(len(norm))
    held = np.zeros(len(norm))
    for t in held_terms:  # in query order, each term's share added as the scalar loop did
        got = pairs(t)
        ids, f = got[0::2].astype(np.intp), got[1::2].astype(np.float64)
        scores[ids] += weight[t] * idf[t] * f * (k1 + 1) / (f + norm[ids])
        held[ids] += idf[t]
    hit = np.flatnonzero(scores > 0)
    # The floor is a gate on the query, not a cut of each record: when no record holds its
    # share, memory has nothing on the request; when one does, the request is about what
    # memory holds, and the records holding less of it still rank, below (BM25 orders them).
    # Cutting each record dropped answers a short question shares one rare word with.
    cover = held[hit] / total
    if not hit.size or not (cover >= min_coverage).any():
        return []
    got = scores[hit]
    if hit.size > top_k:  # the best top_k (all of those tied with the last one kept), then ordered
        cut = np.partition(got, hit.size - top_k)[hit.size - top_k]
        keep = got >= cut
        hit, got, cover = hit[keep], got[keep], cover[keep]
    order = np.lexsort((hit, -got))[:top_k]
    return [Scored(int(i), float(s), float(c)) for i, s, c in zip(hit[order], got[order], cover[order])]


PASSAGE_DEPTH = 100  # documents whose lines are scored: the best by whole-document BM25


class Coded(NamedTuple):
    """One text's line terms as term ids (Vocabulary): every line's ids in one array, and where
    each line ends. A list of strings per line held 1.4 million small objects (96 MB) at
    10,000 turns; two integer arrays per text hold the same in a tenth of that."""

    ids: array
    ends: array

    def lines(self):
        start = 0
        for end in self.ends:
            yield self.ids[start:end]
            start = end


class Vocabulary:
    """Each term seen as a small integer, in order of first sight. A term stays when the texts
    holding it are replaced (their ids are never reused): it costs one dict entry, and a
    searcher's vocabulary grows with what its stores ever said, not with how often."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.terms: list[str] = []

    def code(self, lines: list[list[str]]) -> Coded:
        ids, known = array("I"), self.ids
        ends = array("I")
        for ts in lines:
            for t in ts:
                k = known.get(t)
                if k is None:
                    k = known[t] = len(self.terms)
                    self.terms.append(t)
                ids.append(k)
            ends.append(len(ids))
        return Coded(ids, ends)

    def flat(self, coded: Coded) -> list[str]:
        """The text's terms in order, as BM25 takes a document."""
        terms = self.terms
        return [terms[k] for k in coded.ids]


class Passages:
    """BM25 of each document's best line, with line-level statistics.

    A long record (a session, a turn with tool output) can hold the one line that answers
    a query while its other lines dilute whole-document BM25; the best line's score
    restores that signal. Only line document frequencies are kept for every line, with
    each document's line terms as integer arrays (Coded); a query scans the lines of the
    few documents it asks about for its own terms.
    """

    def __init__(self, texts: list[str], tokenize, k1: float = K1, b: float = B, line_terms=None,
                 vocab: Vocabulary | None = None):
        self.texts: list[str] = []
        self.tokenize = tokenize
        self.k1, self.b = k1, b
        self.vocab = vocab if vocab is not None else Vocabulary()
        self.df = array("I")  # per term id: how many lines hold it
        self.n = self.total = 0
        self.avgdl = 0.0
        self._docs: list[Coded] = []
        self.extend(texts, line_terms)

    def coded(self, lines) -> Coded:
        """A text's line terms in this index's vocabulary (Coded ones are taken as they are)."""
        return lines if isinstance(lines, Coded) else self.vocab.code(lines)

    def extend(self, texts: list[str], per_doc=None) -> None:
        """Add documents at the end, with their line terms (lists, or Coded) when the caller has them."""
        self.texts = self.texts + list(texts)
        if per_doc is None:
            per_doc = [line_terms(t, self.tokenize) for t in texts]
        docs = [self.coded(x) for x in per_doc]
        df = self.df
        if len(df) < len(self.vocab.terms):
            df.frombytes(bytes(df.itemsize * (len(self.vocab.terms) - len(df))))
        for doc in docs:
            for ts in doc.lines():
                if ts:
                    self.n += 1
                    self.total += len(ts)
                    for k in set(ts):
                        df[k] += 1
        self._docs.extend(docs)
        self.avgdl = self.total / self.n if self.n else 0.0

    def remove(self, i: int) -> Coded:
        """Take document i out of the line statistics (it scores nothing after); its line terms."""
        df, doc = self.df, self._docs[i]
        for ts in doc.lines():
            if ts:
                self.n -= 1
                self.total -= len(ts)
                for k in set(ts):
                    df[k] -= 1
        self.avgdl = self.total / self.n if self.n else 0.0
        self.texts[i] = ""
        self._docs[i] = _EMPTY
        return doc

    def best(self, query: list[str], docs: list[int]) -> list[tuple[int, float]]:
        """(document, best line score) for these documents, best first; zero scores left out.

        Each line is scanned for the query's terms only (no per-line index is built): at 10,000
        turns building one per document was half a warm prompt's search.
        """
        known, df = self.vocab.ids, self.df
        weighted = [(known[t], w) for t, w in query_weights(query).items() if t in known and known[t] < len(df) and df[known[t]]]
        return best_lines(weighted, lambda k: df[k], self.n, self.avgdl, ((i, self._docs[i].lines()) for i in docs), self.k1, self.b)


def best_lines(weighted: list[tuple[object, float]], df, n: int, avgdl: float, docs, k1: float = K1, b: float = B) -> list[tuple[int, float]]:
    """The best-line scoring rule of Passages, for any keeping of its statistics: `weighted` the
    query's (term key, query weight) pairs that some line holds, `df(key)` how many lines hold
    it, `n` and `avgdl` the count and mean length of lines; `docs` (document, its lines as
    sequences of term keys). (document, best line score), best first; zero scores left out."""
    if not weighted:
        return []
    q = [k for k, _ in weighted]
    idf = {k: math.log(1.0 + (n - df(k) + 0.5) / (df(k) + 0.5)) for k in q}
    avgdl = avgdl or 1.0
    order = {t: k for k, t in enumerate(q)}
    w = [qw * idf[k] * (k1 + 1) for k, qw in weighted]
    out = []
    for i, lines in docs:
        top = None
        for ts in lines:
            found = [order[t] for t in ts if t in order]
            if not found:
                continue
            counts = Counter(found)
            score = 0.0
            for k in sorted(counts):  # in query order, as the terms' shares always added up
                f = counts[k]
                score = score + w[k] * f / (f + k1 * (1 - b + b * len(ts) / avgdl))
            if top is None or score > top:
                top = score
        if top is not None and top > 0:
            out.append((i, top))
    out.sort(key=lambda x: (-x[1], x[0]))
    return out


_EMPTY = Coded(array("I"), array("I"))


def _lines(text: str) -> list[str]:
    return [x for x in text.split("\n") if x.strip()]


def line_terms(text: str, tokenize) -> list[list[str]]:
    """A text's terms line by line: what lexical_index reads (callers may keep it per text)."""
    return [tokenize(x) for x in _lines(text)]


def lexical_index(texts: list[str], tokenize, k1: float = K1, b: float = B, per_doc: list | None = None,
                  vocab: Vocabulary | None = None) -> tuple[BM25, Passages]:
    """Whole-text BM25 and best-line BM25 from one tokenization of each line.

    A term never spans a newline, so a text's terms are its lines' terms in order.
    `per_doc` is each text's line terms when the caller kept them (a warm searcher keeps
    them Coded in `vocab`, the vocabulary the Passages made then goes on with).
    """
    passages = Passages(texts, tokenize, k1, b, per_doc, vocab)
    vocab = passages.vocab
    return BM25([vocab.flat(d) for d in passages._docs], k1, b), passages


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


def blend(*parts: tuple[float, list[tuple[int, float]], float]) -> list[tuple[int, float]]:
    """Weighted sum of normalized scores, best first (ties: lower index).

    Each part is (weight, [(index, score)], floor): a score becomes (s - floor) / (best -
    floor), so the best of each list counts 1 and the floor 0. Unlike rank fusion this
    keeps margins: a weak second ranker cannot outvote a decisive first one. A list
    missing an index contributes 0 for it, so a truncated list changes little.
    """
    fused: dict[int, float] = {}
    for weight, xs, floor in parts:
        if not xs or weight == 0:
            continue
        hi = max(v for _, v in xs)
        lo = min(floor, min(v for _, v in xs))
        span = (hi - lo) or 1.0
        for i, v in xs:
            fused[i] = fused.get(i, 0.0) + weight * ((v - lo) / span)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))


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


# Pinning anchors costs swe `related` 0.04 R@5 and 0.11 MRR and gains nothing measured
# (docs/benchmarks.md), so it is off unless asked for; the reference pins 2.
DEFAULT_ANCHOR_K = 0


DEFAULT_THRESHOLD = 0.30
# The least cosine the built-in provider reports: every candidate of its depth. Fusion still
# counts only cosines at the threshold or above; the relevance decision (reuse/relevance.py)
# reads the lower ones too, judged against the prompt's Calibration.
REPORT_FLOOR = -1.0


MODES = ("lexical", "semantic", "hybrid")


FUSIONS = ("score", "rrf")


# Weights of the score fusion: whole-text BM25, best-line BM25, cosine (docs/benchmarks.md).
WEIGHTS = (0.6, 0.1, 0.3)

# A query of more than LONG_QUERY terms is a pasted issue or log, not a question: its BM25 sums
# a hundred terms, the traceback's and the template's among them, and matches every record
# that printed the same; the model reads its opening (the title and description) as a topic.
# So a long query leans on the cosine, of which OPENING_SHARE is the record's opening (its own
# request's title and description: a later issue reads like the one it follows), and on BM25
# of what each turn ran, read and changed (its tool inputs, edits included: the whole text
# keeps only their command and path). Chosen on swe `related` (dev), reported on `heldout`
# (docs/benchmarks.md, "Long queries, 6 Dec 2026"). Chat questions and LoCoMo's are far
# shorter, so they rank as before.
LONG_QUERY = 100
LONG_WEIGHTS = (0.3, 0.1, 0.6, 0.2)  # whole text, best line, cosine, tool inputs
OPENING_SHARE = 0.25


@dataclass(frozen=True, slots=True)
class Settings:
    """How to rank: the one settings object of the ranking rule, read by the local provider,
    the Searcher (egg-query and the hook) and the evaluation alike."""

    mode: str = "hybrid"
    top_k: int = DEFAULT_TOP_K
    anchor_k: int = DEFAULT_ANCHOR_K
    threshold: float = DEFAULT_THRESHOLD
    model: str | None = None  # None: the offline default
    cache_dir: str | None = None  # the shared vector cache; None: <data root>/semantic/vectors
    model_dir: str | None = None
    k1: float = K1  # BM25 term-frequency saturation
    b: float = B  # BM25 length normalization
    fusion: str = "score"  # or "rrf", reciprocal rank fusion
    weights: tuple[float, float, float] = WEIGHTS
    long_query: int = LONG_QUERY  # terms past which a query takes long_weights
    long_weights: tuple[float, float, float, float] = LONG_WEIGHTS
    opening_share: float = OPENING_SHARE  # of a long query's cosine in hybrid fusion: the record's opening windows

    def weights_for(self, query_terms: int) -> tuple[float, float, float, float]:
        """The fusion weights for a query of this many terms: whole text, best line, cosine, tool inputs."""
        return self.long_weights if query_terms > self.long_query else (*self.weights, 0.0)

    @staticmethod
    def from_config(cfg, **given) -> "Settings":
        """The ranking a config.Config asks for (mode, top_k, threshold, model, bm25_k1, bm25_b),
        the built-in rule for the rest; `given` overrides (a stage's flags, a provider's mode)."""
        kw = {"mode": cfg.mode, "top_k": cfg.top_k, "model": cfg.model, "k1": cfg.bm25_k1, "b": cfg.bm25_b}
        if cfg.threshold is not None:
            kw["threshold"] = cfg.threshold
        return Settings(**{**kw, **given})

    def fuse(self, mode: str, top_k: int, lexical, semantic, anchors, n: int, passages=(), floor: float | None = None,
             work=(), opening=(), query_terms: int = 0):
        """`fuse` with these settings (its anchors, fusion, and the weights for a query of
        `query_terms` terms; `floor`: the semantic side's own, else the threshold). `opening`:
        (index, cosine of the record's opening windows); a long query's hybrid fusion blends it
        into the cosine. The semantic mode's own ranking stays the cosine: it is what a provider
        reports, and what the relevance decision judges."""
        floor = self.threshold if floor is None else floor
        if mode == "hybrid" and opening and query_terms > self.long_query and self.opening_share:
            semantic = [(i, v) for i, v in with_opening(semantic, dict(opening), self.opening_share) if v >= floor]
        return fuse(mode, top_k, self.anchor_k, lexical, semantic, anchors, n, passages, fusion=self.fusion,
                    floor=floor, weights=self.weights_for(query_terms), work=work)


def with_opening(semantic: list[tuple[int, float]], opening: dict[int, float], share: float) -> list[tuple[int, float]]:
    """Each cosine with `share` of it taken from the record's opening (its own where none came), best first."""
    mixed = [(i, (1.0 - share) * v + share * opening.get(i, v)) for i, v in semantic]
    return sorted(mixed, key=lambda kv: (-kv[1], kv[0]))


@dataclass
class Ranked:
    """Everything one query produced, for the reply and the trace."""

    selected: list[int]
    lexical: list[tuple[int, float]] = field(default_factory=list)
    passages: list[tuple[int, float]] = field(default_factory=list)  # best-line BM25
    anchors: list[tuple[int, float]] = field(default_factory=list)
    semantic: list[tuple[int, float]] = field(default_factory=list)  # thresholded
    opening: list[tuple[int, float]] = field(default_factory=list)  # opening-window cosines: the selected records' (every semantic one's when fusion blended them)
    fused: list[tuple[int, float]] = field(default_factory=list)  # the ranking the mode used
    timings_ms: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    calibration: object = None  # background.Calibration: the prompt's cosines with unrelated turns


def fuse(mode: str, top_k: int, anchor_k: int, lexical: list[tuple[int, float]], semantic: list[tuple[int, float]],
         anchors: list[tuple[int, float]], n: int, passages: list[tuple[int, float]] = (), *, fusion: str = "score",
         floor: float = DEFAULT_THRESHOLD, weights: tuple[float, ...] = WEIGHTS,
         work: list[tuple[int, float]] = ()) -> tuple[list[int], list[tuple[int, float]]]:
    """(selection, the ranking the mode used): the one rule every caller (provider, egg-query, eval) uses.

    `floor` is the least semantic score that counts (the threshold): it maps to 0 when
    scores are normalized, so a cosine just above it adds almost nothing. `weights`: whole
    text, best line, cosine, and optionally `work` (BM25 of the turns' tool inputs, which
    only the Searcher holds: the provider protocol carries one text per candidate).
    """
    w_doc, w_line, w_sem, w_work = (*weights, 0.0)[:4]
    lex = blend((w_doc, list(lexical), 0.0), (w_line, list(passages), 0.0), (w_work, list(work), 0.0)) if (passages or work) else list(lexical)
    if mode == "lexical":
        ranking = lex
    elif mode == "semantic":
        ranking = list(semantic)
    elif fusion == "rrf":
        ranking = rrf([i for i, _ in lex], [i for i, _ in semantic])
    else:
        ranking = blend((w_doc, list(lexical), 0.0), (w_line, list(passages), 0.0), (w_sem, list(semantic), floor), (w_work, list(work), 0.0))
    return select(n, top_k, [i for i, _ in anchors[:anchor_k]], [i for i, _ in ranking]), ranking
