"""egg-index: the provider protocol (lexical ranking in this version)."""

from __future__ import annotations

import io
import json
import os
import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from eggshell import index

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CANDS = [{"id": "a", "text": "bake bread at home"}, {"id": "b", "text": "late_fee is computed in src/billing.py"}, {"id": "c", "text": "late fee policy"}]


def run(lines: list[str], top_k: int = 8, anchor_k: int = 2) -> list[dict]:
    out = io.StringIO()
    provider = index.Provider(index.Settings(mode="lexical", top_k=top_k, anchor_k=anchor_k))
    assert index.run(provider, io.StringIO("".join(l + "\n" for l in lines)), out) == 0
    return [json.loads(l) for l in out.getvalue().splitlines()]


def q(text: str, cands=CANDS) -> str:
    return json.dumps({"query": {"id": "q", "text": text}, "candidates": cands})


def test_index_messages_are_never_answered_and_queries_get_exactly_one_reply():
    replies = run([json.dumps({"index": CANDS}), q("where is late_fee computed"), json.dumps({"index": []}), q("bread")])
    assert replies == [{"related": [1, 2]}, {"related": [0]}]


def test_bad_lines_are_answered_with_an_empty_list_in_step(capsys):
    replies = run(["not json", json.dumps({"query": {"text": 3}, "candidates": CANDS}), json.dumps({"query": {"text": "x"}}), q("late fee")])
    assert replies[:3] == [{"related": []}] * 3 and replies[3]["related"]
    err = capsys.readouterr().err
    assert "<stdin>:1:" in err and "<stdin>:2:" in err and "<stdin>:3:" in err


def test_a_malformed_index_message_is_not_answered(capsys):
    assert run([json.dumps({"index": "nope"}), q("bread")]) == [{"related": [0]}]
    assert "must be a list" in capsys.readouterr().err


def test_top_k_caps_the_reply():
    assert len(run([q("late fee")], top_k=1)[0]["related"]) == 1


@settings(max_examples=80, deadline=None)
@given(texts=st.lists(st.text(max_size=40), max_size=12), query=st.text(max_size=30), k=st.integers(1, 5))
def test_related_indices_are_unique_in_range_and_at_most_top_k(texts, query, k):
    cands = [{"id": str(i), "text": t} for i, t in enumerate(texts)]
    rel = index.related(query, cands, k)
    assert len(rel) == len(set(rel)) <= k
    assert all(0 <= i < len(cands) for i in rel)


def test_the_executable_speaks_the_protocol_and_exits_0_at_eof():
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "lib"))
    p = subprocess.run([os.path.join(REPO, "bin", "egg-index"), "--mode", "lexical"], input=json.dumps({"index": CANDS}) + "\n" + q("late_fee") + "\n",
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert [json.loads(l) for l in p.stdout.splitlines()] == [{"related": [1, 2]}]
