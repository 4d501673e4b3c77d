"""Retrieval quality on public sets (Recall@5, Recall@10, MRR per ranking mode), and what a new chat is handed.

    python tests/eval/eggeval.py [DATA] [--sets locomo-session,locomo-turn,swe,handoff]
                            [--modes lexical,semantic,hybrid] [--text full] [--threshold T]
                            [--limit N] [--cache DIR] [--hosts codex,claude,opencode,gemini]

DATA holds `locomo10.json` and `swe-msa-verified.jsonl` (see its README.md). Every ranking
goes through the product: `search.local.Provider.rank` (BM25, anchors, the embedding model and
the shared vector cache, the fusion, `select`). One `rank` call per query with the
threshold at -1 returns the lexical, best-line, anchor and full semantic rankings; each mode and
each swept threshold is then `search.rank.fuse` of those lists, the rule `rank` itself applies
(the first queries of every set are re-ranked by a `Provider` with the real settings to
prove the two agree). `terms()` is memoized during a run, so a candidate is tokenized once
instead of once per query; it is pure, so rankings do not change.

Sets:
  locomo-session  LoCoMo questions over their own conversation's sessions
  locomo-turn     the same questions over the conversation's dialog turns
  swe             swe-msa-verified queries over all 500 recorded runs; `related` is the
                  test, the `crossagent` sets are sanity checks
  heldout         the swe queries over 500 runs of another agent and model (OpenHands with
                  Claude 3.5 Sonnet), which no setting was chosen on: built by
                  tests/eval/convert_heldout.py into HELDOUT (default: DATA/../../eval-data/
                  heldout.jsonl); reported as it comes out
  handoff         what a new chat is given: the 500 runs written as turns into a project's
                  store by the product's writer, each `related` query (and 40 LoCoMo
                  questions, unrelated) answered by the prompt hook's own code; reports the
                  share naming a gold file of the later fix, size, data share, and how many
                  unrelated questions get a handoff (--limit N: the first N of each)
  dayone          issue 29's day one (tests/eval/dayone.py): each related pair with a
                  hand-written chat follow-up (tests/eval/dayone-chat.jsonl) in a store of
                  its prior run alone, then with 4 and 49 unrelated runs; asked in full, as
                  its title and as the chat follow-up, plus LoCoMo and off-repository coding
                  questions at every size; reports the share handed the prior run's key per
                  size, form and half (choose / held-out) (--limit N: the first N scenarios);
                  with --hosts, the same stores again as each host's hooks record them
                  (tests/eval/hostroute.py), each host's table beside the egg-save route

Metrics: Recall@k is the share of a query's relevant candidates in the top k, averaged
over queries; MRR is the mean of 1/rank of the first relevant candidate within the top 10
(0 when none is there). A query keeps the product's top_k of 10.

--threshold, --anchor-k, --k1, --b, --fusion and --weights are the product's own settings
(search.rank.Settings); `--fusion rrf --anchor-k 2` measures the reference's rule.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterable, Sequence

if __name__ == "__main__":  # run as a script from a checkout: the product is ../../lib
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "lib"))

from eggshell.search import local as local_mod, rank as rank_mod  # noqa: E402
from eggshell.search.local import Provider  # noqa: E402
from eggshell.search.rank import MODES, RRF_K, Settings  # noqa: E402
from eggshell.stages import common as stage  # noqa: E402
from eggshell.search.terms import terms as query_terms  # noqa: E402
from eggshell.graph.records import OUTPUT_CAP, RECORD_CAP, ToolView, TurnView, command_of, searchable_text
from eggshell.graph.turns import normalize_output, work_text

PROG = "eggeval"
SETS = ("locomo-session", "locomo-turn", "swe", "handoff", "heldout", "dayone")
HELDOUT_FILE = "heldout.jsonl"
TOP_K = 10
MRR_CUTOFF = 10
KS = (5, 10)
SWEEP = (0.20, 0.25, 0.30, 0.35, 0.40)
CHECKED = 10  # queries per set re-ranked by a Provider with the real settings
LOCOMO_FILE = "locomo10.json"
SWE_FILE = "swe-msa-verified.jsonl"
SWE_GROUPS = ("related", "crossagent", "crossagent-title")

# How a swe record becomes searchable text. `full` is the product's own
# records.searchable_text; the others use its pieces (command_of, OUTPUT_CAP, RECORD_CAP).
SWE_TEXTS = (
    "prompt",
    "prompt+answer",
    "prompt+commands",
    "prompt+answer+commands",
    "prompt+answer+paths",
    "prompt+answer+commands+outputs",
    "full",
    "full-nocap",
)
# How a LoCoMo session or turn becomes text: "speaker: text" lines, with the session's
# date line first (`date`) and shared images' captions (`+image`).
LOCOMO_TEXTS = ("plain", "date", "image", "date+image")
DEFAULT_SWE_TEXT = "full"
DEFAULT_LOCOMO_TEXT = "date+image"  # what was said, when, and what a shared photo showed


# -- metrics -----------------------------------------------------------------------------


def recall_at(ranked: Sequence[int], relevant: Iterable[int], k: int) -> float:
    """Share of the relevant items among the first k ranked (0 when nothing is relevant)."""
    rel = set(relevant)
    if not rel:
        return 0.0
    return len(rel.intersection(ranked[:k])) / len(rel)


def reciprocal_rank(ranked: Sequence[int], relevant: Iterable[int], cutoff: int = MRR_CUTOFF) -> float:
    """1/rank of the first relevant item within the cutoff, else 0."""
    rel = set(relevant)
    for r, i in enumerate(ranked[:cutoff], 1):
        if i in rel:
            return 1.0 / r
    return 0.0


@dataclass(frozen=True, slots=True)
class Score:
    n: int
    recall: dict[int, float]  # k -> mean Recall@k
    mrr: float


def score(rankings: Sequence[Sequence[int]], relevants: Sequence[Iterable[int]], ks: Sequence[int] = KS, cutoff: int = MRR_CUTOFF) -> Score:
    """Mean Recall@k for each k and MRR over queries."""
    n = len(rankings)
    if n != len(relevants):
        raise ValueError("rankings and relevants differ in length")
    if not n:
        return Score(0, {k: 0.0 for k in ks}, 0.0)
    rels = [set(r) for r in relevants]
    rec = {k: sum(recall_at(r, rel, k) for r, rel in zip(rankings, rels)) / n for k in ks}
    mrr = sum(reciprocal_rank(r, rel, cutoff) for r, rel in zip(rankings, rels)) / n
    return Score(n, rec, mrr)


# -- data --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    """One query: searched within pool `pool`, less the `drop` indices; `relevant` are pool indices."""

    id: str
    text: str
    pool: int
    relevant: frozenset[int]
    group: str = "all"
    category: str = ""
    drop: frozenset[int] = frozenset()


@dataclass
class Task:
    name: str  # locomo-session, locomo-turn, swe
    text: str  # the composition of candidate texts
    pools: list[list[str]]
    cases: list[Case]
    skipped: dict[str, int] = field(default_factory=dict)  # why -> how many queries
    # The recorded turn behind each pool text, where there is one (swe): its fields (request,
    # answer, commands, outputs) for the per-field trial. Elsewhere a text stands as a turn's request.
    turns: list[list[TurnView]] | None = None

    def views(self, pool: int) -> list[TurnView]:
        """The pool's candidates as the turns a Searcher indexes, id = pool index; each one's
        searchable_text is its pool text (the swe record's own, or the text as a request)."""
        if self.turns is not None and self.text == DEFAULT_SWE_TEXT:
            return [dataclasses.replace(v, id=str(j)) for j, v in enumerate(self.turns[pool])]
        return [TurnView(str(j), "eval", str(j), "", t, None, (), "", "") for j, t in enumerate(self.pools[pool])]


_EVIDENCE = re.compile(r"(?:D\W*)?(\d+)\s*:\s*(\d+)")


def parse_evidence(items: Any) -> list[tuple[int, int]]:
    """(session, turn) pairs from LoCoMo evidence ids, leniently.

    Well-formed ids are `D<session>:<turn>`; seen in the data: `D:11:26`, `D8:6; D9:17`,
    `D9:1 D4:4 D4:6`, `D30:05` (leading zero) and a bare `D`. Unusable ids are dropped;
    repeats are kept once, in order.
    """
    if isinstance(items, str):
        items = [items]
    if not isinstance(items, list):
        return []
    out: list[tuple[int, int]] = []
    for it in items:
        if not isinstance(it, str):
            continue
        for m in _EVIDENCE.finditer(it):
            pair = (int(m.group(1)), int(m.group(2)))
            if pair not in out:
                out.append(pair)
    return out


def _dia_id(d: Any) -> tuple[int, int] | None:
    ids = parse_evidence(d)
    return ids[0] if len(ids) == 1 else None


def locomo_line(turn: dict, text: str) -> str:
    line = "%s: %s" % (turn.get("speaker", ""), turn.get("text", ""))
    if "image" in text.split("+") and isinstance(turn.get("blip_caption"), str):
        line += " [shares an image: %s]" % turn["blip_caption"]
    return line


def load_locomo(path: str, text: str = DEFAULT_LOCOMO_TEXT) -> tuple[Task, Task]:
    """(session task, turn task): one pool per conversation."""
    if text not in LOCOMO_TEXTS:
        raise ValueError("unknown LoCoMo text %r (one of %s)" % (text, ", ".join(LOCOMO_TEXTS)))
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    dated = "date" in text.split("+")
    sess_task = Task("locomo-session", text, [], [])
    turn_task = Task("locomo-turn", text, [], [])
    skipped: dict[str, int] = {}
    for ci, conv in enumerate(data):
        c = conv.get("conversation", {})
        nums = sorted(int(m.group(1)) for k in c if (m := re.fullmatch(r"session_(\d+)", k)) and isinstance(c[k], list))
        sess_texts: list[str] = []
        sess_index: dict[int, int] = {}
        turn_texts: list[str] = []
        turn_index: dict[tuple[int, int], int] = {}
        for s in nums:
            date = c.get("session_%d_date_time" % s)
            head = [date] if dated and isinstance(date, str) and date.strip() else []
            lines = []
            for t in c["session_%d" % s]:
                if not isinstance(t, dict):
                    continue
                line = locomo_line(t, text)
                lines.append(line)
                did = _dia_id(t.get("dia_id"))
                if did is not None and did not in turn_index:
                    turn_index[did] = len(turn_texts)
                    turn_texts.append("\n".join(head + [line]))
            sess_index[s] = len(sess_texts)
            sess_texts.append("\n".join(head + lines))
        sess_task.pools.append(sess_texts)
        turn_task.pools.append(turn_texts)
        for qi, qa in enumerate(conv.get("qa", [])):
            q = qa.get("question")
            if not isinstance(q, str) or not q.strip():
                skipped["no question"] = skipped.get("no question", 0) + 1
                continue
            ev = [e for e in parse_evidence(qa.get("evidence")) if e in turn_index]
            if not ev:
                why = "no evidence" if not qa.get("evidence") else "no usable evidence id"
                skipped[why] = skipped.get(why, 0) + 1
                continue
            cat = str(qa.get("category", ""))
            qid = "%s#%d" % (conv.get("sample_id", ci), qi)
            sess_task.cases.append(Case(qid, q, ci, frozenset(sess_index[s] for s, _ in ev), category=cat))
            turn_task.cases.append(Case(qid, q, ci, frozenset(turn_index[e] for e in ev), category=cat))
    sess_task.skipped = dict(skipped)
    turn_task.skipped = dict(skipped)
    return sess_task, turn_task


def swe_calls(rec: dict) -> list[dict]:
    """A swe record's tool calls as a turn record's `tools` (turns.py): name, id, input, output."""
    return [{"name": t.get("name") or "Bash", "id": str(n), "input": t.get("input"), "output": t.get("output")}
            for n, t in enumerate(rec.get("tools") or [])]


def swe_view(rec: dict) -> TurnView:
    """A swe record as the TurnView the product would read back for it."""
    tools = [ToolView(work_text(t["name"], t["input"]), normalize_output(t["output"]), "", t["id"]) for t in swe_calls(rec)]
    rid = str(rec.get("id", ""))
    return TurnView(rid, rid, "1", "", rec.get("prompt") or "", rec.get("answer") or None, tuple(tools), "", "")


_PATH = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+\.[A-Za-z][\w]{0,7}\b|(?<![\w/.-])(?:[\w.-]+/)+[\w.-]+")


def paths_of(texts: Iterable[str]) -> list[str]:
    """File-path-like tokens (a/b.py, setup.cfg, src/pkg/) in order of first appearance."""
    out: dict[str, None] = {}
    for t in texts:
        for m in _PATH.finditer(t):
            p = m.group().rstrip(".")
            if ("/" in p or "." in p) and not p.replace(".", "").isdigit():
                out.setdefault(p, None)
    return list(out)


def swe_text(view: TurnView, text: str) -> str:
    """The searchable text of a swe record under one composition (see SWE_TEXTS)."""
    if text == "full":
        return searchable_text(view)
    if text not in SWE_TEXTS:
        raise ValueError("unknown swe text %r (one of %s)" % (text, ", ".join(SWE_TEXTS)))
    cmds = [command_of(t.work) for t in view.tools]
    parts = [view.prompt]
    if text == "full-nocap":
        parts.append(view.answer or "")
        for c, t in zip(cmds, view.tools):
            parts += [c, t.outcome[:OUTPUT_CAP]]
        return "\n".join(p for p in parts if p)
    want = set(text.split("+"))
    if "answer" in want:
        parts.append(view.answer or "")
    if "commands" in want:
        parts += cmds
    if "paths" in want:
        parts.append(" ".join(paths_of([view.answer or "", *cmds, *(t.outcome[:OUTPUT_CAP] for t in view.tools)])))
    if "outputs" in want:
        parts += [t.outcome[:OUTPUT_CAP] for t in view.tools]
    return "\n".join(p for p in parts if p)[:RECORD_CAP]


def read_swe(path: str) -> tuple[list[dict], list[dict]]:
    """(records, queries) of a swe-msa-verified file, in file order."""
    records: list[dict] = []
    queries: list[dict] = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            o = json.loads(line)
            kind = o.get("kind") if isinstance(o, dict) else None
            if kind == "record":
                records.append(o)
            elif kind == "query":
                queries.append(o)
    return records, queries


def load_swe(path: str, text: str = DEFAULT_SWE_TEXT, name: str = "swe") -> Task:
    """One pool of every record; a query's same_issue records are dropped from its ranking."""
    records, queries = read_swe(path)
    where = {str(r.get("id")): i for i, r in enumerate(records)}
    views = [swe_view(r) for r in records]
    task = Task(name, text, [[swe_text(v, text) for v in views]], [], turns=[views])
    for q in queries:
        group = str(q.get("set", ""))
        rel = [where[r] for r in q.get("relevant") or [] if r in where]
        if not rel or not isinstance(q.get("text"), str):
            task.skipped["no known relevant record"] = task.skipped.get("no known relevant record", 0) + 1
            continue
        drop = frozenset(where[r] for r in q.get("same_issue") or [] if r in where) - set(rel)
        task.cases.append(Case(str(q.get("id")), q["text"], 0, frozenset(rel), group=group, drop=drop))
    order = {g: i for i, g in enumerate(SWE_GROUPS)}
    task.cases.sort(key=lambda c: order.get(c.group, len(order)))  # stable: file order within a set
    return task


# -- ranking -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rule:
    """The fusion settings a run measures (the product's unless options say otherwise)."""

    fusion: str = "score"
    weights: tuple[float, float, float] = rank_mod.WEIGHTS

    def describe(self) -> str:
        if self.fusion == "rrf":
            return "fusion rrf (k %d)" % RRF_K
        return ("fusion score, weights %g/%g/%g (whole text / best line / cosine); past %d query terms %g/%g/%g/%g (+ tool inputs),"
                " %g of the cosine the record's opening" % (*self.weights, rank_mod.LONG_QUERY, *rank_mod.LONG_WEIGHTS, rank_mod.OPENING_SHARE))


@dataclass
class Run:
    """Rankings (pool indices, best first) per (mode, threshold), and timings."""

    task: Task
    rankings: dict[tuple[str, float], list[list[int]]]
    cases: list[Case]
    index_s: float = 0.0
    indexed: int = 0
    embedded_windows: int = 0
    query_ms: list[float] = field(default_factory=list)
    semantic_ms: list[float] = field(default_factory=list)
    checked: int = 0
    mismatches: int = 0
    errors: int = 0
    route: str = "provider"


class Progress:
    def __init__(self, label: str, every: float = 5.0):
        self.label, self.every, self.last = label, every, time.monotonic()

    def __call__(self, done: int, total: int, what: str = "queries", force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= self.every or done == total:
            self.last = now
            print("%s: %s: %d/%d %s" % (PROG, self.label, done, total, what), file=sys.stderr, flush=True)


def _setup(task: Task, modes: Sequence[str], threshold: float, sweep: Sequence[float], limit: int | None,
           log: Callable[[str], None] | None):
    """What both routes start from: the label, the cases, whether the model runs, the thresholds,
    and a log that also keeps each failure (a run with any is refused)."""
    uses_model = any(m != "lexical" for m in modes)
    failures: list[str] = []

    def note(m: str) -> None:
        failures.append(m)
        (log or (lambda x: print("%s: %s" % (PROG, x), file=sys.stderr, flush=True)))(m)

    thresholds = sorted(set([threshold, *sweep])) if uses_model else [threshold]
    return "%s [%s]" % (task.name, task.text), _limited(task.cases, limit), uses_model, thresholds, failures, note


def index_into(out: "Run", provider: Provider, items: list[dict], label: str, failures: list[str]) -> None:
    """Embed every pooled text through the provider, with progress; the time and counts go on `out`."""
    prog = Progress(label)
    seen = [0]

    def on_embed(done: int, total: int) -> None:
        seen[0] = total
        prog(done, total, "new windows embedded")

    print("%s: %s: indexing %d texts" % (PROG, label, len(items)), file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    got = provider.index(items, on_embed)
    out.index_s, out.indexed, out.embedded_windows = time.perf_counter() - t0, got, seen[0]
    if got != len(items) or failures:
        raise RuntimeError("indexing failed: %s" % "; ".join(failures or ["%d of %d texts indexed" % (got, len(items))]))


def run_task(task: Task, modes: Sequence[str], threshold: float, sweep: Sequence[float], cache: str, data_root: str | None,
             limit: int | None = None, rule: Rule = Rule(), anchor_k: int = rank_mod.DEFAULT_ANCHOR_K,
             k1: float = rank_mod.K1, b: float = rank_mod.B,
             model: str | None = None, log: Callable[[str], None] | None = None, dump: IO[str] | None = None) -> Run:
    label, cases, uses_model, thresholds, failures, note = _setup(task, modes, threshold, sweep, limit, log)

    def provider(mode: str, t: float) -> Provider:
        return Provider(Settings(mode=mode, top_k=TOP_K, anchor_k=anchor_k, threshold=t, model=model, cache_dir=cache, k1=k1, b=b,
                                 fusion=rule.fusion, weights=rule.weights), data_root=data_root, log=note)

    main = provider("hybrid" if uses_model else "lexical", -1.0 if uses_model else threshold)
    out = Run(task, {}, cases)
    if uses_model:
        used = sorted({c.pool for c in cases})
        items = [{"id": str(n), "text": t} for n, t in enumerate(dict.fromkeys(t for p in used for t in task.pools[p]))]
        index_into(out, main, items, label, failures)
    keys = [(m, t) for m in modes for t in (thresholds if m != "lexical" else [threshold])]
    out.rankings = {k: [] for k in keys}
    checkers = {(m, threshold): provider(m, threshold) for m in modes}
    prog = Progress(label)
    for qn, case in enumerate(cases):
        pool = task.pools[case.pool]
        if case.drop:
            idx = [i for i in range(len(pool)) if i not in case.drop]
            texts = [pool[i] for i in idx]
        else:
            idx, texts = list(range(len(pool))), pool
        t0 = time.perf_counter()
        r = main.rank(case.text, texts)
        out.query_ms.append((time.perf_counter() - t0) * 1000)
        out.semantic_ms.append(r.timings_ms.get("semantic", 0.0))
        if r.error:
            out.errors += 1
            raise RuntimeError("%s: query %s: %s" % (label, case.id, r.error))
        lexical, anchors = r.lexical, r.anchors
        if dump is not None:
            back = lambda xs: [[idx[i], round(v, 6)] for i, v in xs]  # noqa: E731
            dump.write(json.dumps({"set": task.name, "text": task.text, "id": case.id, "group": case.group, "category": case.category,
                                   "pool": case.pool, "relevant": sorted(case.relevant), "lexical": back(r.lexical),
                                   "passages": back(r.passages), "anchors": back(r.anchors), "semantic": back(r.semantic)}) + "\n")
        for mode, t in keys:
            sem = [(i, s) for i, s in r.semantic if s >= t]
            sel = main.settings.fuse(mode, TOP_K, lexical, sem, anchors, len(texts), r.passages, floor=t,
                                     opening=r.opening, query_terms=len(query_terms(case.text)))[0]
            out.rankings[(mode, t)].append([idx[i] for i in sel])
        if qn < CHECKED:
            for (mode, t), p in checkers.items():
                out.checked += 1
                if [idx[i] for i in p.rank(case.text, texts).selected] != out.rankings[(mode, t)][-1]:
                    out.mismatches += 1
        prog(qn + 1, len(cases))
    return out


# -- the path users run: search.searcher.Searcher ----------------------------------------
#
# The hook and egg-query rank through a Searcher: BM25 with the coverage floor, best line, the
# semantic side behind the matcher seam, Settings.fuse. The searcher route measures that path.
# The semantic side is the hook's own (matcher.in_process_for); its cosines are computed once
# per query, at threshold -1, and every swept threshold reads them (a thresholded list is a
# prefix of the full one); the first queries are checked against the real semantic side.

ROUTES = ("searcher", "provider")
BASELINES = ("bm25", "fields")  # plain Okapi BM25 of the record text; BM25 per field, blended


_WORD = re.compile(r"\w+")


def plain_terms(text: str) -> list[str]:
    """The plain tokenizer of the baseline: lowercased word characters, no stemming."""
    return _WORD.findall(text.lower())


def okapi(docs: list[list[str]], query: list[str], k1: float = 1.2, b: float = 0.75) -> list[tuple[int, float]]:
    """Plain Okapi BM25 (idf ln(1 + (N - df + 0.5) / (df + 0.5))), written apart from the
    product's on purpose: the bar the product's lexical ranking must clear."""
    from collections import Counter

    n = len(docs)
    if not n:
        return []
    tfs = [Counter(d) for d in docs]
    avg = sum(len(d) for d in docs) / n or 1.0
    df: Counter[str] = Counter()
    for tf in tfs:
        df.update(tf.keys())
    q = list(dict.fromkeys(query))
    out = []
    for i, tf in enumerate(tfs):
        sc = 0.0
        for t in q:
            f = tf.get(t)
            if f:
                idf = math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5))
                sc += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(docs[i]) / avg))
        if sc > 0:
            out.append((i, sc))
    out.sort(key=lambda x: (-x[1], x[0]))
    return out


FIELDS = ("request", "answer", "commands", "outputs")


def fields_of(v: TurnView) -> tuple[str, str, str, str]:
    """A turn's searchable text split into the four fields the per-field trial scores apart."""
    return (v.prompt, v.answer or "", "\n".join(command_of(t.work) for t in v.tools),
            "\n".join(t.outcome[:OUTPUT_CAP] for t in v.tools))


class FieldIndex:
    """The per-field trial: the product's BM25 (its terms, k1, b) over each field apart, each
    list normalized by its best and blended with equal weights (rank.blend)."""

    def __init__(self, views: list[TurnView], k1: float, b: float):
        from eggshell.search.terms import terms

        self.terms = terms
        self.indexes = [rank_mod.BM25([list(terms(f[k])) for f in map(fields_of, views)], k1, b) for k in range(len(FIELDS))]

    def rank(self, text: str, n: int) -> list[tuple[int, float]]:
        q = list(self.terms(text))
        w = 1.0 / len(self.indexes)
        return rank_mod.blend(*((w, [(x.index, x.score) for x in ix.search(q, n)], 0.0) for ix in self.indexes))


def run_task_searcher(task: Task, modes: Sequence[str], threshold: float, sweep: Sequence[float], cache: str,
                      data_root: str | None, limit: int | None = None, rule: Rule = Rule(),
                      anchor_k: int = rank_mod.DEFAULT_ANCHOR_K, k1: float = rank_mod.K1, b: float = rank_mod.B,
                      model: str | None = None, min_coverage: float | None = None, log: Callable[[str], None] | None = None) -> Run:
    """Every mode and swept threshold ranked by `Searcher.search` (the hook's and egg-query's
    call, with the coverage floor), plus the baselines; the first queries re-ranked with the
    hook's real semantic side must agree."""
    from eggshell.config import DEFAULT_MIN_COVERAGE
    from eggshell.search import matcher
    from eggshell.search.searcher import Searcher, SemanticList, semantic_depth

    min_coverage = DEFAULT_MIN_COVERAGE if min_coverage is None else min_coverage
    label, cases, uses_model, thresholds, failures, note = _setup(task, modes, threshold, sweep, limit, log)

    depth = semantic_depth(TOP_K)

    def settings(mode: str, t: float, top_k: int = TOP_K) -> Settings:
        return Settings(mode=mode, top_k=top_k, anchor_k=anchor_k, threshold=t, model=model, cache_dir=cache, k1=k1, b=b,
                        fusion=rule.fusion, weights=rule.weights)

    full = Provider(settings("semantic", -1.0, depth), data_root=data_root, log=note) if uses_model else None
    out = Run(task, {}, cases, route="searcher")
    if full is not None:
        items = [{"id": str(n), "text": t} for n, t in enumerate(dict.fromkeys(
            c["text"] for p in sorted({c.pool for c in cases}) for c in [{"text": searchable_text(v)} for v in task.views(p)]))]
        index_into(out, full, items, label, failures)
    checker = matcher.in_process_for(settings("semantic", threshold, depth), data_root, note) if uses_model else None
    keys = [(m, t) for m in modes for t in (thresholds if m != "lexical" else [threshold])]
    out.rankings = {k: [] for k in keys}
    out.rankings.update({(m, threshold): [] for m in BASELINES if m != "fields" or task.turns is not None})
    groups: dict[tuple[int, frozenset[int]], dict] = {}
    at = [threshold]  # the threshold the memoized semantic side answers at
    cosines: dict[str, list[tuple[int, float]]] = {}

    def memo(case: Case):
        def semantic(text: str, candidates: list[dict], k: int):
            if case.id not in cosines:
                t0 = time.perf_counter()
                r = full.rank(text, [c["text"] for c in candidates])
                out.semantic_ms.append((time.perf_counter() - t0) * 1000)
                if r.error:
                    out.errors += 1
                    raise RuntimeError("%s: query %s: %s" % (label, case.id, r.error))
                score = dict(r.fused)
                cosines[case.id] = ([(i, score[i]) for i in r.selected], dict(r.opening))
            ranked, opening = cosines[case.id]
            return SemanticList([(i, v) for i, v in ranked if v >= at[0]][:k], at[0], cosine=True, opening=opening)

        return semantic

    prog = Progress(label)
    for qn, case in enumerate(cases):
        g = groups.get((case.pool, case.drop))
        if g is None:
            views = task.views(case.pool)
            idx = [i for i in range(len(views)) if i not in case.drop]
            kept = [dataclasses.replace(views[i], id=str(j)) for j, i in enumerate(idx)]
            g = groups[(case.pool, case.drop)] = {"idx": idx, "views": kept, "searchers": {}, "plain": None, "fields": None}
        idx, kept = g["idx"], g["views"]
        sem = memo(case)

        t0 = time.perf_counter()
        for mode, t in keys:
            at[0] = t
            s = g["searchers"].get(mode)
            if s is None:  # one per candidate set and mode: its index is built once
                s = g["searchers"][mode] = Searcher.over(kept, settings(mode, threshold))
            s.semantic = sem if mode != "lexical" else None
            hits = s.search(case.text, TOP_K, min_coverage)
            if s.dropped:
                raise RuntimeError("%s: query %s: semantic side dropped: %s" % (label, case.id, s.dropped))
            out.rankings[(mode, t)].append([idx[int(h.id)] for h in hits])
        out.query_ms.append((time.perf_counter() - t0) * 1000)
        if ("bm25", threshold) in out.rankings:
            if g["plain"] is None:
                g["plain"] = [plain_terms(searchable_text(v)) for v in kept]
            out.rankings[("bm25", threshold)].append([idx[i] for i, _ in okapi(g["plain"], plain_terms(case.text), k1, b)[:TOP_K]])
        if ("fields", threshold) in out.rankings:
            if g["fields"] is None:
                g["fields"] = FieldIndex(kept, k1, b)
            out.rankings[("fields", threshold)].append([idx[i] for i, _ in g["fields"].rank(case.text, len(kept))[:TOP_K]])
        if qn < CHECKED:
            for mode in modes:
                real = Searcher.over(kept, settings(mode, threshold), semantic=checker if mode != "lexical" else None)
                out.checked += 1
                if [idx[int(h.id)] for h in real.search(case.text, TOP_K, min_coverage)] != out.rankings[(mode, threshold)][-1]:
                    out.mismatches += 1
        prog(qn + 1, len(cases))
    return out


def _limited(cases: list[Case], limit: int | None) -> list[Case]:
    if not limit:
        return cases
    out, count = [], {}
    for c in cases:
        if count.get(c.group, 0) < limit:
            count[c.group] = count.get(c.group, 0) + 1
            out.append(c)
    return out


def _memoize_terms() -> Callable[[], None]:
    """Tokenize each distinct text once for the whole run (terms() is pure)."""
    orig = local_mod.terms

    @functools.lru_cache(maxsize=None)
    def memo(text: str) -> tuple[str, ...]:
        return tuple(orig(text))

    from eggshell.search import searcher as searcher_mod

    local_mod.terms = memo  # type: ignore[assignment]  # BM25 only reads the sequence
    searcher_mod.terms = memo  # type: ignore[assignment]

    def restore() -> None:
        local_mod.terms = orig  # type: ignore[assignment]
        searcher_mod.terms = orig  # type: ignore[assignment]

    return restore


# -- the handoff a new chat gets (issue 11, section 5) -----------------------------------
#
# Retrieval recall says whether the right prior run is ranked; this says what a new chat
# is actually given. The 500 runs are written as turns by the product's writer
# (save.save_turn) into a project's store, and each query is answered by the prompt hook's
# own code (runtime.turnflow.answer, UserPromptSubmit, as the warm manager runs it: retrieval,
# the reuse engine and the renderer) in a chat that has been given nothing yet.

UNRELATED_PER_CONVERSATION = 4  # LoCoMo questions per conversation: 40 from the 10
HANDOFF_TARGETS = {"gold": 0.60, "data": 0.60, "unrelated": 0.10}
EVAL_CONFIG = """# written by tests/eval/eggeval.py: the product's defaults but for the ranking mode
mode = "%s"
"""


@dataclass(frozen=True, slots=True)
class Question:
    """One prompt a new chat sends: a later swe task's issue (related) or a LoCoMo question (unrelated)."""

    id: str
    text: str
    kind: str  # "related" | "unrelated"
    gold: tuple[str, ...] = ()  # files the later task's real fix changes
    linked: str | None = None  # the record id of the officially linked prior run
    drop: frozenset[str] = frozenset()  # same_issue records: not in the stores this question reads
    relevant: tuple[str, ...] = ()  # every stored relevant run (linked is the first)


def related_questions(queries: list[dict], records: list[dict]) -> list[Question]:
    """The swe `related` queries whose linked run is stored, in file order."""
    ids = {str(r.get("id")) for r in records}
    out = []
    for q in queries:
        rel = [r for r in q.get("relevant") or [] if r in ids]
        if q.get("set") != "related" or not rel or not isinstance(q.get("text"), str):
            continue
        drop = frozenset(r for r in q.get("same_issue") or [] if r in ids) - set(rel)
        out.append(Question(str(q.get("id")), q["text"], "related", tuple(q.get("gold_files") or ()), rel[0], drop, tuple(rel)))
    return out


def unrelated_questions(path: str, per_conversation: int = UNRELATED_PER_CONVERSATION) -> list[Question]:
    """LoCoMo questions spread evenly over each conversation: nothing in a code store answers them."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    out = []
    for ci, conv in enumerate(data):
        qa = [x for x in conv.get("qa", []) if isinstance(x.get("question"), str) and x["question"].strip()]
        for j in range(min(per_conversation, len(qa))):
            n = j * len(qa) // per_conversation
            out.append(Question("%s#%d" % (conv.get("sample_id", ci), n), qa[n]["question"], "unrelated"))
    return out


def swe_turn(rec: dict, cwd: str) -> dict:
    """A swe run as the turn record the hooks journal (egg-save's input): one chat per run."""
    rid = str(rec.get("id", ""))
    return {"session": rid, "turn": "1", "cwd": cwd, "prompt": rec.get("prompt") or "", "tools": swe_calls(rec),
            "answer": rec.get("answer") or None}


def record_text(rec: dict) -> str:
    """Everything a run recorded (request, commands, outputs, answer): what it could hand on at best."""
    parts = [rec.get("prompt") or ""]
    for t in rec.get("tools") or []:
        parts += [json.dumps(t.get("input"), ensure_ascii=False), str(t.get("output") or "")]
    parts.append(rec.get("answer") or "")
    return "\n".join(parts)


def names_file(text: str, path: str) -> bool:
    """Whether the text names this repository path: whole, possibly under a prefix (`/testbed/`, `a/`, `./`).

    A bare base name (`card.py`) does not count: `__init__.py` would name half the gold sets.
    """
    return re.search(r"(?<![\w.-])%s(?![\w/-]|\.\w)" % re.escape(path.lstrip("./")), text) is not None


def named(text: str, files: Iterable[str]) -> tuple[str, ...]:
    return tuple(f for f in files if names_file(text, f))


# The data share: the renderer's own parser of its frame (handoff.parse, handoff.data_share).

DATA = " (data)"  # the suffix of a part that is recorded data


def frame_parts(text: str) -> dict[str, int]:
    """Characters of a handoff by part (handoff.parse): each data kind, and `frame` for the
    rest; they add up to len(text)."""
    from eggshell.reuse import render as handoff

    parts: dict[str, int] = {}
    for kind, body in handoff.parse(text):
        if kind != "frame":
            parts[kind + DATA] = parts.get(kind + DATA, 0) + len(body)
    parts["frame"] = len(text) - sum(parts.values())
    return parts


def data_chars(parts: dict[str, int]) -> int:
    """The characters of recorded data among a handoff's parts (frame_parts)."""
    return sum(v for k, v in parts.items() if k.endswith(DATA))


def data_share(text: str) -> float:
    """Share of a handoff's characters that are recorded data (prior outputs, answers, requests), not frame."""
    from eggshell.reuse import render as handoff

    return handoff.data_share(text)


class NewChat:
    """A project whose stores hold the runs, and the prompt hook of a new chat in it.

    Runs named in `isolate` get a store each, so a question can leave them out of what it
    reads (its same_issue records) while every other question reads them all. The data root
    is private to the measure; its vector cache is `cache`, shared with the retrieval sets.
    """

    def __init__(self, root: str, cache: str, mode: str = "hybrid", model: str | None = None,
                 log: Callable[[str], None] | None = None):
        from eggshell.config import load
        from eggshell.paths import Paths, private_dir
        from eggshell.runtime.warm import Resources

        self.root, self.cache, self.mode, self.model = root, cache, mode, model
        self.project = private_dir(os.path.join(root, "project"))
        self.config_file = os.path.join(self.project, ".eggshell.toml")
        with open(self.config_file, "w", encoding="utf-8") as f:
            f.write(EVAL_CONFIG % mode + ('model = "%s"\n' % model if model else ""))
        data_root = private_dir(os.path.join(root, "data"))
        private_dir(os.path.join(data_root, "semantic"))
        private_dir(cache)
        os.symlink(os.path.abspath(cache), os.path.join(data_root, "semantic", "vectors"))
        prefix = os.path.join(root, "prefix")
        self.paths = Paths(prefix, data_root, os.path.join(prefix, "config.toml"), os.path.join(root, "codex"), os.path.join(prefix, "bin"))
        self.notes: list[str] = []
        self.log = log or (lambda m: None)
        self.res = Resources(data_root, self.paths.bin_dir, warm=True, log=self._note)
        self.cfg = load(self.paths, self.project, env={"EGGSHELL_CONFIG": self.config_file})
        self.main = os.path.join(self.project, ".eggs", "work.egg")
        self.alone: dict[str, str] = {}  # record id -> its own store
        self.views: dict[str, TurnView] = {}  # record id (the run's session) -> its stored turn
        self.extra_views: list[TurnView] = []  # turns stored elsewhere (dayone's host routes), embedded with the rest
        self.asked = 0

    def _note(self, msg: str) -> None:
        self.notes.append(msg)
        self.log(msg)

    def write(self, records: list[dict], isolate: Iterable[str] = (), progress: Callable[[int, int], None] | None = None) -> None:
        """Save every run as a turn with the product's writer; `isolate`d runs each into its own store."""
        from eggshell.paths import private_dir
        from eggshell.graph.records import turn_views
        from eggshell.graph.save import save_turn
        from eggshell.graph.store import Store
        from eggshell.graph.turns import TurnError

        private_dir(os.path.dirname(self.main))
        isolate = set(isolate)
        def opened(path: str):
            s = Store.open(path)
            s.data_root = self.paths.data_root  # written here, as the user's hooks would: their own work (trust.py)
            return s

        stores = {self.main: opened(self.main)}
        for n, rec in enumerate(records):
            rid = str(rec.get("id", ""))
            path = self.main
            if rid in isolate:
                path = self.alone[rid] = os.path.join(self.project, ".eggs", "run-%d.egg" % n)
                stores[path] = opened(path)
            try:
                save_turn(stores[path], swe_turn(rec, self.project), self.project)
            except TurnError as e:
                self._note("run %s not stored: %s" % (rid, e))
            if progress:
                progress(n + 1, len(records))
        for st in stores.values():
            st.refresh()
            self.views.update((v.session, v) for v in turn_views(st.graph))

    def embed(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Embed every stored turn's searchable text into the cache (what `egg index` does ahead of prompts)."""
        if self.mode == "lexical":
            return 0
        texts = {searchable_text(v): v.id for v in (*self.views.values(), *self.extra_views)}  # one item per distinct text
        items = [{"id": i, "text": t} for t, i in texts.items()]
        p = Provider(Settings(mode="semantic", top_k=TOP_K, anchor_k=0, model=self.model, cache_dir=self.cache), self.paths.data_root, self._note)
        if p.index(items, progress) != len(items):
            raise RuntimeError("embedding the stored turns failed: %s" % "; ".join(self.notes[-3:]))
        return len(items)

    def write_store(self, name: str, records: list[dict]) -> str:
        """Save the runs as turns into a store of their own, `name`.egg (a day-one project's whole
        memory), and return its path: a question can then read it alone (ask_in)."""
        from eggshell.paths import private_dir
        from eggshell.graph.records import turn_views
        from eggshell.graph.save import save_turn
        from eggshell.graph.store import Store
        from eggshell.graph.turns import TurnError

        path = os.path.join(self.project, ".eggs", "%s.egg" % name)
        private_dir(os.path.dirname(path))
        st = Store.open(path)
        st.data_root = self.paths.data_root  # written here, as the user's hooks would: their own work (trust.py)
        for rec in records:
            try:
                save_turn(st, swe_turn(rec, self.project), self.project)
            except TurnError as e:
                self._note("run %s not stored: %s" % (rec.get("id"), e))
        st.refresh()
        self.views.update((v.session, v) for v in turn_views(st.graph))
        return path

    def reads(self, drop: Iterable[str] = ()) -> tuple[str, ...]:
        drop = set(drop)
        return (self.main, *(p for rid, p in self.alone.items() if rid not in drop))

    def ask(self, text: str, drop: Iterable[str] = ()) -> tuple[str, list]:
        """(the handoff, the fused hits) the prompt hook gives a new chat sending `text`."""
        return self.ask_in(text, self.reads(drop))

    def ask_in(self, text: str, read: Sequence[str]) -> tuple[str, list]:
        """(the handoff, the fused hits) the prompt hook gives a new chat in a project whose
        selection reads exactly the stores `read` (the first is the one it writes)."""
        from eggshell.config import Selection
        from eggshell.hosts.codex import HOST as CODEX
        from eggshell.runtime import turnflow

        read = tuple(read)
        self.asked += 1
        session, turn = "eval-new-chat-%d" % self.asked, "1"
        sel = Selection("work", True, read, read[0], self.cfg.selection().handoff_chars, self.cfg.local_union)
        st = turnflow.Step("UserPromptSubmit", session, turn, self.project, sel.to_json(), self.config_file, True)
        payload = {"hook_event_name": "UserPromptSubmit", "session_id": session, "turn_id": turn, "cwd": self.project, "prompt": text}
        handed = turnflow.answer(payload, st, self.paths, self.res, None, CODEX.context_cap).get("context") or ""
        hits = self.res.searcher(self.cfg, read).search(turnflow.inquiry_of(text), self.cfg.top_k, self.cfg.min_coverage)
        return handed, hits

    def last_trace(self) -> dict:
        """The search trace of the last question (the Searcher's own sidecar): its raw BM25 and cosine lists."""
        path = os.path.join(self.paths.data_root, "semantic", "matcher-trace.jsonl")
        try:
            with open(path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - (4 << 20)))
                last = f.read().rstrip(b"\n").rpartition(b"\n")[2]
            return json.loads(last)
        except (OSError, ValueError):
            return {}

    def keys_of(self, rid: str) -> frozenset[str]:
        """The display keys a handoff can name a run's turn or tool calls by."""
        from eggshell.core.identity import display_key

        v = self.views.get(rid)
        return frozenset() if v is None else frozenset(display_key(x) for x in (v.id, *(t.id for t in v.tools)))

    def renew(self) -> None:
        """Let go of every store and searcher the prompts loaded (a new warm Resources, its model loaded again)."""
        from eggshell.runtime.warm import Resources

        self.res.close()
        self.res = Resources(self.paths.data_root, self.paths.bin_dir, warm=True, log=self._note)

    def close(self) -> None:
        self.res.close()


@dataclass(frozen=True, slots=True)
class Handed:
    """What one question got."""

    question: Question
    text: str  # the handoff ("" when none)
    top: float | None  # fused score of the first hit (None: no hit)
    hits: int
    named: tuple[str, ...]  # gold files the handoff names
    ceiling: tuple[str, ...]  # gold files the linked run itself names anywhere
    linked_rank: int | None  # the linked run's rank among the hits
    linked: str  # "shown": its evidence is in the handoff; "listed": only named as not shown; "absent"
    share: float | None  # data share (None: no handoff)
    parts: dict[str, int] = field(default_factory=dict)
    cosine: float | None = None  # best raw cosine at or above the threshold (None: none)
    bm25: float | None = None  # best raw BM25 of a turn covering enough of the question (None: none)


_NOT_SHOWN = re.compile(r"^Not shown, over the size budget", re.M)  # handoff._OMIT_HEAD


def linked_state(text: str, keys: frozenset[str]) -> str:
    """Whether a run's work is in the handoff ("shown"), only in its over-budget list ("listed"), or not at all."""
    m = _NOT_SHOWN.search(text)
    shown, listed = (text[: m.start()], text[m.start():]) if m else (text, "")
    if any(k in shown for k in keys):
        return "shown"
    return "listed" if any(k in listed for k in keys) else "absent"


def judge(chat: NewChat, q: Question, records: dict[str, dict]) -> Handed:
    text, hits = chat.ask(q.text, q.drop)
    trace = chat.last_trace()
    best = lambda key: max((v for _, v in trace.get(key) or []), default=None)  # noqa: E731
    rank = next((h.rank for h in hits if h.session == q.linked), None) if q.linked else None
    ceiling = named(record_text(records[q.linked]), q.gold) if q.linked in records else ()
    return Handed(q, text, hits[0].score if hits else None, len(hits), named(text, q.gold), ceiling, rank,
                  linked_state(text, chat.keys_of(q.linked)) if q.linked else "", data_share(text) if text else None,
                  frame_parts(text) if text else {}, best("semantic"), best("lexical"))


@dataclass
class HandoffRun:
    related: list[Handed]
    unrelated: list[Handed]
    stored: int = 0
    stores: int = 0
    write_s: float = 0.0
    embed_s: float = 0.0
    ask_s: float = 0.0
    mode: str = "hybrid"
    settings: str = ""  # the config the prompt path ran with
    share_by: str = ""
    notes: list[str] = field(default_factory=list)


def run_handoff(swe_path: str, locomo_path: str, cache: str, root: str, *, mode: str = "hybrid", model: str | None = None,
                limit: int | None = None, dump: IO[str] | None = None) -> HandoffRun:
    """Write the 500 runs into a new project and ask its prompt hook every related and unrelated question.

    `dump`: one JSON line per question (what it got, its scores), for choosing a score floor.
    """
    records, queries = read_swe(swe_path)
    related = related_questions(queries, records)
    unrelated = unrelated_questions(locomo_path)
    if limit:
        related, unrelated = related[:limit], unrelated[:limit]
    by_id = {str(r.get("id")): r for r in records}
    isolate = {rid for q in related for rid in q.drop}
    chat = NewChat(root, cache, mode, model, log=lambda m: print("%s: handoff: %s" % (PROG, m), file=sys.stderr, flush=True))
    c = chat.cfg
    out = HandoffRun([], [], mode=mode, share_by="handoff.data_share", settings="mode %s, top_k %d, min_coverage %g, handoff_chars %d" % (
        c.mode, c.top_k, c.min_coverage, c.selection().handoff_chars))
    try:
        t0 = time.perf_counter()
        prog = Progress("handoff")
        chat.write(records, isolate, lambda done, total: prog(done, total, "runs written as turns"))
        out.write_s, out.stored, out.stores = time.perf_counter() - t0, len(chat.views), 1 + len(chat.alone)
        t0 = time.perf_counter()
        chat.embed(lambda done, total: prog(done, total, "new windows embedded"))
        out.embed_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        qs = related + unrelated
        for n, q in enumerate(qs):
            h = judge(chat, q, by_id)
            (out.related if q.kind == "related" else out.unrelated).append(h)
            if dump is not None:
                dump.write(json.dumps({"set": "handoff", "id": q.id, "kind": q.kind, "chars": len(h.text), "hits": h.hits, "top": h.top,
                                       "cosine": h.cosine, "bm25": h.bm25, "named": h.named, "ceiling": h.ceiling, "gold": q.gold,
                                       "linked_rank": h.linked_rank, "linked": h.linked, "share": h.share, "parts": h.parts}) + "\n")
            prog(n + 1, len(qs), "questions")
        out.ask_s = time.perf_counter() - t0
    finally:
        chat.close()
    out.notes = list(dict.fromkeys(chat.notes))
    return out


def _share(xs: Iterable[bool]) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def _median(xs: Sequence[float]) -> float:
    import statistics

    return statistics.median(xs) if xs else 0.0


def _quantiles(xs: Sequence[float]) -> str:
    if not xs:
        return "-"
    s = sorted(xs)
    at = lambda p: s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))]  # noqa: E731
    return " / ".join("%.3f" % at(p) for p in (0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0))


@dataclass(frozen=True, slots=True)
class HandoffScore:
    related: int
    gold: float  # share of related questions whose handoff names a gold file
    ceiling: float  # share whose linked run names one
    handed: float  # share of related questions given any handoff
    median_chars: float  # over handoffs given
    share_mean: float
    share_median: float
    unrelated: int
    unrelated_handed: float


def handoff_score(run: HandoffRun) -> HandoffScore:
    given = [h for h in run.related if h.text]
    shares = [h.share for h in given if h.share is not None]
    return HandoffScore(len(run.related), _share(bool(h.named) for h in run.related), _share(bool(h.ceiling) for h in run.related),
                        _share(bool(h.text) for h in run.related), _median([len(h.text) for h in given]),
                        sum(shares) / len(shares) if shares else 0.0, _median(shares), len(run.unrelated),
                        _share(bool(h.text) for h in run.unrelated))


def handoff_report(run: HandoffRun) -> list[str]:
    s = handoff_score(run)
    t = HANDOFF_TARGETS
    met = lambda ok: "met" if ok else "missed"  # noqa: E731
    out = ["", "## Handoffs a new chat gets (swe `related`, %d questions; %d unrelated LoCoMo questions)" % (s.related, s.unrelated), ""]
    out += ["| measure | result | target | status |", "| --- | ---: | ---: | --- |"]
    out.append("| handoff names a gold file | %s | ≥ %.2f | %s |" % (_f(s.gold), t["gold"], met(s.gold >= t["gold"])))
    out.append("| ceiling: the linked prior run names one | %s | | |" % _f(s.ceiling))
    out.append("| no memory | 0.000 | | |")
    out.append("| related questions given a handoff | %s | | |" % _f(s.handed))
    out.append("| median handoff size (characters) | %.0f | | |" % s.median_chars)
    out.append("| recorded data share, mean over handoffs (median) | %s (%s) | ≥ %.2f | %s |" % (
        _f(s.share_mean), _f(s.share_median), t["data"], met(s.share_mean >= t["data"])))
    out.append("| unrelated questions given a handoff | %s | ≤ %.2f | %s |" % (_f(s.unrelated_handed), t["unrelated"], met(s.unrelated_handed <= t["unrelated"])))
    out += _handoff_diagnosis(run)
    return out


def _handoff_diagnosis(run: HandoffRun) -> list[str]:
    out = ["", "### Where the characters go (by part, summed over the related handoffs)", ""]
    totals: dict[str, int] = {}
    for h in run.related:
        for k, v in h.parts.items():
            totals[k] = totals.get(k, 0) + v
    whole = sum(totals.values())
    out += ["| part | characters | share |", "| --- | ---: | ---: |"]
    for k, v in sorted(totals.items(), key=lambda kv: -kv[1]):
        out.append("| %s | %d | %s |" % (k, v, _f(v / whole if whole else 0.0)))
    rel = run.related
    cells = {
        "linked run ranked (top_k)": sum(h.linked_rank is not None for h in rel),
        "linked run's evidence shown": sum(h.linked == "shown" for h in rel),
        "linked run only listed as not shown (over the budget)": sum(h.linked == "listed" for h in rel),
        "ceiling met, handoff names no gold file": sum(bool(h.ceiling) and not h.named for h in rel),
        "... of them: the linked run not ranked": sum(bool(h.ceiling) and not h.named and h.linked_rank is None for h in rel),
        "... of them: ranked, but only listed as over the budget": sum(bool(h.ceiling) and not h.named and h.linked_rank is not None and h.linked == "listed" for h in rel),
        "... of them: ranked, but not in the handoff at all": sum(bool(h.ceiling) and not h.named and h.linked_rank is not None and h.linked == "absent" for h in rel),
        "... of them: its evidence shown, not the part naming a gold file": sum(bool(h.ceiling) and not h.named and h.linked == "shown" for h in rel),
        "handoff names a gold file the linked run does not": sum(bool(set(h.named) - set(h.ceiling)) for h in rel),
    }
    out += ["", "### Why gold files are missed (related questions)", "", "| | questions |", "| --- | ---: |"]
    out += ["| %s | %d |" % kv for kv in cells.items()]
    out += ["", "### Handoffs and retrieval hits", ""]
    out += ["| questions | given a handoff | ... with no retrieval hit |", "| --- | ---: | ---: |"]
    for name, hs in (("related", run.related), ("unrelated", run.unrelated)):
        out.append("| %s (%d) | %d | %d |" % (name, len(hs), sum(bool(h.text) for h in hs), sum(bool(h.text) and not h.hits for h in hs)))
    out += ["", "### Scores of the first hit (min / p10 / p25 / median / p75 / p90 / max)", ""]
    out += ["| questions | fused score the prompt path sees (n) | best raw cosine ≥ threshold (n) | best raw BM25 (n) |", "| --- | --- | --- | --- |"]
    for name, hs in (("related", run.related), ("unrelated", run.unrelated)):
        cols = []
        for key in ("top", "cosine", "bm25"):
            xs = [getattr(h, key) for h in hs if getattr(h, key) is not None]
            cols.append("%s (%d)" % (_quantiles(xs), len(xs)))
        out.append("| %s (%d) | %s |" % (name, len(hs), " | ".join(cols)))
    return out


# -- report ------------------------------------------------------------------------------


def _f(x: float) -> str:
    return "%.3f" % x


def _groups(run: Run) -> list[str]:
    return list(dict.fromkeys(c.group for c in run.cases))


def _set_name(run: Run, group: str) -> str:
    return run.task.name if group == "all" else "%s %s" % (run.task.name, group)


def _score(run: Run, key: tuple[str, float], pick: Callable[[Case], bool]) -> Score:
    rows = [(r, c.relevant) for r, c in zip(run.rankings[key], run.cases) if pick(c)]
    return score([r for r, _ in rows], [rel for _, rel in rows])


def report(runs: list[Run], modes: Sequence[str], threshold: float, sweep: Sequence[float], header: dict[str, str],
           handoff: HandoffRun | None = None) -> str:
    out: list[str] = ["# Eggshell retrieval quality", ""]
    out += ["- %s: %s" % (k, v) for k, v in header.items()]
    if runs:
        out += _retrieval_report(runs, modes, threshold, sweep)
    if handoff is not None:
        out += handoff_report(handoff)
        out += ["", "| handoff step | seconds |", "| --- | ---: |"]
        out += ["| write %d runs as turns (%d stores) | %.1f |" % (handoff.stored, handoff.stores, handoff.write_s),
                "| embed the stored turns (cached windows skipped) | %.1f |" % handoff.embed_s,
                "| %d questions through the prompt hook | %.1f |" % (len(handoff.related) + len(handoff.unrelated), handoff.ask_s)]
        how = "as the warm manager answers" if handoff.mode != "lexical" else "lexical: as a hook with no manager answers"
        out += ["", "- prompt path: runtime.turnflow.answer with the product's defaults (%s; %s); data share by %s" % (
            handoff.settings, how, handoff.share_by)]
        out += ["- %s" % n for n in handoff.notes[:10]]
    return "\n".join(out) + "\n"


def _retrieval_report(runs: list[Run], modes: Sequence[str], threshold: float, sweep: Sequence[float]) -> list[str]:
    out: list[str] = []
    out += ["", "## Recall and MRR (threshold %.2f)" % threshold, ""]
    out += ["| set | text | queries | mode | R@5 | R@10 | MRR |", "| --- | --- | ---: | --- | ---: | ---: | ---: |"]
    for run in runs:
        for g in _groups(run):
            for m in [*modes, *BASELINES]:
                if (m, threshold) not in run.rankings:
                    continue
                s = _score(run, (m, threshold), lambda c, g=g: c.group == g)
                out.append("| %s | %s | %d | %s | %s | %s | %s |" % (_set_name(run, g), run.task.text, s.n, m, _f(s.recall[5]), _f(s.recall[10]), _f(s.mrr)))
    model_modes = [m for m in modes if m != "lexical"]
    if model_modes and sweep:
        out += ["", "## Semantic threshold sweep", ""]
        cols = " | ".join("%s R@5 | %s R@10 | %s MRR" % (m, m, m) for m in model_modes)
        out += ["| set | text | threshold | %s |" % cols, "| --- | --- | ---: |" + " ---: |" * 3 * len(model_modes)]
        for run in runs:
            for g in _groups(run):
                for t in sorted(set([threshold, *sweep])):
                    vals = []
                    for m in model_modes:
                        s = _score(run, (m, t), lambda c, g=g: c.group == g)
                        vals += [_f(s.recall[5]), _f(s.recall[10]), _f(s.mrr)]
                    out.append("| %s | %s | %.2f | %s |" % (_set_name(run, g), run.task.text, t, " | ".join(vals)))
    cat_runs = [r for r in runs if any(c.category for c in r.cases)]
    if cat_runs:
        out += ["", "## By LoCoMo category (threshold %.2f; 5 is adversarial)" % threshold, ""]
        out += ["| set | text | category | queries | %s |" % " | ".join("%s R@5 | %s MRR" % (m, m) for m in modes), "| --- | --- | --- | ---: |" + " ---: |" * 2 * len(modes)]
        for run in cat_runs:
            for cat in sorted({c.category for c in run.cases}):
                vals, n = [], 0
                for m in modes:
                    s = _score(run, (m, threshold), lambda c, cat=cat: c.category == cat)
                    vals += [_f(s.recall[5]), _f(s.mrr)]
                    n = s.n
                out.append("| %s | %s | %s | %d | %s |" % (run.task.name, run.task.text, cat, n, " | ".join(vals)))
    out += ["", "## Timings", ""]
    out += ["| set | text | texts indexed | new windows | index s | texts/s | queries | ms/query | semantic ms/query |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for run in runs:
        q = len(run.query_ms)
        tps = ("%.1f" % (run.indexed / run.index_s)) if run.index_s > 0 and run.indexed else "-"
        out.append("| %s | %s | %d | %d | %.1f | %s | %d | %.1f | %.1f |" % (
            run.task.name, run.task.text, run.indexed, run.embedded_windows, run.index_s, tps, q,
            sum(run.query_ms) / max(q, 1), sum(run.semantic_ms) / max(q, 1)))
    notes = []
    for run in runs:
        if run.task.skipped:
            notes.append("%s: skipped %s" % (run.task.name, ", ".join("%d (%s)" % (n, why) for why, n in sorted(run.task.skipped.items()))))
        if run.checked:
            notes.append("%s [%s]: %d of %d re-ranked checks %s with the real settings agree" % (
                run.task.name, run.task.text, run.checked - run.mismatches, run.checked,
                "by a Searcher with the hook's semantic side" if run.route == "searcher" else "by Provider.rank"))
    if notes:
        out += ["", "## Notes", ""] + ["- " + n for n in dict.fromkeys(notes)]
    return out


# -- CLI ---------------------------------------------------------------------------------


def _choices(text: str, allowed: Sequence[str], what: str) -> list[str]:
    import argparse

    items = [x.strip() for x in text.split(",") if x.strip()]
    if items == ["all"]:
        return list(allowed)
    bad = [x for x in items if x not in allowed]
    if bad or not items:
        raise argparse.ArgumentTypeError("unknown %s %s (choose from %s, or all)" % (what, ", ".join(bad) or "(none)", ", ".join(allowed)))
    return list(dict.fromkeys(items))


def _floats(text: str, n: int | None = None) -> tuple[float, ...]:
    import argparse

    try:
        xs = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a comma-separated list of numbers" % text) from None
    if n is not None and len(xs) != n:
        raise argparse.ArgumentTypeError("expected %d numbers, got %r" % (n, text))
    return xs


def main(argv: list[str]) -> int:
    from eggshell.config import DEFAULT_MIN_COVERAGE
    from eggshell.paths import from_env

    p = stage.parser(PROG, "Measure retrieval quality (Recall@5, Recall@10, MRR) on public sets.", epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("data", nargs="?", default=os.path.join("..", "shared", "data"), help="directory with %s and %s (default %%(default)s)" % (LOCOMO_FILE, SWE_FILE))
    p.add_argument("--sets", type=lambda s: _choices(s, SETS, "set"), default=None,
                   help="comma list of %s (default all; heldout only where it was built)" % ", ".join(SETS))
    p.add_argument("--heldout", metavar="FILE", help="the held-out set (default DATA/../../eval-data/%s; see tests/eval/convert_heldout.py)" % HELDOUT_FILE)
    p.add_argument("--modes", type=lambda s: _choices(s, MODES, "mode"), default=list(MODES), help="comma list of %s (default all)" % ", ".join(MODES))
    p.add_argument("--text", type=lambda s: _choices(s, SWE_TEXTS, "text"), default=[DEFAULT_SWE_TEXT], help="swe record compositions, comma list of %s, or all (default %s: the product's searchable_text)" % (", ".join(SWE_TEXTS), DEFAULT_SWE_TEXT))
    p.add_argument("--locomo-text", type=lambda s: _choices(s, LOCOMO_TEXTS, "LoCoMo text"), default=[DEFAULT_LOCOMO_TEXT], help="LoCoMo session/turn compositions, comma list of %s, or all (default %s)" % (", ".join(LOCOMO_TEXTS), DEFAULT_LOCOMO_TEXT))
    p.add_argument("--threshold", type=float, default=rank_mod.DEFAULT_THRESHOLD, help="least cosine for a semantic match (default %(default)s, the product's)")
    p.add_argument("--sweep", type=_floats, default=SWEEP, help="thresholds to sweep for semantic and hybrid (default %s; '' for none)" % ",".join("%.2f" % t for t in SWEEP))
    p.add_argument("--anchor-k", type=int, default=rank_mod.DEFAULT_ANCHOR_K, help="anchor matches pinned first (default %(default)s, the product's)")
    p.add_argument("--k1", type=float, default=rank_mod.K1, help="BM25 term-frequency saturation (default %(default)s, the product's)")
    p.add_argument("--b", type=stage.fraction, default=rank_mod.B, help="BM25 length normalization (default %(default)s, the product's)")
    p.add_argument("--limit", type=stage.positive_int, help="first N queries of each set (and swe query set)")
    p.add_argument("--cache", metavar="DIR", help="vector cache (default: <data root>/semantic/vectors, the product's)")
    p.add_argument("--model", help="embedding model (default: the product's)")
    p.add_argument("--route", choices=ROUTES, default="searcher",
                   help="searcher: through search.searcher.Searcher as the hook and egg-query rank (the coverage floor, the hook's "
                        "semantic side), with the baselines bm25 (plain Okapi BM25) and fields (BM25 per field); provider: "
                        "search.local.Provider.rank, egg-index's ranking, no floor (default %(default)s)")
    p.add_argument("--min-coverage", type=stage.fraction, help="the searcher route's coverage floor (default: the product's)")
    p.add_argument("--dump", metavar="FILE", help="write every query's lexical, anchor and semantic rankings (pool indices, scores) as JSON lines, for diagnosis")
    p.add_argument("--fusion", choices=rank_mod.FUSIONS, default="score", help="hybrid rule (default %(default)s, the product's)")
    p.add_argument("--weights", type=lambda s: _floats(s, 3), default=rank_mod.WEIGHTS,
                   help="score fusion weights DOC,LINE,SEM (default %s, the product's)" % ",".join("%g" % w for w in rank_mod.WEIGHTS))
    from hostroute import HOSTS  # tests/eval is on the path: this script's own directory

    p.add_argument("--hosts", type=lambda s: _choices(s, HOSTS, "host"), default=[],
                   help="dayone: also record its stores through each of these hosts' hook payloads (comma list of %s, or all; "
                        "default none: only the egg-save route); see tests/eval/hostroute.py" % ", ".join(HOSTS))
    p.add_argument("--host-workers", type=stage.positive_int,
                   help="dayone --hosts: processes recording the host routes at once (default: one per host, at most one per core)")
    a = p.parse_args(argv)
    if a.hosts and a.sets is not None and "dayone" not in a.sets:
        p.error("--hosts measures the dayone set: add it to --sets")
    if not -1.0 <= a.threshold <= 1.0:
        p.error("--threshold must be a cosine from -1 to 1")
    if a.anchor_k < 0 or a.k1 < 0:
        p.error("--anchor-k and --k1 must be 0 or more")
    rule = Rule(a.fusion, tuple(a.weights))
    data_root = from_env().data_root
    cache = a.cache or os.path.join(data_root, "semantic", "vectors")
    files = {"locomo": os.path.join(a.data, LOCOMO_FILE), "swe": os.path.join(a.data, SWE_FILE)}
    files["heldout"] = a.heldout or os.path.join(a.data, "..", "..", "eval-data", HELDOUT_FILE)
    defaulted = a.sets is None
    if defaulted:  # all of them; the held-out set only where it was built
        a.sets = list(SETS)
        if not os.path.isfile(files["heldout"]):
            a.sets.remove("heldout")
            print("%s: no held-out set at %s (build it with tests/eval/convert_heldout.py); skipped" % (PROG, files["heldout"]), file=sys.stderr)
    need = {"locomo" if s.startswith("locomo") else s for s in a.sets if s not in ("handoff", "dayone")}
    need |= {"locomo", "swe"} if {"handoff", "dayone"} & set(a.sets) else set()
    missing = [files[k] for k in sorted(need) if not os.path.isfile(files[k])]
    if missing:
        print("%s: missing %s (DATA is %s; see its README.md)" % (PROG, ", ".join(missing), a.data), file=sys.stderr)
        return 2
    uses_model = any(m != "lexical" for m in a.modes)
    started = time.time()
    restore = _memoize_terms()
    runs: list[Run] = []
    handed: HandoffRun | None = None
    first_day = None
    dump = open(a.dump, "w", encoding="utf-8") if a.dump else None
    if a.dump and a.route != "provider":
        p.error("--dump needs --route provider")

    def ranked(task: Task) -> Run:
        if a.route == "searcher":
            return run_task_searcher(task, a.modes, a.threshold, a.sweep, cache, data_root, a.limit, rule, a.anchor_k, a.k1, a.b,
                                     model=a.model, min_coverage=a.min_coverage)
        return run_task(task, a.modes, a.threshold, a.sweep, cache, data_root, a.limit, rule, a.anchor_k, a.k1, a.b, model=a.model, dump=dump)

    try:
        for text in a.locomo_text if need & {"locomo"} else []:
            sess, turn = load_locomo(files["locomo"], text)
            for t in (sess, turn):
                if t.name in a.sets:
                    runs.append(ranked(t))
        for name in ("swe", "heldout"):
            if name in a.sets:
                for text in a.text:
                    runs.append(ranked(load_swe(files[name], text, name)))
        if "handoff" in a.sets:
            import tempfile

            with tempfile.TemporaryDirectory(prefix="eggshell-eval-") as tmp:
                handed = run_handoff(files["swe"], files["locomo"], cache, tmp, mode="hybrid" if uses_model else "lexical",
                                     model=a.model, limit=a.limit, dump=dump)
        if "dayone" in a.sets:
            import tempfile

            import dayone  # tests/eval is on the path: this script's own directory

            with tempfile.TemporaryDirectory(prefix="eggshell-eval-") as tmp:
                try:
                    first_day = dayone.run_dayone(files["swe"], files["locomo"], cache, tmp, mode="hybrid" if uses_model else "lexical",
                                                  model=a.model, limit=a.limit, hosts=a.hosts, workers=a.host_workers)
                except dayone.NoScenarios as e:
                    if not defaulted:
                        raise
                    print("%s: %s; dayone skipped" % (PROG, e), file=sys.stderr)
    except (RuntimeError, OSError, ValueError) as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return 1
    finally:
        restore()
        if dump is not None:
            dump.close()
    cmd = shlex.join(["python", "tests/eval/eggeval.py", *argv])
    header = {
        "command": "`%s`" % cmd,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "machine": "%d cores" % (os.cpu_count() or 0),
        "model": _model_name(a.model) if uses_model else "none (lexical only)",
        "settings": "top_k %d, anchor_k %d, threshold %.2f, BM25 k1 %g b %g, %s, MRR cutoff %d" % (TOP_K, a.anchor_k, a.threshold, a.k1, a.b, rule.describe(), MRR_CUTOFF),
        "route": ("the Searcher (as the hook and egg-query rank), min_coverage %g; baselines: bm25 = plain Okapi BM25 (k1 1.2, "
                  "b 0.75, lowercased word tokens, no floor) of each record's searchable text, fields = the product's BM25 per "
                  "field (request, answer, commands, outputs) blended with equal weights" % (
                      DEFAULT_MIN_COVERAGE if a.min_coverage is None else a.min_coverage)) if a.route == "searcher"
                 else "search.local.Provider.rank (egg-index's ranking; no coverage floor)",
        "cache": cache if uses_model else "unused",
        "wall time": "%.0f s" % (time.time() - started),
    }
    text = report(runs, a.modes, a.threshold, a.sweep if uses_model else (), header, handed)
    if first_day is not None:
        import dayone

        text += "\n".join(dayone.report(first_day)) + "\n"
    sys.stdout.write(text)
    return 0


def _model_name(model: str | None) -> str:
    from eggshell.search.embed import DEFAULT_MODEL, Encoder

    return Encoder(model or DEFAULT_MODEL).model_id


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
