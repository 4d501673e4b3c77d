"""From stores (and a chat) to a reuse handoff: the one path hooks and egg-extract share.

A Workspace is the prior work an inquiry can reuse: every Work -> Outcome edge of the
selected `.egg` graphs (plus the current turn's journaled tool calls, which are not
committed yet), their turn decompositions and the user's persistent unions. `handoff`
runs the engine (reuse.discover) on one inquiry and renders the result
(handoff.render_plan); any failure of the engine degrades to "no prior work".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from .handoff import DEFAULT_BUDGET, PlanHandoff, owner_of, render_plan
from .identity import content_hex
from .commands import deniable
from .intrinsic import Candidate, Corpus, candidates_from
from .quotient import Union
from .reuse import Plan, discover
from .values import Apply, Atom, Op, Value

EMPTY = PlanHandoff("", False, (), (), (), ())


@dataclass(frozen=True, slots=True)
class Workspace:
    corpus: Corpus
    alls: tuple[Apply, ...]
    unions: tuple[Union, ...]  # persistent ones, from the .egg files
    index: dict[str, int]  # content id (hex) of a candidate's edge -> its index


def workspace(graphs: Iterable, staged: Iterable[Value] = ()) -> Workspace:
    """Prior work from these graphs (store.Graph), plus staged Values of the current turn."""
    roots: list[Value] = []
    pairs: list[tuple[Value, Value]] = []
    for g in graphs:
        roots.extend(g.roots())
        pairs.extend(g.unions())
    staged = list(staged)
    alls = tuple(dict.fromkeys(v for v in [*roots, *staged] if isinstance(v, Apply) and v.op is Op.ALL))
    cands: list[Candidate] = []
    seen: set[Apply] = set()
    for values, is_staged in ((roots, False), (staged, True)):
        for c in candidates_from(values, alls):
            if c.edge not in seen:
                seen.add(c.edge)
                cands.append(Candidate(c.edge, c.work, c.outcome, c.tool, c.patterns, staged=is_staged))
    corpus = Corpus(cands)
    index = {content_hex(c.edge): i for i, c in enumerate(corpus.candidates)}
    return Workspace(corpus, alls, tuple(Union(a, b, "workspace") for a, b in pairs), index)


def plan(ws: Workspace, inquiry: str, *, retrieved: Iterable[str] = (), local_union: bool = True,
         evidence: str | None = None) -> Plan | None:
    """The engine's plan for one inquiry (a request, or a canonical tool Work)."""
    idx = [ws.index[i] for i in retrieved if i in ws.index]
    return discover(ws.corpus, ws.alls, Atom.text(inquiry), persistent=ws.unions, retrieved=idx,
                    local_union=local_union, evidence=evidence)


def handoff(ws: Workspace, inquiry: str, shown: str | None = None, *, retrieved: Iterable[str] = (), budget: int = DEFAULT_BUDGET,
            delivered: frozenset[str] = frozenset(), session: str | None = None, after_compaction: bool = False,
            enforce: bool = False, local_union: bool = True, evidence: str | None = None,
            log: Callable[[str], None] = lambda m: None) -> PlanHandoff:
    """The rendered handoff (or deny reason) for one inquiry; EMPTY when there is nothing.

    `shown` is how the request is displayed (the command of a tool call); `session` is the
    chat asking: its own recorded work is already in its context unless it was compacted.
    `enforce` (PreToolUse) is honoured only for tools whose calls may be denied.
    """
    try:
        p = plan(ws, inquiry, retrieved=retrieved, local_union=local_union, evidence=evidence)
    except RecursionError as e:
        log("reuse engine: %s; no prior work handed over" % e)
        return EMPTY
    if p is None:
        log("reuse engine: the equality could not be certified; no prior work handed over")
        return EMPTY

    def visible(owner: Apply) -> bool:
        return session is not None and not after_compaction and owner_of(owner)[0] == session

    return render_plan(p, ws.corpus, shown if shown is not None else inquiry, budget, delivered, visible,
                       enforce and deniable(inquiry))
