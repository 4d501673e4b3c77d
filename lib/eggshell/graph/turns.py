"""Turn records and the turn compiler: one agent turn becomes a handful of Values.

A turn record is the host-neutral description of what happened:

    {"session":S,"turn":T,"cwd":DIR,"prompt":P,
     "tools":[{"name":N,"id":I,"input":{...},"output":...,"observed":{...}?}],"answer":A|null}

`observed` (optional) is what the call's inputs were when it ran (fingerprint.py); it
becomes an Exact argument of the call's Occurrence, so a later chat can check whether
the output still holds before it is reused. A record without one is simply unverified.

The compiler never invents anything: each tool call becomes Work -> Outcome with a
native Occurrence (observed outcome first), the turn becomes an All whose last child
is a permanently open remainder (so reusing a turn can never close a new one), and
an answered turn adds its own Outcome (work first) and a Receipt. A turn with no
answer keeps what was observed and an "interrupted" Receipt, never an answer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator, NamedTuple

from eggshell.errors import EggshellError
from eggshell.graph.events import terminal_text, well_formed
from eggshell.core.identity import canonical_json
from eggshell.core.values import Apply, Atom, E, Op, S, Value, apply, readable

REMAINDER_MARKER = (
    "Use the selected prior WORK->OUTCOME graph as completed or advisory history; do not redo prior "
    "native work just to verify it; re-check only on changed inputs, missing required evidence or a "
    "concrete contradiction; do every uncovered action needed to answer: "
)
RECEIPT_MARK = "eggshell receipt v1"
INTERRUPTED = "interrupted before final response"
OBSERVED_MARK = "eggshell observed v1\n"  # + canonical JSON of a fingerprint: an Occurrence's last Exact argument


class TurnError(EggshellError, ValueError):
    """A turn record that cannot be compiled; the message says which field and why."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    id: str
    input: Any
    output: str  # normalized across hosts, see normalize_output
    observed: str | None = None  # canonical JSON of its fingerprint (fingerprint.py), if one was taken


@dataclass(frozen=True, slots=True)
class Turn:
    session: str
    turn: str
    cwd: str
    prompt: str
    tools: tuple[ToolCall, ...]
    answer: str | None


@dataclass(frozen=True, slots=True)
class Compiled:
    roots: tuple[Value, ...]
    request: Atom
    decomposition: Apply  # the turn's All
    answer_outcome: Apply | None  # the turn's own Outcome, when it was answered
    tool_outcomes: tuple[Apply, ...]
    receipt: Apply


def normalize_output(output: Any) -> str:
    """One text for a tool's output, whatever the host sent.

    Codex sends Bash output as a plain string, Claude Code as an object with stdout and
    stderr; both become the text a terminal would have shown. Anything else is kept as
    canonical JSON so no information is lost.
    """
    text = terminal_text(output)
    return canonical_json(output) if text is None else text


def work_text(name: str, tool_input: Any) -> str:
    """Canonical tool Work: the tool name, a newline, canonical JSON of its input."""
    return name + "\n" + canonical_json(tool_input)


def in_workdir(inp: object, cmd: str) -> str:
    """A shell call's command as people read it: `cd WORKDIR && CMD` when the call names its own
    `workdir` (Codex's exec_command and shell), else CMD. `cat a.txt` in sub/ is another call
    than at the top: a handoff that shows its output must say where it ran. (Matching compares
    the command alone; freshness checks the call's directory: fingerprint.call_cwd.)"""
    import shlex

    workdir = inp.get("workdir") if isinstance(inp, dict) else None
    if not isinstance(workdir, str) or workdir in ("", "."):
        return cmd
    return "cd %s && %s" % (shlex.quote(workdir), cmd)


def split_work(text: str) -> tuple[str, Any] | None:
    """Inverse of work_text for display: (name, input), or None for non-tool text."""
    import json

    name, sep, rest = text.partition("\n")
    if not sep or not name or " " in name:
        return None
    try:
        return name, json.loads(rest)
    except ValueError:
        return None


def _json_text(make, what: str) -> str:
    try:
        return make()
    except (ValueError, TypeError, RecursionError) as e:
        raise TurnError("%s is not representable as JSON text (%s)" % (what, e)) from None


def _field(d: dict, key: str, kind: type, where: str, *, empty_ok: bool = False) -> Any:
    if key not in d:
        raise TurnError("%s: missing %r" % (where, key))
    v = d[key]
    if not isinstance(v, kind) or isinstance(v, bool):
        raise TurnError("%s: %r must be a %s, got %s" % (where, key, kind.__name__, type(v).__name__))
    if kind is str and not empty_ok and not v:
        raise TurnError("%s: %r must not be empty" % (where, key))
    return v


def _tool(t: Any, where: str) -> ToolCall:
    if not isinstance(t, dict):
        raise TurnError("%s: must be an object with name, id, input, output" % where)
    try:
        t, _ = well_formed(t)
    except RecursionError:
        raise TurnError("%s: nested too deeply to be stored" % where) from None
    name = _field(t, "name", str, where)
    if "\n" in name:
        raise TurnError("%s: 'name' must be one line" % where)
    tid = _field(t, "id", str, where)
    if "input" not in t:
        raise TurnError("%s: missing 'input'" % where)
    _json_text(lambda: canonical_json(t["input"]), "%s: 'input'" % where)
    output = _json_text(lambda: normalize_output(t.get("output")), "%s: 'output'" % where)
    seen = t.get("observed")
    observed = _json_text(lambda: canonical_json(seen), "%s: 'observed'" % where) if isinstance(seen, dict) else None
    return ToolCall(name, tid, t["input"], output, observed)


def parse_turn(d: Any, on_bad: Callable[[int, Any, TurnError], None] | None = None) -> Turn:
    """Validate a decoded turn record; raises TurnError naming the bad field.

    A lone UTF-16 surrogate anywhere becomes U+FFFD (see events.py). With `on_bad`, a tool
    call that cannot be stored is handed to it (index, call, error) and left out, so one
    malformed event never costs the rest of its turn.
    """
    if not isinstance(d, dict):
        raise TurnError("a turn record must be a JSON object")
    d = {k: (v if k == "tools" else well_formed(v)[0]) for k, v in d.items()}
    session = _field(d, "session", str, "turn")
    turn = _field(d, "turn", str, "turn")
    cwd = _field(d, "cwd", str, "turn", empty_ok=True)
    prompt = _field(d, "prompt", str, "turn")
    tools_raw = d.get("tools", [])
    if not isinstance(tools_raw, list):
        raise TurnError("turn: 'tools' must be a list")
    tools = []
    for i, t in enumerate(tools_raw):
        try:
            tools.append(_tool(t, "tools[%d]" % i))
        except TurnError as e:
            if on_bad is None:
                raise
            on_bad(i, t, e)
    answer = d.get("answer")
    if answer is not None and not isinstance(answer, str):
        raise TurnError("turn: 'answer' must be a string or null")
    if answer == "":
        answer = None
    return Turn(session, turn, cwd, prompt, tuple(tools), answer)


def relative_cwd(cwd: str, root: str | None) -> str:
    """The cwd as stored: relative to the project root when inside it.

    Absolute paths would tie stored identity to one machine's checkout location.
    """
    if root and cwd:
        a, r = os.path.abspath(cwd), os.path.abspath(root)
        if a == r or a.startswith(r.rstrip(os.sep) + os.sep):
            return os.path.relpath(a, r)
    return cwd


def compile_turn(t: Turn) -> Compiled:
    """The Values one turn adds to the graph (see the module docstring)."""
    sess, turn_id = Atom.text(t.session), Atom.text(t.turn)
    request = Atom.text(t.prompt)
    remainder = Atom.text(REMAINDER_MARKER + t.prompt)
    outcomes: list[Apply] = []
    works: list[Atom] = []
    for call in t.tools:
        w = Atom.text(work_text(call.name, call.input))
        o = Atom.text(call.output)
        seen = [(E, Atom.text(OBSERVED_MARK + call.observed))] if call.observed else []
        occ = apply(Op.OCCURRENCE, (S, o), (S, w), (E, sess), (E, turn_id), (E, Atom.text(call.id)), *seen)
        outcomes.append(apply(Op.OUTCOME, (S, w), (S, o), (E, occ)))
        if w != request and w not in works:
            works.append(w)
    decomposition = apply(Op.ALL, (S, request), *[(S, w) for w in works], (S, remainder))
    mark = Atom.text(RECEIPT_MARK)
    cwd = Atom.text(t.cwd)
    answer_outcome = None
    if t.answer is not None:
        f = Atom.text(t.answer)
        tocc = apply(Op.OCCURRENCE, (S, request), (S, f), (E, sess), (E, turn_id), (E, cwd))
        answer_outcome = apply(Op.OUTCOME, (S, request), (S, f), (E, tocc))
        receipt = apply(Op.RECEIPT, (E, sess), (E, turn_id), (E, request), (E, f), (E, answer_outcome), (E, decomposition), (E, mark))
        tail: list[Value] = [decomposition, answer_outcome, receipt]
    elif t.tools:
        receipt = apply(
            Op.RECEIPT, (E, sess), (E, turn_id), (E, request), (E, cwd), (E, decomposition), (E, mark), (E, Atom.text(INTERRUPTED))
        )
        tail = [decomposition, receipt]
    else:
        raise TurnError("turn %s has neither an answer nor any tool call: nothing was observed to store" % t.turn)
    roots: list[Value] = []
    for v in [*outcomes, *tail]:
        if v not in roots:
            roots.append(v)
    return Compiled(tuple(roots), request, decomposition, answer_outcome, tuple(outcomes), receipt)


# -- reading back what compile_turn writes: by name here, never by argument position elsewhere --


class Receipt(NamedTuple):
    """A turn's Receipt by name: what was asked, answered (None: interrupted) and where."""

    session: str
    turn: str
    request: str
    answer: str | None
    owner: Apply  # the Value the turn is keyed by: its answer Outcome, or (interrupted) its decomposition
    cwd: str
    decomposition: Value


def receipt_of(v: Value) -> Receipt | None:
    """The Receipt compile_turn wrote (either form), or None for any other Value."""
    if not (isinstance(v, Apply) and v.op is Op.RECEIPT and len(v.args) >= 7 and readable(v.args[-1].target) in (RECEIPT_MARK, INTERRUPTED)):
        return None
    a = [r.target for r in v.args]
    sess, turn, request = readable(a[0]), readable(a[1]), readable(a[2])
    if isinstance(a[4], Apply) and a[4].op is Op.OUTCOME:  # answered: ..., answer, its Outcome, decomposition, mark
        occ = next(occurrences(a[4]), None)
        cwd = readable(occ.args[4].target) if occ is not None and len(occ.args) > 4 else ""
        return Receipt(sess, turn, request, readable(a[3]), a[4], cwd, a[5])
    return Receipt(sess, turn, request, None, a[4], readable(a[3]), a[4])  # interrupted: ..., cwd, decomposition, mark, note


def occurrences(edge: Value) -> Iterator[Apply]:
    """The Occurrences an Outcome edge carries (after its Work and outcome)."""
    if isinstance(edge, Apply) and edge.op is Op.OUTCOME:
        for r in edge.args[2:]:
            if isinstance(r.target, Apply) and r.target.op is Op.OCCURRENCE and len(r.target.args) >= 4:
                yield r.target


def occurrence_turn(occ: Apply) -> tuple[Value, Value]:
    """(session, turn) Atoms of an Occurrence (a tool call's or a turn's answer)."""
    return occ.args[2].target, occ.args[3].target


def observed_text(edge: Value) -> str | None:
    """The fingerprint JSON (after OBSERVED_MARK) a tool Outcome's Occurrence carries, or None.

    Every freshness check asks this of each candidate, so it reads nothing else."""
    for occ in occurrences(edge):
        for a in occ.args[5:]:
            t = a.target.as_text() if isinstance(a.target, Atom) else None
            if t is not None and t.startswith(OBSERVED_MARK):
                return t[len(OBSERVED_MARK):]
    return None


class ToolOccurrence(NamedTuple):
    session: str
    turn: str
    use_id: str


def tool_occurrence(edge: Value) -> ToolOccurrence | None:
    """The native Occurrence of a tool Outcome (the one naming this very output and Work), by name."""
    if not (isinstance(edge, Apply) and edge.op is Op.OUTCOME and len(edge.args) >= 3):
        return None
    work, outcome = edge.args[0].target, edge.args[1].target
    for occ in occurrences(edge):
        a = occ.args
        if len(a) >= 5 and a[0].target == outcome and a[1].target == work:
            return ToolOccurrence(readable(a[2].target), readable(a[3].target), readable(a[4].target))
    return None
