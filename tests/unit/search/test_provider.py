"""The provider client against real child processes, one fake provider per failure mode.

Each failure must be reported (related None, an error), return within the deadline plus
slack, leave no child behind (killed and reaped), and the next call must start a fresh
child that works. Fakes live in tests/fixtures/providers/; `--once PATH` makes a fake
misbehave only in its first process.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest

from eggshell.search.provider import ProviderClient, ProviderResult, clean_related

from helpers import REPO  # noqa: E402
FAKES = os.path.join(REPO, "tests", "fixtures", "providers")
DEADLINE = 1.0
SLACK = 3.0  # generous: this runs on small, busy machines

CANDS = [{"id": "a", "text": "bake bread at home"}, {"id": "b", "text": "late_fee is computed in src/billing.py"},
         {"id": "c", "text": "late fee policy"}]
GOOD = (1, 2)  # what good.py answers to "where is the late fee computed"
Q = "where is the late fee computed"


def fake(name: str, *args: str) -> list[str]:
    return [sys.executable, os.path.join(FAKES, name + ".py"), *args]


def state(pid: int) -> str | None:
    """The process's state letter from /proc, or None once it is gone (reaped)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def wait_for(cond, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


@pytest.fixture
def client():
    made: list[ProviderClient] = []

    def make(argv, **kw) -> ProviderClient:
        kw.setdefault("deadline_s", DEADLINE)
        kw.setdefault("startup_s", 0.0)  # these tests time the deadline itself (a start's allowance: below)
        kw.setdefault("backoff_s", 0.0)
        c = ProviderClient(argv, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def ask(c: ProviderClient, text: str = Q, top_k: int = 8) -> tuple[ProviderResult, float]:
    t0 = time.monotonic()
    r = c.query(text, CANDS, top_k)
    return r, time.monotonic() - t0


def assert_failed_and_recovers(c: ProviderClient, r: ProviderResult, took: float, pid: int, *why: str) -> None:
    """The shared proof for a failure: reported, bounded, child gone, next one fresh and good."""
    assert r.related is None, r
    assert r.error and any(w in r.error for w in why), r.error
    assert took < c.deadline_s + SLACK
    assert state(pid) is None, "child %d left behind (state %s)" % (pid, state(pid))
    assert c.pid is None
    r2, _ = ask(c)
    assert r2 == ProviderResult(GOOD, None, r2.elapsed_ms), r2
    assert c.pid is not None and c.pid != pid


def test_a_good_provider_is_started_once_and_reused(client):
    c = client(fake("good"))
    assert c.pid is None
    r, _ = ask(c)
    assert r.related == GOOD and r.error is None and r.elapsed_ms > 0
    pid = c.pid
    assert ask(c, "bread")[0].related == (0,)
    assert ask(c, "nothing shared")[0].related == ()
    assert c.pid == pid


def test_index_lines_are_written_without_waiting_and_queries_stay_in_step(client):
    c = client(fake("good"))
    t0 = time.monotonic()
    for _ in range(50):
        assert c.index(CANDS)
    assert time.monotonic() - t0 < SLACK
    assert ask(c)[0].related == GOOD
    assert c.index([{"id": "big", "text": "word " * 400_000}])  # 2 MB: more than a pipe holds
    assert ask(c, "bread")[0].related == (0,)


def test_the_shebang_script_runs_directly(client):
    c = client([os.path.join(FAKES, "good.py")], deadline_s=10)
    assert ask(c)[0].related == GOOD


def test_top_k_caps_the_reply(client):
    c = client(fake("good"))
    assert ask(c, top_k=1)[0].related == (1,)


def test_non_ascii_and_lone_surrogates_reach_the_provider(client):
    c = client(fake("good"))
    cands = [{"id": "x", "text": "naïve café \ud800 façade"}, {"id": "y", "text": "other"}]
    assert c.query("café \udfff", cands, 5).related == (0,)


def test_a_provider_that_exits_at_once(client, tmp_path):
    c = client(fake("exits_now", "--once", str(tmp_path / "once")))
    assert c.index(CANDS)  # lands in the pipe before the child (still starting Python) exits
    pid = c.pid
    r, took = ask(c)
    assert_failed_and_recovers(c, r, took, pid, "status 3", "closed its")


def test_a_provider_that_exits_after_some_queries(client):
    c = client(fake("exits_after", "2"))
    assert ask(c)[0].related == GOOD
    pid = c.pid
    assert ask(c)[0].related == GOOD and c.pid == pid
    r, took = ask(c)
    assert r.related is None and ("status 4" in r.error or "closed" in r.error), r.error
    assert took < DEADLINE + SLACK and state(pid) is None and c.pid is None
    assert ask(c)[0].related == GOOD and c.pid not in (None, pid)


def test_a_stalled_query_is_cut_at_the_deadline_and_the_group_killed(client, tmp_path):
    kid_file = tmp_path / "grandchild"
    c = client(fake("stall", "--once", str(tmp_path / "once"), "--grandchild", str(kid_file)))
    assert c.index(CANDS)
    pid = c.pid
    assert wait_for(kid_file.exists) and wait_for(lambda: kid_file.read_text().strip() != "")
    kid = int(kid_file.read_text())
    r, took = ask(c)
    assert r.elapsed_ms >= DEADLINE * 1000 * 0.99  # it did wait for the deadline
    assert_failed_and_recovers(c, r, took, pid, "no reply within")
    # The grandchild was in the group: killed too. Not ours to reap, so a zombie will do.
    assert wait_for(lambda: state(kid) in (None, "Z"), 5), state(kid)


def test_a_provider_that_stops_reading_cannot_block_an_index_write(client, tmp_path):
    c = client(fake("stall", "--once", str(tmp_path / "once"), "--noread"))
    t0 = time.monotonic()
    assert c.index([{"id": "x", "text": "a"}])  # small: fits in the pipe
    pid = c.pid
    assert not c.index([{"id": "big", "text": "word " * 400_000}])
    took = time.monotonic() - t0
    assert DEADLINE * 0.99 <= took < DEADLINE + SLACK
    assert state(pid) is None and c.pid is None
    assert ask(c)[0].related == GOOD


def test_a_broken_pipe_on_index_marks_the_provider_dead(client):
    c = client(fake("closes_stdin"))
    pids = set()

    def refused() -> bool:
        ok = c.index(CANDS)
        if c.pid:
            pids.add(c.pid)
        return not ok

    assert wait_for(refused, 10)
    assert c.pid is None and all(state(p) is None for p in pids - {c.pid})


@pytest.mark.parametrize("name, args, why", [
    ("invalid_json", [], "not JSON"),
    ("wrong_shape", ["list"], "not {"),
    ("wrong_shape", ["string"], "not {"),
    ("wrong_shape", ["missing"], "not {"),
    ("wrong_shape", ["null"], "not {"),
    ("wrong_shape", ["number"], "not {"),
    ("wrong_shape", ["dict"], "not {"),
    ("stray_reply", ["double"], "after the reply"),
    ("stray_reply", ["wrong-id"], "reply id"),
])
def test_a_bad_reply_fails_the_query_and_kills_the_provider(client, tmp_path, name, args, why):
    c = client(fake(name, *args, "--once", str(tmp_path / "once")))
    assert c.index(CANDS)
    pid = c.pid
    r, took = ask(c)
    assert_failed_and_recovers(c, r, took, pid, why)


def test_a_stray_reply_to_an_index_line_is_caught_before_the_next_query(client, tmp_path):
    mark = tmp_path / "mark"
    c = client(fake("stray_reply", "index", "--mark", str(mark), "--once", str(tmp_path / "once")))
    assert c.index(CANDS)
    pid = c.pid
    assert wait_for(mark.exists)  # the stray line has been written and flushed
    r, took = ask(c)
    assert_failed_and_recovers(c, r, took, pid, "no query was outstanding")


def test_a_stray_reply_pending_before_an_index_write_kills_the_provider(client, tmp_path):
    mark = tmp_path / "mark"
    c = client(fake("stray_reply", "index", "--mark", str(mark), "--once", str(tmp_path / "once")))
    assert c.index(CANDS)
    pid = c.pid
    assert wait_for(mark.exists)
    assert not c.index(CANDS)
    assert state(pid) is None and c.pid is None


def test_an_echoed_id_that_matches_is_accepted(client):
    c = client(fake("good", "--echo-id"))
    r = c.query(Q, CANDS, 8, query_id="q-17")
    assert r.related == GOOD and r.error is None


def test_out_of_range_and_repeated_indices_are_dropped_and_the_provider_kept(client):
    c = client(fake("bad_indices"))
    r, _ = ask(c)
    assert r.related == (1, 0, 2) and "dropped" in r.error
    pid = c.pid
    assert ask(c, top_k=2)[0].related == (1, 0) and c.pid == pid


def test_non_integer_indices_are_dropped(client):
    c = client(fake("non_int_indices"))
    r, _ = ask(c)
    assert r.related == (2, 0) and "dropped" in r.error


def test_a_stderr_flood_cannot_deadlock_the_provider(client):
    lines: list[str] = []
    c = client(fake("flood_stderr", "4"), deadline_s=20, log=lines.append)
    r, _ = ask(c)
    assert r.related == GOOD, r
    assert ask(c)[0].related == GOOD  # and again: the drain keeps running after the log budget is spent
    assert lines and lines[0].startswith("%s[%d]: noise" % (os.path.basename(sys.executable), c.pid))
    assert any(l.endswith("further stderr dropped") for l in lines)
    assert sum(len(l) for l in lines) < 200_000  # the log is capped, not 8 MB


def test_a_stderr_flood_with_inherited_stderr(client):
    c = client(fake("flood_stderr", "4"), deadline_s=20)
    assert ask(c)[0].related == GOOD


def test_a_log_that_raises_does_not_stop_the_drain(client):
    def bad_log(line: str) -> None:
        raise RuntimeError("log is broken")

    c = client(fake("flood_stderr", "2"), deadline_s=20, log=bad_log)
    assert ask(c)[0].related == GOOD and ask(c)[0].related == GOOD


def test_a_slow_answer_within_the_deadline_is_accepted(client):
    c = client(fake("slow", "0.5"), deadline_s=5)
    r, _ = ask(c)
    assert r.related == GOOD and r.elapsed_ms >= 500


def test_a_provider_that_died_while_idle_is_replaced_for_the_next_call(client):
    c = client(fake("good"))
    assert ask(c)[0].related == GOOD
    pid = c.pid
    os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: state(pid) == "Z")  # dead, not yet reaped
    r, _ = ask(c)
    assert r.related == GOOD and c.pid != pid and state(pid) is None


def test_a_program_that_cannot_start(client, tmp_path):
    c = client([str(tmp_path / "no-such-provider")])
    r, took = ask(c)
    assert r.related is None and "cannot start" in r.error and took < SLACK
    assert not c.index(CANDS)


def test_close_lets_the_provider_exit_on_eof_then_kills_what_is_left(client, tmp_path):
    with ProviderClient(fake("good"), deadline_s=DEADLINE) as c:
        assert ask(c)[0].related == GOOD
        pid = c.pid
    assert state(pid) is None and c.pid is None
    c.close()  # idempotent
    stuck = client(fake("stall", "--noread"))
    assert stuck.index(CANDS)
    pid = stuck.pid
    t0 = time.monotonic()
    stuck.close()
    assert time.monotonic() - t0 < SLACK and state(pid) is None


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        ProviderClient([])
    with pytest.raises(ValueError):
        ProviderClient(["x"], deadline_s=0)


@pytest.mark.parametrize("reply, n, k, want", [
    ({"related": [2, 0, 1]}, 3, 8, (2, 0, 1)),
    ({"related": [2, 0, 1]}, 3, 2, (2, 0)),
    ({"related": [True, False, 1]}, 3, 8, (1,)),
    ({"related": [1.0, "1", None, 1]}, 3, 8, (1,)),
    ({"related": [3, -1, 0, 0]}, 3, 8, (0,)),
    ({"related": []}, 3, 8, ()),
    ({"related": [0]}, 0, 8, ()),
    ({"related": [0, 1]}, 3, 0, ()),
])
def test_clean_related(reply, n, k, want):
    assert clean_related(reply, n, k)[0] == want


@pytest.mark.parametrize("reply", [[0], {"related": "0"}, {"related": None}, {}, None, 0, "x"])
def test_clean_related_refuses_what_is_not_a_reply(reply):
    related, why, scores = clean_related(reply, 3, 8)
    assert related is None and why and scores is None


@pytest.mark.parametrize("reply, want_related, want_scores", [
    ({"related": [2, 0], "scores": [0.9, 0.5]}, (2, 0), (0.9, 0.5)),
    ({"related": [2, 9, 0], "scores": [0.9, 0.7, 0.5]}, (2, 0), (0.9, 0.5)),  # a dropped index drops its score
    ({"related": [2, 0], "scores": [0.9]}, (2, 0), None),  # not one per index: fused by rank
    ({"related": [2, 0], "scores": [0.9, "x"]}, (2, 0), None),
    ({"related": [2, 0], "scores": [0.9, float("nan")]}, (2, 0), None),
    ({"related": [2, 0], "scores": [True, 0.1]}, (2, 0), None),
    ({"related": [2, 0]}, (2, 0), None),
])
def test_clean_related_keeps_scores_only_when_they_pair_with_the_indices(reply, want_related, want_scores):
    related, note, scores = clean_related(reply, 3, 8)
    assert related == want_related and scores == want_scores
    if "scores" in reply and want_scores is None:
        assert "scores" in note


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_the_real_egg_index_speaks_the_protocol_through_the_client(client, tmp_path, mode):
    env = dict(os.environ, EGGSHELL_DATA_ROOT=str(tmp_path / "data"))  # its vector cache stays here
    c = client([os.path.join(REPO, "bin", "egg-index"), "--mode", mode], deadline_s=60, env=env)
    assert c.index(CANDS)
    assert c.index(CANDS)  # index lines get no reply: a reply here would fail the query below
    pid = c.pid
    r = c.query("where is late_fee computed", CANDS, 8)
    assert r.related == (1, 2) and r.error is None, r
    assert c.query("bake some bread", CANDS, 8).related[0] == 0
    assert len(c.query("late fee", CANDS, 1).related) == 1
    assert c.pid == pid
    c.close()
    assert state(pid) is None


def test_requests_are_one_json_line_each(client, tmp_path):
    """What the child sees: exactly the protocol's two line shapes."""
    log = tmp_path / "seen"
    script = tmp_path / "tee.py"
    script.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    open(%r, 'a').write(line)\n"
        "    if 'query' in json.loads(line):\n"
        "        print(json.dumps({'related': [0]}), flush=True)\n" % str(log))
    c = client([sys.executable, str(script)])
    assert c.index([{"id": "a", "text": "x\ny"}])
    assert c.query("q\nq", CANDS, 3, query_id="id-1").related == (0,)
    seen = [json.loads(l) for l in log.read_text().splitlines()]
    assert seen == [{"index": [{"id": "a", "text": "x\ny"}]},
                    {"query": {"id": "id-1", "text": "q\nq"}, "candidates": CANDS}]


def test_a_childs_start_is_not_counted_against_its_first_query(client):
    """A provider that takes 2 s to start (a model to load) answers its first query within a
    1 s deadline plus the start allowance; without the allowance the same child is killed."""
    c = client(fake("slow_start", "2"), startup_s=10.0)
    r, took = ask(c)
    assert r.related == GOOD and took >= 2.0, (r, took)
    r, took = ask(c)  # started: the deadline alone from now on
    assert r.related == GOOD and took < DEADLINE
    bare = client(fake("slow_start", "2"))
    assert "no reply within" in (ask(bare)[0].error or "")


def test_a_slow_child_is_not_replaced_on_every_query(client, tmp_path):
    """After a query runs out of time, the next queries are answered without a provider (at
    once, saying why) until the back-off has passed, doubling per slow failure in a row."""
    c = client(fake("stall"), backoff_s=1.0)
    r, took = ask(c)
    assert "no reply within" in r.error and c.pid is None
    r, took = ask(c)
    assert r.related is None and "backing off after 1 query past the deadline" in r.error and took < 0.5
    assert c.pid is None  # no child started
    time.sleep(1.1)
    r, _ = ask(c)
    assert "no reply within" in r.error  # tried again: a fresh child, stalled again
    r, _ = ask(c)
    assert "backing off after 2 queries past the deadline (next try in 2 s)" in r.error
    # a failure that is not slowness (a crash) does not back off: the next query starts another
    crash = client(fake("exits_now"), backoff_s=60.0)
    ask(crash)
    assert "backing off" not in (ask(crash)[0].error or "")


@pytest.mark.parametrize("reply, kept, want", [
    ({"related": [2, 0], "opening": [0.4, 0.2]}, (2, 0), (0.4, 0.2)),
    ({"related": [2, 9, 0], "opening": [0.4, 0.3, 0.2]}, (2, 0), (0.4, 0.2)),  # a dropped index drops its opening
    ({"related": [2, 0], "opening": [0.4]}, (2, 0), None),  # not one per index
    ({"related": [2, 0], "opening": [0.4, float("inf")]}, (2, 0), None),
    ({"related": [2, 0], "opening": [0.4, None]}, (2, 0), None),
    ({"related": [2, 0], "opening": "0.4,0.2"}, (2, 0), None),
    ({"related": [2, 0]}, (2, 0), None),  # a provider of the user's own sends none
])
def test_clean_opening_pairs_one_finite_number_with_each_index_or_gives_none(reply, kept, want):
    from eggshell.search.provider import clean_opening

    assert clean_opening(reply, kept) == want
