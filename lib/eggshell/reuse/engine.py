"""From stores (and a chat) to a reuse handoff: the one path hooks and egg-extract share.

A Workspace is the prior work an inquiry can reuse: every Work -> Outcome edge of the
selected `.egg` graphs (plus the current turn's journaled tool calls, which are not
committed yet), their turn decompositions and the user's persistent unions. `handoff`
runs the engine (plan.discover) on one inquiry and renders the result
(render.render_plan); any failure of the engine degrades to "no prior work".
"""

from __future__ import annotations

import os
from collections import ChainMap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from eggshell.reuse.render import DEFAULT_BUDGET, PROMPT_FLOOR, PlanHandoff, owner_of, render_plan
from eggshell.core.identity import content_hex
from eggshell.reuse.commands import deniable, tool_name
from eggshell.reuse.intrinsic import Candidate, Concat, Corpus, candidates_from, candidates_under, tool_children
from eggshell.reuse.quotient import Union
from eggshell.reuse.plan import Plan, alls_by_parent, discover
from eggshell.core.values import Apply, Atom, Op, Value

if TYPE_CHECKING:
    from eggshell.search.searcher import Searcher

EMPTY = PlanHandoff("", False, (), (), (), ())


@dataclass(frozen=True, slots=True)
class Workspace:
    corpus: Corpus
    alls: tuple[Apply, ...]
    unions: tuple[Union, ...]  # persistent ones, from the .egg files
    index: Mapping[str, int]  # content id (hex) of a candidate's edge -> its index
    by_parent: Mapping[Value, list[Apply]]  # reuse.alls_by_parent(alls), kept by a warm workspace
    graphs: tuple = ()  # the store.Graphs it was built from: which store holds a candidate (trust.judge)


def workspace(graphs: Iterable, staged: Iterable[Value] = ()) -> Workspace:
    """Prior work from these graphs (store.Graph), plus staged Values of the current turn."""
    roots: list[Value] = []
    pairs: list[tuple[Value, Value]] = []
    graphs = tuple(graphs)
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
    return Workspace(corpus, alls, tuple(Union(a, b, "workspace") for a, b in pairs), index, alls_by_parent(alls), graphs)


class LiveWorkspace:
    """The Workspace of some stores, kept current by indexing only what each commit added.

    A warm manager holds one per set of read stores: building the workspace of 10,000
    stored calls takes most of a second, extending it by one turn a millisecond. The
    result equals `workspace(graphs, staged)` for a single store (the same candidates in
    the same order); the rare change that would make an already indexed request Work a
    tool-level one (a later turn running the request as a tool) rebuilds from scratch.
    """

    def __init__(self, stores: list):
        self.stores = list(stores)
        self._reset()

    def _reset(self) -> None:
        self._graphs: list = [None] * len(self.stores)
        self._gens = [0] * len(self.stores)  # each graph's tombstone generation when indexed
        self._seen = [0] * len(self.stores)
        self._corpus = Corpus()
        self._alls: dict[Apply, None] = {}
        self._by_parent: dict[Value, list[Apply]] = {}
        self._children: set[Value] = set()
        self._requests: set[Value] = set()  # Works of indexed candidates that are not tool-level
        self._edges: set[Apply] = set()
        self._index: dict[str, int] = {}

    def _grow(self) -> None:
        fresh: list[tuple[str, Value]] = []  # (content id, root): the store knows the ids already
        for i, st in enumerate(self.stores):
            st.refresh()
            g = st.graph
            if self._graphs[i] is not None and (g is not self._graphs[i] or g.generation != self._gens[i]):
                self._reset()  # the file was replaced or deleted, or a tombstone hid indexed roots: start over
                return self._grow()
            self._graphs[i] = g
            self._gens[i] = g.generation
            n = len(g.root_ids)
            if n > self._seen[i]:
                fresh.extend((r, g.nodes[r]) for r in list(g.root_ids)[self._seen[i]:])
                self._seen[i] = n
        if fresh and not self._add(fresh):
            self._reset()
            return self._grow()

    def _add(self, fresh: list[tuple[str, Value]]) -> bool:
        """Index new roots; False when they change an indexed candidate (then rebuild)."""
        ids = {v: i for i, v in fresh}
        values = list(ids)
        new_alls = [v for v in values if isinstance(v, Apply) and v.op is Op.ALL and v not in self._alls]
        kids = tool_children(new_alls)
        if kids & self._requests:
            return False
        self._alls.update(dict.fromkeys(new_alls))
        for a in new_alls:
            self._by_parent.setdefault(a.args[0].target, []).append(a)
        self._children |= kids
        cands = [c for c in candidates_under(values, self._children) if c.edge not in self._edges]
        base = len(self._corpus.candidates)
        for j, c in enumerate(dict((c.edge, c) for c in cands).values()):
            self._edges.add(c.edge)
            self._index[ids[c.edge]] = base + j
            if not c.tool:
                self._requests.add(c.work)
            self._corpus.extend([c])
        return True

    def current(self, staged: Iterable[Value] = (), grow: bool = True) -> Workspace:
        """The workspace now, plus the current turn's staged Values (which are not kept).

        `grow=False`: as last grown, reading the stores not at all (the manager's tool worker:
        only its main worker changes what this holds)."""
        if grow:
            self._grow()
        unions = tuple(Union(a, b, "workspace") for g in self._graphs if g is not None for a, b in g.unions())
        staged = list(staged)
        graphs = tuple(g for g in self._graphs if g is not None)
        if not staged:
            return Workspace(self._corpus, tuple(self._alls), unions, self._index, self._by_parent, graphs)
        new_alls = [v for v in dict.fromkeys(staged) if isinstance(v, Apply) and v.op is Op.ALL and v not in self._alls]
        kids = tool_children(new_alls)
        if kids & self._requests:
            return workspace(self._graphs, staged)
        cands: dict[Apply, Candidate] = {}
        for c in candidates_under(staged, self._children | kids):
            if c.edge not in self._edges and c.edge not in cands:
                cands[c.edge] = Candidate(c.edge, c.work, c.outcome, c.tool, c.patterns, staged=True)
        corpus = self._corpus.plus(list(cands.values())) if cands else self._corpus
        base = len(self._corpus.candidates)
        index = ChainMap({content_hex(e): base + j for j, e in enumerate(cands)}, self._index)
        return Workspace(corpus, (*self._alls, *new_alls), unions, index, Concat(self._by_parent, alls_by_parent(new_alls)), graphs)


def plan(ws: Workspace, inquiry: str, *, retrieved: Iterable[str] = (), local_union: bool = True,
         evidence: str | None = None) -> Plan | None:
    """The engine's plan for one inquiry (a request, or a canonical tool Work)."""
    idx = [ws.index[i] for i in retrieved if i in ws.index]
    return discover(ws.corpus, ws.alls, Atom.text(inquiry), persistent=ws.unions, retrieved=idx,
                    local_union=local_union, evidence=evidence, by_parent=ws.by_parent)


@dataclass(frozen=True, slots=True)
class Inquiry:
    """One question for the engine and the terms it is answered on: a handoff's request object.

    `text` is the request, or a proposed call's canonical Work; `shown` how it is displayed
    (the command of a call); `retrieved` what retrieval nominated (render.nominate); `session`
    the chat asking: its own recorded work is already in its context unless it was compacted,
    and `delivered` is what it was given before. `enforce` (PreToolUse) is honoured only for
    tools whose calls may be denied; `evidence` is the output of a call that has just run.
    """

    text: str
    shown: str | None = None
    retrieved: tuple[str, ...] = ()
    budget: int = DEFAULT_BUDGET
    session: str | None = None
    delivered: frozenset[str] = frozenset()
    after_compaction: bool = False
    enforce: bool = False
    local_union: bool = True
    evidence: str | None = None
    considered: tuple = ()  # relevance.Judged: every candidate turn of a prompt and its verdict (`egg why`)


def handoff(ws: Workspace, q: Inquiry, *, standing=None, log: Callable[[str], None] = lambda m: None,
            now: float | None = None) -> PlanHandoff:
    """The rendered handoff (or deny reason) for one inquiry; EMPTY when there is nothing.

    Only outcomes `standing` (standing.Judge) lets complete may deny a call. For a request
    (not a tool call), advice below render.PROMPT_FLOOR is not handed over. `now` (seconds
    since the epoch) is when the handoff's ages are counted from: the clock when None.
    """
    try:
        p = plan(ws, q.text, retrieved=q.retrieved, local_union=q.local_union, evidence=q.evidence)
    except RecursionError as e:
        log("reuse engine: %s; no prior work handed over" % e)
        return EMPTY
    if p is None:
        log("reuse engine: the equality could not be certified; no prior work handed over")
        return EMPTY

    def visible(owner: Apply) -> bool:
        return q.session is not None and not q.after_compaction and owner_of(owner)[0] == q.session

    request = not tool_name(q.text)  # a prompt, not a tool call: its advice must clear the floor
    return render_plan(p, ws.corpus, q.shown if q.shown is not None else q.text, q.budget, q.delivered, visible,
                       q.enforce and deniable(q.text), standing, now, by_parent=ws.by_parent, floor=PROMPT_FLOOR if request else None)


def inquiry_from_hits(message: dict, searcher: Searcher, budget: int, *, local_union: bool = True,
               seen: Callable[[str], tuple[frozenset[str], bool]] | None = None) -> Inquiry:
    """The Inquiry one hits message asks (egg-query's output line, or the prompt hook's own).

    `{"query": {"text": ..., "chat": ..., "turn": ...}, "hits": [...]}` or `{"query": {"tool":
    {"name", "input"}, "chat": ...}}`. With a `chat`, the handoff is the one that chat gets:
    `seen(chat)` says what it was given (its delivered keys, whether it was compacted since),
    and hits of its current `turn` are left out (that turn is in its context already).
    """
    from eggshell.graph.records import command_of
    from eggshell.reuse.intrinsic import canonical_tool_work
    from eggshell.reuse.relevance import judge
    from eggshell.reuse.render import nominate

    q = message["query"] if isinstance(message["query"], dict) else {"text": message["query"]}
    chat = q.get("chat") if isinstance(q.get("chat"), str) and q.get("chat") else None
    delivered, compacted = seen(chat) if chat is not None and seen is not None else (frozenset(), False)
    tool = q.get("tool")
    if isinstance(tool, dict):
        work = canonical_tool_work(tool["name"], tool.get("input"))
        return Inquiry(work, command_of(work), (), budget, chat, delivered, compacted, enforce=True, local_union=local_union)
    turn = q.get("turn")
    hits = [h for h in (*message.get("hits", ()), *message.get("candidates", ()))
            if isinstance(h, dict) and (chat is None or h.get("session") != chat or h.get("turn") != turn)]
    searcher.refresh()
    from eggshell.search.background import Calibration

    turns = message.get("turns")  # how many turns the search weighed (relevance.lift)
    judged = judge(q["text"], [(searcher.by_id[h["id"]], h) for h in hits if h.get("id") in searcher.by_id],
                   Calibration.of(message.get("calibration")), turns if type(turns) is int and turns > 0 else searcher.turns)
    retrieved = nominate(q["text"], judged, most=_top_k(message))
    return Inquiry(q["text"], q["text"], tuple(retrieved), budget, chat, delivered, compacted, local_union=local_union,
                   considered=tuple(judged))


def _top_k(message: dict) -> int | None:
    """How many turns a hits message may have handed over (None: as many as it holds)."""
    k = message.get("top_k")
    return k if type(k) is int and k > 0 else None


def extract(searcher: Searcher, message: dict, budget: int = DEFAULT_BUDGET, standing=None) -> PlanHandoff:
    """egg-extract on one hits message (see inquiry_from_hits), with the stores its searcher reads.

    `standing` (standing.Judge) says how each prior outcome stands now; by default its
    recorded inputs are checked in the project of the current directory and its origin in
    this user's trust ledger (`judge_here`); only the user's own unions count (trust.own_unions).
    A message naming a chat is answered as that chat would be: with what the data root's
    chat state says it was given.
    """
    from eggshell.graph import trust
    from eggshell.paths import from_env
    from eggshell.reuse.delivery import Deliveries

    paths = from_env()
    searcher.refresh()
    ledger = trust.load(paths.data_root)
    ws = trust.own_unions(workspace(s.graph for s in searcher.stores), ledger)

    def seen(chat: str) -> tuple[frozenset[str], bool]:
        state = Deliveries(paths.state_dir, chat).load()
        return state.delivered, state.after_compaction

    q = inquiry_from_hits(message, searcher, budget, seen=seen)
    return handoff(ws, q, standing=standing or judge_here(os.getcwd() if q.enforce else None, ws, ledger))


def judge_here(cwd: str | None, ws, ledger):
    """The hook's judges for a call run in `cwd` (None: a request), in the project of the current
    directory: inputs unchanged (freshness) and the user's own (trust), as on the hook path."""
    from eggshell.graph import trust
    from eggshell.reuse.freshness import reuse_judge
    from eggshell.paths import find_project, from_env
    from eggshell.core.standing import judges

    fresh = reuse_judge(find_project(os.getcwd()), cwd, None, from_env().state_dir)
    return judges(fresh, trust.judge(ws.graphs, ledger))


def as_record(h: PlanHandoff) -> dict:
    return {"handoff": {"text": h.text, "keys": list(h.keys), "omitted": list(h.omitted), "deny": h.deny, "covered": list(h.covered)}}
