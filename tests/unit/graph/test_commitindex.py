"""AppendStore: commits through a disposable index write exactly what a full Store writes, and
the index never decides anything the file does not confirm (stale, replaced, damaged, forgotten)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eggshell.core.identity import content_hex
from eggshell.core.values import Atom
from eggshell.graph import commitindex
from eggshell.graph.commitindex import AppendStore, _Lazy, index_path
from eggshell.graph.store import EggError, Store, compact
from eggshell.graph.turns import compile_turn, parse_turn

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def record(i: int, session: str = "s1") -> dict:
    return {
        "session": session, "turn": "t%d" % i, "cwd": ".",
        "prompt": "where is handler_%d defined?" % i,
        "tools": [
            {"name": "Bash", "id": "c%d" % i, "input": {"command": "rg -n handler_%d src" % i}, "output": "src/m.py:%d: def handler_%d\n" % (i, i)},
            {"name": "Bash", "id": "d%d" % i, "input": {"command": "ls src"}, "output": "m.py\n"},  # shared by every turn
        ],
        "answer": "in src/m.py, line %d" % i,
    }


def roots(i: int, session: str = "s1"):
    return compile_turn(parse_turn(record(i, session))).roots


WHEN = "2026-12-02T00:00:%02d.000000Z"


def commit(s, i: int, session: str = "s1"):
    return s.commit(roots(i, session), session=session, turn="t%d" % i, when=WHEN % (i % 60))


@pytest.fixture
def env(tmp_path):
    data = str(tmp_path / "data")
    return str(tmp_path / "eggs" / "work.egg"), data


def appender(path: str, data: str) -> AppendStore:
    s = AppendStore.open(path, data)
    s.note = lambda m: None
    return s


def full(path: str, data: str) -> Store:
    s = Store.open(path)
    s.data_root = data
    return s


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_the_same_bytes_as_a_full_store(env, tmp_path):
    path, data = env
    ref = str(tmp_path / "ref" / "work.egg")
    for i in range(5):
        commit(appender(path, data), i)  # a fresh process each time: the index carries the state
        commit(full(ref, data), i)
    assert read(path).split(b"\n")[1:] == read(ref).split(b"\n")[1:]  # all but the header's authority
    assert commit(appender(path, data), 3) is None  # a replay adds nothing
    assert read(path).split(b"\n")[1:] == read(ref).split(b"\n")[1:]
    assert sorted(map(content_hex, Store.open(path).graph.roots())) == sorted(map(content_hex, Store.open(ref).graph.roots()))


def test_a_second_process_reads_only_what_is_new(env):
    path, data = env
    for i in range(20):
        commit(appender(path, data), i)
    s = appender(path, data)
    assert isinstance(s.graph.nodes, _Lazy) and s.refresh() == 0
    assert len(s.graph.nodes.mem) == 0  # nothing loaded to open it
    commit(s, 20)
    loaded = set(s.graph.nodes.mem)
    assert 0 < len(loaded) < 40  # the new turn's nodes and the few it shares (ls, Bash), not the file's hundreds
    assert len(Store.open(path).graph.nodes) > 200


def test_catches_up_on_another_writer(env):
    path, data = env
    commit(appender(path, data), 0)
    other = full(path, data)
    commit(other, 1)
    commit(other, 2)
    s = appender(path, data)
    assert isinstance(s.graph.nodes, _Lazy)
    assert commit(s, 2) is None  # the other writer's roots are known
    assert commit(s, 3) is not None
    g = Store.open(path).graph
    assert len(g.commits) == 4 and len(g.roots()) == len({content_hex(r) for i in range(4) for r in roots(i)})


def test_a_replaced_file_rebuilds_the_index(env):
    path, data = env
    for i in range(3):
        commit(appender(path, data), i)
    compact(path)  # a new file (a new inode) with other offsets
    s = appender(path, data)
    assert not isinstance(s.graph.nodes, _Lazy)  # read in full once
    assert commit(s, 1) is None and commit(s, 3) is not None
    s2 = appender(path, data)
    assert isinstance(s2.graph.nodes, _Lazy) and commit(s2, 3) is None and commit(s2, 4) is not None
    assert len(Store.open(path).graph.commits) == 5


def test_the_file_replaced_between_open_and_commit(env, tmp_path):
    path, data = env
    for i in range(3):
        commit(appender(path, data), i)
    s = appender(path, data)
    shutil.copy(path, path + ".new")
    os.replace(path + ".new", path)  # same bytes, new inode
    commit(s, 5)
    assert len(Store.open(path).graph.commits) == 4


def test_a_damaged_index_costs_speed_not_the_commit(env):
    path, data = env
    commit(appender(path, data), 0)
    with open(index_path(data, path), "wb") as f:
        f.write(b"this is not a database" * 100)
    notes = []
    s = AppendStore.open(path, data)
    s.note = notes.append
    assert commit(s, 1) is not None
    assert len(Store.open(path).graph.commits) == 2
    assert isinstance(appender(path, data).graph.nodes, _Lazy) or notes  # rebuilt, or it said why not


def test_an_index_that_points_wrong_is_caught_and_removed(env):
    path, data = env
    for i in range(3):
        commit(appender(path, data), i)
    db = sqlite3.connect(index_path(data, path))
    db.execute("UPDATE nodes SET off = off + 7")  # every offset wrong, the meta still fits
    db.commit()
    db.close()
    before = read(path)
    with pytest.raises(EggError, match="does not fit the file"):
        commit(appender(path, data), 4)  # it shares nodes (ls src): each is read to check it, and the wrong line is refused
    assert read(path) == before and not os.path.exists(index_path(data, path))
    assert commit(appender(path, data), 4) is not None  # rebuilt from a full read
    assert len(Store.open(path).graph.commits) == 4


def test_a_changed_tail_is_not_trusted(env):
    path, data = env
    for i in range(3):
        commit(appender(path, data), i)
    blob = bytearray(read(path))
    at = blob.rindex(b'"]')  # the end of the last commit's last root id
    blob[at - 1:at] = b"0" if blob[at - 1:at] != b"0" else b"1"
    with open(path, "r+b") as f:  # same size, same inode, edited in place within the tail the index checks
        f.write(blob)
    with pytest.raises(EggError):
        appender(path, data)  # read in full: the altered commit line no longer matches its id
    with pytest.raises(EggError):
        Store.open(path)  # as a full Store says


def test_forgotten_turns_stay_forgotten(env):
    path, data = env
    for i in range(3):
        commit(appender(path, data), i)
    s = appender(path, data)
    assert isinstance(s.graph.nodes, _Lazy)
    full(path, data).forget([], [(content_hex(Atom.text("s1")), content_hex(Atom.text("t1")))])
    before = read(path)
    assert commit(s, 1) is None  # the tombstone came after it opened: it read the file in full and knew
    assert read(path) == before
    s2 = appender(path, data)
    assert not isinstance(s2.graph.nodes, _Lazy)  # a store with tombstones is written through a full read
    assert commit(s2, 1) is None and commit(s2, 7) is not None
    assert isinstance(s2.graph.hidden, dict)


def test_a_torn_tail_is_settled_as_a_full_store_does(env):
    path, data = env
    commit(appender(path, data), 0)
    with open(path, "ab") as f:
        f.write(b'{"node":"abc')  # a crashed writer
    assert commit(appender(path, data), 1) is not None
    assert len(Store.open(path).graph.commits) == 2


def test_the_index_holds_no_text_and_only_its_owner_reads_it(env):
    path, data = env
    r = record(0)
    r["prompt"] = "the deploy password is hunter2-correct-horse"
    s = appender(path, data)
    from eggshell.graph.save import save_turn

    save_turn(s, r, ".")
    blob = read(index_path(data, path))
    assert b"hunter2" not in blob and b"handler_0" not in blob and b"src/m.py" not in blob
    assert stat.S_IMODE(os.stat(index_path(data, path)).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(index_path(data, path))).st_mode) == 0o700


def test_drop_removes_it(env):
    path, data = env
    commit(appender(path, data), 0)
    commitindex.drop(data, path)
    assert not os.path.exists(index_path(data, path))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["append", "full", "compact", "forget"]), st.integers(0, 6)), min_size=1, max_size=12))
def test_any_mix_of_writers_loads_as_one_full_store_would(tmp_path_factory, ops):
    """Whatever the mix of appenders, full writers, compactions and tombstones, the file loads
    to the same roots as the same operations done by full Stores alone."""
    d = str(tmp_path_factory.mktemp("mix"))
    data = os.path.join(d, "data")
    mine, ref = os.path.join(d, "a", "w.egg"), os.path.join(d, "b", "w.egg")
    for op, i in ops:
        if op == "compact":
            for p in (mine, ref):
                if os.path.exists(p):
                    compact(p)
        elif op == "forget":
            for p in (mine, ref):
                if os.path.exists(p):
                    full(p, data).forget([], [(content_hex(Atom.text("s1")), content_hex(Atom.text("t%d" % i)))])
        else:
            commit(appender(mine, data) if op == "append" else full(mine, data), i)
            commit(full(ref, data), i)
    if os.path.exists(ref):
        a, b = Store.open(mine).graph, Store.open(ref).graph
        assert sorted(a.root_ids) == sorted(b.root_ids) and sorted(a.hidden) == sorted(b.hidden)


def test_egg_save_the_process_uses_it(tmp_path):
    data = str(tmp_path / "data")
    egg = str(tmp_path / "w.egg")
    env = dict(os.environ, EGGSHELL_DATA_ROOT=data, PYTHONPATH=os.path.join(REPO, "lib"))
    import json

    for lo in (0, 3):
        lines = "".join(json.dumps(record(i)) + "\n" for i in range(lo, lo + 3))
        p = subprocess.run([os.path.join(REPO, "bin", "egg-save"), "--egg", egg, "--root", str(tmp_path)], input=lines,
                           capture_output=True, text=True, env=env, timeout=120)
        assert p.returncode == 0, p.stderr
        assert len(p.stdout.splitlines()) == 3
    assert os.path.exists(index_path(data, egg))
    assert len(Store.open(egg).graph.commits) == 6


def test_a_store_the_index_cannot_replay_is_still_read_in_full(env):
    path, data = env
    for i in range(3):
        commit(full(path, data), i)
    full(path, data).forget([content_hex(roots(1)[0])])  # a tombstone: replaying it needs every root
    s = appender(path, data)
    assert not isinstance(s.graph.nodes, _Lazy)
    assert commit(s, 3) is not None


def test_a_bad_line_is_named_by_the_full_read(env):
    path, data = env
    for i in range(3):
        commit(full(path, data), i)
    lines = read(path).split(b"\n")
    lines[4] = b'{"node": "not json'
    with open(path, "wb") as f:
        f.write(b"\n".join(lines))
    with pytest.raises(EggError, match=r":5: not valid JSON"):
        appender(path, data)


def test_a_whole_reader_brings_the_index_up_to_date_step_by_step_and_an_appender_resumes_from_it(env):
    """Issue 30: the warm manager holds a whole Store; catch_up indexes what it read (no Value
    built), in steps, and an AppendStore then opens lazily from it and commits as a full Store would."""
    path, data = env
    s = full(path, data)
    for i in range(4):
        commit(s, i)
    s.refresh()
    steps = 0
    while commitindex.catch_up(data, s, step=300):
        steps += 1
    assert steps > 1
    a = appender(path, data)
    assert isinstance(a.graph.nodes, _Lazy)  # resumed: nothing read again
    assert commit(a, 4) is not None and commit(a, 1) is None  # a replay is still known as one
    ref = Store.open(path).graph
    assert len(ref.commits) == 5 and sorted(a.commit_ids()) == sorted(ref.commits)
