"""The Value model: Atom | Apply, frozen and hashable, with a closed, shape-checked vocabulary."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.strategies import ref_exact_footprint, tiny_values, values
from eggshell.core import values as V
from eggshell.core.values import (MAX_OUTCOME_OBSERVATIONS, Apply, Atom, E, Op, Ref, S, ShapeError, apply, exact_footprint, union_admissible)

a, b, c, d = (Atom.text(x) for x in "abcd")


def atoms(n: int, prefix: str = "x") -> list[Atom]:
    return [Atom.text("%s%d" % (prefix, i)) for i in range(n)]


# -- Atom ----------------------------------------------------------------------------


def test_atom_holds_bytes_only():
    assert Atom(b"\x00\xff").data == b"\x00\xff"
    for bad in ["text", bytearray(b"x"), memoryview(b"x"), 1, None]:
        with pytest.raises(TypeError):
            Atom(bad)


def test_atom_text_and_bytes_spellings_are_the_same_value():
    assert Atom.text("h\u00e9") == Atom("h\u00e9".encode())
    assert hash(Atom.text("h\u00e9")) == hash(Atom("h\u00e9".encode()))
    assert Atom(b"\xff").as_text() is None
    assert Atom.text("ok").as_text() == "ok"


def test_values_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.data = b"other"
    o = apply(Op.OUTCOME, (S, a), (S, b))
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.op = Op.ALL
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.args = ()
    assert isinstance(o.args, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.args[0].auth = E


def test_apply_args_given_as_list_become_a_tuple():
    o = Apply(Op.OUTCOME, [Ref(S, a), Ref(S, b)])
    assert isinstance(o.args, tuple)
    assert o == apply(Op.OUTCOME, (S, a), (S, b))


# -- structural identity ----------------------------------------------------------------


def test_equality_is_structural_and_hash_agrees():
    x = apply(Op.OUTCOME, (S, Atom.text("w")), (S, Atom.text("o")), (E, apply(Op.OCCURRENCE, (S, a), (E, b))))
    y = apply(Op.OUTCOME, (S, Atom.text("w")), (S, Atom.text("o")), (E, apply(Op.OCCURRENCE, (S, a), (E, b))))
    assert x is not y and x == y and hash(x) == hash(y)
    assert len({x, y}) == 1


@pytest.mark.parametrize(
    "other",
    [
        apply(Op.OCCURRENCE, (S, a), (S, b)),  # other operator
        apply(Op.OUTCOME, (S, b), (S, a)),  # argument order
        apply(Op.OUTCOME, (S, a), (S, b), (E, c)),  # extra argument
        apply(Op.OUTCOME, (S, a), (S, Atom(b"b\x00"))),  # child bytes
    ],
)
def test_structurally_different_values_are_unequal(other):
    assert apply(Op.OUTCOME, (S, a), (S, b)) != other


def test_authority_is_part_of_identity():
    assert apply(Op.OCCURRENCE, (S, a), (S, b)) != apply(Op.OCCURRENCE, (S, a), (E, b))


def test_atom_never_equals_apply():
    o = apply(Op.OUTCOME, (S, a), (S, b))
    assert a != o and o != a
    assert o != "outcome" and a != b"a"


@given(values, values)
def test_equality_matches_structure(x, y):
    from helpers.strategies import ref_equal

    assert (x == y) == ref_equal(x, y)
    if x == y:
        assert hash(x) == hash(y)


# -- closed vocabulary, shapes checked on construction -------------------------------------


def test_operator_vocabulary_is_closed():
    assert {op.value for op in Op} == {"all", "outcome", "occurrence", "inquiry", "receipt"}
    with pytest.raises(ShapeError):
        Apply("all", (Ref(S, a), Ref(S, b)))
    with pytest.raises(ShapeError):
        Apply("sameas", (Ref(S, a), Ref(S, b)))


def test_arguments_must_be_refs():
    with pytest.raises(ShapeError):
        Apply(Op.OUTCOME, ((S, a), (S, b)))  # raw tuples, not Refs
    with pytest.raises(ShapeError):
        Apply(Op.OUTCOME, (Ref("s", a), Ref(S, b)))  # auth not an Auth
    with pytest.raises(ShapeError):
        Apply(Op.OUTCOME, (Ref(S, "a"), Ref(S, b)))  # target not a Value
    with pytest.raises(ShapeError):
        Apply(Op.OUTCOME, (Ref(S, b"a"), Ref(S, b)))


GOOD = {
    "all one child": (Op.ALL, [(S, a), (S, b)]),
    "all many children, repeats allowed": (Op.ALL, [(S, a), (S, b), (S, c), (S, b)]),
    "outcome bare": (Op.OUTCOME, [(S, a), (S, b)]),
    "outcome work equals outcome": (Op.OUTCOME, [(S, a), (S, a)]),
    "outcome with observations": (Op.OUTCOME, [(S, a), (S, b), (E, c), (E, d)]),
    "occurrence one semantic": (Op.OCCURRENCE, [(S, a)]),
    "occurrence run then exact": (Op.OCCURRENCE, [(S, a), (S, b), (E, c), (E, d)]),
    "inquiry six": (Op.INQUIRY, [(E, a), (E, b), (S, c), (E, d), (E, a), (E, b)]),
    "inquiry extra args of any authority": (Op.INQUIRY, [(E, a), (E, b), (S, c), (E, d), (E, a), (E, b), (S, c), (E, d)]),
    "receipt seven": (Op.RECEIPT, [(E, x) for x in [a, b, c, d, a, b, c]]),
    "receipt eight": (Op.RECEIPT, [(E, x) for x in [a, b, c, d, a, b, c, d]]),
}

BAD = {
    "all no child": (Op.ALL, [(S, a)]),
    "all empty": (Op.ALL, []),
    "all exact parent": (Op.ALL, [(E, a), (S, b)]),
    "all exact child": (Op.ALL, [(S, a), (E, b)]),
    "all child equals parent": (Op.ALL, [(S, a), (S, b), (S, Atom.text("a"))]),
    "outcome empty": (Op.OUTCOME, []),
    "outcome one arg": (Op.OUTCOME, [(S, a)]),
    "outcome exact work": (Op.OUTCOME, [(E, a), (S, b)]),
    "outcome exact outcome": (Op.OUTCOME, [(S, a), (E, b)]),
    "outcome semantic observation": (Op.OUTCOME, [(S, a), (S, b), (S, c)]),
    "outcome repeated observation": (Op.OUTCOME, [(S, a), (S, b), (E, c), (E, d), (E, Atom.text("c"))]),
    "occurrence empty": (Op.OCCURRENCE, []),
    "occurrence exact first": (Op.OCCURRENCE, [(E, a), (S, b)]),
    "occurrence only exact": (Op.OCCURRENCE, [(E, a)]),
    "occurrence semantic after exact": (Op.OCCURRENCE, [(S, a), (E, b), (S, c)]),
    "inquiry five": (Op.INQUIRY, [(E, a), (E, b), (S, c), (E, d), (E, a)]),
    "inquiry third exact": (Op.INQUIRY, [(E, a), (E, b), (E, c), (E, d), (E, a), (E, b)]),
    "inquiry first semantic": (Op.INQUIRY, [(S, a), (E, b), (S, c), (E, d), (E, a), (E, b)]),
    "inquiry sixth semantic": (Op.INQUIRY, [(E, a), (E, b), (S, c), (E, d), (E, a), (S, b)]),
    "receipt six": (Op.RECEIPT, [(E, x) for x in [a, b, c, d, a, b]]),
    "receipt one semantic": (Op.RECEIPT, [(E, x) for x in [a, b, c, d, a, b]] + [(S, c)]),
    "receipt semantic first": (Op.RECEIPT, [(S, a)] + [(E, x) for x in [a, b, c, d, a, b]]),
}


@pytest.mark.parametrize("op,args", GOOD.values(), ids=GOOD.keys())
def test_good_shapes_construct(op, args):
    v = apply(op, *args)
    assert v.op is op and [(r.auth, r.target) for r in v.args] == args


@pytest.mark.parametrize("op,args", BAD.values(), ids=BAD.keys())
def test_bad_shapes_raise_on_construction(op, args):
    with pytest.raises(ShapeError, match=op.value):
        apply(op, *args)


def test_shape_error_is_a_value_error():
    assert issubclass(ShapeError, ValueError)


def test_outcome_observation_limit_is_1024():
    assert MAX_OUTCOME_OBSERVATIONS == 1024
    obs = atoms(1025)
    ok = apply(Op.OUTCOME, (S, a), (S, b), *[(E, o) for o in obs[:1024]])
    assert len(ok.args) == 1026
    with pytest.raises(ShapeError, match="1024"):
        apply(Op.OUTCOME, (S, a), (S, b), *[(E, o) for o in obs])


def test_outcome_observations_are_distinct_by_structure_not_identity():
    occ1 = apply(Op.OCCURRENCE, (S, a), (E, b))
    occ2 = apply(Op.OCCURRENCE, (S, a), (E, b))  # equal, different object
    with pytest.raises(ShapeError, match="distinct"):
        apply(Op.OUTCOME, (S, a), (S, b), (E, occ1), (E, occ2))


def test_children_of_an_apply_are_already_validated():
    # A Value can only be built bottom-up, so an invalid child cannot exist to nest.
    with pytest.raises(ShapeError):
        apply(Op.OUTCOME, (S, a), (S, apply(Op.ALL, (S, a))))


# -- walk / footprint ------------------------------------------------------------------


def test_walk_yields_each_distinct_node_once_children_first():
    occ = apply(Op.OCCURRENCE, (S, b), (S, a), (E, c))
    out = apply(Op.OUTCOME, (S, a), (S, b), (E, occ))
    seen = list(V.walk(out))
    assert seen[-1] is out
    assert seen.index(occ) < seen.index(out)
    assert all(seen.index(x) < seen.index(occ) for x in (a, b, c))
    assert len(seen) == len({id(x) for x in seen})
    assert {Atom.text("a"), Atom.text("b"), Atom.text("c"), occ, out} == set(seen)


def test_exact_footprint_reaches_through_semantic_and_exact_refs():
    inner = apply(Op.OCCURRENCE, (S, a), (E, c))  # c is Exact, one level down
    v = apply(Op.ALL, (S, b), (S, inner))
    assert exact_footprint(v) == frozenset({c})
    w = apply(Op.OUTCOME, (S, a), (S, b), (E, inner))
    assert exact_footprint(w) == frozenset({inner, c})
    assert exact_footprint(a) == frozenset()


def test_union_admissibility_examples():
    prov = apply(Op.OCCURRENCE, (S, a), (E, Atom.text("session-1")))
    x = apply(Op.OUTCOME, (S, a), (S, b), (E, prov))
    y = apply(Op.OUTCOME, (S, c), (S, d), (E, prov))  # same provenance, other semantics
    z = apply(Op.OUTCOME, (S, a), (S, b), (E, apply(Op.OCCURRENCE, (S, a), (E, Atom.text("session-2")))))
    assert union_admissible(a, b)  # plain atoms carry no provenance
    assert union_admissible(x, y)
    assert not union_admissible(x, z)
    assert not union_admissible(x, a)


@given(tiny_values, tiny_values)
def test_union_admissible_iff_equal_exact_footprints(x, y):
    expected = ref_exact_footprint(x) == ref_exact_footprint(y)
    assert union_admissible(x, y) == expected
    assert (exact_footprint(x) == exact_footprint(y)) == expected
    assert union_admissible(y, x) == expected


@given(values)
def test_semantic_nodes_never_cross_an_exact_ref(v):
    nodes = V.semantic_nodes(v)
    assert nodes[0] is v
    # every other node is the Semantic child of a node already in the list
    for n in nodes[1:]:
        assert any(r.auth is S and r.target is n for p in nodes for r in V.children(p))
    # and every Semantic child of a listed node is listed
    ids = {id(n) for n in nodes}
    for p in nodes:
        for r in V.children(p):
            if r.auth is S:
                assert id(r.target) in ids


@given(st.lists(values, min_size=1, max_size=4))
def test_readable_is_total(vs):
    for v in vs:
        assert isinstance(V.readable(v), str)
