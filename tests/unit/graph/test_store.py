"""The `.egg` v1 store: format, append-only commits, validation, torn tails, refresh, compact, merge."""

from __future__ import annotations

import base64
import json
import os
import random
import stat
import tempfile
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import (
    commit_line,
    egg_lines,
    egg_records,
    hand_written_egg,
    header_line,
    listing,
    node_ids_in_file,
    node_lines,
    read_bytes,
    write_bytes,
)
from helpers.strategies import ref_digest, ref_exact_footprint, tiny_values, values
from eggshell.graph import eggfile as ef
from eggshell.graph import store as store_mod
from eggshell.core.identity import content_hex
from eggshell.graph.store import EggError, Store, compact, merge
from eggshell.core.values import Atom, E, Op, S, apply, union_admissible

W, O, SESS = Atom.text("Bash\n{\"command\":\"ls\"}"), Atom.text("a.txt\n"), Atom.text("session-1")
OCC = apply(Op.OCCURRENCE, (S, O), (S, W), (E, SESS), (E, Atom.text("turn-1")), (E, Atom.text("use-1")))
OUT = apply(Op.OUTCOME, (S, W), (S, O), (E, OCC))


def outcome(i: int, session: str = "session-1") -> "apply":
    w, o = Atom.text("work %d" % i), Atom.text("outcome %d" % i)
    occ = apply(Op.OCCURRENCE, (S, o), (S, w), (E, Atom.text(session)), (E, Atom.text("turn %d" % i)), (E, Atom.text("u%d" % i)))
    return apply(Op.OUTCOME, (S, w), (S, o), (E, occ))


def state(g) -> tuple:
    """What a load means: authority, roots, unions in force, commit and unlink ids."""
    return (
        g.authority,
        sorted(content_hex(r) for r in g.roots()),
        sorted((content_hex(a), content_hex(b)) for a, b in g.unions()),
        sorted(g.commits),
        sorted(g.unlinks),
    )


def load(path: str):
    return Store.open(path).graph


# -- format --------------------------------------------------------------------------------


def test_missing_file_is_an_empty_store_and_reading_creates_nothing(egg):
    s = Store.open(egg)
    assert s.graph.header is None and s.graph.roots() == [] and s.graph.commits == {}
    assert not os.path.exists(egg) and not os.path.exists(egg + ".lock")


def test_first_commit_writes_header_nodes_and_commit(egg):
    s = Store.open(egg)
    c = s.commit([OUT], session="sess", turn="t1", when="2024-05-01T10:00:00.000000Z")
    recs = egg_records(egg)
    h = recs[0]
    assert h["magic"] == "eggshell-egg" and h["version"] == 1
    assert str(uuid.UUID(h["authority"])) == h["authority"]
    assert isinstance(h["created"], str) and h["created"]
    assert recs[-1] == {
        "commit": c.id, "time": "2024-05-01T10:00:00.000000Z", "session": "sess", "turn": "t1",
        "roots": [content_hex(OUT)], "unions": [],
    }
    assert c.id == ef.commit_id(c) and len(c.id) == 64
    nodes = {r["node"]: r for r in recs[1:-1]}
    assert len(nodes) == len(recs) - 2 == 7  # 5 text atoms (work, outcome, session, turn, use) + occurrence + outcome
    assert nodes[content_hex(O)] == {"node": content_hex(O), "text": "a.txt\n"}
    assert nodes[content_hex(OUT)] == {"node": content_hex(OUT), "op": "outcome",
                                       "args": [["s", content_hex(W)], ["s", content_hex(O)], ["e", content_hex(OCC)]]}
    # children before parents
    order = [r["node"] for r in recs[1:-1]]
    assert order.index(content_hex(OCC)) < order.index(content_hex(OUT))
    assert all(order.index(content_hex(x)) < order.index(content_hex(OCC)) for x in (W, O, SESS))


def test_non_utf8_atoms_are_stored_as_base64(egg):
    raw = Atom(b"\xff\x00\xfe")
    Store.open(egg).commit([raw])
    rec = [r for r in egg_records(egg) if r.get("node") == content_hex(raw)]
    assert rec == [{"node": content_hex(raw), "bytes": base64.b64encode(b"\xff\x00\xfe").decode()}]
    assert load(egg).roots() == [raw]


def test_each_distinct_node_is_written_once_per_file(egg):
    s = Store.open(egg)
    for i in range(5):
        s.commit([OUT, outcome(i), apply(Op.ALL, (S, W), (S, O), (S, Atom.text("w%d" % i)))])
    Store.open(egg).commit([outcome(7), OUT])  # a second Store instance, same file
    ids = node_ids_in_file(egg)
    assert len(ids) == len(set(ids))
    assert len(egg_lines(egg)) == 1 + len(ids) + 6


def test_commit_of_known_roots_writes_nothing_and_returns_none(egg):
    s = Store.open(egg)
    assert s.commit([OUT]) is not None
    before = read_bytes(egg)
    assert s.commit([OUT]) is None
    assert Store.open(egg).commit([OUT, OUT]) is None
    assert s.commit([]) is None
    assert read_bytes(egg) == before


def test_commit_records_only_new_roots_and_dedups_within_a_call(egg):
    s = Store.open(egg)
    s.commit([outcome(1)])
    c = s.commit([outcome(1), outcome(2), outcome(2)])
    assert c.roots == (content_hex(outcome(2)),)


def test_a_sub_value_committed_later_as_a_root_needs_only_a_commit_line(egg):
    s = Store.open(egg)
    s.commit([OUT])
    n = len(egg_lines(egg))
    c = s.commit([OCC])
    assert len(egg_lines(egg)) == n + 1 and egg_records(egg)[-1]["commit"] == c.id
    assert content_hex(OCC) in s.graph.root_ids


@pytest.mark.usefixtures("umask022")
def test_new_files_are_0600_and_new_directories_0700(tmp_path):
    path = str(tmp_path / "new" / "dir" / "work.egg")
    Store.open(path).commit([OUT])
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path + ".lock").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(str(tmp_path / "new" / "dir")).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(str(tmp_path / "new")).st_mode) == 0o700  # missing parents too


@pytest.mark.usefixtures("umask022")
def test_compacted_and_merged_files_are_0600(egg, tmp_path):
    Store.open(egg).commit([OUT])
    compact(egg)
    out = str(tmp_path / "m" / "merged.egg")
    merge([egg], out)
    assert stat.S_IMODE(os.stat(egg).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600


def test_reload_gives_the_same_graph(egg):
    s = Store.open(egg)
    s.commit([OUT, outcome(1)], [(Atom.text("x"), Atom.text("y"))], session="a", turn="1")
    s.commit([outcome(2)], session="a", turn="2")
    g = load(egg)
    assert state(g) == state(s.graph)
    assert g.nodes == s.graph.nodes
    assert g.provenance(outcome(2)).turn == "2" and g.provenance(OUT).turn == "1"
    assert g.provenance(Atom.text("never")) is None


# -- line order, concatenation ----------------------------------------------------------------


def _rich_store(path: str) -> Store:
    """A store with several commits, unions, and an unlink."""
    s = Store.open(path)
    x, y, z = Atom.text("x"), Atom.text("y"), Atom.text("z")
    s.commit([OUT, outcome(1)], [(x, y)], when="2024-01-01T00:00:01.000000Z")
    s.commit([outcome(2)], [(y, z)], when="2024-01-01T00:00:02.000000Z")
    s.remove_union(x, y, when="2024-01-01T00:00:03.000000Z")
    s.commit([outcome(3)], [(x, z)], when="2024-01-01T00:00:04.000000Z")
    s.remove_union(z, x, when="2024-01-01T00:00:05.000000Z")
    s.commit([outcome(4)], [(z, x)], when="2024-01-01T00:00:06.000000Z")  # re-added after the unlink
    return s


def test_rich_store_state_is_what_was_done(egg):
    g = _rich_store(egg).graph
    x, y, z = Atom.text("x"), Atom.text("y"), Atom.text("z")
    assert sorted(map(content_hex, (a for p in g.unions() for a in p))) == sorted(map(content_hex, [y, z, x, z]))
    assert len(g.unlinks) == 2 and len(g.commits) == 4


@pytest.mark.parametrize("seed", range(8))
def test_any_line_order_after_the_header_loads_the_same(egg, tmp_path, seed):
    want = state(_rich_store(egg).graph)
    lines = egg_lines(egg)
    body = lines[1:]
    random.Random(seed).shuffle(body)
    shuffled = str(tmp_path / "shuffled.egg")
    write_bytes(shuffled, b"\n".join([lines[0]] + body) + b"\n")
    assert state(load(shuffled))[1:] == want[1:]
    assert state(load(shuffled))[0] == want[0]


def test_concatenating_two_copies_loads_the_same_and_later_commits_add_no_duplicates(egg, tmp_path):
    want = state(_rich_store(egg).graph)
    data = read_bytes(egg)
    doubled = str(tmp_path / "doubled.egg")
    write_bytes(doubled, data + data)
    g = load(doubled)
    assert state(g) == want
    assert g.lines == 2 * len(egg_lines(egg))
    s = Store.open(doubled)
    assert s.commit([OUT, outcome(1)]) is None
    s.commit([outcome(1), outcome(99)])
    new = read_bytes(doubled)[len(data) * 2 :]
    assert content_hex(outcome(1)).encode() not in new.split(b'"commit"')[0]  # no re-written nodes
    assert len([r for r in egg_records(doubled) if r.get("node") == content_hex(outcome(99))]) == 1


def test_concatenated_copy_with_reshuffled_second_half_loads_the_same(egg, tmp_path):
    want = state(_rich_store(egg).graph)
    lines = egg_lines(egg)
    second = lines[:]
    random.Random(7).shuffle(second)  # the second header may land anywhere
    p = str(tmp_path / "mixed.egg")
    write_bytes(p, b"\n".join(lines + second) + b"\n")
    assert state(load(p)) == want


def test_header_must_be_line_one(egg, tmp_path):
    _rich_store(egg)
    lines = egg_lines(egg)
    p = str(tmp_path / "late-header.egg")
    write_bytes(p, b"\n".join(lines[1:2] + lines[:1] + lines[2:]) + b"\n")
    with pytest.raises(EggError, match=r"late-header\.egg:1: .*header"):
        load(p)


# -- unions -----------------------------------------------------------------------------------


def test_union_commit_and_unlink(egg):
    x, y = Atom.text("x"), Atom.text("y")
    s = Store.open(egg)
    c = s.commit([], [(x, y)])
    assert c is not None and c.roots == () and len(c.unions) == 1
    assert {frozenset(p) for p in s.graph.unions()} == {frozenset((x, y))}
    assert s.commit([], [(y, x)]) is None  # same pair, other order: already in force
    before = read_bytes(egg)
    u = s.remove_union(y, x)
    after = read_bytes(egg)
    assert after.startswith(before)
    added = after[len(before) :]
    assert added.count(b"\n") == 1
    rec = json.loads(added)
    assert rec == {"unlink": u.id, "time": u.time, "pair": sorted([content_hex(x), content_hex(y)])}
    assert s.graph.unions() == [] and load(egg).unions() == []
    assert s.remove_union(x, y) is None and read_bytes(egg) == after
    assert s.remove_union(x, Atom.text("never")) is None and read_bytes(egg) == after
    c2 = s.commit([], [(x, y)])
    assert c2 is not None and len(load(egg).unions()) == 1


def test_union_events_at_equal_times_let_the_unlink_win_in_any_line_order(tmp_path):
    x, y = Atom.text("x"), Atom.text("y")
    t = "2024-03-03T03:03:03.000000Z"
    u = ef.Unlink("", t, tuple(sorted((content_hex(x), content_hex(y)))))
    unlink = ef.unlink_line(ef.Unlink(ef.unlink_id(u), u.time, u.pair))
    add = commit_line([], [(x, y)], time=t)
    later = commit_line([Atom.text("r")], [(y, x)], time="2024-03-03T03:03:04.000000Z")
    body = node_lines([x, y, Atom.text("r")])
    for i, order in enumerate(([add, unlink], [unlink, add])):
        p = str(tmp_path / ("tie%d.egg" % i))
        write_bytes(p, b"".join([header_line()] + body + order))
        assert load(p).unions() == []
        write_bytes(p, b"".join([header_line()] + body + order + [later]))
        assert {frozenset(u) for u in load(p).unions()} == {frozenset((x, y))}
        write_bytes(p, b"".join([header_line(), later] + body + order[::-1]))
        assert len(load(p).unions()) == 1


def test_commit_fsyncs_the_file_after_writing_everything(egg, monkeypatch):
    Store.open(egg).commit([OUT])
    synced: list[tuple[str, int]] = []
    real_fsync = os.fsync

    def spy(fd):
        try:
            target = os.readlink("/proc/self/fd/%d" % fd)
        except OSError:
            target = "?"
        synced.append((target, os.fstat(fd).st_size))
        return real_fsync(fd)

    monkeypatch.setattr(store_mod.os, "fsync", spy)
    Store.open(egg).commit([outcome(1)])
    size = os.path.getsize(egg)
    assert (os.path.realpath(egg), size) in synced  # the whole append reached fsync


def test_self_union_writes_nothing(egg):
    s = Store.open(egg)
    assert s.commit([], [(OUT, OUT)]) is None
    assert not os.path.exists(egg) or load(egg).commits == {}


def test_commit_refuses_an_inadmissible_union_and_writes_nothing(egg):
    s = Store.open(egg)
    s.commit([OUT])
    before = read_bytes(egg)
    other = outcome(1)
    assert not union_admissible(OUT, other)
    with pytest.raises(EggError, match="provenance"):
        s.commit([outcome(2)], [(OUT, other)])
    assert read_bytes(egg) == before
    with pytest.raises(EggError):
        Store.open(str(egg) + "-new.egg").commit([], [(OUT, Atom.text("x"))])
    assert not os.path.exists(str(egg) + "-new.egg")


def test_hand_written_inadmissible_union_fails_to_load(tmp_path):
    p = str(tmp_path / "bad-union.egg")
    data = hand_written_egg(p, [OUT], [(OUT, outcome(1))])
    n = len(data.split(b"\n")) - 1
    with pytest.raises(EggError, match=r"bad-union\.egg:%d: .*provenance" % n):
        load(p)


def test_hand_written_admissible_union_loads(tmp_path):
    p = str(tmp_path / "ok-union.egg")
    same_prov = apply(Op.OUTCOME, (S, Atom.text("other work")), (S, Atom.text("other out")), (E, OCC))
    hand_written_egg(p, [OUT], [(OUT, same_prov)])
    assert {frozenset(u) for u in load(p).unions()} == {frozenset((OUT, same_prov))}


@settings(max_examples=40)
@given(tiny_values, tiny_values)
def test_store_admits_exactly_the_unions_with_equal_exact_footprints(x, y):
    admissible = ref_exact_footprint(x) == ref_exact_footprint(y)
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "u.egg")
        Store.open(p).commit([Atom.text("seed")])
        before = read_bytes(p)
        if admissible:
            Store.open(p).commit([], [(x, y)])
            assert (x == y) or len(load(p).unions()) == 1
        else:
            with pytest.raises(EggError):
                Store.open(p).commit([], [(x, y)])
            assert read_bytes(p) == before
        q = os.path.join(d, "hand.egg")
        hand_written_egg(q, [Atom.text("seed")], [(x, y)])
        if admissible:
            load(q)
        else:
            with pytest.raises(EggError, match="provenance"):
                load(q)


# -- torn tails and orphans --------------------------------------------------------------------


def test_reader_ignores_a_torn_last_line(egg):
    s = Store.open(egg)
    s.commit([OUT])
    want = state(s.graph)
    with open(egg, "ab") as f:
        f.write(b'{"node":"' + b"a" * 30)
    r = Store.open(egg)
    assert r.torn and state(r.graph) == want


def test_a_complete_record_without_its_newline_is_still_torn(egg):
    s = Store.open(egg)
    s.commit([OUT])
    complete = read_bytes(egg)
    s2 = Store(egg + ".scratch")
    s2.commit([outcome(5)])
    last = egg_lines(egg + ".scratch")[-1]  # a valid commit line of another file
    with open(egg, "ab") as f:
        f.write(last)  # no newline: a writer died before writing it
    assert state(load(egg)) == state(s.graph)
    Store.open(egg).commit([outcome(6)])
    data = read_bytes(egg)
    assert data.startswith(complete) and last not in data


def test_next_writer_trims_the_torn_tail_then_appends(egg):
    s = Store.open(egg)
    s.commit([OUT])
    complete = read_bytes(egg)
    with open(egg, "ab") as f:
        f.write(b'{"commit":"deadbeef","ro')
    w = Store.open(egg)
    c = w.commit([outcome(1)])
    data = read_bytes(egg)
    assert data.startswith(complete)
    assert b"deadbeef" not in data and data.endswith(b"\n")
    g = load(egg)
    assert c.id in g.commits and not Store.open(egg).torn
    assert {content_hex(OUT), content_hex(outcome(1))} == set(g.root_ids)


def test_a_file_that_is_only_a_torn_header_is_empty_and_rewritten(egg):
    write_bytes(egg, b'{"magic":"eggshell-egg","vers')
    r = Store.open(egg)
    assert r.torn and r.graph.header is None
    Store.open(egg).commit([OUT])
    recs = egg_records(egg)
    assert recs[0]["magic"] == "eggshell-egg" and load(egg).roots() == [OUT]
    assert read_bytes(egg).count(b"magic") == 1


def test_nodes_not_reachable_from_a_commit_are_not_roots_and_compaction_drops_them(egg):
    s = Store.open(egg)
    s.commit([OUT])
    orphan = outcome(42)
    with open(egg, "ab") as f:
        f.writelines(node_lines([orphan]))  # a writer died after its nodes, before its commit
    g = load(egg)
    assert content_hex(orphan) not in g.root_ids and g.roots() == [OUT]
    # the next commit of that value needs only its commit line
    n = len(egg_lines(egg))
    Store.open(egg).commit([orphan])
    assert len(egg_lines(egg)) == n + 1
    # an orphan that nobody commits is dropped by compaction
    with open(egg, "ab") as f:
        f.writelines(node_lines([outcome(43)]))
    want = state(load(egg))
    compact(egg)
    assert state(load(egg)) == want
    assert content_hex(outcome(43)) not in node_ids_in_file(egg)


# -- damaged files ----------------------------------------------------------------------------

A1, A2 = Atom.text("one"), Atom.text("two")
PAIR = apply(Op.OUTCOME, (S, A1), (S, A2))
HEX = {v: content_hex(v) for v in (A1, A2, PAIR)}


def _raw_node(op: str, args: list[list[str]], node: str | None = None) -> bytes:
    return (json.dumps({"node": node or "0" * 64, "op": op, "args": args}, separators=(",", ":")) + "\n").encode()


def _bad_shape_line() -> bytes:
    # all(S one) with no child: give it the id its encoding would have, so only the shape is wrong
    enc = b"P" + bytes([3]) + b"all" + (1).to_bytes(4, "big") + b"S" + b"A" + (3).to_bytes(8, "big") + b"one"
    return _raw_node("all", [["s", HEX[A1]]], ref_digest("eggshell.value", enc).hex())


def _base() -> list[bytes]:
    """header, one, two, outcome(one, two), commit — as complete lines with newlines."""
    return [header_line()] + node_lines([PAIR]) + [commit_line([PAIR])]


def _damage(kind: str) -> tuple[list[bytes], int, str]:
    """(lines, bad line number, message pattern) for one kind of damage."""
    L = _base()
    if kind == "altered text":
        L[1] = L[1].replace(b'"one"', b'"onE"')
        return L, 2, "does not match its content"
    if kind == "altered operator node":
        L[3] = L[3].replace(b'"outcome"', b'"occurrence"')
        return L, 4, "does not match its content"
    if kind == "unknown operator":
        L.insert(4, _raw_node("sameas", [["s", HEX[A1]], ["s", HEX[A2]]]))
        return L, 5, "unknown operator 'sameas'"
    if kind == "bad shape":
        L.insert(4, _bad_shape_line())
        return L, 5, "invalid operator application: all"
    if kind == "bad authority":
        L.insert(4, _raw_node("outcome", [["x", HEX[A1]], ["s", HEX[A2]]]))
        return L, 5, "argument"
    if kind == "node refers to a missing node":
        L.insert(4, _raw_node("outcome", [["s", HEX[A1]], ["s", "f" * 64]]))
        return L, 5, "not in the file"
    if kind == "commit refers to a missing node":
        L.append(commit_line([Atom.text("never written")], time="2024-01-02T00:00:00.000000Z"))
        return L, 6, "commit refers to node .* not in the file"
    if kind == "unlink refers to a missing node":
        u = ef.Unlink("", "2024-01-03T00:00:00.000000Z", ("a" * 64, "b" * 64))
        L.append(ef.unlink_line(ef.Unlink(ef.unlink_id(u), u.time, u.pair)))
        return L, 6, "unlink refers to node"
    if kind == "not JSON":
        L.insert(2, b"this is not json\n")
        return L, 3, "not valid JSON"
    if kind == "JSON that is not an object":
        L.insert(2, b"[1,2,3]\n")
        return L, 3, "JSON object"
    if kind == "unknown record":
        L.insert(2, b'{"hello":"world"}\n')
        return L, 3, "unknown record"
    if kind == "empty line":
        L.insert(3, b"\n")
        return L, 4, "empty line"
    if kind == "second header with another authority":
        L.insert(2, header_line("99999999-0000-4000-8000-000000000009"))
        return L, 3, "second store"
    if kind == "unsupported version":
        L[0] = L[0].replace(b'"version":1', b'"version":2')
        return L, 1, "version 2 is not supported"
    if kind == "no header":
        L = L[1:]
        return L, 1, "first line must be the eggshell header"
    if kind == "altered commit":
        L[4] = L[4].replace(b'"session":"s"', b'"session":"S"')
        return L, 5, "commit id does not match"
    if kind == "altered unlink":
        u = ef.Unlink("", "2024-01-03T00:00:00.000000Z", (HEX[A1], HEX[A2]))
        L.append(ef.unlink_line(ef.Unlink(ef.unlink_id(u), u.time, u.pair)).replace(b"2024-01-03", b"2024-01-04"))
        return L, 6, "unlink id does not match"
    if kind == "same id, different node":
        L.insert(4, b'{"node":"%s","text":"ONE"}\n' % HEX[A1].encode())
        return L, 5, "differs from line 2"
    if kind == "cycle":
        x, y = "1" * 64, "2" * 64
        L.insert(4, _raw_node("all", [["s", HEX[A1]], ["s", y]], x))
        L.insert(5, _raw_node("all", [["s", HEX[A1]], ["s", x]], y))
        return L, 0, "cycle"
    if kind == "uppercase id":
        L[1] = L[1].replace(HEX[A1].encode(), HEX[A1].upper().encode())
        return L, 2, "hex content id"
    if kind == "bad base64":
        L.insert(2, b'{"node":"%s","bytes":"!!!"}\n' % ("c" * 64).encode())
        return L, 3, "base64"
    if kind == "lone surrogate text":
        L.insert(2, b'{"node":"%s","text":"\\ud800"}\n' % ("c" * 64).encode())
        return L, 3, "surrogate"
    if kind == "extra field on a node":
        L[1] = L[1].replace(b'"text"', b'"extra":1,"text"')
        return L, 2, "text node must be"
    raise AssertionError(kind)


DAMAGE = [
    "altered text", "altered operator node", "unknown operator", "bad shape", "bad authority",
    "node refers to a missing node", "commit refers to a missing node", "unlink refers to a missing node",
    "not JSON", "JSON that is not an object", "unknown record", "empty line",
    "second header with another authority", "unsupported version", "no header", "altered commit", "altered unlink",
    "same id, different node", "cycle", "uppercase id", "bad base64", "lone surrogate text", "extra field on a node",
]


@pytest.mark.parametrize("kind", DAMAGE)
def test_damaged_file_fails_to_load_naming_file_and_line_and_is_never_written(tmp_path, kind):
    lines, n, pattern = _damage(kind)
    p = str(tmp_path / "damaged.egg")
    data = b"".join(lines)
    write_bytes(p, data)
    where = r"damaged\.egg:%s: " % (n if n else r"\d+")
    with pytest.raises(EggError, match=where + ".*" + pattern):
        Store.open(p)
    before = listing(str(tmp_path))
    # a writer refuses too, and leaves the file byte-identical
    with pytest.raises(EggError, match=where):
        Store(p).commit([Atom.text("new root")])
    with pytest.raises(EggError, match=where):
        Store(p).remove_union(A1, A2)
    with pytest.raises(EggError, match=where):
        compact(p)
    with pytest.raises(EggError, match=where):
        merge([p], str(tmp_path / "out.egg"))
    assert read_bytes(p) == data
    after = listing(str(tmp_path))
    after.pop("damaged.egg.lock", None)  # the only thing a refused writer may leave is its lock file
    assert after == before


def test_the_undamaged_base_file_loads(tmp_path):
    p = str(tmp_path / "base.egg")
    write_bytes(p, b"".join(_base()))
    assert load(p).roots() == [PAIR]


def test_a_second_header_with_the_same_authority_is_fine(tmp_path):
    L = _base()
    L.insert(3, L[0])
    p = str(tmp_path / "two-headers.egg")
    write_bytes(p, b"".join(L))
    assert load(p).roots() == [PAIR]


def test_a_damaged_file_with_a_torn_tail_is_left_byte_identical(tmp_path):
    lines, n, _ = _damage("altered text")
    p = str(tmp_path / "damaged.egg")
    data = b"".join(lines) + b'{"node":"ab'
    write_bytes(p, data)
    with pytest.raises(EggError, match=r"damaged\.egg:2: "):
        Store(p).commit([Atom.text("new root")])
    assert read_bytes(p) == data


def test_an_exact_copy_of_the_file_appended_later_is_accepted_by_refresh(egg):
    s = _rich_store(egg)
    r = Store.open(egg)
    want = state(r.graph)
    data = read_bytes(egg)
    with open(egg, "ab") as f:
        f.write(data)  # `cat copy.egg >> work.egg`: every line repeated, same authority
    assert r.refresh() == len(egg_lines(egg)) // 2
    assert state(r.graph) == want == state(load(egg))
    assert s.commit([outcome(1)]) is None


def test_damage_appended_after_a_load_is_reported_with_its_line_number(egg):
    s = Store.open(egg)
    s.commit([OUT])
    n = len(egg_lines(egg))
    r = Store.open(egg)
    s.commit([outcome(1)])
    with open(egg, "ab") as f:
        f.write(b"garbage\n")
    with pytest.raises(EggError, match=r"work\.egg:%d: not valid JSON" % (len(egg_lines(egg)))):
        r.refresh()
    # the failed refresh changed nothing: the reader still has what it had
    assert r.graph.roots() == [OUT] and r.graph.lines == n
    with pytest.raises(EggError):
        r.refresh()


def test_an_altered_copy_of_a_known_node_appended_later_is_caught_by_refresh_and_commit(egg):
    s = Store.open(egg)
    s.commit([OUT])
    reader, writer = Store.open(egg), Store.open(egg)
    good = next(line for line in egg_lines(egg) if b'"text":"a.txt\\n"' in line)
    with open(egg, "ab") as f:
        f.write(good.replace(b"a.txt", b"b.txt") + b"\n")
    damaged = read_bytes(egg)
    with pytest.raises(EggError, match="differs"):
        Store.open(egg)  # a fresh load rejects it ...
    with pytest.raises(EggError):
        reader.refresh()  # ... and so must an incremental one
    with pytest.raises(EggError):
        writer.commit([outcome(1)])
    assert read_bytes(egg) == damaged


# -- symlinks and odd paths ---------------------------------------------------------------------


def test_symlinked_egg_path_is_refused_and_nothing_changes(tmp_path):
    real = str(tmp_path / "real.egg")
    Store.open(real).commit([OUT])
    link = str(tmp_path / "link.egg")
    os.symlink(real, link)
    before = listing(str(tmp_path))
    with pytest.raises(EggError, match=r"link\.egg: is a symbolic link"):
        Store.open(link)
    with pytest.raises(EggError, match="symbolic link"):
        Store(link).commit([outcome(1)])
    with pytest.raises(EggError, match="symbolic link"):
        compact(link)
    assert listing(str(tmp_path)) == before
    assert not os.path.exists(link + ".lock")


def test_dangling_symlink_egg_path_is_refused_and_not_created(tmp_path):
    link = str(tmp_path / "dangling.egg")
    os.symlink(str(tmp_path / "target.egg"), link)
    with pytest.raises(EggError, match="symbolic link"):
        Store(link).commit([OUT])
    assert not os.path.exists(str(tmp_path / "target.egg"))


def test_symlinked_parent_directory_is_refused_and_nothing_changes(tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    Store.open(str(real_dir / "w.egg")).commit([OUT])
    os.symlink(str(real_dir), str(tmp_path / "linkdir"))
    p = str(tmp_path / "linkdir" / "w.egg")
    before = listing(str(real_dir))
    with pytest.raises(EggError, match=r"linkdir: is a symbolic link"):
        Store.open(p)
    with pytest.raises(EggError, match="symbolic link"):
        Store(p).commit([outcome(1)])
    with pytest.raises(EggError, match="symbolic link"):
        Store(str(tmp_path / "linkdir" / "new.egg")).commit([outcome(1)])
    assert listing(str(real_dir)) == before


def test_symlinked_lock_file_is_refused(egg, tmp_path):
    Store.open(egg).commit([OUT])
    os.unlink(egg + ".lock")
    target = tmp_path / "elsewhere"
    target.write_bytes(b"precious")
    os.symlink(str(target), egg + ".lock")
    before = read_bytes(egg)
    with pytest.raises(EggError, match="symbolic link"):
        Store.open(egg).commit([outcome(1)])
    assert read_bytes(egg) == before and target.read_bytes() == b"precious"


def test_a_directory_is_not_an_egg(tmp_path):
    d = tmp_path / "dir.egg"
    d.mkdir()
    with pytest.raises(EggError, match="not a regular file"):
        Store.open(str(d))
    with pytest.raises(EggError, match="not a regular file"):
        Store(str(d)).commit([OUT])


# -- whose store: owner, mode, the path at write time (issue 10, section 5) ---------------------------

NOBODY = 65534


@pytest.mark.parametrize(
    "spoil, refused, why",
    [
        (lambda p: os.chown(p, NOBODY, NOBODY), "work.egg", "another user owns it (owner nobody (uid 65534), mode 0600)"),
        (lambda p: os.chmod(p, 0o666), "work.egg", "every user can write it (owner root (uid 0), mode 0666)"),
        (lambda p: (os.chown(p, 0, NOBODY), os.chmod(p, 0o660)), "work.egg", "group nogroup (gid 65534) can write it"),
        (lambda p: os.chown(p + ".lock", NOBODY, NOBODY), "work.egg.lock", "another user owns it (owner nobody (uid 65534)"),
        (lambda p: os.chown(os.path.dirname(p), NOBODY, NOBODY), "", "another user owns it (owner nobody (uid 65534), mode 0700)"),
        (lambda p: os.chmod(os.path.dirname(p), 0o777), "", "every user can write it (owner root (uid 0), mode 0777)"),
    ],
)
def test_a_store_someone_else_could_write_is_never_written(egg, spoil, refused, why):
    Store.open(egg).commit([OUT])
    spoil(egg)
    before = read_bytes(egg)
    with pytest.raises(EggError) as e:
        Store.open(egg).commit([outcome(1)])
    target = os.path.join(os.path.dirname(egg), refused) if refused else os.path.dirname(egg)
    assert str(e.value).startswith("%s: refused: %s" % (target, why)), str(e.value)
    assert "`chown root %s && chmod %s %s`" % (target, "700" if not refused else "600", target) in str(e.value)
    assert read_bytes(egg) == before


def test_a_loose_store_is_made_0600_at_the_next_write_with_a_note(egg, capsys):
    s = Store.open(egg)
    s.commit([OUT])
    os.chmod(egg, 0o644)  # a git clone
    s.commit([outcome(1)])
    assert stat.S_IMODE(os.stat(egg).st_mode) == 0o600
    assert capsys.readouterr().err == "eggshell: note: %s: was mode 0644 (others could read every recorded turn); set to 0600\n" % egg
    notes = []
    s.note = notes.append  # a hook or the manager logs it instead
    os.chmod(egg, 0o640)
    s.commit([outcome(2)])
    assert notes == ["%s: was mode 0640 (others could read every recorded turn); set to 0600" % egg]
    import pickle

    assert "note" not in pickle.loads(pickle.dumps(s)).__dict__  # a snapshot keeps no process's logger


def test_a_directory_below_the_project_swapped_for_a_symlink_is_never_written_through(tmp_path):
    root = tmp_path / "proj"
    path = str(root / "a" / "b" / "work.egg")
    root.mkdir()
    s = Store.open(path)
    s.commit([OUT], within=str(root))  # missing directories are made, 0700
    assert stat.S_IMODE(os.stat(root / "a").st_mode) == 0o700
    outside = tmp_path / "outside"
    (outside / "b").mkdir(parents=True)
    os.rename(root / "a", tmp_path / "a-moved")
    os.symlink(outside, root / "a")
    with pytest.raises(EggError, match=r"a is a symbolic link or not a directory \(was it replaced after the turn began\?\)"):
        s.commit([outcome(1)], within=str(root))
    assert os.listdir(outside / "b") == []
    os.unlink(root / "a")
    os.symlink(tmp_path / "a-moved", root / "a")  # even a link back to the real directory: the path is what the project says
    with pytest.raises(EggError, match="symbolic link or not a directory"):
        s.commit([outcome(1)], within=str(root))
    assert Store.open(str(tmp_path / "a-moved" / "b" / "work.egg")).graph.commits.keys() == s.graph.commits.keys()


def test_the_project_root_itself_may_be_reached_through_a_link(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "alias")  # the user's own way to the project
    root = str(tmp_path / "alias")
    s = Store.open(os.path.join(root, ".eggs", "work.egg"))
    s.commit([OUT], within=root)
    s.commit([outcome(1)], within=root)
    assert len(Store.open(str(tmp_path / "real" / ".eggs" / "work.egg")).graph.commits) == 2


# -- refresh: resuming from a byte offset -------------------------------------------------------


def test_refresh_picks_up_other_writers_commits_reading_only_new_lines(egg, monkeypatch):
    w = Store.open(egg)
    w.commit([OUT])
    r = Store.open(egg)
    n = r.graph.lines
    assert r.refresh() == 0
    c1 = Store.open(egg).commit([outcome(1)])
    c2 = w.commit([outcome(2)], [(Atom.text("p"), Atom.text("q"))])
    total = len(egg_lines(egg))
    seen: list[int] = []
    orig = store_mod.Graph.ingest

    def spy(self, numbered):
        numbered = list(numbered)
        seen.extend(k for k, _ in numbered)
        return orig(self, numbered)

    monkeypatch.setattr(store_mod.Graph, "ingest", spy)
    assert r.refresh() == total - n
    assert seen == list(range(n + 1, total + 1))  # only the new part, numbered as in the file
    assert {c1.id, c2.id} <= set(r.graph.commits)
    assert state(r.graph) == state(load(egg))


def test_refresh_waits_for_a_half_written_line(egg):
    s = Store.open(egg)
    s.commit([OUT])
    r = Store.open(egg)
    # Another writer's append, seen half done:
    lines = node_lines([outcome(1)])
    with open(egg, "ab") as f:
        f.write(lines[0][:10])
    assert r.refresh() == 0 and r.torn
    with open(egg, "ab") as f:
        f.write(lines[0][10:] + b"".join(lines[1:]))
    assert r.refresh() == len(lines) and not r.torn
    c = s.commit([outcome(1)])
    assert r.refresh() == 1
    assert c.id in r.graph.commits and state(r.graph) == state(load(egg))


def test_refresh_reloads_a_compacted_file(egg):
    s = Store.open(egg)
    for i in range(4):
        s.commit([outcome(i)])
    with open(egg, "ab") as f:
        f.writelines(node_lines([outcome(100)]))  # an orphan compaction will drop
        f.write(read_bytes(egg).split(b"\n", 1)[1])  # and duplicate lines
    r = Store.open(egg)
    before = state(r.graph)
    compact(egg)
    assert len(egg_lines(egg)) < r.graph.lines
    r.refresh()
    assert state(r.graph) == before
    c = Store.open(egg).commit([outcome(9)])
    r.refresh()
    assert c.id in r.graph.commits and state(r.graph) == state(load(egg))
    assert r.graph.lines == len(egg_lines(egg))


def test_refresh_after_two_compactions_reloads_even_if_the_inode_is_reused(egg, monkeypatch):
    s = Store.open(egg)
    for i in range(3):
        s.commit([outcome(i)])
    compact(egg)  # from here on compaction alternates between recycled inode numbers on ext4
    with open(egg, "ab") as f:
        f.writelines(node_lines([Atom.text("orphan " * 30)]))  # the next compaction drops it: the layout shifts
    r = Store.open(egg)
    ino = os.stat(egg).st_ino
    inodes = []
    for k in range(8):
        for i in range(3):
            Store.open(egg).commit([outcome(10 * k + i + 3)])
        compact(egg)
        inodes.append(os.stat(egg).st_ino)
        if inodes[-1] == ino:
            break
    else:
        # Another process took the freed number (tests running in parallel do): make the reader
        # meet the reuse it guards against by reporting the old number for the new file.
        real = os.fstat

        def reused(fd):
            fields = list(real(fd)[:10])
            fields[1] = ino
            return os.stat_result(fields)

        monkeypatch.setattr(os, "fstat", reused)
    r.refresh()
    assert state(r.graph) == state(load(egg))


def test_a_stale_writer_catches_up_before_appending(egg):
    a, b = Store.open(egg), Store.open(egg)
    a.commit([OUT])
    b.commit([OUT, outcome(1)])  # b has not seen a's commit
    assert len(load(egg).commits) == 2
    ids = node_ids_in_file(egg)
    assert len(ids) == len(set(ids))
    assert a.commit([outcome(1)]) is None  # a catches up and sees it is already there


def test_refresh_on_a_truncated_file_starts_over(egg):
    s = Store.open(egg)
    s.commit([OUT])
    first = read_bytes(egg)
    s.commit([outcome(1)])
    r = Store.open(egg)
    write_bytes(egg, first)  # same inode, shorter
    r.refresh()
    assert state(r.graph) == state(load(egg)) and content_hex(outcome(1)) not in r.graph.root_ids


# -- compact and merge ---------------------------------------------------------------------------


def test_compact_keeps_roots_unions_unlinks_and_authority(egg):
    _rich_store(egg)
    with open(egg, "ab") as f:
        f.write(read_bytes(egg).split(b"\n", 1)[1])  # every record twice
        f.writelines(node_lines([Atom.text("orphan")]))
    want = state(load(egg))
    lines_before = len(egg_lines(egg))
    before, after = compact(egg)
    assert before == lines_before
    assert after == len(egg_lines(egg)) < before
    assert state(load(egg)) == want
    ids = node_ids_in_file(egg)
    assert len(ids) == len(set(ids))
    assert compact(egg)[1] == after  # compacting a compact file is a fixpoint
    assert not [f for f in os.listdir(os.path.dirname(egg)) if ".tmp-" in f]


def test_compact_refuses_a_missing_or_empty_store(egg):
    with pytest.raises(EggError, match="no such store"):
        compact(egg)


def test_compact_preserves_prefix_property_for_later_commits(egg):
    _rich_store(egg)
    compact(egg)
    data = read_bytes(egg)
    Store.open(egg).commit([outcome(50)])
    assert read_bytes(egg).startswith(data)


def test_merge_of_two_stores_holds_both(tmp_path):
    p1, p2, out = (str(tmp_path / n) for n in ("one.egg", "two.egg", "out/merged.egg"))
    s1, s2 = _rich_store(p1), Store.open(p2)
    s2.commit([outcome(10), OUT], [(Atom.text("m"), Atom.text("n"))])
    b1, b2 = read_bytes(p1), read_bytes(p2)
    g1, g2 = load(p1), load(p2)
    assert g1.authority != g2.authority
    merge([p1, p2], out)
    g = load(out)
    assert g.authority == g1.authority
    assert set(g.root_ids) == set(g1.root_ids) | set(g2.root_ids)
    assert set(g.commits) == set(g1.commits) | set(g2.commits)
    assert {frozenset(u) for u in g.unions()} == {frozenset(u) for u in g1.unions() + g2.unions()}
    assert read_bytes(p1) == b1 and read_bytes(p2) == b2
    # the merged file is an ordinary store
    Store.open(out).commit([outcome(11)])
    ids = node_ids_in_file(out)
    assert len(ids) == len(set(ids))
    del s1


def test_merge_of_a_store_with_itself_is_its_compaction(egg, tmp_path):
    want = state(_rich_store(egg).graph)
    out = str(tmp_path / "self.egg")
    merge([egg, egg], out)
    assert state(load(out)) == want


def test_merge_refuses_missing_and_empty_inputs(tmp_path):
    with pytest.raises(EggError, match="no such file"):
        merge([str(tmp_path / "none.egg")], str(tmp_path / "out.egg"))
    empty = str(tmp_path / "empty.egg")
    write_bytes(empty, b"")
    with pytest.raises(EggError, match="nothing to merge"):
        merge([empty], str(tmp_path / "out.egg"))
    assert not os.path.exists(str(tmp_path / "out.egg"))


# -- properties -----------------------------------------------------------------------------------


@settings(max_examples=50)
@given(st.lists(values, min_size=1, max_size=5))
def test_round_trip_values_through_a_file(vs):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "rt.egg")
        Store.open(p).commit(vs)
        g = load(p)
        got = {content_hex(v): v for v in g.roots()}
        for v in vs:
            assert got[content_hex(v)] == v
            assert g.nodes[content_hex(v)] == v
        assert len(got) == len({content_hex(v) for v in vs})


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), st.lists(tiny_values, max_size=3), st.lists(st.tuples(tiny_values, tiny_values), max_size=2)),
        st.tuples(st.just("unlink"), st.integers(0, 10), st.just(None)),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40)
@given(_ops)
def test_commits_only_add(ops):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "add.egg")
        s = Store.open(p)
        roots_so_far: set[str] = set()
        prev = b""
        for kind, a, b in ops:
            if kind == "commit":
                unions = [(x, y) for x, y in b if union_admissible(x, y)]
                s.commit(a, unions)
                roots_so_far |= {content_hex(v) for v in a}
            else:
                inforce = s.graph.unions()
                if inforce:
                    s.remove_union(*inforce[a % len(inforce)])
            data = read_bytes(p) if os.path.exists(p) else b""
            assert data.startswith(prev)
            prev = data
            fresh = load(p)
            assert roots_so_far <= set(fresh.root_ids)
            assert state(fresh) == state(s.graph)


def test_lock_timeout_is_reported(egg, monkeypatch):
    import portalocker

    Store.open(egg).commit([OUT])
    monkeypatch.setattr(Store, "lock_timeout", 0.05)  # the class attribute a Store reads (copied from LOCK_TIMEOUT_S at import)
    with open(egg + ".lock", "r+b") as holder:
        portalocker.lock(holder, portalocker.LOCK_EX)
        before = read_bytes(egg)
        with pytest.raises(EggError, match="timed out after 0.05 s"):
            Store.open(egg).commit([outcome(1)])
        assert read_bytes(egg) == before
        portalocker.unlock(holder)
