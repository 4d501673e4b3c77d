"""Hypothesis strategies for Values and turn records, plus reference implementations.

The reference functions re-derive from the issue text what the library computes
(canonical encoding, content id, Exact footprint), so property tests compare two
independent implementations instead of a function with itself.
"""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import strategies as st

import helpers  # noqa: F401  (puts lib/ on sys.path)
from eggshell.core.identity import content_hex
from eggshell.core.values import Apply, Atom, Auth, E, Op, S, Value, apply

# -- Values -----------------------------------------------------------------------

# A tiny pool makes equal sub-Values (shared nodes, equal footprints) common.
SMALL_ATOMS = [Atom(b""), Atom(b"a"), Atom(b"b"), Atom(b"\xff\xfe"), Atom.text("ls -la\n"), Atom.text("h\u00e9\u2603")]

atoms = st.one_of(
    st.sampled_from(SMALL_ATOMS),
    st.binary(max_size=12).map(Atom),
    st.text(max_size=10).map(Atom.text),
)


def _make_all(pc: tuple[Value, list[Value]]) -> Apply:
    parent, kids = pc
    kids = [k for k in kids if k != parent] or [Atom(b"child of " + content_hex(parent).encode())]
    return apply(Op.ALL, (S, parent), *[(S, k) for k in kids])


def _extend(children: st.SearchStrategy[Value]) -> st.SearchStrategy[Value]:
    auths = st.sampled_from([S, E])
    all_ = st.tuples(children, st.lists(children, min_size=1, max_size=3)).map(_make_all)
    outcome = st.tuples(children, children, st.lists(children, max_size=3, unique_by=content_hex)).map(
        lambda t: apply(Op.OUTCOME, (S, t[0]), (S, t[1]), *[(E, o) for o in t[2]])
    )
    occurrence = st.tuples(st.lists(children, min_size=1, max_size=3), st.lists(children, max_size=3)).map(
        lambda t: apply(Op.OCCURRENCE, *[(S, x) for x in t[0]], *[(E, x) for x in t[1]])
    )
    inquiry = st.tuples(st.lists(children, min_size=6, max_size=6), st.lists(st.tuples(auths, children), max_size=2)).map(
        lambda t: apply(Op.INQUIRY, *zip([E, E, S, E, E, E], t[0]), *t[1])
    )
    receipt = st.lists(children, min_size=7, max_size=8).map(lambda xs: apply(Op.RECEIPT, *[(E, x) for x in xs]))
    return st.one_of(all_, outcome, occurrence, inquiry, receipt)


values = st.recursive(atoms, _extend, max_leaves=24)
applies = values.filter(lambda v: isinstance(v, Apply))

# Values over a two-Atom alphabet: equal Exact footprints between unequal Values are common.
_tiny_atoms = st.sampled_from([Atom(b"x"), Atom(b"y")])
tiny_values = st.recursive(_tiny_atoms, _extend, max_leaves=10)


# -- reference implementations -------------------------------------------------------


def ref_encode(v: Value) -> bytes:
    """The canonical encoding, written from the format description."""
    if isinstance(v, Atom):
        return b"A" + len(v.data).to_bytes(8, "big") + v.data
    name = v.op.value.encode()
    out = b"P" + bytes([len(name)]) + name + len(v.args).to_bytes(4, "big")
    for r in v.args:
        out += (b"S" if r.auth is Auth.SEMANTIC else b"E") + ref_encode(r.target)
    return out


def ref_decode(b: bytes, i: int = 0) -> tuple[Value, int]:
    """Decode one Value at offset i; returns (value, end). Proves the encoding is prefix-free."""
    tag = b[i : i + 1]
    if tag == b"A":
        n = int.from_bytes(b[i + 1 : i + 9], "big")
        end = i + 9 + n
        if end > len(b):
            raise ValueError("truncated atom")
        return Atom(b[i + 9 : end]), end
    if tag == b"P":
        ln = b[i + 1]
        op = Op(b[i + 2 : i + 2 + ln].decode())
        j = i + 2 + ln
        count = int.from_bytes(b[j : j + 4], "big")
        j += 4
        args = []
        for _ in range(count):
            auth = {b"S": S, b"E": E}[b[j : j + 1]]
            child, j = ref_decode(b, j + 1)
            args.append((auth, child))
        return apply(op, *args), j
    raise ValueError("bad tag %r at %d" % (tag, i))


def ref_digest(domain: str, *fields: bytes) -> bytes:
    h = hashlib.sha256()
    d = domain.encode()
    h.update(len(d).to_bytes(8, "big") + d)
    for f in fields:
        h.update(len(f).to_bytes(8, "big") + f)
    return h.digest()


def ref_content_hex(v: Value) -> str:
    return ref_digest("eggshell.value", ref_encode(v)).hex()


def ref_exact_footprint(v: Value) -> set[bytes]:
    """Encodings of every Value reachable through an Exact reference (recursive, by definition)."""
    out: set[bytes] = set()
    if isinstance(v, Apply):
        for r in v.args:
            if r.auth is E:
                out.add(ref_encode(r.target))
            out |= ref_exact_footprint(r.target)
    return out


def ref_equal(a: Value, b: Value) -> bool:
    """Structural equality, spelled out."""
    if isinstance(a, Atom) or isinstance(b, Atom):
        return isinstance(a, Atom) and isinstance(b, Atom) and a.data == b.data
    return (
        a.op is b.op
        and len(a.args) == len(b.args)
        and all(x.auth is y.auth and ref_equal(x.target, y.target) for x, y in zip(a.args, b.args))
    )


# -- turn records ------------------------------------------------------------------

_names = st.sampled_from(["Bash", "Read", "Edit", "exec_command", "mcp__x__y"])
_short = st.text(min_size=1, max_size=12)
_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=8))
json_values = st.recursive(
    _json_leaf,
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=5), c, max_size=3)),
    max_leaves=8,
)
outputs = st.one_of(
    st.none(),
    st.text(max_size=40),
    st.fixed_dictionaries({"stdout": st.text(max_size=20), "stderr": st.text(max_size=20)}),
    json_values,
)


@st.composite
def tool_calls(draw) -> dict[str, Any]:
    return {"name": draw(_names), "id": draw(_short), "input": draw(json_values), "output": draw(outputs)}


@st.composite
def turn_records(draw) -> dict[str, Any]:
    tools = draw(st.lists(tool_calls(), max_size=4))
    answer = draw(st.one_of(st.none(), st.text(min_size=1, max_size=30))) if tools else draw(st.text(min_size=1, max_size=30))
    return {
        "session": draw(st.sampled_from(["s1", "s2"])),
        "turn": draw(_short),
        "cwd": draw(st.sampled_from(["", "sub", "a/b"])),
        "prompt": draw(st.text(min_size=1, max_size=30)),
        "tools": tools,
        "answer": answer,
    }
