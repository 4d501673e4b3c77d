"""egg-index: the provider protocol (lexical ranking in this version)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eggshell.stages import index

from eggshell.search.local import Provider

from eggshell.search.rank import DEFAULT_ANCHOR_K, Settings
from helpers import REPO  # noqa: E402
CANDS = [{"id": "a", "text": "bake bread at home"}, {"id": "b", "text": "late_fee is computed in src/billing.py"}, {"id": "c", "text": "late fee policy"}]


def run(lines: list[str], top_k: int = 8, anchor_k: int = 2) -> list[dict]:
    out = io.StringIO()
    provider = Provider(Settings(mode="lexical", top_k=top_k, anchor_k=anchor_k))
    assert index.run(provider, io.StringIO("".join(l + "\n" for l in lines)), out) == 0
    return [json.loads(l) for l in out.getvalue().splitlines()]


def q(text: str, cands=CANDS) -> str:
    return json.dumps({"query": {"id": "q", "text": text}, "candidates": cands})


def test_index_messages_are_never_answered_and_queries_get_exactly_one_reply():
    replies = run([json.dumps({"index": CANDS}), q("where is late_fee computed"), json.dumps({"index": []}), q("bread")])
    assert [r["related"] for r in replies] == [[1, 2], [0]]
    for r in replies:  # each index's score rides along, best first
        assert len(r["scores"]) == len(r["related"]) and r["scores"] == sorted(r["scores"], reverse=True)


def test_bad_lines_are_answered_with_an_empty_list_in_step(capsys):
    replies = run(["not json", json.dumps({"query": {"text": 3}, "candidates": CANDS}), json.dumps({"query": {"text": "x"}}), q("late fee")])
    assert replies[:3] == [{"related": []}] * 3 and replies[3]["related"]
    err = capsys.readouterr().err
    assert "<stdin>:1:" in err and "<stdin>:2:" in err and "<stdin>:3:" in err


def test_a_malformed_index_message_is_not_answered(capsys):
    assert [r["related"] for r in run([json.dumps({"index": "nope"}), q("bread")])] == [[0]]
    assert "must be a list" in capsys.readouterr().err


def test_top_k_caps_the_reply():
    assert len(run([q("late fee")], top_k=1)[0]["related"]) == 1


@settings(max_examples=80, deadline=None)
@given(texts=st.lists(st.text(max_size=40), max_size=12), query=st.text(max_size=30), k=st.integers(1, 5))
def test_related_indices_are_unique_in_range_and_at_most_top_k(texts, query, k):
    cands = [{"id": str(i), "text": t} for i, t in enumerate(texts)]
    (reply,) = index.step_of(Provider(Settings(mode="lexical", top_k=k)))({"query": {"text": query}, "candidates": cands})
    rel = reply["related"]
    assert len(rel) == len(set(rel)) <= k
    assert all(0 <= i < len(cands) for i in rel)


def test_the_executable_speaks_the_protocol_and_exits_0_at_eof():
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "lib"))
    p = subprocess.run([os.path.join(REPO, "bin", "egg-index"), "--mode", "lexical"], input=json.dumps({"index": CANDS}) + "\n" + q("late_fee") + "\n",
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert [json.loads(l)["related"] for l in p.stdout.splitlines()] == [[1, 2]]


# -- golden cases of the search rules (the published reference design's examples, under our rules) --------

C8 = [
    "Network driver documentation and packet routing.",
    "Historical notes. " * 100 + "\nCONFIG_ARCHIVE_SENTINEL_7E29 requires CONFIG_STORAGE_BRIDGE.",
    "Stra\u00dfe STRASSE ss /usr/include/clock.h",
    "\u03a3 \u03c3 \u03c2 \u212a K \u0130 \ufb01 FI",
    "\u65e5\u672c\u8a9e \u30e1\u30e2\u30ea\u30fc \u8a18\u61b6 \u524a\u6e1b",
    "foo foo foo bar baz",
    "foo bar baz qux",
    "",
]

# Where our rules agree with the reference, the lexical selections are the reference's.
GOLDEN_LEXICAL = {
    "CONFIG_ARCHIVE_SENTINEL_7E29": [1],  # an identifier in the last window of a long record
    "STRASSE": [2],  # case folding: \u00df -> ss
    "\u03c3 \u212a FI": [3],  # Greek sigma kept (the reference dropped it), Kelvin sign and \ufb01 folded
    "\u65e5\u672c\u8a9e \u8a18\u61b6": [4],  # CJK (bigrams here, unigrams in the reference)
    "foo bar baz": [5, 6],  # BM25: three foos outrank the shorter record (the reference tied them)
    "nothing at all": [],
    "": [],
}


def cands(texts):
    return [{"id": str(i), "text": t} for i, t in enumerate(texts)]


@pytest.mark.parametrize("query,expected", GOLDEN_LEXICAL.items(), ids=[repr(q) for q in GOLDEN_LEXICAL])
def test_golden_lexical(query, expected):
    assert Provider(Settings(mode="lexical")).rank(query, C8).selected == expected


@pytest.fixture(scope="module")
def semantic_provider(tmp_path_factory):
    """The real offline model (as CI installs it) over a private vector cache."""
    cache = str(tmp_path_factory.mktemp("vectors"))
    return lambda mode, **kw: Provider(Settings(mode=mode, cache_dir=cache, **kw))


def test_golden_semantic_and_hybrid_with_the_real_model(semantic_provider):
    sem, hyb = semantic_provider("semantic"), semantic_provider("hybrid")
    # The reference pins the best anchor match first in every mode; so do we with its anchor_k of 2.
    for mode in ("lexical", "semantic", "hybrid"):
        assert semantic_provider(mode, anchor_k=2).rank("CONFIG_ARCHIVE_SENTINEL_7E29", C8).selected[0] == 1
    # Deliberate difference: by default nothing is pinned (anchor_k 0; pinning cost swe
    # `related` 0.11 MRR, docs/benchmarks.md), and hybrid still ranks the identifier's record
    # first because its BM25 score dominates the score fusion.
    assert DEFAULT_ANCHOR_K == 0 and sem.settings.anchor_k == 0
    assert hyb.rank("CONFIG_ARCHIVE_SENTINEL_7E29", C8).selected[0] == 1
    # Lexical hits stay in hybrid, ahead of what only the model found.
    assert hyb.rank("STRASSE", C8).selected[0] == 2
    assert hyb.rank("foo bar baz", C8).selected[:2] == [5, 6]
    # Deliberate difference: blank text has no window, so an empty candidate never matches
    # (the reference ranked the empty candidate first for short queries) and an empty query
    # matches nothing (the reference returned [7, 3, 5, 6]).
    for q in ["STRASSE", "foo bar baz", "\u03c3 \u212a FI", "\u65e5\u672c\u8a9e \u8a18\u61b6", "nothing at all"]:
        for p in (sem, hyb):
            assert 7 not in p.rank(q, C8).selected, q
    assert sem.rank("", C8).selected == [] and hyb.rank("", C8).selected == []


def test_semantic_mode_finds_a_paraphrase_lexical_cannot(semantic_provider):
    texts = ["bake bread at home with flour and yeast", "The late_fee is computed by compute_late_fee in src/billing.py",
             "docker build fails on arm64 runners"]
    assert Provider(Settings(mode="lexical")).rank("how are overdue charges calculated", texts).selected == []
    r = semantic_provider("semantic").rank("how are overdue charges calculated", texts)
    assert r.selected == [1] and r.error is None
    assert semantic_provider("hybrid").rank("how are overdue charges calculated", texts).selected == [1]


def test_cache_is_keyed_by_text_not_by_id(semantic_provider):
    # Golden case 8: two candidates share an id; the one whose text matches wins, in every mode.
    two = [{"id": "same", "text": "changed bytes"}, {"id": "same", "text": "unrelated"}]
    for mode in ("lexical", "semantic", "hybrid"):
        p = semantic_provider(mode)
        assert p.rank("changed bytes", [c["text"] for c in two]).selected == [0]
        # the same id with its text changed gets a fresh vector, not the cached one
        swapped = [two[1]["text"], two[0]["text"]]
        assert p.rank("changed bytes", swapped).selected == [1]


def test_a_failing_model_still_answers_lexically_and_restarts(semantic_provider, monkeypatch, capsys):
    from eggshell.search import semantic as sem_mod

    p = semantic_provider("hybrid")
    texts = ["where is late_fee computed", "bake bread"]
    calls = {"n": 0}
    real = sem_mod.SemanticIndex.window_scores

    def broken(self, *a, **k):
        calls["n"] += 1
        raise RuntimeError("onnx session died")

    monkeypatch.setattr(sem_mod.SemanticIndex, "window_scores", broken)
    r = p.rank("late_fee", texts)
    assert r.selected == [0] and "onnx session died" in r.error  # the lexical answer came back
    assert p._semantic is None  # the encoder is dropped and rebuilt on the next request
    monkeypatch.setattr(sem_mod.SemanticIndex, "window_scores", real)
    r = p.rank("late_fee", texts)
    assert r.error is None and r.selected[0] == 0 and calls["n"] == 1


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 12), k=st.integers(0, 6), anchors=st.lists(st.integers(-3, 15), max_size=6),
       ranking=st.lists(st.integers(-3, 15), max_size=20))
def test_select_contract(n, k, anchors, ranking):
    from eggshell.search.rank import select

    out = select(n, k, anchors, ranking)
    assert len(out) == len(set(out)) <= k
    assert all(0 <= i < n for i in out)
    assert all(i in anchors or i in ranking for i in out)
    valid_anchors = [i for i in dict.fromkeys(anchors) if 0 <= i < n][:k]
    assert out[: len(valid_anchors)] == valid_anchors  # anchors first
    if k == 0:
        assert out == []


def test_trace_records_every_ranking_with_scores_and_timings(semantic_provider, tmp_path):
    trace = tmp_path / "t" / "trace.jsonl"
    p = semantic_provider("hybrid")
    out = io.StringIO()
    index.run(p, io.StringIO(q("CONFIG_ARCHIVE_SENTINEL_7E29", cands(C8)) + "\n" + json.dumps({"index": cands(C8[:2])}) + "\n"), out, str(trace))
    lines = [json.loads(l) for l in trace.read_text().splitlines()]
    assert len(lines) == 1  # one line per query, none for index lines
    t = lines[0]
    assert t["mode"] == "hybrid" and t["candidate_count"] == 8
    named = {i for k in ("lexical", "passages", "anchors", "semantic", "fused") for i, _ in t[k]}
    assert named and t["candidate_ids"] == {str(i): str(i) for i in sorted(named)}  # the id of every candidate a ranking names
    assert t["selected"] == json.loads(out.getvalue())["related"]
    assert t["lexical"][0][0] == 1 and isinstance(t["lexical"][0][1], float)
    assert t["passages"][0][0] == 1  # the sentinel's own line is the best line
    assert t["fused"][0][0] == t["selected"][0] == 1 and t["anchors"] == []  # no pinning by default
    assert set(t["timings_ms"]) >= {"lexical", "semantic", "fuse", "total"} and "MiniLM" in t["model"]
    assert oct(os.stat(trace).st_mode & 0o777) == "0o600"


def test_main_answers_at_most_the_one_default_top_k(monkeypatch, capsys):
    """egg-index without --top-k caps a reply at 5, the default every search shares (config.DEFAULT_TOP_K)."""
    cands = [{"id": str(i), "text": "late fee rule %d" % i} for i in range(9)]
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({"query": {"text": "late fee"}, "candidates": cands}) + "\n"))
    assert index.main(["--mode", "lexical"]) == 0
    assert len(json.loads(capsys.readouterr().out)["related"]) == 5


MALLINFO_PROBE = r"""
import ctypes, sys
sys.path.insert(0, sys.argv[1])
class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                                               "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
def mapped(size):
    before = libc.mallinfo2().hblks
    p = libc.malloc(size)
    got = libc.mallinfo2().hblks - before
    libc.free(ctypes.c_void_p(p))
    return got
if sys.argv[2] == "bound":
    from eggshell.search.embed import bound_malloc
    assert bound_malloc()
libc.free(ctypes.c_void_p(libc.malloc(8 << 20)))  # a large tensor freed: glibc's threshold rises past it
print(mapped(4 << 20))  # the next one: from the heap (0), or mapped apart and unmapped on free (1)
"""


def test_the_model_s_process_maps_large_blocks_apart_so_freed_tensors_go_back(tmp_path):
    """After a large block is freed, glibc by default serves the next large one from its heap
    (its mmap threshold rose); after bound_malloc it is mapped apart and unmapped when freed,
    which is what keeps egg-index from growing with each batch (docs/benchmarks.md)."""
    got = {}
    for how in ("default", "bound"):
        r = subprocess.run([sys.executable, "-c", MALLINFO_PROBE, os.path.join(REPO, "lib"), how], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        got[how] = r.stdout.strip()
    assert got == {"default": "0", "bound": "1"}


def test_loading_the_encoder_bounds_malloc_first(monkeypatch):
    from eggshell.search import embed

    called = []
    monkeypatch.setattr(embed, "bound_malloc", lambda: called.append(True) or True)
    embed.Encoder().load()
    assert called == [True]


def test_a_trace_line_keeps_the_top_of_each_ranking_not_every_candidate(tmp_path):
    """A line that listed every candidate grew with the store (megabytes a prompt at 100,000 turns)."""
    from eggshell.search.local import TRACE_DEPTH

    trace = tmp_path / "trace.jsonl"
    many = [{"id": "id-%d" % i, "text": "late fee rule number %d for the billing run" % i} for i in range(TRACE_DEPTH * 4)]
    index.run(Provider(Settings(mode="lexical")), io.StringIO(q("late fee billing", many) + "\n"), io.StringIO(), str(trace))
    t = json.loads(trace.read_text())
    assert t["candidate_count"] == TRACE_DEPTH * 4
    assert len(t["lexical"]) == len(t["fused"]) == TRACE_DEPTH
    assert len(t["candidate_ids"]) <= TRACE_DEPTH * 3 and all(t["candidate_ids"][str(i)] == "id-%d" % i for i, _ in t["lexical"])


def test_embedded_counts_the_texts_ranked_by_all_their_windows_and_loads_nothing_to_say_so(semantic_provider):
    """What `egg status` reports through the warm manager (warm.Resources.counts)."""
    p = semantic_provider("hybrid")
    texts = [c["text"] for c in cands(C8)]
    assert p.embedded(texts) is None  # nothing ranked with the model yet: unknown, and no model loaded to find out
    assert p._semantic is None
    p.rank("CONFIG_ARCHIVE_SENTINEL_7E29", texts)
    assert p.embedded(texts) == len(texts)
    assert p.embedded(texts + ["a text this provider never saw"]) == len(texts)


def test_a_record_s_opening_is_its_best_of_the_first_windows_and_egg_index_reports_it(semantic_provider):
    """The opening (search/semantic.OPENING_WINDOWS) is what a long query's fusion blends into the
    cosine; egg-index sends it with each related index, so egg-query's Searcher fuses as the hook's."""
    from eggshell.search.semantic import OPENING_WINDOWS

    p = semantic_provider("semantic", threshold=-1.0)
    idx = p._index()
    head = "why does the late fee double when an invoice is paid a day late"
    # the opening is about docker; the match is far down the record
    long_text = "\n".join("docker layer cache step %d pulls the python base image again" % i for i in range(60)) + "\n" + head
    texts = [long_text, head, "", "bake a loaf of sourdough bread"]
    best, opening = idx.window_scores("late fee charged twice", texts)
    rows = idx.ensure(texts, limit=0)
    assert len(rows[0]) > OPENING_WINDOWS and len(rows[1]) == 1 and len(rows[2]) == 0
    qv = idx.query_vectors
    m = idx.cache.matrix()
    per_window = (m[rows[0]] @ qv.T).max(axis=1)
    assert opening[0] == pytest.approx(per_window[:OPENING_WINDOWS].max()) and best[0] == pytest.approx(per_window.max())
    assert opening[1] == best[1] and opening[2] == best[2] == float("-inf")  # one window: its opening is itself; blank: none
    assert opening[0] < best[0] - 0.2 and (opening <= best).all()
    (reply,) = index.step_of(p)({"query": {"text": "late fee charged twice"}, "candidates": [{"id": str(i), "text": t} for i, t in enumerate(texts)]})
    r = p.rank("late fee charged twice", texts)
    assert reply["opening"] == [dict(r.opening)[i] for i in reply["related"]] and len(reply["opening"]) == len(reply["related"])
    assert reply["opening"][reply["related"].index(0)] == pytest.approx(float(opening[0]))


def test_a_long_query_blends_the_opening_into_the_cosine_in_hybrid_only():
    from eggshell.search.rank import LONG_QUERY, OPENING_SHARE, Settings, with_opening

    sem, opening = [(0, 0.70), (1, 0.65)], {0: 0.35, 1: 0.65}
    assert with_opening(sem, opening, OPENING_SHARE) == [(1, 0.65), (0, pytest.approx(0.75 * 0.70 + 0.25 * 0.35))]
    assert with_opening(sem, {}, OPENING_SHARE) == sem  # none came: a record's own cosine
    s = Settings()
    long, short = LONG_QUERY + 1, LONG_QUERY
    assert s.fuse("hybrid", 2, [], sem, [], 2, opening=opening, query_terms=long)[0] == [1, 0]
    assert s.fuse("hybrid", 2, [], sem, [], 2, opening=opening, query_terms=short)[0] == [0, 1]
    assert s.fuse("semantic", 2, [], sem, [], 2, opening=opening, query_terms=long)[0] == [0, 1]  # what a provider reports stays the cosine
    assert Settings(opening_share=0.0).fuse("hybrid", 2, [], sem, [], 2, opening=opening, query_terms=long)[0] == [0, 1]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from([-1.0, 0.0, 0.25, 0.3, 0.5, 0.51, 0.9, float("-inf"), float("nan")]) | st.floats(-1, 1, width=32),
                max_size=40), st.sampled_from([-1.0, 0.0, 0.3]))
def test_best_first_is_the_sorted_scores_at_or_above_the_threshold(xs, threshold):
    import numpy as np

    from eggshell.search.local import best_first

    sc = np.array(xs, dtype=np.float32)
    want = sorted(((j, float(v)) for j, v in enumerate(sc) if v >= threshold), key=lambda x: (-x[1], x[0]))
    got = best_first(sc, threshold)
    assert got == want and all(type(i) is int and type(v) is float for i, v in got)
