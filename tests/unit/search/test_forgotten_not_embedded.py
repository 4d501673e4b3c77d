"""A turn a tombstone hides is never written into the vector cache (graph/tombstones.Gate).

Red-team round IV, merge_resurrects_purged_text: the Stop hook hands the saved turn to a
detached provider to embed ahead (runtime/turnflow._pre_index); loading the model takes
seconds, and `egg forget` + `egg compact --purge` ran meanwhile, so its vectors (and the
canary's text with them, in `seg-*.txt`) were written after the purge, for good. Now every
index item names its store, turn and roots (records.index_items), and the provider writes
a batch only while no tombstone hides them, checked under the lock a purge holds.
"""

from __future__ import annotations

import glob
import os
import shutil
from types import SimpleNamespace

import numpy as np
import pytest

from eggshell.graph import tombstones
from eggshell.graph.records import turn_views
from eggshell.graph.save import save_turn
from eggshell.graph.store import Store, compact, merge
from eggshell.runtime import forget
from eggshell.search import semantic
from eggshell.search.local import Provider
from eggshell.search.rank import Settings
from helpers import turn_record

CANARY = "ZQGATECANARY"


class LineEncoder:
    """Stands in for the model: one window per line, deterministic unit vectors; `during` runs inside each embed."""

    model_id = "test/line-encoder"
    dim = 8

    def __init__(self, during=None):
        self.during = during
        self.calls = 0

    def load(self):
        pass

    def windows(self, text):
        return [SimpleNamespace(text=line) for line in text.splitlines() if line]

    def embed(self, batch):
        self.calls += 1
        if self.during is not None:
            self.during()
        v = np.stack([np.random.default_rng(abs(hash(t)) % (1 << 32)).standard_normal(self.dim) for t in batch]).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def _provider(tmp_path, enc) -> Provider:
    p = Provider(Settings(mode="hybrid"), data_root=str(tmp_path / "data"))
    p._semantic = semantic.SemanticIndex(enc, str(tmp_path / "data" / "semantic" / "vectors"))
    return p


def _cached_text(tmp_path) -> str:
    out = ""
    for f in glob.glob(str(tmp_path / "data" / "semantic" / "vectors" / "*" / "seg-*.txt")):
        with open(f, encoding="utf-8", errors="replace") as fh:
            out += fh.read()
    return out


def _saved(tmp_path, prompt: str = "where is %s set" % CANARY, output: str = "conf.py:1: X='%s'\n" % CANARY):
    path = str(tmp_path / ".eggs" / "work.egg")
    s = Store(path)
    tools = [{"id": "c1", "name": "Bash", "input": {"command": "grep -rn %s ." % CANARY}, "output": output}]
    saved = save_turn(s, turn_record(prompt=prompt, tools=tools, answer="in conf.py", cwd=str(tmp_path)), root=str(tmp_path))
    return path, saved.index


def _forget_match(path: str, text: str = CANARY) -> None:
    s = Store.open(path)
    targets = forget.by_match(s.graph, text)
    assert targets
    s.forget([r for x in targets for r in x.roots], [p for x in targets for p in x.turns])


def _forget_tool(path: str) -> None:
    s = Store.open(path)
    (view,) = turn_views(s.graph)
    (tool,) = view.tools
    targets = forget.by_key(s.graph, tool.id)
    s.forget([r for x in targets for r in x.roots], [p for x in targets for p in x.turns])


def _purge(path: str) -> None:
    compact(path, purge=True)


def _merge_old_back(path: str, old: str) -> None:
    _purge(path)
    out = path + ".merged"
    merge([path, old], out)
    os.replace(out, path)


def test_items_name_their_store_turn_and_roots(tmp_path):
    path, items = _saved(tmp_path)
    (it,) = items
    assert it["store"] == path and len(it["turn"]) == 2 and it["id"] in it["roots"] and len(it["roots"]) == 2
    assert tombstones.Gate([tombstones.item_of(it)]).open()


@pytest.mark.parametrize("how", ["forget --match", "forget the tool call", "forget then purge", "purge then merge the old copy back"])
def test_a_forgotten_turn_closes_the_gate(tmp_path, how):
    path, items = _saved(tmp_path)
    old = str(tmp_path / "old.egg")
    shutil.copy(path, old)
    gate = tombstones.Gate([tombstones.item_of(i) for i in items])
    assert gate.open()
    if how == "forget the tool call":
        _forget_tool(path)
    else:
        _forget_match(path)
    if how == "forget then purge":
        _purge(path)
    elif how.startswith("purge then merge"):
        _merge_old_back(path, old)
    assert not gate.open()
    assert not tombstones.Gate([tombstones.item_of(i) for i in items]).open()  # a fresh look agrees


def test_a_deleted_store_closes_the_gate(tmp_path):
    path, items = _saved(tmp_path)
    os.unlink(path)
    assert not tombstones.Gate([tombstones.item_of(i) for i in items]).open()


@pytest.mark.parametrize("when", ["before", "while embedding"])
@pytest.mark.parametrize("then_purge", [False, True])
def test_the_provider_caches_nothing_of_a_turn_forgotten_before_or_while_it_embeds(tmp_path, when, then_purge):
    path, items = _saved(tmp_path)

    def forget_now():
        if not os.path.exists(path + ".done"):
            open(path + ".done", "w").close()
            _forget_match(path)
            if then_purge:
                _purge(path)

    enc = LineEncoder(during=forget_now if when == "while embedding" else None)
    if when == "before":
        forget_now()
    _provider(tmp_path, enc).index(items)
    assert CANARY not in _cached_text(tmp_path)


def test_a_live_turn_is_still_embedded_ahead(tmp_path):
    path, items = _saved(tmp_path)
    (tmp_path / "other").mkdir()
    _, other = _saved(tmp_path / "other", prompt="how is the parser configured", output="depth = 3\n")
    _forget_match(path)  # another store's tombstone does not stop this one
    n = _provider(tmp_path, LineEncoder()).index(other)
    assert n == 1 and "depth = 3" in _cached_text(tmp_path)


def test_a_tombstone_being_appended_is_read_once_whole(tmp_path):
    path, items = _saved(tmp_path)
    gate = tombstones.Gate([tombstones.item_of(i) for i in items])
    assert gate.open()
    s = Store.open(path)
    targets = forget.by_match(s.graph, CANARY)
    s.forget([r for x in targets for r in x.roots], [p for x in targets for p in x.turns])
    with open(path, "rb") as f:
        whole = f.read()
    cut = whole.rindex(b'{"forget"') + 20
    with open(path, "wb") as f:
        f.write(whole[:cut])  # the writer is half-way through the line
    assert gate.open()
    with open(path, "wb") as f:
        f.write(whole)
    assert not gate.open()


def _searcher(tmp_path, path, enc):
    from eggshell.search import matcher
    from eggshell.search.searcher import Searcher

    sem = matcher.in_process_for(Settings(mode="semantic"), str(tmp_path / "data"), lambda m: None)
    sem.provider._semantic = semantic.SemanticIndex(enc, str(tmp_path / "data" / "semantic" / "vectors"))
    return Searcher([Store.open(path)], settings=Settings(mode="hybrid"), semantic=sem)


@pytest.mark.parametrize("then_purge", [False, True])
def test_a_query_caches_nothing_of_a_turn_forgotten_while_it_embeds_the_candidates(tmp_path, then_purge):
    """The warm manager's searcher read the turn as a candidate a moment before `egg forget`: the
    query-time embedding of the candidates must not cache it (Searcher.write_gate)."""
    path, _ = _saved(tmp_path)

    def forget_once():
        if not os.path.exists(path + ".done"):
            open(path + ".done", "w").close()
            _forget_match(path)
            if then_purge:
                _purge(path)

    _searcher(tmp_path, path, LineEncoder(during=forget_once)).search("where is the setting")
    assert CANARY not in _cached_text(tmp_path)


def test_a_query_still_caches_live_candidates(tmp_path):
    path, _ = _saved(tmp_path)
    s = _searcher(tmp_path, path, LineEncoder())
    s.search("where is the setting")
    assert CANARY in _cached_text(tmp_path)
    _forget_match(path)
    s.search("where is the setting")  # read again: the forgotten turn is no candidate, and the gate reopens
    assert s.write_gate()() and s.views == []
