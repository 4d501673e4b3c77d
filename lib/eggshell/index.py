"""egg-index: the search provider, speaking the NDJSON provider protocol.

    {"index":[{"id":...,"text":...}]}                  queued for embedding; never answered, not even on error
    {"query":{"id":...,"text":...},"candidates":[...]}  answered by exactly one {"related":[i,...]}

`related` holds indices into `candidates`: unique, in range, at most --top-k, best first.
Any error in a query line is answered with {"related":[]} and explained on stderr, so a
caller reading one reply per query never falls out of step. EOF ends it with exit 0.

Modes: lexical (BM25 of the whole text plus BM25 of its best line; never loads the model),
semantic (cosine of the best window, at or above --threshold), hybrid (the default): by
default a weighted sum of the normalized scores, 0.6 whole-text BM25 + 0.1 best line +
0.3 cosine; `--fusion rrf` gives reciprocal rank fusion (k 60) of the lexical and semantic
rankings instead, as the reference does. With --anchor-k N (default 0) the best N matches
of the query's identifier-like terms are pinned first in every mode. Ids are opaque:
caching and ranking depend on the texts only. If the model fails, the lexical answer
still comes back and the encoder is restarted on the next request.

A reply may carry "scores", parallel to "related": the score each index was ranked by
(the cosine in semantic mode). egg-query fuses by them; a provider that leaves them out
is fused by rank.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import IO, Any, Callable

from . import stage
from .rank import B, BM25, K1, PASSAGE_DEPTH, Passages, anchor_ranking, blend, lexical_index, rrf, select
from .terms import terms

PROG = "egg-index"
DEFAULT_TOP_K = 8
# Pinning anchors costs swe `related` 0.04 R@5 and 0.11 MRR and gains nothing measured
# (docs/benchmarks.md), so it is off unless asked for; the reference pins 2.
DEFAULT_ANCHOR_K = 0
DEFAULT_THRESHOLD = 0.30
MODES = ("lexical", "semantic", "hybrid")
FUSIONS = ("score", "rrf")
# Weights of the score fusion: whole-text BM25, best-line BM25, cosine (docs/benchmarks.md).
WEIGHTS = (0.6, 0.1, 0.3)


@dataclass(frozen=True, slots=True)
class Settings:
    mode: str = "hybrid"
    top_k: int = DEFAULT_TOP_K
    anchor_k: int = DEFAULT_ANCHOR_K
    threshold: float = DEFAULT_THRESHOLD
    model: str | None = None  # None: the offline default
    cache_dir: str | None = None  # the shared vector cache; None: <data root>/semantic/vectors
    model_dir: str | None = None
    k1: float = K1  # BM25 term-frequency saturation
    b: float = B  # BM25 length normalization
    fusion: str = "score"  # or "rrf", the reference's rule
    weights: tuple[float, float, float] = WEIGHTS


@dataclass
class Ranked:
    """Everything one query produced, for the reply and the trace."""

    selected: list[int]
    lexical: list[tuple[int, float]] = field(default_factory=list)
    passages: list[tuple[int, float]] = field(default_factory=list)  # best-line BM25
    anchors: list[tuple[int, float]] = field(default_factory=list)
    semantic: list[tuple[int, float]] = field(default_factory=list)  # thresholded
    fused: list[tuple[int, float]] = field(default_factory=list)  # the ranking the mode used
    timings_ms: dict[str, float] = field(default_factory=dict)
    error: str | None = None


def _items(x: Any) -> list[dict] | None:
    if not isinstance(x, list) or not all(isinstance(i, dict) and isinstance(i.get("text"), str) for i in x):
        return None
    return x


def fuse(mode: str, top_k: int, anchor_k: int, lexical: list[tuple[int, float]], semantic: list[tuple[int, float]],
         anchors: list[tuple[int, float]], n: int, passages: list[tuple[int, float]] = (), *, fusion: str = "score",
         floor: float = DEFAULT_THRESHOLD, weights: tuple[float, float, float] = WEIGHTS) -> tuple[list[int], list[tuple[int, float]]]:
    """(selection, the ranking the mode used): the one rule every caller (provider, egg-query, eval) uses.

    `floor` is the least semantic score that counts (the threshold): it maps to 0 when
    scores are normalized, so a cosine just above it adds almost nothing.
    """
    w_doc, w_line, w_sem = weights
    lex = blend((w_doc, list(lexical), 0.0), (w_line, list(passages), 0.0)) if passages else list(lexical)
    if mode == "lexical":
        ranking = lex
    elif mode == "semantic":
        ranking = list(semantic)
    elif fusion == "rrf":
        ranking = rrf([i for i, _ in lex], [i for i, _ in semantic])
    else:
        ranking = blend((w_doc, list(lexical), 0.0), (w_line, list(passages), 0.0), (w_sem, list(semantic), floor))
    return select(n, top_k, [i for i, _ in anchors[:anchor_k]], [i for i, _ in ranking]), ranking


class Provider:
    """The ranking behind egg-index, usable in-process (the hook path) or as a filter."""

    def __init__(self, settings: Settings, data_root: str | None = None, log: Callable[[str], None] | None = None):
        self.settings = settings
        self.data_root = data_root
        self.log = log or (lambda m: stage.warn(PROG, m))
        self._semantic = None
        self._bm25: BM25 | None = None
        self._passages: Passages | None = None
        self._bm25_texts: list[str] | None = None
        self.query_embed_limit: int | None = None  # None: semantic.QUERY_EMBED_LIMIT
        self.threads: int | None = None  # the model's threads (None: onnxruntime's default, every core)

    @property
    def uses_model(self) -> bool:
        return self.settings.mode != "lexical"

    def _index(self):
        if self._semantic is None:
            from .embed import Encoder
            from .semantic import SemanticIndex

            s = self.settings
            enc = Encoder(s.model, model_dir=s.model_dir, threads=self.threads) if s.model else Encoder(model_dir=s.model_dir, threads=self.threads)
            root = s.cache_dir or os.path.join(self.data_root or ".", "semantic", "vectors")
            self._semantic = SemanticIndex(enc, root, self.log)
            if self.query_embed_limit is not None:
                self._semantic.query_embed_limit = self.query_embed_limit
        return self._semantic

    @property
    def model_id(self) -> str | None:
        return self._semantic.encoder.model_id if self._semantic is not None else None

    def index(self, items: list[dict], progress=None) -> int:
        """Embed and cache the texts' windows now, so a later query only embeds itself."""
        if not self.uses_model or not items:
            return 0
        try:
            return len(self._index().ensure([i["text"] for i in items], progress))
        except Exception as e:
            self._failed("index", e)
            return 0

    def _failed(self, what: str, e: Exception) -> None:
        self.log("%s: the embedding model failed (%s: %s); answering lexically, the encoder restarts on the next request" % (what, type(e).__name__, e))
        self._semantic = None

    def rank(self, query: str, texts: list[str]) -> Ranked:
        s = self.settings
        t0 = time.perf_counter()
        if s.mode == "semantic" and s.anchor_k == 0:
            lexical, passages, anchors = [], [], []  # nothing lexical can change this answer: skip the work
        else:
            lexical, passages, anchors = self._lexical(query, texts)
        t1 = time.perf_counter()
        semantic: list[tuple[int, float]] = []
        error = None
        if self.uses_model and texts:
            try:
                sc = self._index().scores(query, texts)
                semantic = sorted(((j, float(v)) for j, v in enumerate(sc) if v >= s.threshold), key=lambda x: (-x[1], x[0]))
            except Exception as e:
                error = "%s: %s" % (type(e).__name__, e)
                self._failed("query", e)
        t2 = time.perf_counter()
        mode = s.mode if error is None else "lexical"
        selected, fused = fuse(mode, s.top_k, s.anchor_k, lexical, semantic, anchors, len(texts), passages,
                               fusion=s.fusion, floor=s.threshold, weights=s.weights)
        t3 = time.perf_counter()
        ms = lambda a, b: round((b - a) * 1000, 3)  # noqa: E731
        return Ranked(selected, lexical, passages, anchors, semantic, fused, {"lexical": ms(t0, t1), "semantic": ms(t1, t2), "fuse": ms(t2, t3), "total": ms(t0, t3)}, error)

    def _lexical(self, query: str, texts: list[str]):
        """BM25, best-line and anchor rankings; the indexes are kept while the candidates stay the same (a warm provider)."""
        s = self.settings
        if self._bm25_texts != texts:
            self._bm25, self._passages = lexical_index(list(texts), terms, s.k1, s.b)
            self._bm25_texts = list(texts)
        q = terms(query)
        lex = [(x.index, x.score) for x in self._bm25.search(q, len(texts))]
        lines = self._passages.best(q, [i for i, _ in lex[:PASSAGE_DEPTH]])
        anc = [(x.index, x.score) for x in anchor_ranking(self._bm25, q, max(s.anchor_k, 0) and len(texts))]
        return lex, lines, anc

    def trace_record(self, r: Ranked, candidates: list[dict]) -> dict:
        cut = lambda xs: [[i, round(v, 6)] for i, v in xs]  # noqa: E731
        return {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "mode": self.settings.mode,
            "model": self.model_id if self.uses_model else None,
            "candidate_count": len(candidates),
            "candidate_ids": [c.get("id") for c in candidates],
            "lexical": cut(r.lexical),
            "passages": cut(r.passages),
            "anchors": cut(r.anchors),
            "semantic": cut(r.semantic),
            "fused": cut(r.fused),
            "selected": r.selected,
            "timings_ms": r.timings_ms,
            "error": r.error,
        }


def append_trace(path: str, record: dict, log: Callable[[str], None]) -> None:
    """One line per query; best effort (a trace failure never fails the query)."""
    import ujson

    try:
        from .journal import append_whole
        from .paths import private_dir

        private_dir(os.path.dirname(os.path.abspath(path)))
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            append_whole(fd, (ujson.dumps(record, ensure_ascii=False, escape_forward_slashes=False) + "\n").encode("utf-8"), path, sync=False)
        finally:
            os.close(fd)
    except OSError as e:
        log("cannot write the trace %s: %s" % (path, e))


def run(provider: Provider, lines: IO[str], out: IO[str], trace: str | None = None, name: str = "<stdin>") -> int:
    for n, obj in stage.read_ndjson(lines, name):
        if isinstance(obj, dict) and "index" in obj and "query" not in obj:
            items = _items(obj["index"])
            if items is None:
                stage.warn(PROG, '%s:%d: "index" must be a list of {"id":...,"text":...}; ignored' % (name, n))
            else:
                provider.index(items)
            continue
        q = obj.get("query") if isinstance(obj, dict) else None
        cands = _items(obj.get("candidates")) if isinstance(obj, dict) else None
        if isinstance(obj, stage.InputError) or not isinstance(q, dict) or not isinstance(q.get("text"), str) or cands is None:
            why = str(obj) if isinstance(obj, stage.InputError) else '%s:%d: expected {"query":{"text":...},"candidates":[{"id":...,"text":...},...]}' % (name, n)
            stage.warn(PROG, why + '; answered {"related":[]}')
            stage.write({"related": []}, out)
            continue
        try:
            r = provider.rank(q["text"], [c["text"] for c in cands])
        except Exception as e:  # never leave a query unanswered
            stage.warn(PROG, "%s:%d: %s: %s; answered {\"related\":[]}" % (name, n, type(e).__name__, e))
            stage.write({"related": []}, out)
            continue
        if trace:
            append_trace(trace, provider.trace_record(r, cands), provider.log)
        score = dict(r.fused)
        stage.write({"related": r.selected, "scores": [score.get(i, 0.0) for i in r.selected]}, out)  # full precision: egg-query must fuse exactly as in-process
    return 0


def related(query: str, candidates: list[dict], top_k: int = DEFAULT_TOP_K) -> list[int]:
    """Lexical indices of the candidates that match the query, best first (no model)."""
    return Provider(Settings(mode="lexical", top_k=top_k)).rank(query, [c["text"] for c in candidates]).selected


def main(argv: list[str]) -> int:
    from .paths import from_env

    p = stage.parser(PROG, "Rank candidates against queries (the Eggshell search-provider protocol).", epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--mode", choices=MODES, default="hybrid", help="ranking mode (default %(default)s)")
    p.add_argument("--top-k", type=stage.positive_int, default=DEFAULT_TOP_K, help="most indices per reply (default %(default)s)")
    p.add_argument("--anchor-k", type=int, default=DEFAULT_ANCHOR_K, help="anchor matches pinned first (default %(default)s)")
    p.add_argument("--fusion", choices=FUSIONS, default="score",
                   help="hybrid rule: score (weighted normalized scores) or rrf (reciprocal rank fusion, k 60) (default %(default)s)")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="least cosine for a semantic match (default %(default)s)")
    p.add_argument("--model", help="embedding model (default: the offline all-MiniLM-L6-v2)")
    p.add_argument("--cache", metavar="DIR", help="vector cache (default: $EGGSHELL_DATA_ROOT/semantic/vectors)")
    p.add_argument("--k1", type=float, default=K1, help="BM25 k1 (default %(default)s)")
    p.add_argument("--b", type=float, default=B, help="BM25 b (default %(default)s)")
    p.add_argument("--trace", metavar="FILE", help="append one JSON line per query with every ranking, scores and timings")
    a = p.parse_args(argv)
    if a.anchor_k < 0:
        p.error("--anchor-k must be 0 or more")
    if not -1.0 <= a.threshold <= 1.0:
        p.error("--threshold must be a cosine from -1 to 1")
    if a.k1 < 0 or not 0 <= a.b <= 1:
        p.error("--k1 must be 0 or more and --b from 0 to 1")
    settings = Settings(a.mode, a.top_k, a.anchor_k, a.threshold, a.model, a.cache, k1=a.k1, b=a.b, fusion=a.fusion)
    provider = Provider(settings, from_env().data_root)
    return run(provider, sys.stdin, sys.stdout, a.trace)
