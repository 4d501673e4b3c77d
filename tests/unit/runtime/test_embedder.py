"""runtime/embedder.py: the background embedder embeds a backlog whole, once, and nothing forgotten.

Requirements (issue 30): run as the manager starts it (a real process, the real model), it embeds
every window of every live turn of the stores it is given, read through the search index when
that serves and from a whole read when not (a store with a tombstone); a forgotten turn leaves no
vector; it leaves no progress file behind; a second one while one runs exits at once, embedding
nothing; `egg status`'s line says the backlog, the rate and the time left.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys

import portalocker
import pytest

from eggshell.core.identity import content_hex
from eggshell.core.values import Atom
from eggshell.graph.commitindex import AppendStore
from eggshell.graph.records import searchable_text, turn_views
from eggshell.graph.save import save_turn
from eggshell.graph.store import Store
from eggshell.runtime import embedder
from eggshell.runtime.client import lib_dir, run_dir
from eggshell.search.embed import Encoder
from eggshell.search.semantic import SemanticIndex
from eggshell.search.turnindex import TurnIndex

WORDS = "late_fee billing invoice rounding docker build cache config parser timeout retry schema".split()


def record(rng: random.Random, i: int) -> dict:
    w = lambda k: " ".join(rng.choice(WORDS) for _ in range(k))  # noqa: E731
    return {"session": "s1", "turn": "t%d" % i, "cwd": ".", "prompt": "%s? (turn %d)" % (w(6), i),
            "tools": [{"name": "Bash", "id": "c%d" % i, "input": {"command": "rg -n %s src" % rng.choice(WORDS)},
                       "output": "src/a.py:%d: %s\n" % (i, w(30))}],
            "answer": "%s (answer %d)" % (w(12), i)}


@pytest.fixture
def store(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    path = str(tmp_path / "p" / "work.egg")
    s = AppendStore.open(path, str(data))
    rng = random.Random(4)
    for i in range(6):
        save_turn(s, record(rng, i), None, "2026-12-06T10:00:%02d.000000Z" % i)
    s.close()
    return path, str(data)


def run_embedder(data: str, *stores: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, EGGSHELL_DATA_ROOT=data, PYTHONPATH=lib_dir())
    return subprocess.run([sys.executable, "-m", "eggshell", "egg-embedder", "run", "--", *stores], env=env,
                          capture_output=True, text=True, timeout=600)


def embedded(data: str, texts: list[str]) -> list[bool]:
    """Whether every window of each text is in the data root's vector cache (nothing is embedded to say)."""
    idx = SemanticIndex(Encoder(), os.path.join(data, "semantic", "vectors"))
    rows = idx.ensure(texts, limit=0)
    return [len(r) == len(idx._windows(t)) and len(r) > 0 for r, t in zip(rows, texts)]


def test_the_embedder_embeds_a_backlog_through_the_search_index_and_leaves_no_progress_file(store):
    path, data = store
    s = AppendStore.open(path, data)
    ix = TurnIndex(data, path)
    assert ix.update(s) == 6  # the index serves: the embedder reads the turns through it
    ix.close()
    texts = [searchable_text(v) for v in turn_views(Store.open(path).graph)]
    assert not any(embedded(data, texts))
    r = run_embedder(data, path)
    assert r.returncode == 0, r.stderr
    assert all(embedded(data, texts))
    assert not os.path.exists(embedder.state_path(data))


def test_a_forgotten_turn_is_not_embedded_and_a_store_with_a_tombstone_is_read_whole(store):
    path, data = store
    full = Store.open(path)
    views = turn_views(full.graph)
    gone = views[2]
    full.forget([gone.id], [(content_hex(Atom.text(gone.session)), content_hex(Atom.text(gone.turn)))])
    r = run_embedder(data, path)
    assert r.returncode == 0, r.stderr
    live = [searchable_text(v) for v in turn_views(Store.open(path).graph)]
    assert gone.id not in {v.id for v in turn_views(Store.open(path).graph)} and all(embedded(data, live))
    assert embedded(data, [searchable_text(gone)]) == [False]


def test_a_second_embedder_exits_at_once_while_one_runs(store):
    path, data = store
    d = run_dir(data)
    os.makedirs(d, mode=0o700, exist_ok=True)
    with open(os.path.join(d, embedder.LOCK), "a") as held:
        portalocker.lock(held, portalocker.LOCK_EX | portalocker.LOCK_NB)
        r = run_embedder(data, path)
    assert r.returncode == 0
    assert not os.path.exists(os.path.join(data, "semantic", "vectors")) or not any(
        embedded(data, [searchable_text(v) for v in turn_views(Store.open(path).graph)]))


def test_status_says_the_backlog_the_rate_and_the_time_left():
    line = embedder.describe({"turns": 2001, "done": 201, "rate_turns_s": 2.0})
    assert line.startswith("embedding in the background: 201 of 2001 turns looked at, 2.0 turns/s, about 15 min left")
    assert "found lexically" in line
    assert "s left" in embedder.describe({"turns": 10, "done": 5, "rate_turns_s": 1.0})


def test_egg_status_shows_a_running_embedders_progress(tmp_path, monkeypatch, capsys):
    from helpers.cli_env import Egg

    egg = Egg(tmp_path, monkeypatch, capsys)
    egg("init")
    data = str(tmp_path / "data")
    os.makedirs(data, mode=0o700, exist_ok=True)
    os.chmod(data, 0o700)
    os.makedirs(run_dir(data), mode=0o700, exist_ok=True)
    embedder._write(data, {"pid": os.getpid(), "turns": 2001, "done": 201, "rate_turns_s": 2.0})
    rc, out, err = egg("status")
    assert rc == 0, err
    assert "vectors    embedding in the background: 201 of 2001 turns looked at, 2.0 turns/s, about 15 min left" in out
    os.unlink(embedder.state_path(data))
    assert "vectors" not in egg("status")[1]


def test_a_warm_manager_leaves_a_backlog_to_the_embedder_and_its_prompts_embed_none_of_it(tmp_path, monkeypatch):
    """Issue 30: 40 turns saved by another process (an import): a warm prompt embeds none of their
    windows (only its own query), the background step embeds none of them either and starts the
    embedder instead; the manager's own just-saved turn is still embedded at once."""
    import json

    from helpers.hook_env import Env
    from helpers.hooks import answer_here
    from eggshell.runtime.warm import Resources

    env = Env(tmp_path)  # the project template: hybrid, the built-in model
    env.record_turn("where is parse_config defined?", [("rg -n parse_config src", "src/config.py:1:def parse_config(path):\n")],
                    "in src/config.py", session="chat-1", turn="t1")
    s = AppendStore.open(env.egg, env.data)
    rng = random.Random(8)
    for i in range(40):
        save_turn(s, record(rng, 100 + i), None, "2026-12-06T11:00:%02d.000000Z" % i)
    s.close()
    started: list = []
    monkeypatch.setattr(embedder, "spawn", lambda data_root, stores, *a: started.append(stores) or True)
    res = Resources(env.data, env.paths.bin_dir, warm=True)
    reply = answer_here("codex", json.dumps(env.prompt("where is parse_config defined", turn="u1", session_id="chat-2")), env.paths, res)
    assert "parse_config" in json.dumps(reply)
    idx = next(iter(res._searchers.values())).semantic.provider._index()
    assert idx.embedded == 0  # the prompt embedded its query, no stored window
    for _ in range(5):
        res.backfill()
        assert idx.embedded == 0
    assert started == [[env.egg]]


def test_a_later_pass_reads_only_the_turns_saved_since(store):
    """A long import goes on while the embedder runs: its next pass takes only the documents the
    search index gained since the last one, newest first."""
    path, data = store
    total, docs, chunks = embedder._views(path, data)
    assert (total, docs) == (6, 6) and sum(len(c) for c in chunks) == 6
    s = AppendStore.open(path, data)
    rng = random.Random(9)
    for i in range(6, 8):
        save_turn(s, record(rng, i), None, "2026-12-06T10:01:%02d.000000Z" % i)
    s.close()
    total, docs, chunks = embedder._views(path, data, 6)
    got = [v.turn for c in chunks for v in c]
    assert (total, docs, got) == (2, 8, ["t7", "t6"])
    total, docs, chunks = embedder._views(path, data, 8)
    assert (total, list(chunks)) == (0, [])
