"""search/postings.py: BM25 kept in SQLite ranks exactly as the in-memory rank.BM25.

Requirements: any sequence of extends (each a segment), removals and merges leaves an index whose
search equals rank.BM25's after the same changes (documents, scores, coverage, order, the gate);
a second connection sees the first one's changes; a file that is not an index, or of another
schema, is refused with IndexDamaged naming it (the caller rebuilds it from the stores).
"""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eggshell.search.postings import IndexDamaged, DiskBM25
from eggshell.search.rank import BM25

WORDS = ["late_fee", "billing", "docker", "build", "tests", "rounding", "cache", "config", "parser", "timeout", "src/a.py"]
docs_st = st.lists(st.sampled_from(WORDS), min_size=0, max_size=8)


def same(disk: DiskBM25, mem: BM25, query: list[str], top_k: int, cov: float) -> None:
    got, want = disk.search(query, top_k, cov), mem.search(query, top_k, cov)
    assert [(s.index, round(s.coverage, 9)) for s in got] == [(s.index, round(s.coverage, 9)) for s in want]
    assert [s.score for s in got] == pytest.approx([s.score for s in want], rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("extend"), st.lists(docs_st, min_size=1, max_size=4)),
    st.tuples(st.just("remove"), st.integers(0, 30)),
    st.tuples(st.just("merge"), st.integers(1, 3)),
), min_size=1, max_size=12), st.lists(st.sampled_from(WORDS + ["nowhere"]), min_size=1, max_size=5),
    st.integers(1, 12), st.sampled_from([0.0, 0.2, 0.6]))
def test_any_changes_rank_as_the_in_memory_index(tmp_path_factory, steps, query, top_k, cov):
    path = str(tmp_path_factory.mktemp("post") / "lexical.db")
    disk, mem = DiskBM25(path), BM25([])
    added: list[list[str]] = []
    for op, arg in steps:
        if op == "extend":
            disk.extend(arg)
            mem.extend(arg)
            added += arg
        elif op == "remove" and arg < len(added):
            disk.remove(arg, added[arg])
            mem.remove(arg, added[arg])
        elif op == "merge":
            assert disk.merge(arg) <= max(arg, disk.segments())
        same(disk, mem, query, top_k, cov)
    assert (disk.n, disk.avgdl) == (mem.n, pytest.approx(mem.avgdl))
    assert all(disk.df(t) == mem.df(t) for t in WORDS)
    again = DiskBM25(path)  # another process opening the file sees the same index
    same(again, mem, query, top_k, cov)


def test_a_second_connection_sees_the_first_ones_changes(tmp_path):
    path = str(tmp_path / "lexical.db")
    a, b = DiskBM25(path), DiskBM25(path)
    a.extend([["late_fee", "billing"], ["docker"]])
    assert [s.index for s in b.search(["docker"], 5)] == [1]
    b.search(["docker"], 5)  # b's lengths are cached now
    a.extend([["docker", "docker", "build"]])
    mem = BM25([["late_fee", "billing"], ["docker"], ["docker", "docker", "build"]])
    same(b, mem, ["docker"], 5, 0.0)  # its cached lengths were renewed
    a.remove(1, ["docker"])
    mem.remove(1, ["docker"])
    same(b, mem, ["docker"], 5, 0.0)
    assert [s.index for s in b.search(["docker"], 5)] == [2]


def test_merging_folds_segments_and_keeps_the_ranking(tmp_path):
    d = DiskBM25(str(tmp_path / "lexical.db"))
    for k in range(10):
        d.extend([["tests", "w%d" % k], ["tests"] * (k + 1)])
    before = d.search(["tests", "w3"], 20)
    assert d.segments() == 10 and d.merge(2) == 2 and d.segments() == 2
    assert d.search(["tests", "w3"], 20) == before
    assert len(d.db.execute("select * from post where term = 'tests'").fetchall()) == 2


def test_a_file_that_is_not_an_index_is_refused_by_name(tmp_path):
    junk = tmp_path / "lexical.db"
    junk.write_bytes(b"not sqlite at all, " * 100)
    with pytest.raises(IndexDamaged, match="lexical.db"):
        DiskBM25(str(junk))
    other = tmp_path / "other.db"
    con = sqlite3.connect(str(other))
    con.execute("create table meta(k text primary key, v)")
    con.execute("insert into meta values ('schema', 99), ('lens', x'')")
    con.commit()
    con.close()
    with pytest.raises(IndexDamaged, match="another schema"):
        DiskBM25(str(other))
