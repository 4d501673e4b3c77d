"""Equality: the quotient of a Value universe by Unions, closed under Semantic congruence.

A Union says two Values mean the same thing ("this prior Work is the current Work").
Equality must never be able to rewrite provenance, so:

* a Union is admissible only between Values with the same Exact footprint, and a
  single inadmissible Union makes `build` return None: callers get either a sound
  equality or none at all, never a partial one;
* congruence only looks through Semantic arguments; Exact arguments stay literal;
* after closing, every class is certified (checked, not trusted) to be footprint-pure.

Representatives are chosen by an order-free rule: the member with the smallest
`content_id` bytes. The classes themselves are the least congruence containing the
Unions, so the same roots and Unions in any order give the same canonical map (the
reference design's "first member" rule made equality depend on merge order).

The closure is union-find (path halving, union by size) plus a signature table kept
up to date by a worklist: when a class loses its root, only the Applys that use it
as a Semantic argument are re-signed. Each use moves to the winner at most log n
times, so building is near-linear in the universe size.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

from eggshell.core.identity import content_id
from eggshell.core.values import Apply, S, Value, exact_footprint, union_admissible

RUN, WORKSPACE = "run", "workspace"
SCOPES = (RUN, WORKSPACE)


@dataclass(frozen=True, slots=True)
class Union:
    """A proposed identification. "run" Unions come from the matcher for one inquiry
    and are never stored; "workspace" Unions are persistent, from the .egg."""

    left: Value
    right: Value
    scope: str

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError("union scope must be %s, got %r" % (" or ".join(SCOPES), self.scope))


@dataclass(frozen=True, slots=True)
class Quotient:
    """An immutable, certified equality over a finite universe of Values.

    Only non-singleton classes are stored; every other Value (in the universe or
    not) is its own representative, so outside the universe equality is identity.
    """

    _canon: Mapping[Value, Value]
    _classes: tuple[frozenset[Value], ...]

    def canonical(self, v: Value) -> Value:
        return self._canon.get(v, v)

    def same(self, a: Value, b: Value) -> bool:
        return self.canonical(a) == self.canonical(b)

    def classes(self) -> list[frozenset[Value]]:
        """The non-singleton classes, ordered by their representative's content id."""
        return list(self._classes)


def build(roots: Iterable[Value], unions: Iterable[Union]) -> Quotient | None:
    """The least Semantic congruence over the universe containing `unions`, or None.

    None means an inadmissible Union was offered (or, defensively, a class failed
    certification); there is then no equality at all for this build.
    """
    unions = tuple(unions)
    if not all(union_admissible(u.left, u.right) for u in unions):
        return None
    c = _Closure()
    for v in roots:
        c.collect(v)
    for u in unions:
        c.collect(u.left)
        c.collect(u.right)
    for u in unions:
        c.union(c.index[u.left], c.index[u.right])
    c.close()
    return c.certify()


class _Closure:
    """Mutable build state; lives only inside one `build` call."""

    def __init__(self) -> None:
        self.index: dict[Value, int] = {}
        self.nodes: list[Value] = []
        self.parent: list[int] = []
        self.size: list[int] = []
        self.uses: list[list[int]] = []  # root -> Applys with a Semantic argument in that class
        self.shape: dict[int, tuple] = {}  # Apply -> (op, ((True, arg index) | (False, exact value), ...))

    def collect(self, v: Value) -> None:
        """Add v and its Semantic descendants (deduplicated, unlike a tree walk)."""
        stack = [v]
        while stack:
            x = stack.pop()
            if x in self.index:
                continue
            i = self.index[x] = len(self.nodes)
            self.nodes.append(x)
            self.parent.append(i)
            self.size.append(1)
            self.uses.append([])
            if isinstance(x, Apply):
                stack.extend(r.target for r in x.args if r.auth is S)

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(self, a: int, b: int) -> list[int]:
        """Merge two classes; returns the Applys whose signatures may have changed."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return []
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]
        moved, self.uses[rb] = self.uses[rb], []
        self.uses[ra].extend(moved)
        return moved

    def signature(self, i: int) -> tuple:
        op, args = self.shape[i]
        return (op, tuple((True, self.find(x)) if sem else (False, x) for sem, x in args))

    def close(self) -> None:
        """Congruence fixpoint. Each union lowers the class count, so this terminates
        after at most len(universe) - 1 merges; the signature table is append-only."""
        for i, v in enumerate(self.nodes):
            if isinstance(v, Apply):
                args = tuple((True, self.index[r.target]) if r.auth is S else (False, r.target) for r in v.args)
                self.shape[i] = (v.op, args)
                for sem, x in args:
                    if sem:
                        self.uses[self.find(x)].append(i)
        table: dict[tuple, int] = {}
        work = list(self.shape)
        while work:
            i = work.pop()
            j = table.setdefault(self.signature(i), i)
            if j != i:
                work.extend(self.union(i, j))

    def certify(self) -> Quotient | None:
        groups: dict[int, list[Value]] = {}
        for i, v in enumerate(self.nodes):
            groups.setdefault(self.find(i), []).append(v)
        canon: dict[Value, Value] = {}
        classes: list[tuple[bytes, frozenset[Value]]] = []
        for members in groups.values():
            if len(members) < 2:
                continue
            fp = exact_footprint(members[0])
            if any(exact_footprint(m) != fp for m in members[1:]):
                return None
            rep = min(members, key=content_id)
            for m in members:
                canon[m] = rep
            classes.append((content_id(rep), frozenset(members)))
        classes.sort(key=lambda t: t[0])
        return Quotient(MappingProxyType(canon), tuple(cls for _, cls in classes))
