"""Read turns back out of a graph, and the searchable text each one exposes.

The graph has no kind tags, so a turn is recognised by its Receipt: a completed
turn's Receipt pins its answer Outcome, an interrupted one pins its decomposition and
the interrupted marker. Tool outcomes are tied to their turn through the Exact
(session, turn) of their native Occurrence.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterable

from eggshell.core.identity import content_hex, display_key
from eggshell.graph.store import Graph
from eggshell.graph.turns import in_workdir, receipt_of, split_work, tool_occurrence
from eggshell.core.values import Apply, Atom, Op, Value, dataclass_reduce, readable

OUTPUT_CAP = 1000  # characters of each tool output that go into searchable text
RECORD_CAP = 8000  # characters of searchable text per record, so one huge turn cannot stall search


@dataclass(frozen=True, slots=True)
class ToolView:
    work: str
    output: str | Value  # the recorded output, or the graph's Value holding it (read as text when asked)
    id: str  # content id of the tool's Outcome relation
    use_id: str

    __reduce__ = dataclass_reduce

    @property
    def outcome(self) -> str:
        """The output as text. A view keeps the graph's own Value, not a decoded copy: a warm
        searcher's views of 10,000 turns held every tool output a second time, as text."""
        o = self.output
        return o if isinstance(o, str) else _text(o)


@dataclass(frozen=True, slots=True)
class TurnView:
    id: str  # content id of the owner: the answer Outcome, or the All of an interrupted turn
    session: str
    turn: str
    cwd: str
    prompt: str
    answer: str | None
    tools: tuple[ToolView, ...]
    time: str
    store: str  # path of the .egg it came from

    __reduce__ = dataclass_reduce

    @property
    def key(self) -> str:
        return display_key(self.id)


def _text(v: Value) -> str:
    return readable(v)


def _native(out: Apply) -> tuple[str, str, str] | None:
    """(session, turn, use_id) of a tool Outcome whose Occurrence is native (outcome first)."""
    occ = tool_occurrence(out)
    return (occ.session, occ.turn, occ.use_id) if occ is not None else None


def turn_views(g: Graph) -> list[TurnView]:
    """Every recorded turn in the graph, oldest first; a re-recorded turn keeps its latest form."""
    return LiveViews(g).current()


class LiveViews:
    """turn_views of one graph, kept current by reading only the roots committed since the last look.

    A turn committed while it was open (an interrupted Receipt with its calls so far) is
    replaced by its sealed form later, and a settled open turn by a longer one. Reading every
    root again on each commit cost a 100,000-turn store seconds per saved turn; `update` reads
    the new roots, and re-derives only the turns they belong to, exactly as a full read would.
    """

    def __init__(self, g: Graph):
        self.graph = g
        self.generation = getattr(g, "generation", 0)  # a tombstone that hid live roots: read again (`stale`)
        self._seen = 0  # roots of g.root_ids read so far, in commit order
        self._tools: dict[tuple[str, str], list[ToolView]] = {}
        self._receipts: dict[tuple[str, str], list[tuple[tuple, str]]] = {}
        self.latest: dict[tuple[str, str], TurnView] = {}

    def stale(self, g: Graph) -> bool:
        """Whether this cannot be brought current by reading appended roots (another graph, roots removed)."""
        return g is not self.graph or getattr(g, "generation", 0) != self.generation or len(g.root_ids) < self._seen

    def current(self) -> list[TurnView]:
        self.update()
        return sorted(self.latest.values(), key=lambda t: (t.time, t.id))

    def update(self) -> list[tuple[TurnView, TurnView | None]]:
        """Read the roots committed since; (view, the view it replaces or None) for each turn that changed,
        oldest first."""
        g = self.graph
        touched: dict[tuple[str, str], None] = {}
        for rid, commit in itertools.islice(g.root_ids.items(), self._seen, None):
            self._seen += 1
            v = g.nodes[rid]
            if not isinstance(v, Apply):
                continue
            if v.op is Op.OUTCOME:
                nat = _native(v)
                if nat is not None:
                    sess, turn, use = nat
                    self._tools.setdefault((sess, turn), []).append(
                        ToolView(_text(v.args[0].target), v.args[1].target, rid, use))
                    if (sess, turn) in self._receipts:
                        touched[(sess, turn)] = None
            elif (rec := receipt_of(v)) is not None:
                self._receipts.setdefault((rec[0], rec[1]), []).append((rec, commit.time))
                touched[(rec[0], rec[1])] = None
        changed = []
        for key in touched:
            view = self._view(key)
            prior = self.latest.get(key)
            if view != prior:
                self.latest[key] = view
                changed.append((view, prior))
        changed.sort(key=lambda vp: (vp[0].time, vp[0].id))
        return changed

    def _view(self, key: tuple[str, str]) -> TurnView:
        """The turn's view as of every Receipt read so far, the rule a full read applies in root order."""
        best: TurnView | None = None
        for rec, when in self._receipts[key]:
            sess, turn, prompt, answer, owner, cwd, decomposition = rec
            oid = content_hex(owner)
            # Roots keep the order they were committed in, which is call order: egg-save announced the
            # turn's text in that order, so the text rebuilt here is the same bytes (the pre-indexed
            # vectors are found). An answer identical to its request looks like a native tool Outcome
            # (output first): it is the owner, never one of its calls.
            tools = tuple(t for t in self._tools.get(key, []) if t.id != oid)
            view = TurnView(oid, sess, turn, cwd, prompt, answer, tools, when, self.graph.path)
            if best is None or (best.answer is None) or (view.answer is not None and when >= best.time):
                best = view
        assert best is not None
        return best


class TurnKeys:
    """The turns of one graph as (session, turn) keys only, kept current as LiveViews is: what a
    count needs. A second LiveViews kept for SessionStart's count held every turn's view again
    (21 MB at 10,000 turns) beside the searcher's."""

    def __init__(self, g: Graph):
        self.graph = g
        self.generation = getattr(g, "generation", 0)
        self._seen = 0
        self.keys: set[tuple[str, str]] = set()

    stale = LiveViews.stale

    def update(self) -> int:
        """Read the roots committed since; how many turns the graph holds."""
        g = self.graph
        for rid in itertools.islice(g.root_ids, self._seen, None):
            self._seen += 1
            v = g.nodes[rid]
            if isinstance(v, Apply) and v.op is not Op.OUTCOME and (rec := receipt_of(v)) is not None:
                self.keys.add((rec[0], rec[1]))  # a turn is there once a Receipt of it is (LiveViews.update)
        return len(self.keys)


def command_of(work: str) -> str:
    """The human part of a tool Work: a shell command, or the input JSON.

    An editor tool's `command` is a verb ("view", "str_replace") and its `path` the object,
    so both are kept: the verb alone names no file to search by or to show.
    """
    parsed = split_work(work)
    if parsed is None:
        return work
    name, inp = parsed
    if isinstance(inp, dict):
        for k in ("command", "cmd", "file_path", "path", "pattern", "query"):
            if isinstance(inp.get(k), str):
                where = next((inp[p] for p in ("file_path", "path") if isinstance(inp.get(p), str)), None)
                if k in ("command", "cmd") and where and where not in inp[k]:
                    return "%s %s" % (inp[k], where)
                return in_workdir(inp, inp[k]) if k in ("command", "cmd") else inp[k]
    return work.partition("\n")[2]


def searchable_text(t: TurnView) -> str:
    """What search sees of a turn: request, answer, commands and capped outputs.

    An interrupted turn has no answer, so its observed operations carry it.
    """
    parts = [t.prompt]
    if t.answer:
        parts.append(t.answer)
    for tool in t.tools:
        parts.append(command_of(tool.work))
        parts.append(tool.outcome[:OUTPUT_CAP])
    return "\n".join(p for p in parts if p)[:RECORD_CAP]


def tool_inputs(t: TurnView) -> str:
    """What a turn ran, read and changed: its tool calls' whole inputs, edits included.

    searchable_text keeps only each call's command and path, which a reader scans; ranking
    a long query also weighs these (search/rank.LONG_WEIGHTS). Capped as a record is.
    """
    return "\n".join(tool.work for tool in t.tools)[:RECORD_CAP]


def index_items(views: Iterable[TurnView]) -> list[dict]:
    """Provider `index` items for these turns: id and text, and what the built-in provider checks
    right before it writes a vector (graph/tombstones.Gate): the store, the turn's (session, turn)
    Atom ids and its roots, so a turn forgotten while it was being embedded is never cached."""
    return [{"id": t.id, "text": searchable_text(t), "store": t.store,
             "turn": [content_hex(Atom.text(t.session)), content_hex(Atom.text(t.turn))],
             "roots": [t.id, *(x.id for x in t.tools)]} for t in views]


def view_of_turn(turn, compiled, time: str, store: str) -> TurnView:
    """The TurnView of a turn just compiled, without re-reading the graph."""
    owner = compiled.answer_outcome if compiled.answer_outcome is not None else compiled.decomposition
    oid = content_hex(owner)
    tools: dict[str, ToolView] = {}  # each Outcome once, as the graph holds it (turn_views reads it back)
    for call, o in zip(turn.tools, compiled.tool_outcomes):
        h = content_hex(o)
        if h != oid:
            tools.setdefault(h, ToolView(_text(o.args[0].target), o.args[1].target, h, call.id))
    return TurnView(oid, turn.session, turn.turn, turn.cwd, turn.prompt, turn.answer, tuple(tools.values()), time, store)
