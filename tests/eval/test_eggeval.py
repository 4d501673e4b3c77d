"""tests/eval/eggeval.py (the evaluation tool): metrics, the LoCoMo evidence parser, loaders and a lexical run on tiny files.

Nothing here reads the public data sets or loads the embedding model.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "eval"))
import eggeval as ev  # noqa: E402
import dayone  # noqa: E402
from eggshell.search import local
from eggshell.graph.records import OUTPUT_CAP, RECORD_CAP, searchable_text

# -- metrics -------------------------------------------------------------------------------


def test_recall_at_k_counts_relevant_items_in_the_top_k():
    ranked = [4, 2, 9, 1, 7, 3]
    assert ev.recall_at(ranked, {2}, 5) == 1.0
    assert ev.recall_at(ranked, {3}, 5) == 0.0  # rank 6
    assert ev.recall_at(ranked, {3}, 10) == 1.0
    assert ev.recall_at(ranked, {2, 3}, 5) == 0.5
    assert ev.recall_at(ranked, {2, 7, 8, 9}, 5) == 0.75
    assert ev.recall_at([], {1}, 5) == 0.0
    assert ev.recall_at(ranked, set(), 5) == 0.0


def test_reciprocal_rank_is_one_over_the_first_relevant_rank_within_the_cutoff():
    assert ev.reciprocal_rank([5, 6, 7], {5}) == 1.0
    assert ev.reciprocal_rank([5, 6, 7], {7, 6}) == 0.5
    assert ev.reciprocal_rank([5, 6, 7], {8}) == 0.0
    ranked = list(range(20))
    assert ev.reciprocal_rank(ranked, {9}) == pytest.approx(0.1)  # rank 10: inside the cutoff
    assert ev.reciprocal_rank(ranked, {10}) == 0.0  # rank 11: outside
    assert ev.reciprocal_rank(ranked, {10}, cutoff=20) == pytest.approx(1 / 11)


def test_score_averages_over_queries():
    # q1: relevant at rank 1; q2: relevant {a at 3, b at 7}; q3: relevant missing.
    rankings = [[1, 2, 3], [0, 0 + 10, 30, 11, 12, 13, 40], [5, 6]]
    relevants = [{1}, {30, 40}, {99}]
    s = ev.score(rankings, relevants)
    assert s.n == 3
    assert s.recall[5] == pytest.approx((1 + 0.5 + 0) / 3)
    assert s.recall[10] == pytest.approx((1 + 1 + 0) / 3)
    assert s.mrr == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert ev.score([], []).n == 0
    with pytest.raises(ValueError):
        ev.score([[1]], [])


# -- evidence ids --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given, want",
    [
        (["D1:3"], [(1, 3)]),
        (["D1:9", "D1:11"], [(1, 9), (1, 11)]),
        (["D:11:26"], [(11, 26)]),
        (["D8:6; D9:17"], [(8, 6), (9, 17)]),
        (["D30:05"], [(30, 5)]),
        (["D9:1 D4:4 D4:6"], [(9, 1), (4, 4), (4, 6)]),
        (["D"], []),
        ([], []),
        (None, []),
        (["D2:1", "D2:1", 7, None], [(2, 1)]),
        ("D3:4", [(3, 4)]),
    ],
)
def test_parse_evidence_is_lenient(given, want):
    assert ev.parse_evidence(given) == want


# -- loaders -------------------------------------------------------------------------------

LOCOMO = [
    {
        "sample_id": "conv-a",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:00 pm on 1 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Rex."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely! What breed?", "blip_caption": "a photo of a dog"},
            ],
            "session_2_date_time": "2:00 pm on 9 June, 2023",
            "session_2": [
                {"speaker": "Bo", "dia_id": "D2:1", "text": "I started pottery classes."},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "Pottery sounds fun, I bake bread."},
            ],
        },
        "qa": [
            {"question": "What is the name of Ann's puppy?", "answer": "Rex", "evidence": ["D1:1"], "category": 1},
            {"question": "What class did Bo start?", "answer": "pottery", "evidence": ["D:2:1"], "category": 4},
            {"question": "What do they both like?", "answer": "x", "evidence": ["D1:2; D2:2"], "category": 3},
            {"question": "No evidence here?", "answer": "x", "evidence": [], "category": 2},
            {"question": "Bad evidence?", "answer": "x", "evidence": ["D7:1", "D"], "category": 5},
        ],
    },
    {
        "sample_id": "conv-b",
        "conversation": {"session_1": [{"speaker": "Cy", "dia_id": "D1:1", "text": "My puppy is called Max."}]},
        "qa": [{"question": "What is the puppy called?", "evidence": ["D1:01"], "category": 5}],
    },
]


@pytest.fixture
def data(tmp_path):
    (tmp_path / ev.LOCOMO_FILE).write_text(json.dumps(LOCOMO), encoding="utf-8")
    lines = [
        {"kind": "record", "id": "msa:a-1", "prompt": "late_fee is wrong for overdue invoices", "answer": "diff --git a/billing/fees.py b/billing/fees.py\n+late_fee = 5",
         "tools": [{"name": "Bash", "input": {"command": "grep -rn late_fee billing/"}, "output": "billing/fees.py:3: late_fee = 0\n" + "x" * 3000}], "meta": {}},
        {"kind": "record", "id": "msa:b-2", "prompt": "Bread recipe crashes the oven timer", "answer": "patch oven.py",
         "tools": [{"name": "Bash", "input": {"command": "cat oven.py"}, "output": "def timer(): pass"}], "meta": {}},
        {"kind": "record", "id": "msa:c-3", "prompt": "Overdue invoices ignore the late fee", "answer": "", "tools": [], "meta": {}},
        {"kind": "query", "id": "related:x", "set": "related", "text": "late fee on overdue invoices is computed wrongly", "relevant": ["msa:a-1"], "same_issue": ["msa:c-3"]},
        {"kind": "query", "id": "crossagent:b", "set": "crossagent", "text": "the oven timer crashes with a bread recipe", "relevant": ["msa:b-2"]},
        {"kind": "query", "id": "related:y", "set": "related", "text": "nothing known", "relevant": ["msa:gone"]},
    ]
    (tmp_path / ev.SWE_FILE).write_text("".join(json.dumps(l) + "\n" for l in lines), encoding="utf-8")
    return tmp_path


def test_load_locomo_builds_session_and_turn_pools_per_conversation(data):
    sess, turn = ev.load_locomo(str(data / ev.LOCOMO_FILE), "date")
    assert sess.pools[0] == [
        "1:00 pm on 1 May, 2023\nAnn: I adopted a puppy named Rex.\nBo: Lovely! What breed?",
        "2:00 pm on 9 June, 2023\nBo: I started pottery classes.\nAnn: Pottery sounds fun, I bake bread.",
    ]
    assert turn.pools[0][2] == "2:00 pm on 9 June, 2023\nBo: I started pottery classes."
    assert sess.pools[1] == ["Cy: My puppy is called Max."]  # no date line to add
    assert [(c.relevant, c.category, c.pool) for c in sess.cases] == [
        ({0}, "1", 0), ({1}, "4", 0), ({0, 1}, "3", 0), ({0}, "5", 1)]
    assert [c.relevant for c in turn.cases] == [{0}, {2}, {1, 3}, {0}]
    assert sess.skipped == {"no evidence": 1, "no usable evidence id": 1}


def test_load_locomo_plain_and_image_texts(data):
    sess, turn = ev.load_locomo(str(data / ev.LOCOMO_FILE), "plain")
    assert sess.pools[0][0] == "Ann: I adopted a puppy named Rex.\nBo: Lovely! What breed?"
    _, turn = ev.load_locomo(str(data / ev.LOCOMO_FILE), "image")
    assert turn.pools[0][1] == "Bo: Lovely! What breed? [shares an image: a photo of a dog]"
    with pytest.raises(ValueError):
        ev.load_locomo(str(data / ev.LOCOMO_FILE), "nope")


def test_load_swe_full_is_the_products_searchable_text(data):
    task = ev.load_swe(str(data / ev.SWE_FILE), "full")
    view = ev.swe_view({"id": "msa:a-1", "prompt": "p", "answer": "a", "tools": [{"name": "Bash", "input": {"command": "ls"}, "output": "y" * 5000}]})
    assert ev.swe_text(view, "full") == searchable_text(view) == "p\na\nls\n" + "y" * OUTPUT_CAP
    assert task.pools[0][0].startswith("late_fee is wrong for overdue invoices\ndiff --git")
    assert "grep -rn late_fee billing/" in task.pools[0][0] and "x" * (OUTPUT_CAP - 40) in task.pools[0][0]
    assert "x" * (OUTPUT_CAP + 1) not in task.pools[0][0]
    assert [(c.group, c.relevant, c.drop) for c in task.cases] == [("related", {0}, {2}), ("crossagent", {1}, frozenset())]
    assert task.skipped == {"no known relevant record": 1}


def test_swe_compositions(data):
    rec = {"id": "r", "prompt": "P", "answer": "diff --git a/src/app.py b/src/app.py", "tools": [
        {"name": "Bash", "input": {"command": "cat setup.cfg"}, "output": "O" * 2000}]}
    view = ev.swe_view(rec)
    assert ev.swe_text(view, "prompt") == "P"
    assert ev.swe_text(view, "prompt+answer") == "P\ndiff --git a/src/app.py b/src/app.py"
    assert ev.swe_text(view, "prompt+commands") == "P\ncat setup.cfg"
    assert ev.swe_text(view, "prompt+answer+commands+outputs") == "P\n%s\ncat setup.cfg\n%s" % (rec["answer"], "O" * OUTPUT_CAP)
    assert ev.swe_text(view, "prompt+answer+paths").endswith("a/src/app.py b/src/app.py setup.cfg")
    big = ev.swe_view({"id": "r", "prompt": "P" * (RECORD_CAP + 10), "tools": []})
    assert len(ev.swe_text(big, "full")) == len(ev.swe_text(big, "prompt")) == RECORD_CAP
    assert len(ev.swe_text(big, "full-nocap")) == RECORD_CAP + 10
    with pytest.raises(ValueError):
        ev.swe_text(view, "nope")


def test_paths_of_finds_file_like_tokens_once():
    assert ev.paths_of(["edit src/pkg/mod.py and setup.cfg", "src/pkg/mod.py:12: x", "v1.2 3.14 docs/api"]) == [
        "src/pkg/mod.py", "setup.cfg", "docs/api"]


# -- running ---------------------------------------------------------------------------------


def test_a_lexical_run_ranks_through_the_provider_and_drops_same_issue(data):
    task = ev.load_swe(str(data / ev.SWE_FILE), "full")
    run = ev.run_task(task, ["lexical"], 0.3, ev.SWEEP, cache="/nonexistent", data_root=None)
    got = run.rankings[("lexical", 0.3)]
    assert got[0][0] == 0 and 2 not in got[0]  # msa:c-3 is the same issue: never ranked
    assert got[1][0] == 1
    assert run.checked == 2 and run.mismatches == 0
    assert run.index_s == 0 and run.indexed == 0  # lexical mode embeds nothing
    s = ev.score(got, [c.relevant for c in run.cases])
    assert s.recall[5] == 1.0 and s.mrr == 1.0


def test_limit_keeps_the_first_n_queries_of_each_set(data):
    task = ev.load_swe(str(data / ev.SWE_FILE), "full")
    run = ev.run_task(task, ["lexical"], 0.3, (), cache="/nonexistent", data_root=None, limit=1)
    assert [c.group for c in run.cases] == ["related", "crossagent"]


def test_fusion_options_are_product_settings_checked_against_the_provider(data):
    task = ev.load_swe(str(data / ev.SWE_FILE), "full")
    base = ev.run_task(task, ["lexical"], 0.3, (), cache="/x", data_root=None)
    rrf = ev.run_task(task, ["lexical"], 0.3, (), cache="/x", data_root=None, rule=ev.Rule("rrf"), anchor_k=2)
    assert rrf.rankings == base.rankings  # the hybrid rule leaves lexical alone
    assert rrf.checked == 2 and rrf.mismatches == 0  # and the reference's rule is still the provider's
    heavy = ev.run_task(task, ["lexical"], 0.3, (), cache="/x", data_root=None, rule=ev.Rule("score", (1.0, 0.0, 0.0)))
    assert heavy.checked == 2 and heavy.mismatches == 0


def test_product_settings_go_through_the_provider(data):
    task = ev.load_swe(str(data / ev.SWE_FILE), "full")
    run = ev.run_task(task, ["lexical"], 0.3, (), cache="/x", data_root=None, anchor_k=0, k1=0.9, b=0.4)
    assert run.checked == 2 and run.mismatches == 0


def test_main_prints_a_markdown_table(data, capsys):
    assert ev.main([str(data), "--modes", "lexical", "--text", "prompt,full", "--locomo-text", "plain"]) == 0
    out = capsys.readouterr().out
    assert "| set | text | queries | mode | R@5 | R@10 | MRR |" in out
    assert "| locomo-session | plain | 4 | lexical |" in out
    assert "| swe related | prompt | 1 | lexical | 1.000 | 1.000 | 1.000 |" in out
    assert "| swe crossagent | full | 1 | lexical |" in out
    assert "By LoCoMo category" in out and "threshold sweep" not in out
    assert local.terms.__module__ == "eggshell.search.terms"  # the memo is undone


def test_main_reports_missing_data(tmp_path, capsys):
    assert ev.main([str(tmp_path), "--modes", "lexical"]) == 2
    assert "missing" in capsys.readouterr().err


def test_bad_options_are_usage_errors(data):
    for argv in (["--sets", "nope"], ["--modes", "lexical,x"], ["--text", "prompt,bad"], ["--threshold", "2"], ["--weights", "1"],
                 ["--anchor-k", "-1"], ["--b", "1.5"], ["--fusion", "max"], ["--weights", "1,2"]):
        with pytest.raises(SystemExit) as e:
            ev.main([str(data), *argv])
        assert e.value.code == 2


def test_terms_are_memoized_and_stemmed_as_the_product_does(data):
    restore = ev._memoize_terms()
    try:
        assert list(local.terms("adopted puppies late_fee")) == ["adopt", "puppi", "late_fee", "late", "fee"]
        assert local.terms("adopted") is local.terms("adopted")  # one tokenization per text
    finally:
        restore()
    assert local.terms("adopted") == ["adopt"]


# -- the handoff a new chat gets -----------------------------------------------------------------

FEES_OUT = "billing/fees.py:3: late_fee = 0\n" + "".join("billing/fees.py:%d:     total += line.amount  # overdue\n" % i for i in range(4, 60))
RUNS = [
    {"kind": "record", "id": "msa:a-1", "prompt": "late_fee is wrong for overdue invoices",
     "answer": "diff --git a/billing/fees.py b/billing/fees.py\n+late_fee = 5",
     "tools": [{"name": "Bash", "input": {"command": "grep -rn late_fee billing/"}, "output": FEES_OUT}], "meta": {}},
    {"kind": "record", "id": "msa:b-2", "prompt": "Bread recipe crashes the oven timer", "answer": "patch the oven timer",
     "tools": [{"name": "Bash", "input": {"command": "cat oven.py"}, "output": "def timer(): pass"}], "meta": {}},
    {"kind": "record", "id": "msa:d-4", "prompt": "sprocket torque overflows in the gearbox", "answer": "fixed gears/torque.py",
     "tools": [{"name": "Bash", "input": {"command": "sed -n 1,40p gears/torque.py"}, "output": "def torque(sprocket): ..."}], "meta": {}},
]
FEES_Q = ev.Question("related:fees", "late fee on overdue invoices is computed wrongly", "related", ("billing/fees.py",), "msa:a-1")
OVEN_Q = ev.Question("related:oven", "the oven timer crashes with a bread recipe", "related", ("kitchen/clock.py",), "msa:b-2")
TORQUE_Q = ev.Question("related:torque", "the sprocket torque overflows in the gearbox", "related", ("gears/torque.py",), "msa:b-2")
UNRELATED_Q = ev.Question("conv-x#0", "When did Caroline go to the LGBTQ support group?", "unrelated")


@pytest.fixture
def chat(tmp_path):
    c = ev.NewChat(str(tmp_path / "m"), str(tmp_path / "cache"), "lexical")
    c.write(RUNS, isolate={"msa:d-4"})
    yield c
    c.close()


def test_a_handoff_counts_only_when_it_names_a_gold_file(chat):
    by_id = {r["id"]: r for r in RUNS}
    fees = ev.judge(chat, FEES_Q, by_id)
    assert fees.text and fees.named == ("billing/fees.py",) and fees.ceiling == ("billing/fees.py",)
    assert fees.linked == "shown" and fees.linked_rank == 1 and fees.hits >= 1
    oven = ev.judge(chat, OVEN_Q, by_id)
    assert oven.text and "oven" in oven.text  # a handoff, but not one that points at the fix
    assert oven.named == () and oven.ceiling == ()
    none = ev.judge(chat, UNRELATED_Q, by_id)
    assert none.text == "" and none.share is None and none.top is None


def test_a_questions_same_issue_runs_are_not_in_what_it_reads(chat):
    by_id = {r["id"]: r for r in RUNS}
    assert chat.reads() == (chat.main, chat.alone["msa:d-4"])
    assert chat.reads({"msa:d-4"}) == (chat.main,)
    seen = ev.judge(chat, TORQUE_Q, by_id)
    assert seen.named == ("gears/torque.py",)
    hidden = ev.judge(chat, ev.Question(TORQUE_Q.id, TORQUE_Q.text, "related", TORQUE_Q.gold, "msa:b-2", frozenset({"msa:d-4"})), by_id)
    assert hidden.named == ()


def test_names_file_needs_the_whole_repository_path():
    p = "astropy/io/fits/card.py"
    for text in ("see /testbed/astropy/io/fits/card.py:12", "--- a/astropy/io/fits/card.py", "open ./astropy/io/fits/card.py.", p):
        assert ev.names_file(text, p), text
    for text in ("card.py", "io/fits/card.py", "astropy/io/fits/card.pyc", "xastropy/io/fits/card.py", "astropy/io/fits/card.py/x"):
        assert not ev.names_file(text, p), text
    assert ev.named("a/b.py and c/d.py", ["c/d.py", "e.py", "a/b.py"]) == ("c/d.py", "a/b.py")


def test_the_data_share_counts_recorded_data_not_frame(chat):
    by_id = {r["id"]: r for r in RUNS}
    fees, oven = ev.judge(chat, FEES_Q, by_id), ev.judge(chat, OVEN_Q, by_id)
    for h in (fees, oven):
        assert sum(h.parts.values()) == len(h.text)
        assert 0 < h.share < 1
    from eggshell.reuse import render as handoff

    # what the handoff quotes (the prior request, its answer, outputs) is data; its own words are frame
    quoted = "".join(x for k, x in handoff.parse(fees.text) if k != "frame")
    assert quoted and ev.data_chars(fees.parts) > 0 and 0 < fees.share < 1
    assert "EGGSHELL PRIOR WORK" not in quoted
    assert ev.data_share(fees.text) == pytest.approx(fees.share)
    assert ev.data_share("EGGSHELL PRIOR WORK\nno data at all\n") == 0.0


def test_handoff_score_and_report_are_computed_from_the_answers():
    def h(kind, text, named=(), ceiling=(), top=None, share=None):
        return ev.Handed(ev.Question("q", "t", kind), text, top, 1 if top is not None else 0, named, ceiling, None, "absent", share)

    run = ev.HandoffRun(
        [h("related", "x" * 100, ("a.py",), ("a.py",), 0.9, 0.7), h("related", "x" * 300, (), ("b.py",), 0.8, 0.3), h("related", "")],
        [h("unrelated", ""), h("unrelated", "y" * 50, top=0.5, share=0.1), h("unrelated", ""), h("unrelated", "")])
    s = ev.handoff_score(run)
    assert (s.related, s.unrelated) == (3, 4)
    assert s.gold == pytest.approx(1 / 3) and s.ceiling == pytest.approx(2 / 3) and s.handed == pytest.approx(2 / 3)
    assert s.median_chars == 200 and s.share_mean == pytest.approx(0.5) and s.unrelated_handed == 0.25
    out = "\n".join(ev.handoff_report(run))
    assert "| handoff names a gold file | 0.333 | ≥ 0.60 | missed |" in out
    assert "| unrelated questions given a handoff | 0.250 | ≤ 0.10 | missed |" in out


def test_main_measures_handoffs(data, capsys):
    recs = [json.loads(line) for line in (data / ev.SWE_FILE).read_text().splitlines()]
    recs = [r for r in recs if r["kind"] == "record"] + RUNS + [
        {"kind": "query", "id": "related:fees", "set": "related", "text": FEES_Q.text, "relevant": ["msa:a-1"], "gold_files": ["billing/fees.py"]}]
    (data / ev.SWE_FILE).write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    assert ev.main([str(data), "--sets", "handoff", "--modes", "lexical"]) == 0
    out = capsys.readouterr().out
    assert "## Recall and MRR" not in out
    assert "| handoff names a gold file | 1.000 | ≥ 0.60 | met |" in out
    assert "| ceiling: the linked prior run names one | 1.000 | | |" in out


# -- day one (issue 29): small stores, three forms of a query, a choosing and a held-out half -----

def _filler(n: int) -> dict:
    return {"kind": "record", "id": "msa:f-%d" % n, "prompt": "gizmo %d widget frobnication" % n, "answer": "patch gizmo/w%d.py" % n,
            "tools": [{"name": "Bash", "input": {"command": "cat gizmo/w%d.py" % n}, "output": "def frob(): return %d" % n}], "meta": {}}


FILLERS = [_filler(n) for n in range(60)]
DAY_Q = ev.Question("related:fees", FEES_Q.text, "related", ("billing/fees.py",), "msa:a-1", frozenset({"msa:c-3"}), ("msa:a-1",))


def test_dayone_stores_hold_the_prior_run_then_nested_deterministic_fillers():
    ids = [r["id"] for r in RUNS] + [r["id"] for r in FILLERS] + ["msa:c-3", "msa:fees"]
    runs = dayone.store_runs(DAY_Q, ids)
    assert {s: len(r) for s, r in runs.items()} == {1: 1, 5: 5, 50: 50}
    assert all(r[0] == "msa:a-1" for r in runs.values())
    assert runs[50][:5] == runs[5] and len(set(runs[50])) == 50
    # never the relevant run again, a same_issue run, or the later task's own run
    assert not {"msa:c-3", "msa:fees"} & set(runs[50]) and runs[50].count("msa:a-1") == 1
    assert dayone.store_runs(DAY_Q, list(reversed(ids))) == runs  # file order does not matter
    other = dayone.store_runs(ev.Question("related:other", "t", "related", (), "msa:a-1"), ids)
    assert other[50] != runs[50]  # each query draws its own


def test_dayone_halves_split_deterministically_whatever_the_order():
    ids = ["related:q%d" % n for n in range(45)]
    halves = dayone.split_halves(ids)
    assert halves == dayone.split_halves(reversed(ids))
    assert sorted(halves.values()).count("choose") == 23 and sorted(halves.values()).count("held-out") == 22
    assert dayone.split_halves(ids[:2]) != {} and set(dayone.split_halves(["a"]).values()) == {"choose"}
    assert not all(halves[i] == "choose" for i in ids[:23])  # not by file order


def test_dayone_title_is_the_first_line_or_its_first_sentence():
    assert dayone.title_of("\n  Late fee is wrong  \nbody text") == "Late fee is wrong"
    long = "The late fee is wrong. " + "x" * 300
    assert dayone.title_of(long) == "The late fee is wrong."
    assert len(dayone.title_of("y" * 500)) == dayone.TITLE_CHARS


def test_the_chat_follow_ups_are_many_varied_and_cover_every_intent():
    rows = dayone.read_chat()
    assert len(rows) >= 40 and all(r["id"].startswith("related:") for r in rows.values())
    assert {r["intent"] for r in rows.values()} == {"change", "why", "test", "where"}
    assert all(len(r["text"].split()) <= 25 for r in rows.values())  # short, as typed in a chat
    assert len({r["text"] for r in rows.values()}) == len(rows)


def test_dayone_scores_a_handoff_hit_and_miss_through_the_prompt_hook(tmp_path):
    c = ev.NewChat(str(tmp_path / "m"), str(tmp_path / "cache"), "lexical")
    try:
        one = c.write_store("one", [RUNS[0]])
        keys = c.keys_of("msa:a-1")
        text, _ = c.ask_in(FEES_Q.text, (one,))
        hit = dayone.score_related(DAY_Q, text, keys, 1, "full", "choose")
        assert hit.hit and hit.shown and hit.gold and hit.chars == len(text) > 0
        text, _ = c.ask_in(UNRELATED_Q.text, (one,))
        assert text == "" and dayone.score_unrelated(UNRELATED_Q, text, 1).chars == 0
        miss = dayone.score_related(DAY_Q, "", keys, 1, "chat", "held-out")
        assert not (miss.hit or miss.shown or miss.gold)
        other = dayone.score_related(DAY_Q, "EGGSHELL PRIOR WORK\nsome other run's work in billing/fees.py\n", keys, 1, "chat", "choose")
        assert not other.hit and other.gold  # a gold file named by another run is not the prior run
    finally:
        c.close()


def test_dayone_run_and_report_on_tiny_data(data, tmp_path):
    lines = RUNS + FILLERS + [{"kind": "query", "id": "related:fees", "set": "related", "text": FEES_Q.text, "relevant": ["msa:a-1"],
                               "gold_files": ["billing/fees.py"]}]
    swe = tmp_path / "swe.jsonl"
    swe.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    follow = tmp_path / "chat.jsonl"
    follow.write_text(json.dumps({"id": "related:fees", "intent": "change", "text": "what if the late fee were higher?"}) + "\n")
    run = dayone.run_dayone(str(swe), str(data / ev.LOCOMO_FILE), str(tmp_path / "cache"), str(tmp_path / "root"), mode="lexical",
                            chat_path=str(follow), sizes=(1, 3))
    assert run.scenarios == 1 and run.stores == 2
    rel = [a for a in run.asked if a.kind == "related"]
    assert sorted((a.size, a.form) for a in rel) == sorted((s, f) for s in (1, 3) for f in dayone.FORMS)
    assert all(a.hit for a in rel if a.form == "full")
    n_unrel = len(ev.unrelated_questions(str(data / ev.LOCOMO_FILE))) + len(dayone.CODE_QUESTIONS)
    assert sum(a.kind != "related" for a in run.asked) == 2 * n_unrel
    out = "\n".join(dayone.report(run, (1, 3)))
    assert "| full | all | 1.000 (1) | 1.000 (1) |" in out and "| code |" in out
    assert all(a.intent == "change" for a in rel) and "| change |" in out
    with pytest.raises(dayone.NoScenarios):
        dayone.run_dayone(str(swe), str(data / ev.LOCOMO_FILE), str(tmp_path / "cache"), str(tmp_path / "r2"), mode="lexical")
