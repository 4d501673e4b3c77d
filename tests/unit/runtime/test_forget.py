"""What the user deletes is gone: `egg forget`, tombstones, `egg compact --purge`, deleted stores.

In-process, with real stores, files and CLI calls (the warm manager and the embedding model
in real processes are in test_forget_manager.py):
  1. a tombstone line holds only content ids, checks its own id, and merges by concatenation;
  2. forgetting a turn hides all its roots from every reader (turn views, `egg show`/`egg find`,
     egg-query, egg-extract, the reuse workspace, warm Searchers and LiveWorkspaces built
     before it), and the turn's later commits are neither served nor written;
  3. forgetting a tool outcome hides that call everywhere and keeps the rest of its turn; an
     evidence key forgets the Outcomes it is the output of; `--match` forgets every turn
     holding a text; exit codes as the rest of the CLI;
  4. a deleted store is dropped by every warm reader, a replaced one (even with as many
     commits) read again, a cold start from a snapshot included;
  5. `egg compact --purge` removes the text from the file (atomically, the rest equal) and
     from the vector cache (a process holding it reloads), the journal, chat state and
     snapshots.
"""

from __future__ import annotations

import io
import json
import os
import shutil

import numpy as np
import pytest

from eggshell.graph import eggfile as ef
from eggshell.reuse import engine as reuse_engine
from eggshell.stages import query
from eggshell.search.searcher import Searcher
from eggshell.search import vectors
from eggshell.runtime.chat import Chat
from eggshell.reuse.engine import LiveWorkspace, workspace
from eggshell.core.identity import content_hex
from eggshell.runtime.journal import Journal
from eggshell.graph.records import searchable_text, turn_views
from eggshell.graph.save import save_turn
from eggshell.graph.store import Store
from eggshell.core.values import Atom
from helpers import bash, read_bytes, turn_record
from helpers.cli_env import Egg
from helpers.vectors import DIM, MODEL, vecs_for

SECRET = "CANARY-4b1d-forget-me"
FEE_OUT = "src/billing.py:42: def late_fee(days):\n"


def t_fee(session: str = "sess-a"):
    return turn_record(session=session, turn="t1", prompt="where is late_fee computed?",
                       tools=[bash("grep -rn late_fee src/", FEE_OUT), bash("cat NOTES", "remember %s\n" % SECRET)],
                       answer="late_fee is in src/billing.py")


def t_docker():
    return turn_record(session="sess-b", turn="t2", prompt="why does the docker build fail?",
                       tools=[bash("docker build .", "error: lockfile is stale\n")], answer="the lockfile is stale")


@pytest.fixture
def egg(tmp_path, monkeypatch, capsys):
    return Egg(tmp_path, monkeypatch, capsys)


@pytest.fixture
def store(egg) -> Store:
    s = Store.open(str(egg.tmp / "eggs" / "w.egg"))
    save_turn(s, t_fee())
    save_turn(s, t_docker())
    return s


def view(s: Store, turn: str):
    s.refresh()
    vs = [v for v in turn_views(s.graph) if v.turn == turn]
    return vs[-1] if vs else None


def texts_served(s: Store) -> str:
    """Everything a reader of this store can hand out: views, searchable text, workspace edges."""
    s.refresh()
    views = turn_views(s.graph)
    ws = workspace([s.graph])
    return "\n".join([*(searchable_text(v) + "\n" + "\n".join(t.outcome for t in v.tools) for v in views),
                      *(c.outcome.as_text() for c in ws.corpus.candidates)])


# -- 1. the record -------------------------------------------------------------------------------


def test_a_tombstone_line_round_trips_holds_only_ids_and_checks_its_id():
    f = ef.Forget("", "2026-11-29T18:50:00.123456Z", ("a" * 64,), (("b" * 64, "c" * 64),))
    f = ef.Forget(ef.forget_id(f), f.time, f.roots, f.turns)
    line = ef.forget_line(f)
    assert ef.parse_record(line.rstrip(b"\n")) == f
    assert set(json.loads(line)) == {"forget", "time", "roots", "turns"}
    forged = json.loads(line)
    forged["roots"] = ["d" * 64]
    with pytest.raises(ef.RecordError, match="tombstone id does not match"):
        ef.parse_record(json.dumps(forged))
    with pytest.raises(ef.RecordError, match="tombstone must be"):
        ef.parse_record(json.dumps({**json.loads(line), "text": "the forgotten words"}))
    with pytest.raises(ef.RecordError, match="64-character"):
        ef.parse_record(json.dumps({**json.loads(line), "roots": ["not an id"]}))


def test_a_store_with_tombstones_merges_by_concatenation(egg, store):
    old = str(egg.tmp / "old.egg")
    shutil.copy(store.path, old)  # a copy from before the forget (a clone, a backup)
    assert egg("forget", view(store, "t1").key, "--egg", store.path)[0] == 0
    both = str(egg.tmp / "both.egg")
    for order in ((store.path, old), (old, store.path)):
        with open(both, "wb") as f:
            f.write(b"".join(read_bytes(p) for p in order))
        merged = Store.open(both)
        assert [v.turn for v in turn_views(merged.graph)] == ["t2"]
        assert SECRET not in texts_served(merged) and "late_fee" not in texts_served(merged)
        assert egg("fsck", both)[0] == 0


# -- 2. a forgotten turn ---------------------------------------------------------------------------


def test_forgetting_a_turn_hides_all_of_it_from_every_reader(egg, store):
    fee = view(store, "t1")
    warm = Searcher([Store.open(store.path)])  # built before the forget, as a manager's are
    live_store = Store.open(store.path)
    live = LiveWorkspace([live_store])
    assert [h.turn for h in warm.search("late_fee computed")] == ["t1"]
    assert any(SECRET in (c.outcome.as_text() or "") for c in live.current().corpus.candidates)

    rc, out, err = egg("forget", fee.key, "--egg", store.path)
    assert rc == 0, err
    assert out.startswith("forgot turn %s (session sess-a, turn t1," % fee.key) and "egg compact --purge" in out
    assert SECRET not in out  # it says what it forgot by key, never by its text

    assert view(store, "t1") is None and view(store, "t2") is not None
    assert SECRET not in texts_served(store) and FEE_OUT not in texts_served(store)
    assert warm.search("late_fee computed") == []
    assert all("late_fee" not in (c.work.as_text() + c.outcome.as_text()) for c in live.current().corpus.candidates)
    assert not any(a.args[0].target == Atom.text("where is late_fee computed?") for a in live.current().alls)
    rc, _, err = egg("show", fee.key, "--egg", store.path)
    assert rc == 1 and "was forgotten" in err
    rc, _, err = egg("show", fee.tools[1].id[:12], "--egg", store.path)
    assert rc == 1 and "was forgotten" in err
    assert egg("find", "late_fee", "--egg", store.path)[:2] == (1, "no matching turns\n")
    hits = io.StringIO()
    query.run(Searcher([Store.open(store.path)]), io.StringIO('{"query":{"text":"where is late_fee computed"}}\n'), hits, 8, 0.2)
    assert json.loads(hits.getvalue())["hits"] == []
    h = reuse_engine.extract(Searcher([Store.open(store.path)]), {"query": {"tool": {"name": "Bash", "input": {"command": "grep -rn late_fee src/"}}},
                                                                "hits": [{"id": fee.id, "semantic": None}]})
    assert h.text == "" and not h.deny
    rc, out, _ = egg("forget", fee.key, "--egg", store.path)
    assert rc == 0 and out.startswith("already forgotten: %s" % fee.key)


def test_a_forgotten_turn_committed_again_is_neither_written_nor_served(store):
    size = os.path.getsize(store.path)
    s = Store.open(store.path)
    fee = view(s, "t1")
    sid, tid = content_hex(Atom.text("sess-a")), content_hex(Atom.text("t1"))
    assert s.forget([], [(sid, tid)]) is not None
    with_tomb = read_bytes(store.path)
    assert len(with_tomb) > size and SECRET.encode() not in with_tomb[size:]
    assert save_turn(s, t_fee()).commit_id is None  # a replay (the journal read again)
    more = t_fee()
    more["tools"].append(bash("cat secrets.txt", "also-%s\n" % SECRET))  # the same turn, grown since
    assert save_turn(s, more).commit_id is None
    assert read_bytes(store.path) == with_tomb  # not one byte of it was written again
    assert view(Store.open(store.path), "t1") is None and fee is not None


def test_an_all_shared_with_a_live_turn_stays_live(egg, store):
    """Two turns with the same prompt and calls share their All: forgetting one keeps the other's."""
    again = t_fee(session="sess-c")
    save_turn(store, again)
    first = [v for v in turn_views(store.graph) if v.session == "sess-a"][0]
    assert egg("forget", first.key, "--egg", store.path)[0] == 0
    for purged in (False, True):
        s = Store.open(store.path)
        assert [v.session for v in turn_views(s.graph) if v.turn == "t1"] == ["sess-c"]
        alls = workspace([s.graph]).alls
        assert any(a.args[0].target == Atom.text("where is late_fee computed?") for a in alls)
        if not purged:
            assert egg("compact", "--purge", store.path)[0] == 0
    assert b"sess-a" not in read_bytes(store.path)  # the All moved to the live turn's commit
    assert egg("fsck", store.path)[0] == 0


# -- 3. a tool outcome, an evidence key, --match, exit codes -----------------------------------------


def test_forgetting_a_tool_outcome_hides_that_call_and_keeps_its_turn(egg, store):
    fee = view(store, "t1")
    env_call = fee.tools[1]
    rc, out, _ = egg("forget", env_call.id[:12], "--egg", store.path)
    assert rc == 0 and out.startswith("forgot tool call %s (Bash) of turn %s" % (env_call.id[:12], fee.key))
    after = view(store, "t1")
    assert after.prompt == fee.prompt and after.answer == fee.answer  # the rest of the turn stays
    assert [t.id for t in after.tools] == [fee.tools[0].id]
    assert SECRET not in texts_served(store) and FEE_OUT in texts_served(store)
    rc, out, _ = egg("show", fee.key, "--egg", store.path)
    assert rc == 0 and SECRET not in out and FEE_OUT.strip() in out


def test_an_evidence_key_forgets_the_outcomes_it_is_the_output_of(egg, store):
    fee = view(store, "t1")
    evidence = content_hex(Atom.text("remember %s\n" % SECRET))[:12]  # what `egg why` lists as `evidence KEY`
    rc, out, _ = egg("forget", evidence, "--egg", store.path)
    assert rc == 0 and "forgot tool call %s" % fee.tools[1].id[:12] in out
    assert SECRET not in texts_served(store)
    docker = view(store, "t2")
    answer_evidence = content_hex(Atom.text(docker.answer))[:12]  # an answer: its whole turn
    rc, out, _ = egg("forget", answer_evidence, "--egg", store.path)
    assert rc == 0 and "forgot turn %s" % docker.key in out
    assert view(store, "t2") is None


def test_forget_match_forgets_every_turn_holding_the_text(egg, store):
    save_turn(store, turn_record(session="sess-d", turn="t3", prompt="rotate %s please" % SECRET, tools=[], answer="done"))
    save_turn(store, turn_record(session="sess-e", turn="t4", prompt="and now?", tools=[], answer="it was %s" % SECRET))
    save_turn(store, turn_record(session="sess-f", turn="t5", prompt="unrelated", tools=[bash("ls", "a\n")], answer="one file"))
    rc, out, _ = egg("forget", "--match", SECRET, "--egg", store.path)
    assert rc == 0 and sorted(line.split(" (session ")[1].split(",")[0] for line in out.splitlines() if line.startswith("forgot")) == \
        ["sess-a", "sess-d", "sess-e"]
    assert [v.turn for v in turn_views(Store.open(store.path).graph)] == ["t2", "t5"]
    assert SECRET not in texts_served(store)
    rc, _, err = egg("forget", "--match", SECRET, "--egg", store.path)
    assert rc == 1 and "no recorded turn contains" in err


def test_a_chat_whose_lock_is_held_is_reported_and_cleared_by_running_again(egg, store):
    import subprocess
    import sys

    state = str(egg.tmp / "data" / "state")
    chat = Chat(state, "chat-1")
    chat.delivered("EVIDENCE\nremember %s\n" % SECRET, "")
    holder = subprocess.Popen([sys.executable, "-c", "import portalocker, sys, time\n"
                               "f = open(sys.argv[1], 'a'); portalocker.lock(f, portalocker.LOCK_EX); print('held', flush=True); time.sleep(60)",
                               chat.path + ".lock"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        key = view(store, "t1").key
        rc, out, err = egg("forget", key, "--egg", store.path)
        assert rc == 1 and out.startswith("forgot turn ") and "run this again" in err
        rc, _, err = egg("compact", "--purge", store.path)
        assert rc == 1 and "was not rewritten" in err and SECRET.encode() in read_bytes(store.path)
    finally:
        holder.kill()
        holder.wait()
    rc, out, _ = egg("forget", key, "--egg", store.path)
    assert rc == 0 and "already forgotten" in out and "cleared the last handoff of 1 chat" in out
    assert chat.load().last_handoff == ""
    assert egg("compact", "--purge", store.path)[0] == 0 and SECRET.encode() not in read_bytes(store.path)


def test_forget_usage_errors_and_unknown_keys(egg, store):
    assert egg("forget", "--egg", store.path)[0] == 2
    assert egg("forget", "abc", "--match", "x", "--egg", store.path)[0] == 2
    assert egg("forget", "--match", "  ", "--egg", store.path)[0] == 2
    rc, _, err = egg("forget", "0" * 12, "--egg", store.path)
    assert rc == 1 and "unknown key" in err
    occurrence = next(i for i, v in store.graph.nodes.items() if getattr(v, "op", None) is not None and v.op.value == "occurrence")
    rc, _, err = egg("forget", occurrence[:16], "--egg", store.path)
    assert rc == 1 and "not a turn, a tool outcome or an evidence key" in err
    assert len(turn_views(Store.open(store.path).graph)) == 2  # nothing was written


# -- 4. a deleted or replaced store ------------------------------------------------------------------


def test_a_deleted_store_is_dropped_and_a_replaced_one_read_again_by_warm_readers(egg, store):
    from eggshell.runtime.warm import Resources

    res = Resources(str(egg.tmp / "data"), "/nonexistent", warm=False)
    s = res.store(store.path)
    searcher = Searcher([s])
    live = LiveWorkspace([s])
    assert res.turn_count(store.path) == 2 and len(searcher.search("late_fee computed")) == 1
    assert live.current().corpus.candidates
    other = Store.open(str(egg.tmp / "other.egg"))  # other content, as many commits
    save_turn(other, turn_record(session="sess-x", turn="x1", prompt="how is the cache warmed?",
                                 tools=[bash("cat warm.py", "def warm(): pass\n")], answer="by warm()"))
    save_turn(other, turn_record(session="sess-x", turn="x2", prompt="what does late_fee round to?",
                                 tools=[bash("cat round.py", "ROUND = 2\n")], answer="cents"))
    spare = str(egg.tmp / "spare.egg")
    shutil.copy(other.path, spare)
    os.replace(other.path, store.path)  # replaced (a restore, a purge by another tool): read again
    assert [h.turn for h in searcher.search("late_fee")] == ["x2"]
    served = [c.outcome.as_text() for c in live.current().corpus.candidates]
    assert "ROUND = 2\n" in served and FEE_OUT not in served
    assert res.turn_count(store.path) == 2
    os.unlink(store.path)  # deleted, as docs/privacy.md says a project's memory is
    assert res.turn_count(store.path) == 0
    assert searcher.search("late_fee") == [] and searcher.views == []
    assert live.current().corpus.candidates == [] and live.current().alls == ()
    shutil.copy(spare, store.path)  # a new file where the deleted one was
    assert [h.turn for h in searcher.search("late_fee")] == ["x2"] and res.turn_count(store.path) == 2


def cold_after_snapshot(egg, store, change):
    """A cold Resources that starts from the snapshot a warm one wrote before `change()`."""
    from eggshell.runtime.warm import Resources

    data = str(egg.tmp / "data")
    warm = Resources(data, "/nonexistent", warm=True)
    warm.workspace((store.path,))
    warm.turn_count(store.path)
    assert warm.save_snapshots() == 1
    change()
    cold = Resources(data, "/nonexistent", warm=False)
    assert cold._adopt((store.path,)) is None and cold._live  # it did start from the snapshot
    return cold


def test_a_cold_start_from_a_snapshot_does_not_serve_a_deleted_store(egg, store):
    cold = cold_after_snapshot(egg, store, lambda: os.unlink(store.path))
    assert cold.workspace((store.path,)).corpus.candidates == []
    assert cold.turn_count(store.path) == 0


def test_a_cold_start_from_a_snapshot_does_not_serve_a_forgotten_turn(egg, store):
    cold = cold_after_snapshot(egg, store, lambda: egg("forget", view(store, "t1").key, "--egg", store.path))
    served = [c.outcome.as_text() for c in cold.workspace((store.path,)).corpus.candidates]
    assert served and FEE_OUT not in served and "remember %s\n" % SECRET not in served
    assert cold.turn_count(store.path) == 1
    assert view(store, "t1") is None


def test_a_warm_backfill_never_embeds_a_turn_forgotten_since_the_last_prompt(egg, tmp_path):
    """The manager embeds between requests from its searchers' candidates: they must be current."""
    from eggshell import config
    from eggshell.paths import from_env
    from eggshell.runtime.warm import Resources

    assert egg("init")[0] == 0
    path = str(egg.cwd / ".eggs" / "work.egg")
    s = Store.open(path)
    save_turn(s, t_fee())
    save_turn(s, t_docker())
    paths = from_env()
    res = Resources(paths.data_root, paths.bin_dir, warm=True)
    searcher = res.searcher(config.load(paths, str(egg.cwd)), (path,))
    searcher._refresh()  # as after the last prompt: both turns are candidates
    assert len(searcher.candidates) == 2
    assert egg("forget", view(s, "t1").key)[0] == 0
    assert res.backfill(limit=64) > 0  # the docker turn
    res.close()
    root = vectors.vectors_root(paths.data_root)
    held = [os.path.join(d, n) for d, _, names in os.walk(root) for n in names if n.endswith(".txt")]
    assert held and not any(SECRET.encode() in read_bytes(p) or b"late_fee" in read_bytes(p) for p in held)


@pytest.mark.parametrize("purge", [False, True])
def test_a_warm_backfill_never_embeds_a_saved_turn_forgotten_while_it_waited(egg, tmp_path, purge):
    """Red team IV (merge_resurrects_purged_text): a turn the manager saved waits in its pending list
    to be embedded between requests; `egg forget` (and `egg compact --purge`) before that must leave
    nothing of it in the vector cache, and the other turns are still embedded."""
    from eggshell import config
    from eggshell.paths import from_env
    from eggshell.runtime.warm import Resources

    assert egg("init")[0] == 0
    path = str(egg.cwd / ".eggs" / "work.egg")
    s = Store.open(path)
    fee, docker = save_turn(s, t_fee()), save_turn(s, t_docker())
    paths = from_env()
    res = Resources(paths.data_root, paths.bin_dir, warm=True)
    res.searcher(config.load(paths, str(egg.cwd)), (path,))
    res.index(fee.index + docker.index)  # as the manager does after saving them
    assert egg("forget", view(s, "t1").key)[0] == 0
    if purge:
        assert egg("compact", "--purge", path)[0] == 0
    assert res.backfill(limit=64) > 0  # the docker turn
    res.close()
    root = vectors.vectors_root(paths.data_root)
    held = [os.path.join(d, n) for d, _, names in os.walk(root) for n in names if n.endswith(".txt")]
    assert held and not any(SECRET.encode() in read_bytes(p) or b"late_fee" in read_bytes(p) for p in held)


# -- 5. the purge -------------------------------------------------------------------------------------


def test_compact_purge_removes_the_text_and_keeps_everything_else(egg, store):
    old = str(egg.tmp / "old.egg")
    shutil.copy(store.path, old)
    docker_before = view(store, "t2")
    assert egg("forget", "--match", SECRET, "--egg", store.path)[0] == 0
    assert SECRET.encode() in read_bytes(store.path)  # forgotten, not yet purged
    ino = os.stat(store.path).st_ino
    rc, out, err = egg("compact", "--purge", store.path)
    assert rc == 0, err
    assert out.startswith("%s: purged 5 forgotten records" % store.path)
    data = read_bytes(store.path)
    assert SECRET.encode() not in data and b"late_fee" not in data and b"sess-a" not in data
    assert os.stat(store.path).st_ino != ino and os.stat(store.path).st_mode & 0o777 == 0o600  # a new file, renamed in
    assert [n for n in os.listdir(os.path.dirname(store.path)) if ".tmp-" in n] == []
    purged = Store.open(store.path)
    assert turn_views(purged.graph) == [docker_before]
    assert len(purged.graph.forgets) == 1  # the tombstone stays: ids only
    assert egg("fsck", store.path)[0] == 0
    with open(store.path, "ab") as f:  # the old copy merged back in stays forgotten
        f.write(read_bytes(old))
    assert [v.turn for v in turn_views(Store.open(store.path).graph)] == ["t2"]
    rc, out, _ = egg("compact", "--purge", store.path)
    assert rc == 0 and SECRET.encode() not in read_bytes(store.path)


def test_compact_purge_drops_a_union_only_forgotten_turns_held(egg, store):
    fee, docker = view(store, "t1"), view(store, "t2")
    assert egg("union", fee.tools[0].id[:12], docker.tools[0].id[:12], "--egg", store.path)[0] == 1  # Outcomes: refused
    works = [content_hex(Atom.text(t.work))[:12] for t in (fee.tools[0], docker.tools[0])]
    assert egg("union", *works, "--egg", store.path)[0] == 0
    assert egg("forget", fee.key, "--egg", store.path)[0] == 0
    assert egg("compact", "--purge", store.path)[0] == 0
    s = Store.open(store.path)
    assert s.graph.unions() == [] and b"late_fee" not in read_bytes(store.path)
    assert egg("fsck", store.path)[0] == 0


def test_purge_removes_copies_from_the_vector_cache_journal_chat_state_and_snapshots(egg, store):
    data = str(egg.tmp / "data")
    fee = view(store, "t1")
    text = searchable_text(fee)
    interrupted = searchable_text(fee.__class__(fee.id, fee.session, fee.turn, fee.cwd, fee.prompt, None, fee.tools[:1],
                                                fee.time, fee.store))  # as saved while it ran
    forgotten = [text, text[10:60], interrupted, interrupted[-30:],  # windows are substrings of one of its texts
                 "a layout no form has\nremember %s\nand more" % SECRET]  # or hold a whole line of them
    kept = [searchable_text(view(store, "t2")), "nothing to do with it"]
    root = vectors.vectors_root(data)
    vectors.VectorCache(root, MODEL, DIM, log=lambda m: None).put(forgotten + kept, vecs_for(forgotten + kept))
    other_model = vectors.VectorCache(root, "another model", DIM, log=lambda m: None)
    other_model.put([text], vecs_for([text]))
    holder = vectors.VectorCache(root, MODEL, DIM, log=lambda m: None)  # a process holding the cache (a manager)
    holder.refresh()
    assert (holder.lookup(forgotten) >= 0).all()
    journal = Journal(os.path.join(data, "journal"))
    journal.append("sess-a", "t1", {"event": "prompt", "prompt": "where is late_fee computed? " + SECRET})
    journal.append("sess-b", "t9", {"event": "prompt", "prompt": "another turn"})
    state = os.path.join(data, "state")
    Chat(state, "chat-1").delivered("EGGSHELL PRIOR WORK\n  EVIDENCE\nremember %s\n" % SECRET, "evidence  %s  shown in full" % fee.key)
    Chat(state, "chat-2").delivered("prior docker work", "retrieved %s" % view(store, "t2").key)
    snaps = os.path.join(data, "run", "snapshots")
    os.makedirs(snaps)
    with open(os.path.join(snaps, "x.pickle"), "wb") as f:
        f.write(SECRET.encode())

    assert egg("forget", fee.key, "--egg", store.path)[0] == 0
    assert Chat(state, "chat-1").load().last_handoff == ""  # cleared by the forget already
    rc, out, err = egg("compact", "--purge", store.path)
    assert rc == 0, err
    assert "1 journal file, 6 cached windows (2 segments rewritten)" in out and "1 snapshot removed" in out

    fresh = vectors.VectorCache(root, MODEL, DIM, log=lambda m: None)
    fresh.refresh()
    assert (fresh.lookup(forgotten) < 0).all() and (fresh.lookup(kept) >= 0).all()
    assert np.array_equal(fresh.matrix()[fresh.lookup(kept)], vecs_for(kept))
    assert holder.lookup(forgotten)[0] >= 0  # until it looks again
    holder.refresh()
    assert (holder.lookup(forgotten) < 0).all() and len(holder) == len(kept) and holder.epoch == 1
    again = vectors.VectorCache(root, "another model", DIM, log=lambda m: None)
    again.refresh()
    assert len(again) == 0
    assert not journal.has("sess-a", "t1") and journal.has("sess-b", "t9")
    assert Chat(state, "chat-2").load().last_handoff == "prior docker work"
    assert os.listdir(snaps) == []
    for d, _, files in os.walk(str(egg.tmp)):
        for name in files:
            assert SECRET.encode() not in read_bytes(os.path.join(d, name)), os.path.join(d, name)


def test_a_semantic_index_drops_its_memos_when_the_cache_is_purged(tmp_path):
    """The warm manager's SemanticIndex keeps text -> rows: after a purge the rows are void and go."""
    from eggshell.search.embed import Encoder
    from eggshell.search.semantic import SemanticIndex

    root = str(tmp_path / "vectors")
    idx = SemanticIndex(Encoder(), root)
    a, b = "the late_fee is %s" % SECRET, "the docker build needs a fresh lockfile"
    before = idx.scores("late fee", [a, b])
    assert a in idx._rows
    assert vectors.purge(root, lambda w: SECRET in w) == (1, 1)
    after = idx.scores("late fee", [b])
    assert a not in idx._rows and len(idx.cache) == 1
    assert np.isclose(after[0], before[1])
