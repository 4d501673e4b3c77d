"""The reuse engine: match, unify, saturate, extract; one plan per inquiry.

An inquiry is the current request or a proposed tool call. Intrinsic matches
(intrinsic.py) propose run-local unions between the current fragment and the prior
one; a union can expose new open demand (when the current request equals a prior
request, that request's tool calls become demanded Work), which is matched in the next
pass. Only the newly demanded frontier is matched each pass, and the loop stops when
nothing changes; every pass adds a union or a demanded Work, so it runs at most
(candidates + stored All edges + 2) times: linear in the graph, not a product.

Nothing here is stored: unions and projected outcomes live for one inquiry. The result
is checked by extraction.valid_for; an inconsistent equality degrades to no plan.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

from eggshell.reuse import extraction as ex
from eggshell.reuse.intrinsic import Corpus, Match, find, identity_match, patterns_of, projected_edge, projection_outcome
from eggshell.reuse.quotient import Union, build
from eggshell.graph.turns import REMAINDER_MARKER
from eggshell.core.values import Apply, Atom, Op, S, Value, apply

MAX_SELECTED = 12  # matches handed over per inquiry; the rest are not worth the agent's attention


@dataclass(frozen=True, slots=True)
class Selected:
    match: Match
    edge: Apply  # the projected edge (the owner itself, or a run-local Outcome citing it)
    status: str  # ex.COMPLETED or ex.ADVISORY
    boundary: bool  # matched against the inquiry itself, not a demanded child
    nominated: int | None = None  # its place among retrieval's nominations (None: not nominated)

    @property
    def blocks(self) -> bool:
        """Only a completed, local, tool-level match on the inquiry itself may stop a call."""
        m = self.match
        return self.status == ex.COMPLETED and self.boundary and not m.retrieved and m.tool and m.completed


@dataclass(frozen=True, slots=True)
class Plan:
    inquiry: Atom
    extraction: ex.Extraction
    selected: tuple[Selected, ...]
    unions: tuple[Union, ...]  # run-local, never stored
    passes: int
    continuation: Apply | None


def remainder(inquiry: Atom) -> Atom:
    return Atom.text(REMAINDER_MARKER + (inquiry.as_text() or ""))


def _retrieved(corpus: Corpus, inquiry: Atom, ci: int) -> Match:
    """A retrieval nomination as an advisory match on the inquiry (never completes, never unifies)."""
    cand = corpus.candidates[ci]
    cur = patterns_of(inquiry)[0]
    past = cand.patterns[0]
    return Match.nomination(inquiry, ci, past, cur, cand)


def alls_by_parent(alls: Iterable[Apply]) -> dict[Value, list[Apply]]:
    """Each turn request's decompositions (Alls), for finding a matched Work's children."""
    out: dict[Value, list[Apply]] = {}
    for a in alls:
        out.setdefault(a.args[0].target, []).append(a)
    return out


def discover(corpus: Corpus, stored_alls: Sequence[Apply], inquiry: Atom, *, persistent: Sequence[Union] = (),
             retrieved: Iterable[int] = (), local_union: bool = True, evidence: str | None = None,
             by_parent: Mapping[Value, list[Apply]] | None = None) -> Plan | None:
    """The plan for one inquiry, or None when the equality cannot be certified.

    `by_parent` is alls_by_parent(stored_alls), when the caller keeps it (a warm workspace).
    """
    if by_parent is None:
        by_parent = alls_by_parent(stored_alls)
    declared = _declared(corpus, persistent)
    hits: dict[tuple, Match] = {}
    nominated: dict[int, int] = {}
    for ci in dict.fromkeys(retrieved):
        if 0 <= ci < len(corpus.candidates):
            nominated[ci] = len(nominated)
            m = _retrieved(corpus, inquiry, ci)
            hits[(inquiry, ci, "retrieved")] = m
    unions: list[Union] = []
    matched: set[Value] = set()
    frontier: list[Value] = [inquiry]
    continuation: Apply | None = None
    passes = 0
    edges: dict[tuple, Apply] = {}  # projected edge per hit, built once across passes
    fuel = len(corpus.candidates) + len(stored_alls) + 2
    while True:
        fuel -= 1
        new: list[Match] = []
        for d in frontier:
            matched.add(d)
            text = d.as_text() if isinstance(d, Atom) else None
            if text is None or text.startswith(REMAINDER_MARKER):
                continue
            for m in [*declared(d), *find(corpus, d, text)]:
                if not local_union:
                    m = replace(m, retrieved=True)  # the advisory-only profile: reuse becomes retrieval
                key = (m.demand, m.cand, m.past.text, m.cur_frag)
                if key not in hits:
                    hits[key] = m
                    new.append(m)
        proposed = []
        for m in new:
            if not m.retrieved and m.cur_frag != m.past_frag:
                u = Union(m.cur_frag, m.past_frag, "run")
                if u not in unions and u not in proposed:
                    proposed.append(u)
        unions += proposed
        eq = build([inquiry, *(u.left for u in unions), *(u.right for u in unions)], [*persistent, *unions])
        if eq is None:
            return None
        graph, policy = _graph(corpus, eq, by_parent, hits.values(), continuation, inquiry, edges)
        result = ex.extract(graph, eq, policy, inquiry)
        kids = set(continuation.args[i].target for i in range(1, len(continuation.args))) if continuation else set()
        frontier = [t for t in result.discovery if t not in matched and t not in kids]
        if fuel <= 0 or (not proposed and not frontier):
            decomposed = any(a is not continuation and eq.same(a.args[0].target, inquiry) for a in graph.alls)
            if continuation is None and fuel > 0 and not decomposed:
                parts = list(dict.fromkeys(m.projection_work for m in hits.values()
                                           if m.demand == inquiry and m.tool and m.relevant and m.projection_work != inquiry))
                if parts:
                    continuation = apply(Op.ALL, (S, inquiry), *[(S, p) for p in parts], (S, remainder(inquiry)))
                    passes += 1
                    continue
            return Plan(inquiry, result, _select(corpus, result, hits.values(), inquiry, evidence, edges, nominated), tuple(unions), passes, continuation)
        passes += 1


def _declared(corpus: Corpus, persistent: Sequence[Union]):
    """Demand -> identity matches with the prior Works the user's unions make equal to it."""
    if not persistent:
        return lambda d: []
    eq = build([u.left for u in persistent] + [u.right for u in persistent], persistent)
    if eq is None:
        return lambda d: []
    by_work: dict[Value, list[int]] = {}
    for ci, c in enumerate(corpus.candidates):
        by_work.setdefault(eq.canonical(c.work), []).append(ci)

    def matches(d: Value) -> list[Match]:
        if not isinstance(d, Atom):
            return []
        return [identity_match(corpus, d, ci) for ci in by_work.get(eq.canonical(d), []) if corpus.candidates[ci].work != d]

    return matches


def _edge(corpus: Corpus, m: Match, edges: dict[tuple, Apply]) -> Apply:
    key = (m.demand, m.cand, m.past.text, m.cur_frag, m.retrieved)
    e = edges.get(key)
    if e is None:
        e = edges[key] = projected_edge(corpus, m)
    return e


def _graph(corpus: Corpus, eq, by_parent: Mapping[Value, list[Apply]], hits: Iterable[Match], continuation: Apply | None, inquiry: Atom,
           edges: dict[tuple, Apply]):
    """The run graph: stored decompositions of demanded Work, projected edges of the hits."""
    table: dict[Apply, str] = {}
    outcomes: list[Apply] = []
    for m in hits:
        if not m.relevant:
            continue
        e = _edge(corpus, m, edges)
        status = ex.COMPLETED if m.completed else ex.ADVISORY
        if table.get(e) != ex.COMPLETED:
            table[e] = status
        outcomes.append(e)
    # Stored decompositions of any demanded Work or of a Work equal to one: look the parents
    # up through the (few) non-trivial classes rather than scanning every stored turn.
    demanded = {inquiry, *(m.demand for m in hits)}
    wanted = {eq.canonical(v) for v in demanded}
    parents = set(demanded)
    for cls in eq.classes():
        if eq.canonical(next(iter(cls))) in wanted:
            parents |= cls
    alls = [a for p in parents for a in by_parent.get(p, ())]
    if continuation is not None:
        alls.insert(0, continuation)
    policy = lambda demand, edge: table.get(edge)  # noqa: E731 - extraction checks the work equality itself
    return ex.WorkGraph(tuple(alls), tuple(outcomes)), policy


def _visible_in(evidence: str, outcome: Atom) -> bool:
    """The new result already shows this prior outcome (most of its lines), so resending it is noise."""
    lines = [x.strip() for x in (outcome.as_text() or "").splitlines() if x.strip()]
    if not lines:
        return True
    shown = {x.strip() for x in evidence.splitlines()}
    return sum(1 for x in lines if x in shown) * 2 >= len(lines)


def _select(corpus: Corpus, result: ex.Extraction, hits: Iterable[Match], inquiry: Atom, evidence: str | None,
            edges: dict[tuple, Apply], nominated: Mapping[int, int] | None = None) -> tuple[Selected, ...]:
    """Matches whose projected edge the extraction used: completed first, then what retrieval
    nominated (in its order: it ranked them), then other advice, tool-level first.

    At most MAX_SELECTED that retrieval did not nominate: a prompt's words match many prior
    commands; the nominations are bounded by retrieval's own top_k."""
    nominated = nominated or {}
    completed = {e for _, e in result.completed_uses}
    advisory = {e for _, e in result.advisory_uses}
    out: list[Selected] = []
    seen: set[Apply] = set()
    # Intrinsic matches first: when retrieval nominates the very edge a match completes,
    # the intrinsic match is the one that stands (and may block); retrieval stays advice.
    for m in sorted(hits, key=lambda m: m.retrieved):
        if not m.relevant:
            continue
        e = _edge(corpus, m, edges)
        if e in seen:
            continue
        status = ex.COMPLETED if e in completed else ex.ADVISORY if e in advisory else None
        if status is None:
            continue
        if m.retrieved:
            status = ex.ADVISORY
        if evidence is not None and _visible_in(evidence, projection_outcome(corpus, m)):
            continue
        seen.add(e)
        out.append(Selected(m, e, status, m.demand == inquiry, nominated.get(m.cand)))
    far = len(nominated)
    out.sort(key=lambda s: (s.status != ex.COMPLETED, far if s.nominated is None else s.nominated, not s.match.tool, s.match.retrieved))
    # The same command with the same output, recorded in several turns, is one piece of evidence.
    unique: dict[tuple, Selected] = {}
    for sel in out:
        c = corpus.candidates[sel.match.cand]
        unique.setdefault((sel.status, c.work, projection_outcome(corpus, sel.match)), sel)
    others = 0
    kept = []
    for sel in unique.values():
        if sel.nominated is None:
            others += 1
            if others > MAX_SELECTED:
                continue
        kept.append(sel)
    return tuple(kept)
