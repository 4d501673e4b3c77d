"""Query-time catch-up embedding is bounded by time and keeps what it made.

A query over records never indexed embeds their windows itself. Embedding them all could
outlast the provider's deadline, and the child would be killed with nothing stored, so
the next query would repeat the same work. Now catch-up stops starting batches once its
time budget is spent, stores each small batch as soon as it is made, and scores the
candidates with the windows they have. The next query goes on from there.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np

from eggshell.search import semantic


class SlowEncoder:
    """Stands in for the model: one window per text, 20 ms per embed call, deterministic vectors."""

    model_id = "test/slow-encoder"
    dim = 8

    def __init__(self):
        self.calls: list[int] = []

    def load(self):
        pass

    def windows(self, text):
        return [SimpleNamespace(text=text)] if text else []

    def embed(self, batch):
        time.sleep(0.02)
        self.calls.append(len(batch))
        v = np.stack([np.random.default_rng(abs(hash(t)) % (1 << 32)).standard_normal(self.dim) for t in batch]).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_catch_up_stops_at_its_budget_keeps_what_it_embedded_and_the_next_query_goes_on(tmp_path):
    enc = SlowEncoder()
    idx = semantic.SemanticIndex(enc, str(tmp_path / "cache"))
    idx.query_embed_budget_s = 0.05  # about three batches of QUERY_BATCH windows
    texts = ["record %d about late fees" % i for i in range(10 * semantic.QUERY_BATCH)]
    first = idx.scores("late fees", texts)
    made = idx.embedded
    assert 0 < made < len(texts), made  # stopped early ...
    assert all(n <= semantic.QUERY_BATCH for n in enc.calls[:-1])  # ... in small batches (the last call: the query)
    assert np.isfinite(first).sum() == made  # those it has are scored; the rest wait, never an error
    # what was embedded is in the cache, for another process too
    again = semantic.SemanticIndex(SlowEncoder(), str(tmp_path / "cache"))
    assert sum(len(r) for r in again.ensure(texts, limit=0)) == made
    second = idx.scores("late fees", texts)  # the next query embeds the next windows, not the same ones
    assert idx.embedded > 0 and np.isfinite(second).sum() == made + idx.embedded
    # with no budget (egg index), everything is embedded in one go
    rest = semantic.SemanticIndex(SlowEncoder(), str(tmp_path / "cache"))
    rest.ensure(texts)
    assert all(len(r) == 1 for r in rest.ensure(texts))


class WindowedEncoder(SlowEncoder):
    """One window per line, no delay: what a long pasted issue looks like to the model."""

    def windows(self, text):
        return [SimpleNamespace(text=line) for line in text.splitlines() if line]

    def embed(self, batch):
        self.calls.append(list(batch))
        v = np.stack([np.random.default_rng(abs(hash(t)) % (1 << 32)).standard_normal(self.dim) for t in batch]).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_a_long_query_embeds_only_its_first_windows(tmp_path):
    """Each query window is a model run on every prompt; a 30-window issue embeds the first
    QUERY_WINDOWS (its title and description), and a short one no more than it has."""
    enc = WindowedEncoder()
    idx = semantic.SemanticIndex(enc, str(tmp_path))
    idx.ensure(["record one", "record two"])
    enc.calls.clear()
    long = "\n".join("part %d of the issue" % i for i in range(30))
    idx.scores(long, ["record one", "record two"])
    assert enc.calls == [["part %d of the issue" % i for i in range(semantic.QUERY_WINDOWS)]]
    enc.calls.clear()
    idx.scores("title\nbody", ["record one", "record two"])
    assert enc.calls == [["title", "body"][:semantic.QUERY_WINDOWS]]


def test_a_backlog_is_never_embedded_by_a_query_only_the_managers_own_new_turns(tmp_path):
    """Issue 30: more windows missing than a query may embed (an import of 2,000 turns) and the
    query embeds none of the backlog, only the windows of the turns the warm manager saved itself
    (`query_embed_first`); with few missing (a store's first turns) it embeds them all, as before."""
    enc = WindowedEncoder()
    idx = semantic.SemanticIndex(enc, str(tmp_path / "cache"))
    idx.query_embed_limit = 4
    backlog = ["imported turn %d" % i for i in range(40)]
    own = ["just saved line one\njust saved line two"]
    pending: dict = {own[0]: {}}
    idx.query_embed_first = lambda: pending
    got = idx.scores("saved", backlog + own)
    embedded = [w for call in enc.calls[:-1] for w in call]  # the last call embeds the query
    assert sorted(embedded) == ["just saved line one", "just saved line two"]
    assert np.isfinite(got).sum() == 1 and np.isfinite(got[-1])
    # nothing of its own left to embed: the query embeds only itself
    pending.clear()
    enc.calls.clear()
    idx.scores("imported", backlog + own)
    assert enc.calls == [["imported"]]
    # a store's first turns: fewer missing than the limit, so the query embeds them
    few = semantic.SemanticIndex(WindowedEncoder(), str(tmp_path / "few"))
    few.query_embed_limit = 4
    few.query_embed_first = lambda: {}
    assert np.isfinite(few.scores("turn", backlog[:3])).all()


def test_a_few_turns_with_more_windows_missing_than_a_step_embeds_are_embedded_step_by_step(tmp_path):
    """A store's first turn, saved where no manager ran (a cold Stop, `egg import`), with more
    windows missing than one background step embeds: no backlog, so each step embeds `limit` of
    them until the turn is complete (never left waiting for an embedder that is not started)."""
    enc = WindowedEncoder()
    idx = semantic.SemanticIndex(enc, str(tmp_path / "cache"))
    turn = "\n".join("line %d of the only turn" % i for i in range(10))
    steps = 0
    while not idx.complete([turn]):
        idx.ensure([turn], None, 4, None, None, (), semantic.SCAN_STEP, True)
        assert not idx.backlog and idx.embedded <= 4
        steps += 1
        assert steps <= 3
    assert steps == 3
