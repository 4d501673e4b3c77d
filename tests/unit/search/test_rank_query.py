"""rank.py (BM25) and search/searcher.py (egg-query): lexical retrieval of prior turns.

Requirements: egg-query reads `{"query":{"text":...}}` lines and writes one
`{"hits":[...]}` line per query line (a malformed line gets `{"hits":[],"error":...}`
and the exit status is 1); each hit has id (content id), key (12-hex display key),
rank, score, session, turn; ranking is BM25, best first; an unrelated query gets no
hits; several --egg stores are searched.
"""

from __future__ import annotations

import io
import json
import math
import re
import shutil
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eggshell.stages import query

from eggshell.search.rank import DEFAULT_TOP_K

from eggshell.search.searcher import DEFAULT_MIN_COVERAGE, Searcher, query_text, semantic_depth
from eggshell.stages import common as stage
from eggshell.core.identity import content_hex
from eggshell.search.rank import BM25
from eggshell.graph.records import turn_views
from eggshell.graph.save import save_turn
from eggshell.graph.store import Store
from helpers import bash, tool_call, turn_record

# -- BM25 against an independent reference ------------------------------------------------


def ref_bm25(docs, query, k1=1.2, b=0.75, k3=5.0):
    """Okapi BM25 with the non-negative idf log(1 + (N - n + .5) / (n + .5)) and Robertson's
    query-term factor (k3 + 1) qtf / (k3 + qtf), written from the textbook; coverage: the idf
    share of the query's terms this one holds, of which at most three that no document holds count."""
    n_docs = len(docs)
    avgdl = sum(map(len, docs)) / n_docs
    qtf = Counter(query)
    q = list(dict.fromkeys(query))
    idf = {}
    for t in q:
        n = sum(1 for d in docs if t in d)
        idf[t] = math.log(1 + (n_docs - n + 0.5) / (n + 0.5))
    out = []
    for i, d in enumerate(docs):
        tf = Counter(d)
        s = sum((k3 + 1) * qtf[t] / (k3 + qtf[t]) * idf[t] * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / avgdl))
                for t in q if tf[t])
        held_somewhere = [t for t in q if any(t in e for e in docs)]
        nowhere = [t for t in q if t not in held_somewhere][:3]
        cov = sum(idf[t] for t in q if tf[t]) / (sum(idf[t] for t in held_somewhere + nowhere) or 1.0)
        out.append((i, s, cov))
    return out


_vocab = st.sampled_from(["fee", "late", "build", "test", "lock", "cache", "node", "rust", "go", "db"])
_docs = st.lists(st.lists(_vocab, min_size=1, max_size=12), min_size=1, max_size=8)
_query = st.lists(st.one_of(_vocab, st.sampled_from(["unseen", "nowhere", "absent", "missing", "gone"])), min_size=1, max_size=14)


@given(_docs, _query, st.sampled_from([0.0, 0.2, 0.5, 1.0]), st.integers(1, 10))
def test_bm25_matches_reference(docs, q, min_cov, top_k):
    got = BM25(docs).search(q, top_k=top_k, min_coverage=min_cov)
    floor = min_cov * min(1.0, 8 / len(set(q)))  # the floor shrinks past eight distinct terms
    ref = [(i, s, c) for i, s, c in ref_bm25(docs, q) if s > 0]
    if not any(c >= floor - 1e-12 for _, _, c in ref):  # a gate on the query: none clears it, nothing
        ref = []
    ref.sort(key=lambda x: (-x[1], x[0]))
    ref = ref[:top_k]
    assert [g.index for g in got] == [r[0] for r in ref]
    for g, r in zip(got, ref):
        assert g.score == pytest.approx(r[1])
        assert g.coverage == pytest.approx(r[2])


@given(_docs, _query)
def test_bm25_best_first_ties_by_document_order(docs, q):
    got = BM25(docs).search(q, top_k=100)
    assert [(-s.score, s.index) for s in got] == sorted((-s.score, s.index) for s in got)
    # only documents that share a term with the query
    assert all(set(q) & set(docs[s.index]) for s in got)
    assert {s.index for s in got} == {i for i, d in enumerate(docs) if set(q) & set(d)}


def test_a_term_the_query_repeats_counts_more_up_to_a_limit():
    """A pasted issue names the function it is about again and again; a short question says each
    word once and ranks as plain BM25 would."""
    from eggshell.search.rank import K3, query_weights

    docs = [["fee", "late"], ["rate", "daily"]]
    once = BM25(docs).search(["fee", "rate"])
    assert once[0].score == pytest.approx(once[1].score)  # equal footing: one mention each
    got = BM25(docs).search(["fee", "rate", "rate", "rate"])
    assert [g.index for g in got] == [1, 0]
    w = query_weights(["rate"] * 1000 + ["fee"])
    assert w["fee"] == 1.0 and 1.0 < w["rate"] < K3 + 1 and list(w) == ["rate", "fee"]


def test_bm25_rare_term_outweighs_common_term():
    docs = [["build", "fee"], ["build", "cache"], ["build", "lock"], ["build", "node"]]
    got = BM25(docs).search(["build", "fee"])
    assert got[0].index == 0
    assert got[0].score > got[1].score


def test_bm25_higher_term_frequency_scores_higher_at_equal_length():
    docs = [["fee", "x", "y", "z"], ["fee", "fee", "fee", "z"], ["a", "b", "c", "d"]]
    got = BM25(docs).search(["fee"])
    assert [s.index for s in got] == [1, 0]


def test_min_coverage_gates_the_query_and_leaves_the_ranking_to_bm25():
    """A query only a generic word of which memory holds gets nothing; once one record holds
    its share, the records sharing less still rank below it (a short question may share one
    rare word with its answer: cutting each record by the floor lost those)."""
    docs = [["project", "late", "fee", "billing"], ["project", "docker", "image"], ["project", "readme"], ["other"]]
    q = ["project", "late", "fee"]
    assert [s.index for s in BM25(docs).search(q, min_coverage=0.2)] == [0, 2, 1]
    assert [s.index for s in BM25(docs).search(q, min_coverage=0.0)] == [0, 2, 1]
    generic = ["project", "kubernetes", "cluster"]
    assert BM25(docs).search(generic, min_coverage=0.2) == []
    assert {s.index for s in BM25(docs).search(generic, min_coverage=0.0)} == {0, 1, 2}


def test_a_long_query_of_words_no_record_has_still_finds_the_record_it_names():
    """A pasted issue: two words name the record, twenty appear in no record at all. Only three of
    those count against the floor, so the record stays above it; the same two words beside three
    unknown ones still count as the partial match they are."""
    docs = [["parse", "config", "toml", "loader"], ["docker", "image", "build"], ["readme", "intro"]]
    q = ["parse", "config"] + ["w%d" % i for i in range(20)]
    got = BM25(docs).search(q, min_coverage=0.2)
    held, unknown = 2 * math.log(1 + 2.5 / 1.5), 3 * math.log(1 + 3.5 / 0.5)  # idf: in 1 of 3 records, in none
    assert [s.index for s in got] == [0] and got[0].coverage == pytest.approx(held / (held + unknown))
    assert BM25(docs).search(["parse", "config", "w1", "w2", "w3"])[0].coverage == pytest.approx(got[0].coverage)
    assert BM25(docs).search(["w1", "w2"], min_coverage=0.0) == []  # nothing held: nothing found


def test_the_floor_shrinks_for_a_query_of_many_known_words():
    """A long question shares a few words with the record that answers it and a few with others;
    the record's share of a sixteen-word query is small, yet it is the answer. Past eight distinct
    terms the floor scales by 8/n; a five-word query keeps the whole floor."""
    docs = [["parse", "config", "toml"]] + [["w%d" % i, "filler"] for i in range(14)]
    q = ["parse", "config"] + ["w%d" % i for i in range(14)]
    got = BM25(docs).search(q, top_k=20, min_coverage=0.2)
    assert got and got[0].coverage < 0.2 and 0 in {s.index for s in got}
    assert got[0].coverage >= 0.2 * 8 / 16 - 1e-12
    short = ["parse", "w1", "w2", "w3", "w4"]
    assert len(BM25(docs).search(short, top_k=20, min_coverage=0.19)) == 5  # each record holds a fifth
    assert BM25(docs).search(short, top_k=20, min_coverage=0.21) == []


def test_bm25_empty_inputs():
    assert BM25([]).search(["fee"]) == []
    assert BM25([["fee"]]).search([]) == []
    assert BM25([["fee"]]).search(["zzz"]) == []


def test_bm25_top_k_limits():
    docs = [["fee"] for _ in range(10)]
    assert len(BM25(docs).search(["fee"], top_k=3)) == 3
    assert [s.index for s in BM25(docs).search(["fee"], top_k=3)] == [0, 1, 2]


# -- Searcher over .egg stores --------------------------------------------------------------

LATE_FEE = turn_record(
    session="sess-a",
    turn="t-late-fee",
    prompt="where is late_fee computed?",
    tools=[bash("grep -rn late_fee src/", "src/billing.py:42: def late_fee(days):\n")],
    answer="late_fee is computed in src/billing.py, line 42",
)
FRONTEND = turn_record(
    session="sess-a",
    turn="t-frontend",
    prompt="run the frontend unit tests",
    tools=[bash("npm test", "12 passing\n")],
    answer="all 12 frontend tests pass",
)
DOCKER = turn_record(
    session="sess-b",
    turn="t-docker",
    prompt="why does the docker image build fail?",
    tools=[bash("docker build .", "ERROR: failed to solve: python:3.99 not found\n")],
    answer="the base image tag python:3.99 does not exist",
)
LATE_FEE_TESTS = turn_record(
    session="sess-b",
    turn="t-late-fee-tests",
    prompt="add tests for late_fee rounding",
    tools=[bash("pytest tests/test_billing.py", "3 passed\n")],
    answer="added three late_fee rounding tests in tests/test_billing.py",
)


def make_store(path, records):
    s = Store.open(path)
    for r in records:
        save_turn(s, r, root="/")
    return Store.open(path)


@pytest.fixture
def one_store(egg):
    return make_store(egg, [LATE_FEE, FRONTEND, DOCKER, LATE_FEE_TESTS])


def test_hit_fields(one_store):
    hits = Searcher([one_store]).search("how is the late_fee calculated")
    assert hits
    ids_in_store = set(one_store.graph.nodes)
    views = {v.id: v for v in turn_views(one_store.graph)}
    for rank, h in enumerate(hits, 1):
        assert re.fullmatch(r"[0-9a-f]{64}", h.id) and h.id in ids_in_store
        assert h.key == h.id[:12] and re.fullmatch(r"[0-9a-f]{12}", h.key)
        assert h.rank == rank
        assert isinstance(h.score, float) and h.score > 0
        assert (h.session, h.turn) == (views[h.id].session, views[h.id].turn)
        assert h.store == one_store.path


def test_hit_id_is_the_turns_answer_outcome(one_store):
    hit = Searcher([one_store]).search("docker image build fail")[0]
    view = next(v for v in turn_views(one_store.graph) if v.id == hit.id)
    owner = one_store.graph.nodes[hit.id]
    assert content_hex(owner) == hit.id
    assert view.answer == DOCKER["answer"]


def test_best_first(one_store):
    hits = Searcher([one_store], anchor_k=0).search("late_fee rounding tests")
    assert [h.turn for h in hits][:2] == ["t-late-fee-tests", "t-late-fee"]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_anchor_matches_are_pinned_first(one_store):
    # `late_fee` is identifier-like: its best matches come first, in anchor order,
    # even where the whole-query ranking would put another turn first.
    plain = Searcher([one_store], anchor_k=0).search("late_fee rounding tests")
    pinned = Searcher([one_store], anchor_k=1).search("late_fee rounding tests")
    assert [h.turn for h in plain][0] == "t-late-fee-tests"
    assert [h.turn for h in pinned][0] == "t-late-fee"
    assert sorted(h.turn for h in plain) == sorted(h.turn for h in pinned)


def test_related_query_finds_the_turn(one_store):
    hits = Searcher([one_store]).search("the docker build fails again")
    assert hits[0].turn == "t-docker"


def test_unrelated_query_gets_no_hits(one_store):
    s = Searcher([one_store])
    assert s.search("kubernetes helm chart values") == []
    # a query sharing only a generic word with some turns is still unrelated
    assert s.search("configure the kubernetes tests cluster") == []


def test_top_k(one_store):
    s = Searcher([one_store])
    assert len(s.search("late_fee tests", top_k=1)) == 1
    assert len(s.search("late_fee tests", top_k=8)) >= 2


def test_search_finds_tool_output_text(one_store):
    hits = Searcher([one_store]).search("python:3.99 not found")
    assert hits and hits[0].turn == "t-docker"


def test_several_stores_are_searched(tmp_path):
    a = make_store(str(tmp_path / "a.egg"), [LATE_FEE])
    b = make_store(str(tmp_path / "b.egg"), [LATE_FEE_TESTS, DOCKER])
    hits = Searcher([a, b]).search("late_fee")
    assert {(h.turn, h.store) for h in hits} == {("t-late-fee", a.path), ("t-late-fee-tests", b.path)}
    # and each store alone only sees its own
    assert {h.turn for h in Searcher([b]).search("late_fee")} == {"t-late-fee-tests"}


def test_the_same_turn_in_two_stores_is_one_hit(tmp_path):
    a = make_store(str(tmp_path / "a.egg"), [LATE_FEE])
    shutil.copy(a.path, tmp_path / "copy.egg")
    hits = Searcher([a, Store.open(str(tmp_path / "copy.egg"))]).search("late_fee")
    assert len(hits) == 1 and hits[0].store == a.path


def test_searcher_sees_turns_committed_after_it_was_built(egg):
    s = Searcher([make_store(egg, [FRONTEND])])
    assert s.search("docker image") == []
    make_store(egg, [DOCKER])  # another writer appends
    assert [h.turn for h in s.search("docker image")] == ["t-docker"]


def test_empty_or_missing_store(egg):
    assert Searcher([Store.open(egg)]).search("late_fee") == []


# -- query.run: the NDJSON protocol ----------------------------------------------------------


def run_lines(store, text, top_k=DEFAULT_TOP_K, min_cov=DEFAULT_MIN_COVERAGE):
    out = io.StringIO()
    bad = query.run(Searcher([store]), io.StringIO(text), out, top_k, min_cov)
    return bad, [json.loads(line) for line in out.getvalue().splitlines()]


def test_run_writes_one_hits_line_per_query_in_order(one_store):
    text = "".join(json.dumps({"query": {"text": t}}) + "\n" for t in ["late_fee", "kubernetes helm", "docker build"])
    bad, lines = run_lines(one_store, text)
    assert bad == 0
    assert len(lines) == 3
    assert [ln["query"]["text"] for ln in lines] == ["late_fee", "kubernetes helm", "docker build"]
    assert lines[0]["hits"] and lines[1]["hits"] == [] and lines[2]["hits"][0]["turn"] == "t-docker"
    for h in lines[0]["hits"]:
        assert set(h) >= {"id", "key", "rank", "score", "session", "turn"}


def test_run_output_matches_searcher(one_store):
    s = Searcher([one_store])
    _, lines = run_lines(one_store, '{"query":{"text":"late_fee tests"}}\n', top_k=5)
    expect = [
        {"id": h.id, "key": h.key, "rank": h.rank, "score": h.score, "session": h.session, "turn": h.turn, "store": h.store,
         "semantic": h.semantic, "via": "ranked", "latest": h.latest}
        for h in s.search("late_fee tests", 5)
    ]
    assert lines[0]["hits"] == expect and [h["via"] for h in lines[0].get("candidates", [])] == [c.via for c in s.others]


def test_run_answers_malformed_lines_in_step(one_store):
    text = 'not json\n{"query":{"text":"late_fee"}}\n{"nope":1}\n[1,2]\n{"query":{"text":7}}\n\n{"query":"docker build"}\n'
    bad, lines = run_lines(one_store, text)
    assert bad == 4
    assert len(lines) == 6  # the blank line is skipped, every other line answered
    for i in (0, 2, 3, 4):
        assert lines[i]["hits"] == [] and isinstance(lines[i]["error"], str) and lines[i]["error"]
        assert "query" not in lines[i]
    assert "<stdin>:1" in lines[0]["error"] and "<stdin>:3" in lines[2]["error"]
    assert lines[1]["hits"] and "error" not in lines[1]
    assert lines[5]["hits"][0]["turn"] == "t-docker"  # a bare string query is accepted too


def test_run_warns_on_stderr_for_malformed_lines(one_store, capsys):
    run_lines(one_store, "garbage\n")
    err = capsys.readouterr().err
    assert err.startswith("egg-query: <stdin>:1: not valid JSON")


def test_main_exit_status(one_store, monkeypatch, capsys):
    def main(stdin, *args):
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        rc = query.main(["--egg", one_store.path, *args])
        return rc, capsys.readouterr().out

    rc, out = main('{"query":{"text":"late_fee"}}\n')
    assert rc == 0 and json.loads(out)["hits"]
    rc, out = main('{"query":{"text":"late_fee"}}\nbad\n')
    assert rc == 1 and len(out.splitlines()) == 2
    rc, out = main('{"query":{"text":"late_fee"}}\n', "--top-k", "1")
    assert rc == 0 and len(json.loads(out)["hits"]) == 1


def test_main_lists_the_configs_top_k_by_default(egg, tmp_path, monkeypatch, capsys):
    """egg-query's default is the config's top_k (5 unless set), as a chat's search gets."""
    store = make_store(egg, [turn_record(session="s", turn="t%d" % i, prompt="late_fee question %d" % i,
                                         tools=[bash("grep late_fee %d" % i, "late_fee %d\n" % i)], answer="late_fee %d" % i)
                             for i in range(9)])
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("EGGSHELL_PREFIX", str(tmp_path / "prefix"))  # no global config of the user's
    monkeypatch.delenv("EGGSHELL_CONFIG", raising=False)

    def hits(*args):
        monkeypatch.setattr("sys.stdin", io.StringIO('{"query":{"text":"late_fee"}}\n'))
        assert query.main(["--egg", store.path, "--mode", "lexical", "--no-trace", *args]) == 0
        return len(json.loads(capsys.readouterr().out)["hits"])

    assert hits() == 5
    assert hits("--top-k", "7") == 7
    (here / ".eggshell.toml").write_text("top_k = 3\n")
    assert hits() == 3


def test_main_refuses_a_store_that_does_not_exist(one_store, tmp_path, monkeypatch, capsys):
    """A --egg path that names no file is a usage error (exit 2, named on stderr), not "no hits"."""
    missing = str(tmp_path / "typo.egg")
    monkeypatch.setattr("sys.stdin", io.StringIO('{"query":{"text":"late_fee"}}\n'))
    assert query.main(["--egg", one_store.path, "--egg", missing]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err == ("egg-query: %s: no such store; nothing was searched (check the path: a store exists once a turn was "
                       "saved to it)\n" % missing)
    assert not (tmp_path / "typo.egg").exists()
    with pytest.raises(SystemExit):
        query.main(["--help"])
    assert "a --egg file that does not exist is one" in " ".join(capsys.readouterr().out.split())


def test_main_damaged_store_is_exit_2(one_store, monkeypatch, capsys):
    data = open(one_store.path, "rb").read().splitlines(keepends=True)
    data[1] = data[1].replace(b'"node":"', b'"node":"0', 1)  # a 65-character id
    open(one_store.path, "wb").write(b"".join(data))
    monkeypatch.setattr("sys.stdin", io.StringIO('{"query":{"text":"late_fee"}}\n'))
    assert query.main(["--egg", one_store.path]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.startswith("egg-query: %s:2:" % one_store.path)


def test_main_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        query.main([])  # --egg is required
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        query.main(["--egg", "x.egg", "--mode", "fuzzy"])
    assert e.value.code == 2


@pytest.mark.parametrize("args", [["--top-k", "-1"], ["--top-k", "0"], ["--min-coverage", "1.5"], ["--min-coverage", "-0.1"]])
def test_main_refuses_out_of_range_options(one_store, monkeypatch, capsys, args):
    monkeypatch.setattr("sys.stdin", io.StringIO('{"query":{"text":"late_fee tests"}}\n'))
    with pytest.raises(SystemExit) as e:
        query.main(["--egg", one_store.path, *args])
    assert e.value.code == 2


def test_query_text_accepts_object_and_string_forms():
    assert query_text({"query": {"text": "a"}}) == "a"
    assert query_text({"query": "a"}) == "a"
    for bad in (None, [], {"query": {}}, {"query": {"text": 1}}, {"text": "a"}):
        assert query_text(bad) is None


def test_stage_reader_numbers_lines_and_skips_blanks():
    got = list(stage.read_ndjson(io.StringIO('{"a":1}\n\n  \nxx\n'), "f"))
    assert got[0] == (1, {"a": 1})
    assert got[1][0] == 4 and isinstance(got[1][1], stage.InputError) and str(got[1][1]).startswith("f:4:")
    assert len(got) == 2


def test_a_stage_names_the_first_twenty_bad_lines_and_counts_the_rest(capsys):
    """300 bad lines (a converter that left out a field) give 20 named lines and one count;
    every bad line is still answered in step and counted in the exit status."""
    def step(obj):
        if "ok" not in obj:
            raise stage.Refused("missing 'ok'")
        yield {"fine": obj["ok"]}

    lines = io.StringIO("".join('{"n":%d}\n' % i for i in range(300)) + '{"ok":1}\n')
    out = io.StringIO()
    assert stage.loop("egg-x", step, lines, out, "f", refusal=lambda why: {"error": why}) == 300
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 21 and err[0].startswith("egg-x: f:1: missing 'ok'") and err[19].startswith("egg-x: f:20:")
    assert err[20] == "egg-x: 280 more bad lines not shown (300 in all)"
    assert out.getvalue().count('"error"') == 300 and out.getvalue().endswith('{"fine":1}\n')


def test_fixture_store_holds_the_four_turns(one_store):
    assert sorted(v.turn for v in turn_views(one_store.graph)) == sorted(
        r["turn"] for r in (LATE_FEE, FRONTEND, DOCKER, LATE_FEE_TESTS)
    )


# -- fusion: one rule for egg-index and egg-query (rank.fuse) ---------------------------------

from eggshell.search import local, rank  # noqa: E402
from eggshell.search.rank import Passages, blend  # noqa: E402
from eggshell.search.terms import terms  # noqa: E402


def test_blend_normalizes_each_list_from_its_floor_to_its_best():
    lex = [(0, 10.0), (1, 5.0)]
    sem = [(1, 0.8), (2, 0.55), (3, 0.3)]
    # lex: 0 -> 1, 1 -> .5 (floor 0); sem with floor .3: 1 -> 1, 2 -> .5, 3 -> 0
    got = dict(blend((0.7, lex, 0.0), (0.3, sem, 0.3)))
    assert got == pytest.approx({0: 0.7, 1: 0.35 + 0.3, 2: 0.15, 3: 0.0})
    assert [i for i, _ in blend((0.7, lex, 0.0), (0.3, sem, 0.3))] == [0, 1, 2, 3]
    # a margin counts: a decisive lexical winner is not outvoted by a weak semantic second
    assert blend((0.7, [(0, 9.0), (1, 1.0)], 0.0), (0.3, [(1, 0.9), (0, 0.85)], 0.3))[0][0] == 0
    assert blend() == [] and blend((1.0, [], 0.0)) == []
    assert [i for i, _ in blend((1.0, [(4, 2.0), (5, 2.0)], 0.0))] == [4, 5]  # ties: lower index


@given(st.lists(st.tuples(st.integers(0, 20), st.floats(0, 50)), max_size=15, unique_by=lambda x: x[0]),
       st.lists(st.tuples(st.integers(0, 20), st.floats(0.3, 1)), max_size=15, unique_by=lambda x: x[0]))
def test_blend_scores_lie_between_0_and_the_sum_of_weights(lex, sem):
    out = blend((0.55, lex, 0.0), (0.3, sem, 0.3))
    assert {i for i, _ in out} == {i for i, _ in lex} | {i for i, _ in sem}
    assert all(-1e-9 <= v <= 0.85 + 1e-9 for _, v in out)
    assert [v for _, v in out] == sorted((v for _, v in out), reverse=True)


def test_fuse_modes_and_the_reference_rule():
    lex, lines, sem = [(0, 8.0), (1, 6.0)], [(1, 5.0), (0, 1.0)], [(2, 0.9), (1, 0.6)]
    sel, ranking = rank.fuse("lexical", 8, 0, lex, sem, [], 3, lines)
    w = rank.WEIGHTS
    assert sel == [0, 1] and ranking == blend((w[0], lex, 0.0), (w[1], lines, 0.0))
    assert rank.fuse("semantic", 8, 0, lex, sem, [], 3, lines)[0] == [2, 1]
    hybrid = rank.fuse("hybrid", 8, 0, lex, sem, [], 3, lines)[0]
    assert hybrid == [1, 0, 2]  # in both lists, with the best line: 1 wins
    assert rank.fuse("hybrid", 8, 0, lex, sem, [], 3, lines, fusion="rrf")[0] == [i for i, _ in rank.rrf([0, 1], [2, 1])]
    assert rank.fuse("hybrid", 8, 1, lex, sem, [(2, 1.0)], 3, lines)[0][0] == 2  # anchors are pinned when asked


def test_the_best_line_of_a_long_record_is_found():
    texts = ["generic notes about the weather\n" * 40 + "the late fee is rounded half up in billing.py",
             "late fee", "billing overview\nrounding rules for invoices"]
    p = Passages(texts, terms)
    q = terms("is the late fee rounded half up")
    best = dict(p.best(q, [0, 1, 2]))
    assert best[0] > best[1] > 0  # the long record's one line holds every query word
    assert 2 in best and best[2] < best[0]
    assert p.best(terms("nothing matches"), [0, 1, 2]) == [] and p.best(q, []) == []
    # the lexical ranking puts the long record's answering line above the short partial match
    r = local.Provider(rank.Settings(mode="lexical")).rank("is the late fee rounded half up", texts)
    assert r.passages[0][0] == 0


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_egg_query_and_egg_index_rank_alike(one_store, egg, mode):
    """egg-query (its own BM25, the provider's semantic list with scores) and egg-index's
    own hybrid are the same rule over the same candidates."""
    from eggshell import config
    from eggshell.search import matcher

    sem = matcher.in_process(config.Config(), str(egg) + ".data", semantic_depth(8), print) if mode == "hybrid" else None
    s = Searcher([one_store], mode, sem)
    for text in ["how is the late_fee calculated", "docker build fails", "frontend tests", "rounding"]:
        hits = s.search(text, 8, 0.0)
        p = local.Provider(rank.Settings(mode=mode, top_k=8, cache_dir=str(egg) + ".data/semantic/vectors"))
        ranked = p.rank(text, [c["text"] for c in s.candidates])
        assert [h.id for h in hits] == [s.candidates[i]["id"] for i in ranked.selected], text


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=80))
def test_a_texts_terms_are_its_lines_terms_in_order(text):
    """lexical_index tokenizes each line once and joins them into the document."""
    from eggshell.search.rank import lexical_index

    bm25, _ = lexical_index([text], terms)
    from collections import Counter

    assert {t: bm25.tf(0, t) for t in set(terms(text))} == Counter(terms(text)) and bm25.lens[0] == len(terms(text))


# -- a warm searcher grows instead of rebuilding ------------------------------------------------


def test_bm25_and_passages_extended_equal_built_at_once():
    from eggshell.search.rank import BM25, Passages
    from eggshell.search.terms import terms

    texts = ["parse_config reads the file\nand returns a dict", "late_fee is computed in billing.py", "tests pass\n3 passed",
             "parse_config raises on empty input", "the billing module"]
    a = BM25([terms(t) for t in texts])
    b = BM25([terms(t) for t in texts[:2]])
    b.extend([terms(t) for t in texts[2:]])
    assert (a.lens, a.n, a.avgdl, a.postings) == (b.lens, b.n, b.avgdl, b.postings)
    p = Passages(texts, terms)
    q = Passages(texts[:3], terms)
    q.extend(texts[3:])
    assert (p.texts, p.df, p.n, p.avgdl) == (q.texts, q.df, q.n, q.avgdl)
    assert p.best(terms("parse_config empty"), [0, 3]) == q.best(terms("parse_config empty"), [0, 3])


def test_a_searcher_that_grew_answers_as_a_new_one(tmp_path):
    from eggshell.graph.save import save_turn
    egg = str(tmp_path / "w.egg")
    store = Store.open(egg)
    prompts = ["where is parse_config defined", "why does late_fee fail on weekends", "how are the billing tests run",
               "what does parse_config return", "fix the late_fee rounding", "list the billing modules"]
    for i, p in enumerate(prompts[:3]):
        save_turn(store, {"session": "s", "turn": "t%d" % i, "cwd": "", "prompt": p, "tools": [], "answer": "answer %d" % i})
    grown = Searcher([Store.open(egg)])
    grown.search("parse_config")
    for i, p in enumerate(prompts[3:], 3):
        save_turn(store, {"session": "s", "turn": "t%d" % i, "cwd": "", "prompt": p, "tools": [], "answer": "answer %d" % i})
    for q in ("parse_config", "late_fee weekends", "billing tests"):
        assert grown.search(q, 5, 0.0) == Searcher([Store.open(egg)]).search(q, 5, 0.0)
    assert len(grown.views) == 6


def test_a_dropped_semantic_side_is_said_in_the_message_and_the_trace(one_store, tmp_path):
    """Hybrid asked, lexical answered: egg-query's message names why, and so does the trace."""
    from eggshell.search.searcher import Dropped, SemanticList, hits_message

    trace = str(tmp_path / "trace.ndjson")
    msg = {"query": {"text": "how is the late_fee calculated"}}
    failing = Searcher([one_store], mode="hybrid", trace=trace,
                       semantic=lambda text, cands, k: Dropped("search provider egg-index failed: no reply within 15 s"))
    out = hits_message(failing, msg, 5, 0.0)
    assert out["semantic_dropped"] == "search provider egg-index failed: no reply within 15 s" and out["hits"]
    line = json.loads(open(trace).read().splitlines()[-1])
    assert (line["answered_as"], line["semantic_dropped"]) == ("lexical", "search provider egg-index failed: no reply within 15 s")
    assert "semantic_dropped" in hits_message(Searcher([one_store], mode="hybrid", semantic=lambda *a: None), msg, 5, 0.0)
    working = Searcher([one_store], mode="hybrid", semantic=lambda text, cands, k: SemanticList([(0, 0.9)], 0.2, cosine=True))
    assert "semantic_dropped" not in hits_message(working, msg, 5, 0.0)
    assert "semantic_dropped" not in hits_message(Searcher([one_store]), msg, 5, 0.0)  # lexical by choice: nothing dropped


# -- a warm searcher follows open turns being settled and sealed without rebuilding ------------

_WORDS = ["late_fee", "billing", "docker", "build", "tests", "rounding", "cache", "config", "parser", "timeout"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4), st.booleans()),
                min_size=1, max_size=12), st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3))
def test_a_searcher_grown_through_settled_and_sealed_turns_ranks_like_a_fresh_one(tmp_path_factory, steps, query):
    """Each step commits turn k as the save queue does: settled while open (an interrupted turn with
    its calls so far) or sealed (answered). The warm searcher, asked after every step, never rebuilds
    (a rebuild of 10,000 turns held the manager's worker 10 to 18 s) and ranks as one built fresh."""
    path = str(tmp_path_factory.mktemp("grow") / "w.egg")
    store = Store.open(path)
    warm = Searcher([store])
    warm.search("late_fee")
    built = warm._bm25
    from eggshell.graph.records import TurnKeys

    keys = TurnKeys(store.graph)  # SessionStart's count, kept the same way
    calls: dict[int, list[dict]] = {}
    q = " ".join(query)
    for k, words, sealed_now in steps:
        calls.setdefault(k, []).append(bash("rg -n %s src/%d" % (words[0], len(calls.get(k, []))), " ".join(words) + "\n"))
        save_turn(store, turn_record(session="s", turn="t%d" % k, prompt="turn %d about %s" % (k, words[0]), tools=list(calls[k]),
                                     answer=("done: " + " ".join(words)) if sealed_now else None), root="/")
        fresh = Searcher([Store.open(path)])
        for text in (q, " ".join(query * 120)):  # a question, and a query long enough to rank the tool inputs too
            got = warm.search(text, top_k=10, min_coverage=0.0)
            assert {h.id: h.score for h in got} == pytest.approx({h.id: h.score for h in fresh.search(text, top_k=10, min_coverage=0.0)})
        assert warm._bm25 is built  # extended, never rebuilt
        store.refresh()
        assert keys.update() == len(turn_views(Store.open(path).graph))
    assert sorted(v.id for v in warm.by_id.values()) == sorted(v.id for v in turn_views(Store.open(path).graph))


def _ref_best(texts, query, docs, k1=1.2, b=0.75, k3=5.0):
    """Best-line BM25 written out: every nonblank line a document, its best line's score per text
    (with the query-term factor of ref_bm25)."""
    lines = [[terms(x) for x in t.split("\n") if x.strip()] for t in texts]
    flat = [ts for ls in lines for ts in ls if ts]
    n, avgdl = len(flat), (sum(map(len, flat)) / len(flat) if flat else 1.0)
    df = Counter(t for ts in flat for t in set(ts))
    q = [t for t in dict.fromkeys(query) if t in df]
    qtf = Counter(query)
    out = []
    for i in docs:
        scores = []
        for ts in lines[i]:
            tf = Counter(ts)
            s = sum((k3 + 1) * qtf[t] / (k3 + qtf[t]) * math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * (k1 + 1) * tf[t]
                    / (tf[t] + k1 * (1 - b + b * len(ts) / avgdl)) for t in q if tf[t])
            if any(tf[t] for t in q):
                scores.append(s)
        if scores and max(scores) > 0:
            out.append((i, max(scores)))
    return sorted(out, key=lambda x: (-x[1], x[0]))


@given(st.lists(st.lists(st.lists(_vocab, max_size=6).map(" ".join), min_size=1, max_size=5).map("\n".join), min_size=1, max_size=6),
       _query)
def test_best_line_scores_match_a_written_out_line_bm25(texts, q):
    from eggshell.search.rank import Passages, line_terms

    docs = list(range(len(texts)))
    want = _ref_best(texts, q, docs)
    for p in (Passages(texts, terms), Passages(texts, terms, line_terms=[line_terms(t, terms) for t in texts])):
        got = p.best(q, docs)
        assert [i for i, _ in got] == [i for i, _ in want] and [s for _, s in got] == pytest.approx([s for _, s in want])


# -- long queries: more of the model, and what each turn ran, read and changed ------------------


def test_a_query_past_long_query_terms_takes_the_long_weights():
    from eggshell.search.rank import LONG_QUERY, LONG_WEIGHTS, WEIGHTS, Settings

    s = Settings()
    assert s.weights_for(1) == s.weights_for(LONG_QUERY) == (*WEIGHTS, 0.0)
    assert s.weights_for(LONG_QUERY + 1) == LONG_WEIGHTS and LONG_WEIGHTS[3] > 0
    assert Settings(long_query=5).weights_for(6) == LONG_WEIGHTS


def test_fuse_weighs_tool_inputs_only_when_given_a_weight_for_them():
    from eggshell.search.rank import fuse

    lexical, semantic, work = [(0, 2.0), (1, 1.9)], [(0, 0.61), (1, 0.60)], [(1, 5.0)]
    short = fuse("hybrid", 2, 0, lexical, semantic, [], 2, work=work, weights=(0.6, 0.1, 0.3))[0]
    long = fuse("hybrid", 2, 0, lexical, semantic, [], 2, work=work, weights=(0.3, 0.1, 0.6, 0.15))[0]
    assert short == [0, 1] and long == [1, 0]
    assert fuse("lexical", 2, 0, lexical, [], [], 2, work=work, weights=(0.3, 0.1, 0.6, 0.15))[0] == [1, 0]


ISSUE_WORDS = ("the report shows wrong totals when an invoice spans two months and the customer "
               "was created before the migration ran so the old rows keep their legacy currency field").split()


def _edit_store(egg):
    """Two turns: one edited compute_penalty_rate (the name is only in its edit's input, which the
    whole text leaves out), one only talked about invoices."""
    edit = tool_call("str_replace_based_edit_tool", "call_e", {"command": "str_replace", "path": "src/billing/fees.py",
                     "old_str": "def compute_penalty_rate(days):\n    return 0.015 * days",
                     "new_str": "def compute_penalty_rate(days, rate=0.015):\n    return rate * days"}, "edited src/billing/fees.py")
    ask = "why are the invoice totals in the monthly report wrong?"
    return make_store(egg, [
        turn_record(session="s", turn="t-talk", prompt=ask, tools=[bash("cat docs/sums.md", "per customer\n")],
                    answer="the sums per customer were correct"),
        turn_record(session="s", turn="t-edit", prompt=ask, tools=[edit], answer="the fee rate was applied twice; fixed"),
    ])


def test_a_long_query_finds_the_turn_that_changed_what_it_names(egg, tmp_path):
    store = _edit_store(egg)
    trace = str(tmp_path / "trace.ndjson")
    s = Searcher([store], trace=trace)
    long_q = " ".join(ISSUE_WORDS * 6 + ["compute_penalty_rate"] * 3)
    assert len(terms_of(long_q)) > 100
    hits = s.search(long_q, 2, 0.0)
    assert hits[0].turn == "t-edit"
    assert json.loads(open(trace).read().splitlines()[-1])["work"]  # the tool inputs were ranked
    s.search("invoice totals compute_penalty_rate", 2, 0.0)
    assert json.loads(open(trace).read().splitlines()[-1])["work"] == []  # a question ranks as before: by its whole text


def terms_of(text):
    from eggshell.search.terms import terms

    return terms(text)
