"""Laws of the equality engine (quotient.py): equivalence, Exact preservation,
certification, congruence through Semantic arguments only, order-free representatives,
and agreement with a naive fixpoint of the specification."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eggshell.reuse import quotient
from eggshell.core.identity import content_id
from eggshell.reuse.quotient import Union, build
from eggshell.core.values import Apply, Atom, E, Op, S, apply, same_exact_footprint, semantic_nodes, union_admissible

T = Atom.text
ATOMS = [T(c) for c in "abcdefgh"]


@st.composite
def pools(draw, max_applys: int = 10) -> list:
    """A small random graph: atoms plus Applys of every operator over earlier Values."""
    pool = list(draw(st.lists(st.sampled_from(ATOMS), min_size=2, max_size=6, unique=True)))
    for _ in range(draw(st.integers(0, max_applys))):
        pick = st.sampled_from(pool)
        kind = draw(st.sampled_from(["all", "outcome", "occurrence", "receipt"]))
        if kind == "all":
            parent = draw(pick)
            kids = [k for k in draw(st.lists(pick, min_size=1, max_size=3)) if k != parent]
            if not kids:
                continue
            v = apply(Op.ALL, (S, parent), *[(S, k) for k in kids])
        elif kind == "outcome":
            obs = draw(st.lists(pick, max_size=2, unique=True))
            v = apply(Op.OUTCOME, (S, draw(pick)), (S, draw(pick)), *[(E, o) for o in obs])
        elif kind == "occurrence":
            v = apply(Op.OCCURRENCE, (S, draw(pick)), (S, draw(pick)), (E, draw(st.sampled_from(ATOMS))))
        else:
            v = apply(Op.RECEIPT, *[(E, draw(pick)) for _ in range(7)])
        if v not in pool:
            pool.append(v)
    return pool


@st.composite
def graphs(draw, admissible_only: bool = True):
    pool = draw(pools())
    pairs = draw(st.lists(st.tuples(st.sampled_from(pool), st.sampled_from(pool)), max_size=6))
    if admissible_only:
        pairs = [(a, b) for a, b in pairs if union_admissible(a, b)]
    scopes = draw(st.lists(st.sampled_from(["run", "workspace"]), min_size=len(pairs), max_size=len(pairs)))
    return pool, [Union(a, b, s) for (a, b), s in zip(pairs, scopes)]


def universe(roots, unions) -> list:
    out = []
    for v in [*roots, *(x for u in unions for x in (u.left, u.right))]:
        out.extend(semantic_nodes(v))
    return list(dict.fromkeys(out))


def naive_classes(univ, unions) -> dict:
    """The specification, literally: merge Union pairs, then merge congruent Applys
    (same op, same auths, Exact args equal, Semantic args in the same class) until stable."""
    cls = {v: frozenset([v]) for v in univ}

    def merge(a, b):
        m = cls[a] | cls[b]
        for x in m:
            cls[x] = m

    for u in unions:
        merge(u.left, u.right)

    def congruent(a, b):
        if not (isinstance(a, Apply) and isinstance(b, Apply)) or a.op is not b.op or len(a.args) != len(b.args):
            return False
        for ra, rb in zip(a.args, b.args):
            if ra.auth is not rb.auth:
                return False
            if ra.auth is E and ra.target != rb.target:
                return False
            if ra.auth is S and cls[ra.target] != cls[rb.target]:
                return False
        return True

    changed = True
    while changed:
        changed = False
        for a in univ:
            for b in univ:
                if cls[a] != cls[b] and congruent(a, b):
                    merge(a, b)
                    changed = True
    return cls


@given(graphs())
def test_same_is_an_equivalence(g):
    roots, unions = g
    q = build(roots, unions)
    assert q is not None
    univ = universe(roots, unions)
    for a in univ:
        assert q.same(a, a)
        for b in univ:
            assert q.same(a, b) == q.same(b, a)
            if q.same(a, b):
                assert all(q.same(a, c) == q.same(b, c) for c in univ)


@given(graphs(admissible_only=False))
def test_same_preserves_exact_footprint_even_with_untrusted_unions(g):
    roots, unions = g
    q = build(roots, unions)
    if q is None:
        return
    univ = universe(roots, unions)
    for a in univ:
        for b in univ:
            if q.same(a, b):
                assert same_exact_footprint(a, b)


@given(graphs())
def test_same_iff_canonical_equal_and_canonical_is_idempotent(g):
    roots, unions = g
    q = build(roots, unions)
    univ = universe(roots, unions)
    for a in univ:
        assert q.canonical(q.canonical(a)) == q.canonical(a)
        assert q.same(a, q.canonical(a))
        for b in univ:
            assert q.same(a, b) == (q.canonical(a) == q.canonical(b))


@given(graphs(admissible_only=False))
def test_build_fails_exactly_when_some_union_is_inadmissible(g):
    roots, unions = g
    q = build(roots, unions)
    assert (q is None) == any(not union_admissible(u.left, u.right) for u in unions)


@given(graphs())
def test_matches_the_naive_congruence_closure(g):
    roots, unions = g
    q = build(roots, unions)
    univ = universe(roots, unions)
    cls = naive_classes(univ, unions)
    for a in univ:
        for b in univ:
            assert q.same(a, b) == (cls[a] == cls[b]), (a, b)
    assert sorted(map(len, q.classes())) == sorted(len(c) for c in set(cls.values()) if len(c) > 1)


@given(graphs(), st.data())
def test_representatives_do_not_depend_on_input_order(g, data):
    roots, unions = g
    q1 = build(roots, unions)
    q2 = build(data.draw(st.permutations(roots)), [Union(u.right, u.left, u.scope) for u in data.draw(st.permutations(unions))])
    for v in universe(roots, unions):
        assert q1.canonical(v) == q2.canonical(v)
    assert q1.classes() == q2.classes()


@given(graphs())
def test_representative_is_the_member_with_the_smallest_content_id(g):
    q = build(*g)
    for cls in q.classes():
        assert len(cls) > 1
        rep = min(cls, key=content_id)
        assert all(q.canonical(m) == rep for m in cls)


def test_congruence_rewrites_semantic_positions_only():
    A, B, X, o = T("A"), T("B"), T("X"), T("o")
    oa = apply(Op.OUTCOME, (S, A), (S, X), (E, o))
    ob = apply(Op.OUTCOME, (S, B), (S, X), (E, o))
    ea = apply(Op.OCCURRENCE, (S, X), (E, A))
    eb = apply(Op.OCCURRENCE, (S, X), (E, B))
    q = build([oa, ob, ea, eb], [Union(A, B, "run")])
    assert q is not None
    assert q.same(oa, ob)
    assert not q.same(ea, eb)
    assert q.same(A, B) and not q.same(A, X)
    assert build([oa, ob, ea, eb], []).same(oa, ob) is False


def test_congruence_propagates_through_nesting():
    A, B, X = T("A"), T("B"), T("X")
    inner_a, inner_b = apply(Op.OCCURRENCE, (S, A), (S, X)), apply(Op.OCCURRENCE, (S, B), (S, X))
    outer_a, outer_b = apply(Op.ALL, (S, X), (S, inner_a)), apply(Op.ALL, (S, X), (S, inner_b))
    q = build([outer_a, outer_b], [Union(A, B, "workspace")])
    assert q.same(outer_a, outer_b) and q.same(inner_a, inner_b)


def test_an_inadmissible_union_gives_no_equality_at_all():
    A, B = T("A"), T("B")
    occ = apply(Op.OCCURRENCE, (S, A), (E, T("who")))
    assert build([A, B], [Union(A, B, "run"), Union(A, occ, "run")]) is None


def test_certification_rejects_a_class_that_mixes_footprints(monkeypatch):
    """Defense in depth: even if admissibility were wrongly granted, certification
    still refuses a class whose members carry different provenance."""
    A = T("A")
    occ = apply(Op.OCCURRENCE, (S, A), (E, T("who")))
    monkeypatch.setattr(quotient, "union_admissible", lambda a, b: True)
    assert quotient.build([A, occ], [Union(A, occ, "run")]) is None


def test_values_outside_the_universe_map_to_themselves():
    A, B, C = T("A"), T("B"), T("C")
    q = build([A], [Union(A, B, "run")])
    assert q.canonical(C) == C and not q.same(A, C)
    assert q.classes() == [frozenset([A, B])]


def test_union_scope_is_checked():
    with pytest.raises(ValueError):
        Union(T("A"), T("B"), "global")


def test_large_universe_builds():
    """Timing sanity, not a timed assertion: 10k-node universe, 100 unions."""
    roots, unions = [], []
    for i in range(3000):
        w, o = T("work %d" % i), T("out %d" % (i % 1500))
        occ = apply(Op.OCCURRENCE, (S, o), (S, w), (E, T("turn %d" % i)))
        roots.append(apply(Op.OUTCOME, (S, w), (S, o)))
        roots.append(apply(Op.OUTCOME, (S, w), (S, o), (E, occ)))
    for i in range(100):
        unions.append(Union(T("work %d" % i), T("work %d" % (i + 1500)), "run"))
    t = time.perf_counter()
    q = build(roots, unions)
    elapsed = time.perf_counter() - t
    assert q is not None and len(universe(roots, unions)) > 10_000
    # Each Union also makes the two occurrence-free Outcomes congruent.
    assert len(q.classes()) == 200
    print("build over %d roots took %.3fs" % (len(roots), elapsed))
