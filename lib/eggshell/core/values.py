"""The one data type: a Value is an Atom of bytes or an operator applied to references.

Roles (request, tool call, answer, provenance) are given only by argument position
inside an operator, never by a type tag, so the whole graph is one closed vocabulary
that can be validated on construction and again when loaded from disk.

Identity is structural: two Values are the same Value exactly when their canonical
encodings (see `identity.py`) are equal. Python equality here is that structural
comparison; hashes only nominate candidates.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Iterator

from eggshell.errors import EggshellError

MAX_OUTCOME_OBSERVATIONS = 1024


class ShapeError(EggshellError, ValueError):
    """An operator was applied to arguments of the wrong shape."""


class Op(enum.Enum):
    ALL = "all"
    OUTCOME = "outcome"
    OCCURRENCE = "occurrence"
    INQUIRY = "inquiry"
    RECEIPT = "receipt"


class Auth(enum.Enum):
    """How an argument may be replaced under equality.

    SEMANTIC arguments may be swapped for any equal Value (unions, congruence);
    EXACT arguments are provenance and are compared literally, forever.
    """

    SEMANTIC = "s"
    EXACT = "e"


S = Auth.SEMANTIC
E = Auth.EXACT


def dataclass_reduce(self):
    """Pickle a frozen dataclass by its constructor arguments (its `__match_args__`).

    The default for a frozen slots dataclass rebuilds each object through `fields()`,
    most of the time it takes a cold hook to read a manager's snapshot (warm.py); and a
    constructor call also recomputes anything derived, such as a cached hash, which must
    never cross processes (string hashes differ per process).
    """
    return (type(self), tuple(getattr(self, f) for f in type(self).__match_args__))


def _atom(data: bytes, cid: bytes | None) -> "Atom":
    a = Atom(data)
    object.__setattr__(a, "_cid", cid)
    return a


def _apply(op: "Op", args: tuple, cid: bytes | None) -> "Apply":
    """An Apply as pickled: its shape was checked when it was made, so only the hash is computed."""
    a = object.__new__(Apply)
    object.__setattr__(a, "op", op)
    object.__setattr__(a, "args", args)
    object.__setattr__(a, "_hash", hash((b"P", op, args)))
    object.__setattr__(a, "_cid", cid)
    return a


@dataclass(frozen=True, slots=True)
class Atom:
    data: bytes
    _hash: int = field(default=0, init=False, compare=False, repr=False)
    _cid: bytes | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.data, bytes):
            raise TypeError("Atom holds bytes, got %s" % type(self.data).__name__)
        object.__setattr__(self, "_hash", hash((b"A", self.data)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):
        return (_atom, (self.data, self._cid))  # the hash is computed again in the loading process

    @staticmethod
    def text(s: str) -> "Atom":
        return Atom(s.encode("utf-8"))

    def as_text(self) -> str | None:
        """The UTF-8 text of this Atom, or None when the bytes are not valid UTF-8."""
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError:
            return None


@dataclass(frozen=True, slots=True)
class Ref:
    auth: Auth
    target: "Value"

    __reduce__ = dataclass_reduce


@dataclass(frozen=True, slots=True)
class Apply:
    op: Op
    args: tuple[Ref, ...]
    _hash: int = field(default=0, init=False, compare=False, repr=False)
    _cid: bytes | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.args, tuple):
            object.__setattr__(self, "args", tuple(self.args))
        check_shape(self.op, self.args)
        object.__setattr__(self, "_hash", hash((b"P", self.op, self.args)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):
        return (_apply, (self.op, self.args, self._cid))

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Apply):
            return NotImplemented
        return self._hash == other._hash and self.op is other.op and self.args == other.args


Value = Atom | Apply


def apply(op: Op, *args: tuple[Auth, Value]) -> Apply:
    """Build `Apply(op, ...)` from `(auth, value)` pairs; raises ShapeError on a bad shape."""
    return Apply(op, tuple(Ref(a, v) for a, v in args))


def check_shape(op: Op, args: tuple[Ref, ...]) -> None:
    """Validate the argument shape of one operator (children are checked when built)."""
    for r in args:
        if not isinstance(r, Ref) or not isinstance(r.auth, Auth) or not isinstance(r.target, (Atom, Apply)):
            raise ShapeError("%s: arguments must be (Semantic|Exact, Value) references" % op.value)
    auths = [r.auth for r in args]
    if op is Op.ALL:
        if len(args) < 2:
            raise ShapeError("all: needs a parent and at least one child")
        if any(a is not S for a in auths):
            raise ShapeError("all: every argument must be Semantic")
        parent = args[0].target
        if any(r.target == parent for r in args[1:]):
            raise ShapeError("all: a child equals its parent")
    elif op is Op.OUTCOME:
        if len(args) < 2 or auths[0] is not S or auths[1] is not S:
            raise ShapeError("outcome: needs Semantic work and Semantic outcome first")
        obs = args[2:]
        if len(obs) > MAX_OUTCOME_OBSERVATIONS:
            raise ShapeError("outcome: more than %d observations" % MAX_OUTCOME_OBSERVATIONS)
        if any(r.auth is not E for r in obs):
            raise ShapeError("outcome: observations must be Exact")
        if len(set(r.target for r in obs)) != len(obs):
            raise ShapeError("outcome: observations must be distinct")
    elif op is Op.OCCURRENCE:
        if not args or auths[0] is not S:
            raise ShapeError("occurrence: needs at least one Semantic argument first")
        first_exact = next((i for i, a in enumerate(auths) if a is E), len(auths))
        if any(a is S for a in auths[first_exact:]):
            raise ShapeError("occurrence: Semantic arguments must precede Exact ones")
    elif op is Op.INQUIRY:
        if len(args) < 6 or auths[:6] != [E, E, S, E, E, E]:
            raise ShapeError("inquiry: needs at least six arguments shaped Exact, Exact, Semantic, Exact, Exact, Exact")
    elif op is Op.RECEIPT:
        if len(args) < 7 or any(a is not E for a in auths):
            raise ShapeError("receipt: needs at least seven arguments, all Exact")
    else:  # pragma: no cover - the enum is closed
        raise ShapeError("unknown operator %r" % (op,))


def children(v: Value) -> tuple[Ref, ...]:
    return v.args if isinstance(v, Apply) else ()


def walk(v: Value) -> Iterator[Value]:
    """Every distinct sub-Value of v (v included), children before parents."""
    seen: set[int] = set()
    stack: list[tuple[Value, bool]] = [(v, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in seen:
            continue
        if expanded or isinstance(node, Atom):
            seen.add(id(node))
            yield node
            continue
        stack.append((node, True))
        for r in reversed(node.args):
            if id(r.target) not in seen:
                stack.append((r.target, False))


def exact_footprint(v: Value) -> frozenset[Value]:
    """Every Value reachable through an Exact reference, at any depth.

    Unions must keep this set unchanged, which is what makes provenance unforgeable:
    no equality can ever rewrite who, where or when something was observed.
    """
    out: set[Value] = set()
    stack = [v]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen or isinstance(node, Atom):
            continue
        seen.add(id(node))
        for r in node.args:
            if r.auth is E:
                out.add(r.target)
            stack.append(r.target)
    return frozenset(out)


def same_exact_footprint(a: Value, b: Value) -> bool:
    return exact_footprint(a) == exact_footprint(b)


def union_admissible(left: Value, right: Value) -> bool:
    """A union may only identify Values that carry the same Exact provenance."""
    return same_exact_footprint(left, right)


def semantic_nodes(v: Value) -> list[Value]:
    """The Values the equality engine works over: v and its Semantic descendants."""
    out = [v]
    if isinstance(v, Apply):
        for r in v.args:
            if r.auth is S:
                out.extend(semantic_nodes(r.target))
    return out


def readable(v: Value) -> str:
    """Text for people: an Atom's UTF-8 text, otherwise a compact structural form."""
    if isinstance(v, Atom):
        t = v.as_text()
        return t if t is not None else "<%d bytes>" % len(v.data)
    return "%s(%s)" % (v.op.value, ", ".join(("E " if r.auth is E else "") + readable(r.target) for r in v.args))
