"""One canonical encoding, one domain-separated hash, display keys and their lookup."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import helpers
from helpers.strategies import ref_content_hex, ref_decode, ref_digest, ref_encode, values
from eggshell.core import identity
from eggshell.core.identity import (DISPLAY_KEY_LEN, KeyError_, canonical_json, content_hex, content_id, digest, display_key, encode, resolve_key)
from eggshell.graph.store import Store
from eggshell.core.values import Atom, Op, S, apply

# -- encoding -------------------------------------------------------------------------


def test_encoding_of_small_values_is_exactly_the_documented_layout():
    assert encode(Atom(b"")) == b"A" + bytes(8)
    assert encode(Atom(b"hi")) == b"A" + (2).to_bytes(8, "big") + b"hi"
    o = apply(Op.OUTCOME, (S, Atom(b"w")), (S, Atom(b"o")))
    assert encode(o) == (
        b"P" + bytes([7]) + b"outcome" + (2).to_bytes(4, "big")
        + b"S" + b"A" + (1).to_bytes(8, "big") + b"w"
        + b"S" + b"A" + (1).to_bytes(8, "big") + b"o"
    )


@given(values)
def test_encode_matches_reference_and_decodes_back(v):
    enc = encode(v)
    assert enc == ref_encode(v)
    back, end = ref_decode(enc)
    assert end == len(enc)  # prefix-free: the encoding is exactly one Value
    assert back == v


@given(values, values)
def test_encode_is_injective(x, y):
    assert (encode(x) == encode(y)) == (x == y)
    assert (content_id(x) == content_id(y)) == (x == y)


def test_encoding_separates_fields_that_concatenate_alike():
    # "ab"+"c" and "a"+"bc" must not collide: lengths are part of the encoding.
    x = apply(Op.OUTCOME, (S, Atom(b"ab")), (S, Atom(b"c")))
    y = apply(Op.OUTCOME, (S, Atom(b"a")), (S, Atom(b"bc")))
    assert encode(x) != encode(y) and content_id(x) != content_id(y)


# -- hashing --------------------------------------------------------------------------


def test_digest_is_domain_separated_length_prefixed_sha256():
    assert digest("d", b"x") == hashlib.sha256((1).to_bytes(8, "big") + b"d" + (1).to_bytes(8, "big") + b"x").digest()
    assert digest("d", "x") == digest("d", b"x")
    assert digest("a", b"bc") != digest("ab", b"c")  # domain cannot bleed into fields
    assert digest("d", b"ab", b"c") != digest("d", b"a", b"bc")
    assert digest("d") != digest("d", b"")
    assert identity.hexdigest("d", b"x") == digest("d", b"x").hex()


@given(values)
def test_content_id_is_sha256_of_the_encoding_under_the_value_domain(v):
    assert content_hex(v) == ref_content_hex(v)
    assert len(content_id(v)) == 32
    assert content_hex(v) != hashlib.sha256(encode(v)).hexdigest()  # domain separated


def test_content_ids_are_pinned():
    # The .egg v1 format stores these ids: changing encode() or the domain breaks every file.
    assert content_hex(Atom(b"")) == "0c079cff81f852679aa0691eefe92358ecb1ed85dfe710fe25e69f337990df61"
    o = apply(Op.OUTCOME, (S, Atom.text("ls")), (S, Atom.text("a.txt\n")))
    assert content_hex(o) == "d48e9bd281f1accc4fae60db627f61af037de3cc6ae719028ea612c2400b145b"
    assert ref_digest("eggshell.value", encode(o)).hex() == content_hex(o)


def test_content_id_is_cached_but_not_part_of_equality():
    x, y = Atom(b"q"), Atom(b"q")
    content_id(x)
    assert x._cid is not None and y._cid is None
    assert x == y and hash(x) == hash(y)


def test_display_key_is_a_12_hex_prefix():
    v = Atom.text("hello")
    assert DISPLAY_KEY_LEN == 12
    assert display_key(v) == content_hex(v)[:12]
    assert display_key(content_hex(v)) == content_hex(v)[:12]


def test_canonical_json_sorts_keys_and_is_compact():
    assert canonical_json({"b": 1, "a": [1, {"d": None, "c": "\u00e9"}]}) == '{"a":[1,{"c":"\u00e9","d":null}],"b":1}'
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


# -- ids across processes -------------------------------------------------------------

_STABILITY_SCRIPT = r"""
import json, sys
import helpers
from helpers import turn_record, bash
from eggshell.core.identity import content_hex
from eggshell.graph.turns import compile_turn, parse_turn
from eggshell.core.values import Atom, E, Op, S, apply

a = [Atom.text("k%d" % i) for i in range(40)]
vals = [Atom(b""), Atom(b"\xff\x00"), Atom.text("h\u00e9")]
vals.append(apply(Op.OUTCOME, (S, a[0]), (S, a[1]), *[(E, x) for x in a[2:]]))
vals.append(apply(Op.ALL, (S, a[0]), *[(S, x) for x in reversed(a[1:])]))
vals.append(apply(Op.INQUIRY, (E, a[0]), (E, a[1]), (S, a[2]), (E, a[3]), (E, a[4]), (E, a[5])))
rec = turn_record(tools=[bash("ls", "x\n"), {"name": "Edit", "id": "u2",
                  "input": {"z": 1, "a": {"q": [1, 2], "b": None}, "m": "\u00e9"}, "output": {"stdout": "o", "stderr": "e"}}])
vals.extend(compile_turn(parse_turn(rec)).roots)
print(json.dumps({"ids": [content_hex(v) for v in vals], "hash": hash(Atom.text("k0"))}))
"""


def _ids_in_subprocess(seed: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _STABILITY_SCRIPT],
        env=helpers.subprocess_env(PYTHONHASHSEED=seed),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def test_content_ids_are_stable_across_processes_and_hash_seeds():
    here: dict = {}
    exec(compile(_STABILITY_SCRIPT.replace("print(", "here['r'] = ("), "<stability>", "exec"), {"here": here})
    one, two = _ids_in_subprocess("1"), _ids_in_subprocess("4242")
    # The seeds really differ in effect (Python's hash of the same Atom changes) ...
    assert one["hash"] != two["hash"]
    # ... yet every content id is the same, and equals this process's.
    assert one["ids"] == two["ids"] == json.loads(here["r"])["ids"]
    assert len(set(one["ids"])) == len(one["ids"])


# -- resolving keys ---------------------------------------------------------------------

IDS = ["abc123" + "0" * 58, "abc124" + "0" * 58, "ffff" + "1" * 60]


def test_resolve_key_unique_prefix():
    assert resolve_key("abc123", IDS) == IDS[0]
    assert resolve_key("f", IDS) == IDS[2]
    assert resolve_key(IDS[1], IDS) == IDS[1]
    assert resolve_key("  ABC124 ", IDS) == IDS[1]  # case and surrounding space forgiven


def test_resolve_key_ambiguous_names_the_candidates():
    with pytest.raises(KeyError_, match="ambiguous") as e:
        resolve_key("abc12", IDS)
    assert "abc123" in str(e.value) and "abc124" in str(e.value)


def test_resolve_key_duplicates_in_ids_are_not_ambiguous():
    assert resolve_key("abc123", IDS + [IDS[0]]) == IDS[0]


@pytest.mark.parametrize("key", ["0", "abd", "abc1230000000000000000000000000000000000000000000000000000000000000"])
def test_resolve_key_unknown(key):
    with pytest.raises(KeyError_, match="unknown"):
        resolve_key(key, IDS)


@pytest.mark.parametrize("key", ["", "   ", "xyz", "abc-12", "abc 12"])
def test_resolve_key_rejects_non_hex(key):
    with pytest.raises(KeyError_, match="not a key"):
        resolve_key(key, IDS)


def test_key_error_is_a_lookup_error():
    assert issubclass(KeyError_, LookupError)


def test_graph_lookup_by_display_key_prefix_and_errors(egg):
    s = Store.open(egg)
    vals = [Atom.text("value %d" % i) for i in range(40)]
    s.commit(vals)
    g = Store.open(egg).graph
    for v in vals:
        nid, got = g.lookup(display_key(v))
        assert nid == content_hex(v) and got == v
        assert g.lookup(content_hex(v)[:DISPLAY_KEY_LEN + 5])[1] == v
    # 40 ids over 16 first characters: some one-character prefix is shared.
    shared = next(ch for ch in "0123456789abcdef" if sum(content_hex(v).startswith(ch) for v in vals) > 1)
    with pytest.raises(LookupError, match="ambiguous"):
        g.lookup(shared)
    absent = next(p for p in ("%03x" % i for i in range(4096)) if not any(i.startswith(p) for i in g.nodes))
    with pytest.raises(LookupError, match="unknown"):
        g.lookup(absent)


@given(st.lists(values, min_size=1, max_size=6, unique_by=content_hex))
def test_display_keys_of_distinct_values_resolve_to_them(vs):
    ids = [content_hex(v) for v in vs]
    for v in vs:
        # 12 hex characters are 48 bits: no collision among a handful of values.
        assert resolve_key(display_key(v), ids) == content_hex(v)
