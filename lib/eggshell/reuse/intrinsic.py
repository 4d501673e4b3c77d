"""Intrinsic matching: has a proposed Work, or a part of it, been done before?

Retrieval (search/local.py, search/searcher.py) finds turns that look related; this module decides
something stronger and checks it from the text itself: that the prior tool call's
Work is contained in the current one. Only that can mark a prior outcome *completed*
(reusable in place of running the call); everything else it finds is advisory.

The gate for completed, each part of which a property test pins down:
- an intrinsic match (never a retrieval hit) on a tool-level owner (a tool call, a child
  of a turn's All; a turn's own request/answer is only ever advice);
- forward: every unit of the prior fragment occurs in the current Work (orderless, one to
  one), so the prior output is a part of what the current call would produce. A larger
  prior command never completes a smaller current one (its output answers more, or
  something else);
- the prior fragment carries identity (a path, symbol or word of its own; shared option
  syntax, a bare `ls`, or `git status` (a subcommand is framing) are not enough), and the
  current call adds no option the prior one lacked (`rg -v foo` is not `rg foo`; options
  keep their case: `ls -r` is not `ls -R`);
- both only read (`rg`, `cat`, `sed -n`, `git log`...; no `rm`, `sed -i`, `> file`, `| xargs`,
  builds or test runs: a prior run never stands in for those), and the current call either
  is the prior one in another order or spelling, or adds only operands to a program whose
  operands are inputs (`rg foo src tests` contains `rg foo src`; `git diff HEAD~3 src` is
  not `git diff src`);
- either the prior fragment is the whole prior Work, or it is one clause of a batched
  prior command and result lines ground it: they hold what the clause looks for (its
  identifying units other than paths) and are not an echo of a clause.

Units come from logical.py, so spelling (`./src` vs `src`, case, width) does not matter
and order does not either (`cat b a` is `cat a b`); a different `sed` range, a different
file with the same suffix, or a pipeline with another stage are different units.
"""

from __future__ import annotations

import json
from collections import ChainMap, Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Iterable

from eggshell.reuse.commands import framing, reads_only, tool_name
from eggshell.reuse.logical import Logical, logical, result_lines, work_surfaces
from eggshell.core.values import Apply, Atom, Op, S, E, Value, apply, dataclass_reduce

RARE_CAP = 64  # a unit in more prior Works than this names nothing specific, however large the store
ADVICE_SHARE = 1 / 3  # least share of one side's identifying weight an advisory match must cover
GROUND_CAP = 200_000  # characters of a prior output searched for grounding lines


@dataclass(frozen=True, slots=True)
class Pattern:
    text: str  # what is compared: "<tool>\n<clause>" for a shell clause, else the Work text
    value: Atom  # the Value the pattern stands for (the whole Work when `whole`)
    whole: bool  # the pattern is the entire Work, not one clause of a batched command
    lg: Logical
    framing: int  # leading units that frame rather than identify (tool name, shell verb)

    __reduce__ = dataclass_reduce


@dataclass(frozen=True, slots=True)
class Candidate:
    edge: Apply  # the Outcome relation: work -> outcome (+ Exact provenance)
    work: Atom
    outcome: Atom
    tool: bool  # a tool-level owner (a child of a turn's All); False: a turn's request
    patterns: tuple[Pattern, ...]
    staged: bool = False  # from the current turn's journal, not yet committed

    __reduce__ = dataclass_reduce

    @property
    def redacted(self) -> bool:
        """Its Work or outcome was redacted or withheld at capture: not what the call really showed."""
        from eggshell.core.redact import marked

        return marked(self.outcome.data) or marked(self.work.data)


def patterns_of(work: Atom) -> tuple[Pattern, ...]:
    """The comparison patterns of a Work: its clauses once there are several, else itself."""
    text = work.as_text() or ""
    name = tool_name(text)
    surfaces = work_surfaces(text) if name else [text]
    if len(surfaces) == 1:
        lg = logical(surfaces[0])
        return (Pattern(surfaces[0], work, True, lg, framing(lg, name)),)
    return tuple(Pattern(s, Atom.text(s), False, lg, framing(lg, name)) for s in surfaces for lg in [logical(s)])


def identifying(t: str) -> bool:
    """A unit that can name something: a word of 3+ letters, a path, a non-ASCII word.

    `rg`, `n`, `45` and `1,50p` pieces are syntax or numbers, not identity.
    """
    if not t:
        return False
    c = t[0]
    return not c.isascii() or ((c.isalpha() or c == "_") and len(t) >= 3)


class Corpus:
    """Prior Work -> Outcome edges indexed by unit, with rarity weights.

    Rarity is counted over Work units only: outputs can be megabytes, and what makes a
    command distinctive is what it names. A unit in every prior command weighs 1; one in
    a single command weighs as much as there are candidates.
    """

    def __init__(self, candidates: Iterable[Candidate] = ()):
        self.candidates: list[Candidate] = []
        self.df: Counter[str] = Counter()
        self.postings: dict[str, list[tuple[int, int]]] = {}
        # Each pattern once, under one of its units, the rarest when it was indexed: a pattern
        # whose every unit is in `cur` is listed under one of `cur`'s units (`admitted`).
        self.keyed: dict[str, list[tuple[int, int]]] = {}
        self._outcome_lg: dict[int, Logical] = {}
        self._weights: dict[tuple[int, int], list[float]] = {}
        self.extend(candidates)

    def extend(self, candidates: Iterable[Candidate]) -> None:
        """Index more candidates in place: a warm process adds each commit's new edges only.

        Lists in `postings` are appended to, so a corpus made by `plus` must not outlive
        the next `extend` of the corpus it was made from.
        """
        for c in candidates:
            ci = len(self.candidates)
            self.candidates.append(c)
            seen: set[str] = set()
            for pi, p in enumerate(c.patterns):
                distinct = frozenset(u.text for u in p.lg.units)
                for t in distinct:
                    self.postings.setdefault(t, []).append((ci, pi))
                if distinct:
                    self.keyed.setdefault(min(distinct, key=lambda t: (self.df.get(t, 0), -len(t), t)), []).append((ci, pi))
                seen |= distinct
            self.df.update(seen)
        self._weights.clear()  # rarity depends on the corpus size and df

    def plus(self, candidates: list[Candidate]) -> "Corpus":
        """This corpus and a few more candidates (the current turn's), leaving this one as it is.

        The new candidates are indexed on their own and layered over this corpus's tables,
        which are shared, not copied: a proposed tool call at 10,000 stored calls would
        otherwise copy tens of thousands of entries to add two or three.
        """
        extra = Corpus()
        extra.extend(candidates)
        n = len(self.candidates)
        c = Corpus.__new__(Corpus)
        c.candidates = self.candidates + extra.candidates
        c.df = _Sum(self.df, extra.df)
        c.postings = Concat(self.postings, {t: [(ci + n, pi) for ci, pi in ps] for t, ps in extra.postings.items()})
        c.keyed = Concat(self.keyed, {t: [(ci + n, pi) for ci, pi in ps] for t, ps in extra.keyed.items()})
        c._outcome_lg = ChainMap({}, self._outcome_lg)  # the base's memo is valid for its indices
        c._weights = {}
        return c

    def pattern_weights(self, ci: int, pi: int) -> list[float]:
        w = self._weights.get((ci, pi))
        if w is None:
            w = self._weights[(ci, pi)] = self.weights(self.candidates[ci].patterns[pi])
        return w

    def weights(self, p: Pattern) -> list[float]:
        n = len(self.candidates)
        return [0.0 if i < p.framing or u.option or not identifying(u.text) else float(n + 1 - min(n, self.df.get(u.text, 0)))
                for i, u in enumerate(p.lg.units)]

    def rare(self, t: str) -> bool:
        """A unit in at most an eighth of the prior Works (at least 2, at most RARE_CAP): it names something specific.

        The floor of 2 keeps a young store useful: a symbol seen in one command and the
        request that asked for it is still specific.
        """
        return identifying(t) and self.df.get(t, 0) <= max(2, min(len(self.candidates) // 8, RARE_CAP))

    def outcome_logical(self, ci: int) -> Logical:
        lg = self._outcome_lg.get(ci)
        if lg is None:
            lg = logical((self.candidates[ci].outcome.as_text() or "")[:GROUND_CAP])
            self._outcome_lg[ci] = lg
        return lg

    def within(self, k: tuple[int, int], distinct: frozenset[str]) -> bool:
        """Every unit of pattern k occurs in `distinct`. Read from the pattern, not kept as a
        set per pattern: those sets were 30 MB of a 10,000-turn manager."""
        ci, pi = k
        return all(u.text in distinct for u in self.candidates[ci].patterns[pi].lg.units)

    def admitted(self, cur: Pattern) -> list[tuple[int, int]]:
        """The (candidate, pattern) pairs that can match `cur`, found through the postings.

        Only two kinds can: a prior pattern whose every unit occurs in `cur` (it may be
        completed), and one sharing a rare unit with `cur` (it may be advice). The first kind
        is listed in `keyed` under one of its units, so it is among the patterns keyed under
        `cur`'s units; those are few, as each pattern is keyed under its rarest unit (counting
        shared units over the postings instead read every call's `rg` and `-n` at 10,000
        stored calls: 47 ms a call). The second reads only the short postings of rare units.
        Neither compares `cur` with the whole corpus.
        """
        distinct = frozenset(u.text for u in cur.lg.units)
        out = dict.fromkeys(k for t in distinct for k in self.keyed.get(t, ()) if self.within(k, distinct))
        for t in distinct:
            if self.rare(t):
                out.update(dict.fromkeys(self.postings.get(t, ())))
        return sorted(out)


class _Sum(Mapping):
    """Two count tables read as one (a layered corpus's document frequencies)."""

    def __init__(self, a: Mapping, b: Mapping):
        self.a, self.b = a, b

    def __getitem__(self, k):
        if k not in self.a and k not in self.b:
            raise KeyError(k)
        return self.a.get(k, 0) + self.b.get(k, 0)

    def get(self, k, default=None):
        x, y = self.a.get(k, 0), self.b.get(k, 0)
        return x + y if (x or y or k in self.a or k in self.b) else default

    def __iter__(self):
        yield from self.a
        yield from (k for k in self.b if k not in self.a)

    def __len__(self):
        return len(self.a) + sum(1 for k in self.b if k not in self.a)


class Concat(Mapping):
    """Two tables of lists read as one, the base's entries first (a layered corpus or workspace)."""

    def __init__(self, a: Mapping, b: Mapping):
        self.a, self.b = a, b

    def __getitem__(self, k):
        x, y = self.a.get(k), self.b.get(k)
        if x is None and y is None:
            raise KeyError(k)
        return (x or []) + (y or [])

    def get(self, k, default=None):
        try:
            return self[k]
        except KeyError:
            return default

    def __iter__(self):
        yield from self.a
        yield from (k for k in self.b if k not in self.a)

    def __len__(self):
        return len(self.a) + sum(1 for k in self.b if k not in self.a)


@dataclass(frozen=True, slots=True)
class Match:
    demand: Value  # the Work being served: the current request/call, or a demanded child
    cand: int
    past: Pattern
    cur: Pattern
    pin: bool  # every unit of the prior fragment is in the current one (forward containment)
    din: bool  # every unit of the current fragment is in the prior one
    pin_weight: float  # share of the prior pattern's identifying weight covered
    din_weight: float
    past_identity: float  # identifying weight of the covered prior units
    anchored: bool  # a shared unit is rare in the corpus (names something specific)
    reads: bool  # both fragments only read (a prior run can stand in for a repeat)
    additive: bool  # extra operands in the current call only add inputs (containment is enough)
    new_options: bool  # the current fragment has option units the prior one lacks
    past_frag: Atom
    cur_frag: Atom
    grounded: Atom | None  # the prior output's lines holding the fragment's identifying units
    tool: bool
    retrieved: bool = False
    redacted: bool = False  # the prior call's Work or outcome holds a redaction marker (Candidate.redacted)

    @classmethod
    def whole_call(cls, demand: Value, ci: int, whole: Pattern, cur: Pattern, cand: "Candidate") -> "Match":
        """The current call is the prior one, whole (the same canonical Work): every gate open but the tool's own."""
        return cls(demand, ci, whole, cur, pin=True, din=True, pin_weight=1.0, din_weight=1.0, past_identity=1.0, anchored=True,
                   reads=True, additive=True, new_options=False, past_frag=cand.work, cur_frag=demand, grounded=None, tool=cand.tool,
                   redacted=cand.redacted)

    @classmethod
    def nomination(cls, inquiry: Value, ci: int, past: Pattern, cur: Pattern, cand: "Candidate") -> "Match":
        """What retrieval nominated, as an advisory match: it never completes and never unifies."""
        return cls(inquiry, ci, past, cur, pin=False, din=False, pin_weight=0.0, din_weight=0.0, past_identity=0.0, anchored=False,
                   reads=False, additive=False, new_options=False, past_frag=cand.work, cur_frag=inquiry, grounded=None, tool=cand.tool,
                   retrieved=True)

    @property
    def completed(self) -> bool:
        """The forward reusable-work gate (see the module docstring).

        A redacted or withheld prior output is never the real output of the call, so it
        never stands in for running it (it may still be advice).
        """
        return (not self.retrieved and self.tool and self.pin and self.past_identity > 0 and not self.new_options
                and self.reads and (self.din or self.additive) and (self.past.whole or self.grounded is not None)
                and not self.redacted)

    @property
    def relevant(self) -> bool:
        """Worth showing as advice: a rare unit is shared, and one side is whole or a third shared.

        A common directory name or a shared verb alone ("cd src" against "ls src") is not.
        """
        if self.retrieved or self.completed:
            return True
        return self.anchored and (self.pin or self.din or max(self.pin_weight, self.din_weight) >= ADVICE_SHARE)

    @property
    def projection_work(self) -> Value:
        return self.cur_frag if self.tool else self.demand


def unit_key(lg: Logical, u) -> str:
    """What a unit is compared by: its folded text, but an option as written (`-r` is not `-R`)."""
    return "-" + lg.source[u.start:u.end] if u.option else u.text


def _cover(a: Logical, b: Logical) -> tuple[list[int], list[int]]:
    """Orderless one-to-one cover: units of a found in b and units of b found in a (first occurrences)."""
    ka = [unit_key(a, u) for u in a.units]
    kb = [unit_key(b, u) for u in b.units]
    left, right = Counter(kb), Counter(ka)
    ia, ib = [], []
    for i, k in enumerate(ka):
        if left[k] > 0:
            left[k] -= 1
            ia.append(i)
    for i, k in enumerate(kb):
        if right[k] > 0:
            right[k] -= 1
            ib.append(i)
    return ia, ib


def _frag(p: Pattern, covered: list[int]) -> Atom:
    from eggshell.reuse.logical import fragment_text

    if len(covered) == len(p.lg.units):
        return p.value
    return Atom.text(fragment_text(p.lg, covered))


def match_pair(corpus: Corpus, demand: Value, cur: Pattern, ci: int, pi: int, wc: list[float] | None = None) -> Match | None:
    cand = corpus.candidates[ci]
    past = cand.patterns[pi]
    if not past.lg.units or not cur.lg.units:
        return None
    ip, ic = _cover(past.lg, cur.lg)
    if not ip:
        return None
    wp = corpus.pattern_weights(ci, pi)
    wc = corpus.weights(cur) if wc is None else wc
    covered_wp = sum(wp[i] for i in ip)
    covered_wc = sum(wc[i] for i in ic)
    if covered_wp == 0 and covered_wc == 0:
        return None  # nothing identifying is shared: syntax or prose overlap only
    past_opts = Counter(unit_key(past.lg, u) for u in past.lg.units if u.option)
    cur_opts = Counter(unit_key(cur.lg, u) for u in cur.lg.units if u.option)
    cur_frag = _frag(cur, ic)
    pr, pa = reads_only(past.text, past.framing)
    cr, ca = reads_only(cur.text, cur.framing)
    reads, additive = pr and cr, pa and ca
    grounded = None
    if cand.tool and len(ip) == len(past.lg.units) and not past.whole:
        grounded = _ground(corpus, ci, [cur.lg.units[i].text for i in ic if wc[i] > 0 and not _pathlike(cur.lg.units[i].text)],
                           [p.text.partition("\n")[2] for p in cand.patterns])
    return Match(
        demand, ci, past, cur,
        pin=len(ip) == len(past.lg.units), din=len(ic) == len(cur.lg.units),
        pin_weight=covered_wp / (sum(wp) or 1.0), din_weight=covered_wc / (sum(wc) or 1.0),
        past_identity=covered_wp, anchored=any(corpus.rare(past.lg.units[i].text) for i in ip),
        reads=reads, additive=additive,
        new_options=bool(cur_opts - past_opts),
        past_frag=_frag(past, ip), cur_frag=cur_frag, grounded=grounded, tool=cand.tool, redacted=cand.redacted,
    )


def _pathlike(t: str) -> bool:
    return "/" in t or "." in t


def _ground(corpus: Corpus, ci: int, texts: list[str], clauses: list[str]) -> Atom | None:
    """The prior output's lines that hold any of these identifying units, or None.

    A batched command's output cannot be split by clause, so only what a clause looks
    for grounds it: its symbols and words, not its paths (`cat b.txt` never prints
    "b.txt", while another clause's output may). Lines that merely echo a clause (a
    `set -x` trace, a prompt line) are not results.
    """
    if not texts:
        return None
    want = set(texts)
    lg = corpus.outcome_logical(ci)
    echo = [c.strip() for c in clauses if c.strip()]
    spans = [(u.start, u.end) for u in lg.units if u.text in want]
    if not spans:
        return None
    kept = []
    for line in (result_lines(lg.source, spans) or "").split("\n"):
        bare = line.strip().lstrip("+$> ").strip()
        if bare and bare not in echo:
            kept.append(line)
    return Atom.text("\n".join(kept)) if kept else None


def find(corpus: Corpus, demand: Value, text: str) -> list[Match]:
    """Every admitted match of one demanded Work against the corpus, best first."""
    cur_patterns = patterns_of(Atom.text(text)) if isinstance(demand, Atom) else ()
    out: list[Match] = []
    for cur in cur_patterns:
        wc = corpus.weights(cur)
        for ci, pi in corpus.admitted(cur):
            m = match_pair(corpus, demand, cur, ci, pi, wc)
            if m is not None and m.relevant:
                out.append(m)
    out.sort(key=lambda m: (not m.completed, -(m.pin_weight + m.din_weight), m.cand, m.past.text))
    return out


def identity_match(corpus: Corpus, demand: Atom, ci: int) -> Match:
    """A prior Work the user declared equal to the demand (a persistent union): whole identity.

    The user's union stands in for the textual containment; the rest of the gate (a
    tool-level owner, an intrinsic match) still applies, so a declared equality with a
    turn's request stays advice.
    """
    cand = corpus.candidates[ci]
    cur, past = patterns_of(demand)[0], cand.patterns[0]
    whole = Pattern(past.text, cand.work, True, past.lg, past.framing)
    return Match.whole_call(demand, ci, whole, cur, cand)


def projection_outcome(corpus: Corpus, m: Match) -> Atom:
    """What is handed over: the whole prior output, or only its grounded lines."""
    cand = corpus.candidates[m.cand]
    if not m.tool or (m.past.whole and m.pin) or m.grounded is None:
        return cand.outcome
    return m.grounded


def projected_edge(corpus: Corpus, m: Match) -> Apply:
    """The owner edge itself, or a run-local Outcome that cites its owner as Exact provenance."""
    cand = corpus.candidates[m.cand]
    work, out = m.projection_work, projection_outcome(corpus, m)
    if work == cand.work and out == cand.outcome:
        return cand.edge
    return apply(Op.OUTCOME, (S, work), (S, out), (E, cand.edge))


def candidates_from(roots: Iterable[Value], alls: Iterable[Apply]) -> list[Candidate]:
    """Candidates from stored Outcome relations whose Work and outcome are UTF-8 text.

    A Work that is a child of some All (a tool call inside a turn) is a tool-level owner;
    a turn's request (the All's parent) is not.
    """
    return candidates_under(roots, tool_children(alls))


def tool_children(alls: Iterable[Apply]) -> set[Value]:
    """The Works that are children of some turn's All: tool-level owners."""
    children: set[Value] = set()
    for a in alls:
        children.update(r.target for r in a.args[1:])
    return children


def candidates_under(roots: Iterable[Value], children: set[Value]) -> list[Candidate]:
    """candidates_from with the tool-level Works already gathered (a warm workspace keeps them)."""
    out = []
    for v in roots:
        if not (isinstance(v, Apply) and v.op is Op.OUTCOME):
            continue
        w, o = v.args[0].target, v.args[1].target
        if not (isinstance(w, Atom) and isinstance(o, Atom)) or w.as_text() is None or o.as_text() is None:
            continue
        out.append(Candidate(v, w, o, w in children, patterns_of(w)))
    return out


def canonical_tool_work(name: str, tool_input: object) -> str:
    from eggshell.graph.turns import work_text

    try:
        return work_text(name, tool_input)
    except (TypeError, ValueError):
        return name + "\n" + json.dumps(str(tool_input))
