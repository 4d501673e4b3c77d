"""search/turnindex.py and search/indexed.py: the on-disk search index ranks as the Searcher does.

Requirements (issue 30): ranking from the index gives the same turns, scores and order as the
in-memory Searcher over the same stores (one store or several read together), however the index
was brought up to date (at once, a step at a time, save by save, a turn re-committed longer); the
turns it hands over are read back from the store exactly as a full read gives them; an index that
does not describe its store (replaced, edited in place, of other code, not a database) is rebuilt,
never trusted; a store with tombstones is not served from it, and `egg forget` leaves none of the
forgotten turn's terms in it.
"""

from __future__ import annotations

import os
import random

import pytest

from eggshell.graph.commitindex import AppendStore
from eggshell.graph.records import turn_views
from eggshell.graph.save import save_turn
from eggshell.graph.store import Store, compact
from eggshell.search import turnindex
from eggshell.search.indexed import IndexedSearcher
from eggshell.search.rank import Settings
from eggshell.search.searcher import Searcher
from eggshell.search.turnindex import NotIndexed, TurnIndex

WORDS = ("late_fee billing invoice rounding docker build cache config parser timeout retry schema migration "
         "worker queue socket deadline token refresh cursor pagination index vector embed window snapshot "
         "manager hook payload journal ledger trust forget purge compact merge union").split()
FILES = ["src/billing/late_fee.py", "src/db/schema.sql", "lib/worker/queue.py", "docs/hooks.md", "tests/test_cache.py"]


def record(rng: random.Random, i: int, session: str = "s1", answer: bool = True) -> dict:
    w = lambda k: " ".join(rng.choice(WORDS) for _ in range(k))  # noqa: E731
    f = rng.choice(FILES)
    tools = [{"name": "Bash", "id": "c%d-%d" % (i, k), "input": {"command": "rg -n %s %s" % (rng.choice(WORDS), f)},
              "output": "%s:%d: %s\n%s\n" % (f, rng.randint(1, 400), w(8), w(12))} for k in range(rng.randint(0 if answer else 1, 3))]
    return {"session": session, "turn": "t%d" % i, "cwd": ".", "prompt": "%s in %s?" % (w(rng.randint(2, 9)), f),
            "tools": tools, "answer": ("%s, see %s" % (w(rng.randint(3, 20)), f)) if answer else None}


def when(i: int) -> str:
    return "2026-12-%02dT%02d:%02d:00.000000Z" % (1 + i // 1440 % 28, i // 60 % 24, i % 60)


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir(mode=0o700)
    return str(d)


def saved(path: str, data: str, records: list[tuple[dict, str]]) -> AppendStore:
    s = AppendStore.open(path, data)
    s.note = lambda m: None
    for r, t in records:
        save_turn(s, r, None, t)
    return s


def queries(rng: random.Random, n: int = 12) -> list[str]:
    out = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) for _ in range(n)]
    out += ["late_fee in src/billing/late_fee.py", "nothing here at all", " ".join(rng.choice(WORDS) for _ in range(130))]
    return out


def same_ranking(pairs, stores: list[str], qs: list[str], top_k: int = 5, cov: float = 0.3) -> None:
    st = Settings(mode="lexical")
    ref = Searcher([Store.open(p) for p in stores], settings=st)
    for q in qs:
        ix = IndexedSearcher(pairs, st)
        got, want = ix.search(q, top_k, cov), ref.search(q, top_k, cov)
        assert [(h.id, h.rank, h.store, h.latest) for h in got] == [(h.id, h.rank, h.store, h.latest) for h in want], q
        assert [h.score for h in got] == pytest.approx([h.score for h in want], rel=1e-9), q
        assert [(h.id, h.via) for h in ix.others] == [(h.id, h.via) for h in ref.others], q
        assert ix.turns == ref.turns
        for h in got:  # the turns handed over are read back as a full read gives them
            assert ix.by_id[h.id] == ref.by_id[h.id]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ranking_from_the_index_equals_the_searchers(tmp_path, data, seed):
    rng = random.Random(seed)
    path = str(tmp_path / "p" / "work.egg")
    s = saved(path, data, [(record(rng, i, "s%d" % (i % 3)), when(i)) for i in range(60)])
    ix = TurnIndex(data, path)
    assert ix.update(s) == 60 and ix.turns() == 60
    same_ranking([(s, ix)], [path], queries(rng))


def test_saves_steps_and_a_turn_committed_again_rank_as_one_build(tmp_path, data):
    """Save by save (each its own segment), some steps cut mid-store, and open turns later sealed
    (re-derived: the old document leaves), against the Searcher over the same file."""
    rng = random.Random(7)
    path = str(tmp_path / "p" / "work.egg")
    s = saved(path, data, [])
    ix = TurnIndex(data, path)
    for batch in range(6):
        for i in range(batch * 10, batch * 10 + 10):
            save_turn(s, record(rng, i, answer=i % 4 != 0), None, when(i))
        if batch % 2:
            for i in range(batch * 10, batch * 10 + 10, 4):  # the open ones end: committed again, longer
                save_turn(s, record(random.Random(i), i), None, when(i + 1))
        s.refresh()
        while ix.behind(s):
            ix.update(s, step=rng.choice([300, 5000, 1 << 20]))
    same_ranking([(s, ix)], [path], queries(rng))
    views = turn_views(Store.open(path).graph)
    assert ix.turns() == len(views)


def test_stores_read_together_rank_as_one_searcher_over_both(tmp_path, data):
    rng = random.Random(11)
    a, b = str(tmp_path / "a" / "work.egg"), str(tmp_path / "b" / "work.egg")
    sa = saved(a, data, [(record(rng, i, "sa"), when(i)) for i in range(30)])
    sb = saved(b, data, [(record(rng, i, "sb"), when(i + 15)) for i in range(25)])
    ia, ib = TurnIndex(data, a), TurnIndex(data, b)
    ia.update(sa)
    ib.update(sb)
    same_ranking([(sa, ia), (sb, ib)], [a, b], queries(rng))


def test_an_index_that_does_not_describe_its_store_is_rebuilt(tmp_path, data):
    rng = random.Random(5)
    path = str(tmp_path / "p" / "work.egg")
    s = saved(path, data, [(record(rng, i), when(i)) for i in range(12)])
    ix = TurnIndex(data, path)
    ix.update(s)
    # compacted (a new file): the index is rebuilt from it, not extended
    compact(path)
    s2 = AppendStore.open(path, data)
    assert not ix.fits(s2) and ix.update(s2) == 12 and ix.turns() == 12
    same_ranking([(s2, ix)], [path], queries(rng, 4))
    # edited in place before the point indexed: it no longer fits (and would be rebuilt)
    assert ix.fits(s2)
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) - 20)
        last = f.read(20)
        f.seek(os.path.getsize(path) - 20)
        f.write(last.replace(last[5:6], b"0" if last[5:6] != b"0" else b"1"))
    assert not ix.fits(s2)
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) - 20)
        f.write(last)
    # of other code: rebuilt
    ix.db.execute("update meta set v = 'other' where k = 'code'")
    assert not ix.fits(s2) and ix.update(s2) == 12
    # not a database at all: a new one is made in its place
    ix.close()
    with open(turnindex.index_path(data, path), "wb") as f:
        f.write(b"this is no database" * 100)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(turnindex.index_path(data, path) + suffix):
            os.unlink(turnindex.index_path(data, path) + suffix)
    again = TurnIndex(data, path)
    assert again.turns() == 0 and again.update(s2) == 12
    assert last.endswith(b"\n")


def test_a_store_with_a_tombstone_is_not_served_and_forget_drops_its_terms(tmp_path, data):
    rng = random.Random(9)
    path = str(tmp_path / "p" / "work.egg")
    recs = [(record(rng, i), when(i)) for i in range(8)]
    recs[3][0]["prompt"] = "the zanzibar_canary lives in %s?" % FILES[0]
    s = saved(path, data, recs)
    ix = TurnIndex(data, path)
    ix.update(s)
    assert ix.text.df("zanzibar_canary") == 1
    full = Store.open(path)
    v = [x for x in turn_views(full.graph) if "zanzibar_canary" in x.prompt][0]
    full.forget([v.id], [])
    s.refresh()
    with pytest.raises(NotIndexed):
        ix.update(s)
    assert ix.text.df("zanzibar_canary") == 0 and ix.turns() == 0  # cleared, not merely refused
    ix.close()
    turnindex.drop(data, path)
    for name in os.listdir(os.path.join(data, "cache", "search")):
        with open(os.path.join(data, "cache", "search", name), "rb") as f:
            assert b"zanzibar_canary" not in f.read()


def test_a_save_updates_a_current_index_and_leaves_a_missing_one_to_the_manager(tmp_path, data):
    rng = random.Random(3)
    path = str(tmp_path / "p" / "work.egg")
    s = saved(path, data, [])
    start = s.offset
    for i in range(5):
        save_turn(s, record(rng, i), None, when(i))
    turnindex.index_appended(s, start, lambda m: None)  # a new store: its index starts with it
    ix = TurnIndex(data, path)
    assert ix.turns() == 5 and ix.behind(s) == 0
    start = s.offset
    save_turn(s, record(rng, 5), None, when(5))
    turnindex.index_appended(s, start, lambda m: None)
    assert ix.turns() == 6 and ix.behind(s) == 0
    ix.close()
    turnindex.drop(data, path)  # missing: a save does not build it from the whole store
    start = s.offset
    save_turn(s, record(rng, 6), None, when(6))
    turnindex.index_appended(s, start, lambda m: None)
    ix = TurnIndex(data, path)
    assert ix.turns() == 0 and ix.behind(s) == s.offset


def test_an_index_ahead_of_a_reader_is_never_moved_back(tmp_path, data):
    """The warm manager's Store may lag an egg-save that appended and indexed since: its upkeep
    leaves both indexes as they are, and they still serve the newer file."""
    from eggshell.graph import commitindex

    rng = random.Random(12)
    path = str(tmp_path / "p" / "work.egg")
    s = saved(path, data, [(record(rng, i), when(i)) for i in range(5)])
    first = TurnIndex(data, path)
    assert first.update(s) == 5
    first.close()
    lagging = Store.open(path)  # the manager's view: 5 turns
    start = s.offset
    for i in range(5, 8):
        save_turn(s, record(rng, i), None, when(i))
    turnindex.index_appended(s, start, lambda m: None)
    ix = TurnIndex(data, path)
    assert ix.turns() == 8
    assert ix.update(lagging) == 0 and ix.turns() == 8 and ix.behind(lagging) == 0
    assert commitindex.catch_up(data, lagging) == 0
    again = AppendStore.open(path, data)
    assert ix.behind(again) == 0 and len(again.commit_ids()) == 8
