"""reuse/relevance.py: whether a prior turn bears on a new prompt, from its first turn on.

The issue (29) this answers: with one prior turn, a related follow-up typed as a chat ("if
finance wants 2% instead, what do I have to touch?") was handed nothing, because a fixed
cosine floor tuned on big stores dropped it. The checks are tested one by one at their
thresholds, then through the prompt hook on a store of one turn with the real model, and
`egg why` must say which check a held-back turn failed.
"""

from __future__ import annotations

import math

import pytest

from eggshell.reuse import relevance as R
from eggshell.search.background import Calibration, generic_terms
from helpers.hook_env import Env

CAL = Calibration(0.1, 0.05)  # z = (cosine - 0.1) / 0.05


def ev(**kw) -> R.Evidence:
    base = dict(anchors=(), specific=(), share=0.0, cosine=None, z=None, latest=False, follows=())
    return R.Evidence(**{**base, **kw})


@pytest.mark.parametrize("kw, check", [
    (dict(anchors=("late_fee",)), "anchor"),
    (dict(share=R.PROMPT_FLOOR), "words"),
    (dict(cosine=R.SEMANTIC_FLOOR), "cosine"),
    (dict(z=R.Z_ALONE), "calibrated"),
    (dict(z=R.Z_WORDS, specific=("fee",) * R.SPECIFIC_WORDS), "calibrated with words"),
    (dict(z=R.Z_MANY_WORDS, specific=("late", "fee", "rate")[:R.MANY_WORDS]), "calibrated with words"),
    (dict(z=R.Z_FOLLOW, latest=True, follows=("instead",)), "latest turn, a follow-up"),
])
def test_each_check_passes_at_its_threshold_and_not_below(kw, check):
    v = R.decide(ev(**kw))
    assert v.bears and v.check == check
    below = {k: (x - 1e-6 if isinstance(x, float) else x) for k, x in kw.items()}
    if below == kw:  # a count or a word list: one fewer
        below = {k: (x[:-1] if isinstance(x, tuple) else x) for k, x in kw.items()}
    assert not R.decide(ev(**below)).bears, below


@pytest.mark.parametrize("kw", [
    dict(z=R.Z_WORDS + 1, specific=()),  # the model alone, not enough of it
    dict(z=R.Z_MANY_WORDS, specific=("a", "b")),  # under Z_WORDS with too few words
    dict(z=R.Z_FOLLOW + 3, latest=True, follows=()),  # the latest turn, not asked as a follow-up
    dict(z=R.Z_FOLLOW + 3, latest=False, follows=("that",)),  # a follow-up, of an older turn
    dict(z=None, latest=True, follows=("that",), share=0.5),  # no calibration: no calibrated check
])
def test_no_check_passes_on_part_of_its_evidence(kw):
    v = R.decide(ev(**kw))
    assert not v.bears and v.check == ""
    assert len(v.missing()) == len(R.CHECKS) - (0 if kw.get("latest") else 1)


def test_a_store_past_the_sizes_the_thresholds_were_chosen_on_asks_more_of_the_weak_checks():
    """The best z of n unrelated turns grows like sqrt(2 ln n): in 500 runs, one specific word and
    z 3.8, or a short prompt's words, were met by chance (unrelated prompts handed something 0.175)."""
    assert R.lift(1) == R.lift(R.N_CHOSEN) == 0.0
    assert 0 < R.lift(R.N_CHOSEN + 1) < R.lift(500) < R.lift(100_000)
    assert R.lift(500) == pytest.approx(math.sqrt(2 * math.log(500)) - math.sqrt(2 * math.log(R.N_CHOSEN)))
    weak = [dict(z=R.Z_WORDS + 0.3, specific=("maria",)), dict(z=R.Z_ALONE + 0.3), dict(share=1.0, specific=("john", "problem"))]
    for kw in weak:
        assert R.decide(ev(**kw, turns=R.N_CHOSEN)).bears, kw
        v = R.decide(ev(**kw, turns=500))
        assert not v.bears, kw
        assert any("%.1f" % (R.Z_WORDS + R.lift(500)) in m or "specific words in a store of 500" in m or
                   "%.1f" % (R.Z_ALONE + R.lift(500)) in m for m in v.missing())
    strong = [dict(anchors=("compute_late_fee",)), dict(cosine=R.SEMANTIC_FLOOR), dict(share=0.7, specific=("a", "b", "c")),
              dict(z=R.Z_FOLLOW, latest=True, follows=("that",))]  # the latest turn is one turn, however big the store
    for kw in strong:
        assert R.decide(ev(**kw, turns=100_000)).bears, kw


@pytest.mark.parametrize("prompt, words", [
    ("If finance wants 2% instead, what do I have to touch?", ("instead",)),
    ("Does anything else depend on that number?", ("else", "that")),
    ("And what does a caller get back once they go over?", ("^and",)),
    ("can you add a test for it", ("it",)),
    ("Could you write a unit test that pins that schedule down?", ("that",)),
    ("How do I add a middleware in Express that logs every request's duration?", ()),
    ("Is it likely that Nate has friends besides Joanna?", ()),
    ("What is Audrey's favorite recipe that she shares with Andrew?", ()),
    ("How can I stream a large file download without loading it into memory?", ()),
    ("Suggest three names for a grey kitten.", ()),
])
def test_a_prompt_reads_as_a_follow_up_by_its_referring_words(prompt, words):
    assert R.follows_on(prompt) == words


def test_evidence_counts_anchors_specific_and_generic_words_apart():
    text = "where is late_fee computed?\nlate_fee in src/billing.py applies the daily rate\nchange the function"
    q = R.prompt_terms("change late_fee and the daily rate function")
    e = R.evidence(q, text, 0.3, CAL, False, generic_terms())
    assert "late_fee" in e.anchors and {"daili", "rate"} <= set(e.specific)
    assert "chang" not in e.specific and "function" not in e.specific  # generic in agent chat
    assert e.z == pytest.approx(4.0) and e.share == 1.0


# -- through the prompt hook, on a store of one turn (the real model) -------------------------

RATE_TURN = ("Where is the late fee computed and what rate does it use?",
             [("grep -rn 'late' src/billing", "src/billing/invoice.py:12:def compute_late_fee(balance, days):\n"
               "src/billing/invoice.py:14:    return balance * DAILY_LATE_RATE * days\n"),
              ("sed -n 1,20p src/billing/invoice.py", "DAILY_LATE_RATE = 0.015\n\n\ndef compute_late_fee(balance, days):\n"
               "    \"\"\"The fee on an overdue balance.\"\"\"\n    return balance * DAILY_LATE_RATE * days\n")],
             "compute_late_fee() in src/billing/invoice.py charges DAILY_LATE_RATE = 0.015 of the balance per day overdue.")


@pytest.fixture
def one_turn(tmp_path):
    """A project whose store holds one turn, and the warm manager's resources (the model loaded):
    what a new chat's prompt is answered from on a user's first day."""
    from eggshell.runtime.warm import Resources

    env = Env(tmp_path)
    env.record_turn(*RATE_TURN)
    env.res = Resources(env.paths.data_root, env.paths.bin_dir, warm=True)
    yield env
    env.res.close()


def handed(env: Env, prompt: str, session: str) -> str:
    from helpers.hooks import answer_here

    reply = answer_here("codex", env.prompt(prompt, "turn-1", session_id=session), env.paths, env.res)
    return (reply.get("hookSpecificOutput") or {}).get("additionalContext", "") if reply else ""


@pytest.mark.parametrize("prompt", [
    "If we change the late fee rate to 2%, which function and tests need updating?",  # the chat 2
    "if finance wants 2% instead, what do I have to touch?",  # no shared word: a follow-up of the latest turn
    "what would break if that rate were doubled?",
])
def test_a_follow_up_on_a_one_turn_store_is_handed_the_turn(one_turn, prompt):
    text = handed(one_turn, prompt, "chat-2")
    assert "compute_late_fee" in text and "EGGSHELL PRIOR WORK" in text


@pytest.mark.parametrize("prompt", ["Suggest three names for a grey kitten.", "How do I configure nginx to proxy websocket connections?"])
def test_an_unrelated_prompt_on_a_one_turn_store_is_handed_nothing_and_egg_why_says_why(one_turn, prompt, monkeypatch, capsys):
    assert handed(one_turn, prompt, "chat-3") == ""
    from eggshell.cli import main as cli

    monkeypatch.setenv("EGGSHELL_PREFIX", one_turn.prefix)
    monkeypatch.setenv("EGGSHELL_DATA_ROOT", one_turn.data)
    monkeypatch.chdir(one_turn.project)
    capsys.readouterr()
    assert cli.main(["why", "--chat", "chat-3"]) == 0
    out = capsys.readouterr().out
    assert "held back, no check passed" in out and "calibrated: z " in out and "latest turn, a follow-up: does not read as one" in out
    assert "compute_late_fee" not in out  # what was held back is named by key, not shown


# -- what the decision is given: egg-query's message and egg-index's reply -------------------


def test_egg_query_s_message_carries_the_calibration_and_the_turns_weighed_beside_the_ranking(one_turn):
    """The pipe carries all the decision reads, so `egg-query | egg-extract` decides as the hook does."""
    from eggshell.search.searcher import hits_message

    cfg = __import__("eggshell.config", fromlist=["load"]).load(one_turn.paths, one_turn.project)
    s = one_turn.res.searcher(cfg, (one_turn.egg,))
    msg = hits_message(s, {"query": {"text": "if finance wants 2% instead, what do I have to touch?"}}, 5, 0.2)
    assert msg["hits"] == []  # nothing ranks: no shared word, a cosine under the threshold
    [c] = msg["candidates"]
    assert c["via"] == "nearest" and c["latest"] is True and c["rank"] == 0 and isinstance(c["semantic"], float)
    mean, sd = msg["calibration"]
    assert -1 < mean < 1 and 0 < sd < 1 and msg["top_k"] == 5 and msg["turns"] == 1
    assert R.decide(R.evidence(R.prompt_terms("x"), "", c["semantic"], Calibration(mean, sd), True, frozenset(), ("instead",))).bears


def test_egg_index_replies_with_the_prompt_s_calibration(tmp_path):
    from eggshell.search.local import Provider
    from eggshell.search.rank import REPORT_FLOOR, Settings
    from eggshell.stages.index import step_of

    step = step_of(Provider(Settings(mode="semantic", top_k=3, anchor_k=0, threshold=REPORT_FLOOR), str(tmp_path)))
    [reply] = step({"query": {"text": "why does the build cache miss on CI?"},
                    "candidates": [{"id": "a", "text": "the CI cache key includes the lockfile hash"}, {"id": "b", "text": "a recipe for bread"}]})
    assert reply["related"] == [0, 1] and len(reply["scores"]) == 2  # every candidate of its depth, under 0.30 too
    assert Calibration.of(reply["calibration"]) is not None


def test_a_prompt_is_handed_at_most_top_k_turns_though_more_bear_on_it():
    from eggshell.graph.records import TurnView
    from eggshell.reuse.render import nominate

    views = [TurnView("id%d" % i, "s", "t%d" % i, "", "late_fee case %d" % i, "done", (), "", "x.egg") for i in range(4)]
    judged = R.judge("late_fee case", [(v, {"via": "ranked"}) for v in views], None)
    assert all(j.verdict.check == "anchor" for j in judged)
    assert nominate("late_fee case", judged, most=2) == ["id0", "id1"] and len(nominate("late_fee case", judged)) == 4
