"""stages/hook.py and runtime/turnflow.py (egg-hook codex): record turns, hand prior work back, fail open.

Requirements: always exit 0 with exactly one JSON object on stdout (malformed or
non-object JSON, missing hook_event_name, unknown event, missing session_id, an
unreadable or invalid .eggshell.toml, a damaged .egg); a damaged store is never
changed and the error goes to $EGGSHELL_DATA_ROOT/logs/hook.log; a project without
.eggshell.toml is left alone; PostToolUse journals the tool result durably before
anything else; Stop commits the turn; an interrupted turn stores tool outcomes and no
answer; UserPromptSubmit hands over the prior outcome of a related prompt and nothing
for an unrelated one; SessionStart says a short systemMessage; Claude Code payloads
work too; with no Python environment at all bin/egg-hook still prints {}.
"""

from __future__ import annotations

import io
import json
import os
import subprocess

import pytest

from helpers.hooks import answer_here
from eggshell import config
from eggshell.stages import hook
from eggshell.search.searcher import Searcher
from eggshell.runtime.journal import Journal
from eggshell.paths import PROJECT_CONFIG, Paths
from eggshell.graph.records import turn_views
from eggshell.graph.store import Store
from helpers import listing, read_bytes, real_venv
from helpers.hook_env import EGG_HOOK, LATE_FEE_ANSWER, Env, damage, one_json_object, record_late_fee  # noqa: F401 - EGG_HOOK for the process tests

from helpers import REPO  # noqa: E402


@pytest.fixture
def env(tmp_path):
    return Env(tmp_path)


# -- recording a turn ------------------------------------------------------------------------


def test_stop_commits_prompt_tools_and_answer(env):
    os.makedirs(os.path.join(env.project, "src"))
    sub = os.path.join(env.project, "src")
    assert env.respond(env.prompt("where is late_fee computed?", cwd=sub)) == {}  # nothing recorded yet
    env.respond(env.tool("grep -rn late_fee src/", "src/billing.py:42: def late_fee(days):\n", use="c1"))
    env.respond(env.tool("sed -n 40,45p src/billing.py", "def late_fee(days):\n    return days * 5\n", use="c2"))
    assert env.respond(env.stop(LATE_FEE_ANSWER)) == {}
    (v,) = env.views()
    assert (v.session, v.turn, v.prompt, v.answer) == ("sess-1", "turn-1", "where is late_fee computed?", LATE_FEE_ANSWER)
    assert v.cwd == "src"  # relative to the project root, never absolute
    assert [(t.work, t.outcome, t.use_id) for t in v.tools] == [
        ('Bash\n{"command":"grep -rn late_fee src/"}', "src/billing.py:42: def late_fee(days):\n", "c1"),
        ('Bash\n{"command":"sed -n 40,45p src/billing.py"}', "def late_fee(days):\n    return days * 5\n", "c2"),
    ]
    # the journal of a committed turn is removed
    assert Journal(env.paths.journal_dir).read("sess-1", "turn-1") == []
    assert env.log_text() == ""


def test_interrupted_turn_stores_tool_outcomes_and_no_answer(env):
    env.respond(env.prompt("run the migration"))
    env.respond(env.tool("alembic upgrade head", "INFO  Running upgrade 1a2b -> 3c4d\n"))
    assert env.respond(env.stop(None)) == {}
    (v,) = env.views()
    assert v.answer is None
    assert [t.outcome for t in v.tools] == ["INFO  Running upgrade 1a2b -> 3c4d\n"]
    assert v.prompt == "run the migration"


def test_turn_with_neither_answer_nor_tools_stores_nothing(env):
    env.respond(env.prompt("hello"))
    assert env.respond(env.stop(None)) == {}
    assert not os.path.exists(env.egg) or env.views() == []


def test_stop_without_a_journaled_turn_does_nothing(env):
    assert env.respond(env.stop("an answer", turn="never-seen")) == {}
    assert not os.path.exists(env.egg)
    assert env.log_text() == ""


def test_replayed_tool_event_is_stored_once(env):
    env.respond(env.prompt("list files"))
    for _ in range(2):
        env.respond(env.tool("ls", "a\nb\n", use="same"))
    env.respond(env.stop("two files"))
    (v,) = env.views()
    assert len(v.tools) == 1


def test_post_tool_use_is_journaled_durably_before_anything_else(env):
    env.respond(env.prompt("check the disk"))
    assert env.respond(env.tool("df -h", "/dev/sda1 40G\n", use="c9")) == {}
    events = Journal(env.paths.journal_dir).read("sess-1", "turn-1")
    assert [e["event"] for e in events] == ["prompt", "tool"]
    tool = events[1]
    assert (tool["name"], tool["id"], tool["input"], tool["output"]) == ("Bash", "c9", {"command": "df -h"}, "/dev/sda1 40G\n")
    assert not os.path.exists(env.egg)  # nothing but the journal was written
    path = Journal(env.paths.journal_dir).turn_path("sess-1", "turn-1")
    assert path.startswith(env.data + os.sep)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700


def test_a_torn_or_garbled_journal_line_is_skipped_at_stop(env):
    env.respond(env.prompt("list files"))
    env.respond(env.tool("ls", "a\n", use="c1"))
    path = Journal(env.paths.journal_dir).turn_path("sess-1", "turn-1")
    with open(path, "ab") as f:
        f.write(b'garbage line\n[1]\n{"event":"tool","name":"Bash","id":"c2","inp')  # a crash mid-append
    assert env.respond(env.stop("one file")) == {}
    (v,) = env.views()
    assert [t.use_id for t in v.tools] == ["c1"] and v.answer == "one file"


def test_post_tool_use_is_journaled_even_when_the_store_is_damaged(env):
    record_late_fee(env)
    damaged = damage(env.egg)
    env.respond(env.prompt("check the disk", turn="turn-2"))
    assert env.respond(env.tool("df -h", "/dev/sda1 40G\n", turn="turn-2")) == {}
    events = Journal(env.paths.journal_dir).read("sess-1", "turn-2")
    assert [e["event"] for e in events] == ["prompt", "tool"]
    assert read_bytes(env.egg) == damaged


def test_prompt_is_journaled_before_search(env, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("search exploded")

    monkeypatch.setattr(Searcher, "search", boom)
    assert env.respond(env.prompt("anything at all")) == {}
    (e,) = Journal(env.paths.journal_dir).read("sess-1", "turn-1")
    assert e["event"] == "prompt" and e["prompt"] == "anything at all"
    assert "RuntimeError: search exploded" in env.log_text()


def test_post_tool_use_without_turn_id_uses_the_sessions_open_turn(env):
    env.respond(env.prompt("list files", turn="t-open"))
    env.respond(env.tool("ls", "a\n", turn=None))
    env.respond(env.stop("one file", turn=None))
    (v,) = env.views()
    assert v.turn == "t-open" and len(v.tools) == 1


def test_a_call_that_ran_outside_the_project_belongs_to_the_turn_that_made_it(env, tmp_path):
    """Codex gives a tool hook the call's working directory: a command run in /tmp (or a sibling
    checkout) is still a call of the project's turn, and so is a Stop reported from there."""
    elsewhere = tmp_path / "scratch"
    elsewhere.mkdir()
    env.respond(env.prompt("check the scratch build log"))
    env.respond(env.tool("tail build.log", "BUILD OK\n", cwd=str(elsewhere)))
    env.respond(env.tool("ls", "a\n", use="call-2"))
    env.respond(env.stop("it built", cwd=str(elsewhere)))
    (v,) = env.views()
    assert [t.outcome for t in v.tools] == ["BUILD OK\n", "a\n"] and "tail build.log" in v.tools[0].work
    assert v.answer == "it built"
    assert listing(str(elsewhere)) == {}  # nothing written where the call ran


def test_post_tool_use_for_a_turn_whose_prompt_was_not_journaled_is_dropped(env):
    # no open turn at all, or a turn id never opened by a prompt: nothing to attach the result to
    assert env.respond(env.tool("ls", "a\n", turn=None)) == {}
    assert env.respond(env.tool("ls", "a\n", turn="stray")) == {}
    assert not os.path.exists(env.paths.journal_dir)
    assert env.log_text() == ""


# -- Claude Code payloads --------------------------------------------------------------------


def claude(env, payload) -> dict:
    return env.respond(payload, host="claude")  # as `egg install claude` registers it: egg-hook claude


def test_claude_code_payloads(env):
    base = {"session_id": "claude-1", "cwd": env.project, "transcript_path": "/dev/null"}
    claude(env, dict(base, hook_event_name="UserPromptSubmit", prompt_id="p-1", prompt="why does make build fail?"))
    claude(env, dict(base, hook_event_name="PostToolUse", tool_name="Bash", tool_input={"command": "make build"},
                     tool_response={"stdout": "cc -c main.c\n", "stderr": "main.c:3: error: missing ;", "interrupted": False},
                     tool_use_id="toolu_1"))
    claude(env, dict(base, hook_event_name="Stop", last_assistant_message="a missing semicolon in main.c line 3"))
    (v,) = env.views()
    assert (v.session, v.turn) == ("claude-1", "p-1")
    assert v.tools[0].outcome == "cc -c main.c\nmain.c:3: error: missing ;"
    assert v.answer == "a missing semicolon in main.c line 3"
    # and the claude host name is accepted by egg-hook
    assert answer_here("claude", json.dumps(dict(base, hook_event_name="SessionStart")), env.paths)["systemMessage"]


def test_a_failed_claude_tool_call_is_recorded_from_its_error(env):
    """Claude Code reports a non-zero exit as PostToolUseFailure, with `error` instead of tool_response."""
    base = {"session_id": "claude-2", "cwd": env.project, "transcript_path": "/dev/null"}
    claude(env, dict(base, hook_event_name="UserPromptSubmit", prompt_id="p-2", prompt="run the tests"))
    claude(env, dict(base, hook_event_name="PostToolUseFailure", tool_name="Bash", tool_input={"command": "pytest -q"},
                     error="Exit code 1\n1 failed, 3 passed", is_interrupt=False, tool_use_id="toolu_9"))
    claude(env, dict(base, hook_event_name="Stop", last_assistant_message="one test fails"))
    (v,) = env.views()
    assert [(t.work, t.outcome) for t in v.tools] == [('Bash\n{"command":"pytest -q"}', "Exit code 1\n1 failed, 3 passed")]


def test_claude_context_is_capped_at_its_limit(env):
    env.write_config(config.PROJECT_TEMPLATE.replace("handoff_chars = 8000", "handoff_chars = 40000"))
    for i in range(4):  # four turns whose evidence is about 6,500 characters each
        big = "".join("src/billing_%d.py:%d: late_fee += rate * day  # case %d\n" % (i, n, n) for n in range(130))
        env.respond(env.prompt("where is late_fee computed in billing_%d?" % i, turn="t%d" % i, session="s0"))
        env.respond(env.tool("grep -rn late_fee src/billing_%d.py" % i, big, turn="t%d" % i, session="s0"))
        env.respond(env.stop("late_fee is computed in billing_%d" % i, turn="t%d" % i, session="s0"))
    sizes = {}
    for host in ("claude", "codex"):
        reply = answer_here(host, json.dumps(env.prompt("where is late_fee computed?", turn="t-" + host, session="s-" + host)),
                             env.paths)
        sizes[host] = len(reply["hookSpecificOutput"]["additionalContext"])
    assert 0 < sizes["claude"] <= 10000 < sizes["codex"] <= 40000


# -- handing prior work back ------------------------------------------------------------------


def test_related_prompt_gets_the_prior_outcome(env):
    record_late_fee(env)
    reply = env.respond(env.prompt("how is the late_fee calculated?", turn="turn-2", session="sess-2"))
    assert set(reply) == {"hookSpecificOutput"}
    out = reply["hookSpecificOutput"]
    assert out["hookEventName"] == "UserPromptSubmit"
    ctx = out["additionalContext"]
    assert ctx.startswith("EGGSHELL PRIOR WORK")
    assert "where is late_fee computed?" in ctx and LATE_FEE_ANSWER in ctx
    assert "src/billing.py:42: def late_fee(days):" in ctx
    assert len(ctx) <= 8000


def test_unrelated_prompt_gets_nothing(env):
    record_late_fee(env)
    assert env.respond(env.prompt("set up the kubernetes helm chart", turn="turn-2")) == {}
    assert env.log_text() == ""


def test_handoff_budget_and_top_k_come_from_the_project_config(env):
    for i in range(4):
        env.record_turn("late_fee case %d" % i, [("pytest -k late_fee_%d" % i, "late_fee %d ok\n" % i * 40)],
                        "late_fee case %d passes" % i, turn="t%d" % i)
    env.write_config('handoff_chars = 2000\ntop_k = 1\n')
    ctx = env.respond(env.prompt("late_fee case", turn="t9"))["hookSpecificOutput"]["additionalContext"]
    assert len(ctx) <= 2000
    assert ctx.count("] Request") == 1


def test_read_stores_are_searched_too(env, tmp_path):
    other = Env(tmp_path / "proj" / "vendor" / "billing")  # a store inside the project (outside it is refused)
    other.paths = env.paths
    record_late_fee(other)
    env.write_config('read = ["vendor/billing/proj/.eggs/work.egg"]\n')
    ctx = env.respond(env.prompt("where is late_fee?", turn="t2"))["hookSpecificOutput"]["additionalContext"]
    assert LATE_FEE_ANSWER in ctx


def test_session_start_says_a_short_system_message(env):
    assert env.respond(env.ev("SessionStart", source="startup")) == {
        "systemMessage": "Eggshell: recording this project; 0 prior turns in .eggs/work.egg."}
    assert not os.path.exists(os.path.dirname(env.egg))  # reading creates no store
    record_late_fee(env)
    msg = env.respond(env.ev("SessionStart", source="startup"))["systemMessage"]
    assert msg == "Eggshell: recording this project; 1 prior turn in .eggs/work.egg."
    assert len(msg) < 200 and "\n" not in msg


def test_pre_tool_use_and_unknown_events_reply_empty(env):
    assert env.respond(env.ev("PreToolUse", turn_id="t", tool_name="Bash", tool_input={"command": "ls"})) == {}
    assert env.respond(env.ev("SomeFutureEvent")) == {}
    assert env.log_text() == ""


# -- leaving other projects alone ---------------------------------------------------------------


def test_project_without_config_is_left_alone(env, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    before = listing(str(tmp_path))
    for p in (env.prompt("where is late_fee computed?"), env.tool("ls", "a\n"), env.stop("done"), env.ev("SessionStart")):
        p["cwd"] = str(plain)
        assert env.respond(p) == {}
    assert listing(str(tmp_path)) == before
    assert not os.path.exists(env.data)


def test_disabled_project_is_left_alone(env):
    env.write_config("enabled = false\n")
    record_late_fee(env)
    assert not os.path.exists(env.egg)
    assert not os.path.exists(env.paths.journal_dir)


def test_nested_directory_belongs_to_the_nearest_project(env):
    inner = os.path.join(env.project, "vendor", "lib")
    os.makedirs(inner)
    env.write_config('egg = ".eggs/inner.egg"\n', project=os.path.join(env.project, "vendor"))
    env.respond(env.prompt("where is it", cwd=inner))
    env.respond(env.stop("here", cwd=inner))
    assert os.path.exists(os.path.join(env.project, "vendor", ".eggs", "inner.egg"))
    assert not os.path.exists(env.egg)


# -- failing open -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, logged",
    [
        ("this is not json", "payload is not valid JSON"),
        ("", "payload is not valid JSON"),
        ("[1, 2, 3]", "not a JSON object"),
        ('"UserPromptSubmit"', "not a JSON object"),
        ("null", "not a JSON object"),
        ('{"session_id": "s", "prompt": "x"}', "'hook_event_name'"),
        ('{"hook_event_name": 7, "session_id": "s"}', "'hook_event_name'"),
    ],
)
def test_malformed_payloads_fail_open_and_are_logged(env, raw, logged):
    assert env.respond(raw) == {}
    assert logged in env.log_text()
    assert not os.path.exists(env.paths.journal_dir)


def test_missing_session_id_fails_open(env):
    p = env.prompt("where is late_fee computed?")
    del p["session_id"]
    assert env.respond(p) == {}
    assert "PayloadError" in env.log_text() and "'session_id'" in env.log_text()
    assert not os.path.exists(env.paths.journal_dir)


def test_missing_prompt_fails_open(env):
    p = env.prompt("x")
    del p["prompt"]
    assert env.respond(p) == {}
    assert "'prompt'" in env.log_text()


@pytest.mark.parametrize(
    "text, logged",
    [
        ("tpo_k = 5\n", "unknown key 'tpo_k'"),
        ("top_k = [\n", "not valid TOML"),
        ('top_k = "five"\n', "'top_k' must be"),
        ("handoff_chars = 100000\n", "'handoff_chars' must be"),
    ],
)
def test_invalid_project_config_fails_open(env, text, logged):
    record_late_fee(env)
    before = read_bytes(env.egg)
    env.respond(env.prompt("where is late_fee?", turn="t2"))  # journaled while the config was good
    env.write_config(text)
    # SessionStart says memory is off and why (tests/unit/runtime/test_session_notices.py); the rest answer {}
    assert env.respond(env.ev("SessionStart"))["systemMessage"].startswith("Eggshell is OFF for this project: ")
    for p in (env.prompt("where is late_fee?", turn="t3"), env.tool("ls", "a\n", turn="t2"), env.stop("x", turn="t2")):
        assert env.respond(p) == {}
    log = env.log_text()
    assert [line.split()[1:3] for line in log.splitlines()] == [["SessionStart", "ConfigError:"], ["UserPromptSubmit", "ConfigError:"]]
    assert logged in log and PROJECT_CONFIG in log
    assert read_bytes(env.egg) != before
    # t2 began while the config was good: it runs and is saved under the selection snapshotted
    # at its prompt (the broken file is only read again by the next prompt), so nothing is lost
    t2 = [v for v in env.views() if v.turn == "t2"]
    assert [(t.work, v.answer) for v in t2 for t in v.tools] == [('Bash\n{"command":"ls"}', "x")]
    assert not os.path.exists(Journal(env.paths.journal_dir).turn_path("sess-1", "t2"))


def test_unreadable_project_config_fails_open(env, monkeypatch):
    def unreadable(path, *a, **k):
        if str(path).endswith(PROJECT_CONFIG):
            raise PermissionError(13, "Permission denied")
        return open(path, *a, **k)

    monkeypatch.setattr(config, "open", unreadable, raising=False)
    assert env.respond(env.prompt("where is late_fee?")) == {}
    assert "cannot read: Permission denied" in env.log_text()


def test_damaged_store_is_not_changed_and_the_error_is_logged(env):
    record_late_fee(env)
    damaged = damage(env.egg)
    assert env.respond(env.ev("SessionStart"))["systemMessage"].startswith("Eggshell is OFF for this project: %s:" % env.egg)
    assert env.respond(env.prompt("where is late_fee computed?", turn="t2")) == {}
    assert env.respond(env.tool("grep late_fee", "x\n", turn="t2")) == {}
    assert env.respond(env.stop("it is in billing.py", turn="t2")) == {}
    assert read_bytes(env.egg) == damaged
    log = env.log_text().splitlines()
    assert len(log) == 4 and all("EggError" in line and env.egg in line for line in log)
    assert [line.split()[1] for line in log] == ["SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"]
    # the turn is still in the journal, sealed, so nothing observed was lost
    assert [e["event"] for e in Journal(env.paths.journal_dir).read("sess-1", "t2")] == ["prompt", "tool", "stop"]
    assert os.stat(env.log).st_mode & 0o777 == 0o600


@pytest.fixture
def as_a_hook_process():
    """egg-hook's main sets what a one-event process wants (umask 077, no cyclic gc): undo it after."""
    import gc

    umask, collecting = os.umask(0o077), gc.isenabled()
    os.umask(umask)
    yield
    os.umask(umask)
    if collecting:
        gc.enable()


def test_unknown_host_fails_open(env, monkeypatch, capsys, as_a_hook_process):
    monkeypatch.setenv("EGGSHELL_DATA_ROOT", env.data)
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(env.ev("SessionStart"))))
    assert hook.main(["no-such-host"]) == 0
    assert capsys.readouterr().out == "{}\n"
    assert "unknown host 'no-such-host'" in env.log_text()


def test_help_exits_0(capsys):
    assert hook.main(["--help"]) == 0
    assert "egg-hook HOST" in capsys.readouterr().out


# -- the real process ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stdin",
    [
        "this is not json",
        "",
        "[1,2]",
        '{"session_id":"s"}',
        "UNKNOWN_EVENT",
        "NO_SESSION",
        "{\"hook_event_name\":\"Stop\",\"session_id\":\"s\",\"cwd\":\"/nonexistent/dir\"}",
    ],
)
def test_process_fails_open_with_one_json_line(env, stdin):
    if stdin == "UNKNOWN_EVENT":
        stdin = json.dumps(env.ev("Bogus"))
    elif stdin == "NO_SESSION":
        p = env.prompt("x")
        del p["session_id"]
        stdin = json.dumps(p)
    r = env.run_bin(stdin)
    assert r.returncode == 0
    assert one_json_object(r.stdout) == {}


def test_process_with_invalid_config_and_damaged_store(env):
    record_late_fee(env)
    damaged = damage(env.egg)
    for p in (env.prompt("where is late_fee?", turn="t2"), env.tool("ls", "a\n", turn="t2"), env.stop("x", turn="t2")):
        r = env.run_bin(json.dumps(p))
        assert r.returncode == 0 and one_json_object(r.stdout) == {}
    assert read_bytes(env.egg) == damaged
    assert [line.split()[1:3] for line in env.log_text().splitlines()] == [
        ["UserPromptSubmit", "EggError:"], ["PostToolUse", "EggError:"], ["Stop", "EggError:"]]
    env.write_config("bogus = 1\n")
    r = env.run_bin(json.dumps(env.prompt("where is late_fee?")))
    assert r.returncode == 0 and one_json_object(r.stdout) == {}
    assert "unknown key 'bogus'" in env.log_text()
    assert "egg-hook: failed open" in r.stderr


def test_process_full_turn_then_handoff(env):
    chat1 = dict(session="sess-0")
    for p in (env.prompt("where is late_fee computed?", **chat1), env.tool("grep -rn late_fee src/", "src/billing.py:42\n", **chat1),
              env.stop(LATE_FEE_ANSWER, **chat1)):
        r = env.run_bin(json.dumps(p))
        assert r.returncode == 0 and one_json_object(r.stdout) is not None
    r = env.run_bin(json.dumps(env.prompt("how is late_fee calculated", turn="turn-2")))
    assert r.returncode == 0
    assert LATE_FEE_ANSWER in one_json_object(r.stdout)["hookSpecificOutput"]["additionalContext"]
    assert env.log_text() == ""


def test_process_without_any_python_environment_still_answers(env, tmp_path):
    empty = tmp_path / "empty-prefix"
    empty.mkdir()
    e = dict(env.proc_env(), EGGSHELL_PREFIX=str(empty))
    r = env.run_bin(json.dumps(env.prompt("x")), env=e)
    assert r.returncode == 0 and r.stdout == "{}\n"


def test_process_help_exits_0(env):
    r = env.run_bin("", "--help")
    assert r.returncode == 0 and "usage: egg-hook HOST" in r.stdout


def test_a_cold_hook_does_not_start_on_a_store_it_cannot_read_in_time(env, monkeypatch):
    """No manager, and a store too large to read within the budget (as a 100,000-turn one is at any
    real rate): the prompt is answered at once without memory and the log says why, instead of
    holding the agent for the whole budget; SessionStart still says what it records."""
    from eggshell.runtime import warm

    record_late_fee(env)
    monkeypatch.setattr(warm, "STORE_MB_S", 1e-9)  # any store is too large at this rate
    assert env.respond(env.prompt("how is the late_fee calculated?", turn="turn-2", session="sess-2")) == {}
    logged = env.log_text()
    assert "TooLargeCold" in logged and "reading it takes" in logged and "TimeoutError" not in logged
    assert env.respond(env.ev("SessionStart", source="startup")) == {
        "systemMessage": "Eggshell: recording this project in .eggs/work.egg (too large to count before the manager has loaded it)."}
    monkeypatch.setattr(warm, "STORE_MB_S", 15.0)  # at the real rate the same store is small: memory again
    ctx = env.respond(env.prompt("how is the late_fee calculated?", turn="turn-3", session="sess-3"))
    assert LATE_FEE_ANSWER in ctx["hookSpecificOutput"]["additionalContext"]


def test_a_cold_hook_over_a_store_too_big_to_read_ranks_from_its_search_index(env, monkeypatch):
    """No manager, a store too large to read in time, but its search index can be brought up to
    date within the budget: the prompt gets the prior turn, read from the store through the index
    alone, the same handoff a full read gives; the trace says it was ranked from the index."""
    from eggshell.runtime import warm

    record_late_fee(env)
    full = env.respond(env.prompt("how is the late_fee calculated?", turn="turn-2", session="sess-2"))
    assert LATE_FEE_ANSWER in full["hookSpecificOutput"]["additionalContext"]
    trace = os.path.join(env.data, "semantic", "matcher-trace.jsonl")
    assert all(json.loads(x).get("source") is None for x in open(trace))  # a small store is read whole
    monkeypatch.setattr(warm, "INDEXED_PAST_MB", 0.0)  # any store is past the size a cold hook reads
    got = env.respond(env.prompt("how is the late_fee calculated?", turn="turn-3", session="sess-3"))
    assert got == full and env.log_text() == ""
    traced = [json.loads(x) for x in open(trace)]
    assert traced[-1]["source"] == "index" and traced[-1]["answered_as"] == "lexical" and traced[-1]["selected"]
    # an index that cannot be brought up to date within the budget: at once, without memory, and the log says why
    monkeypatch.setattr(warm, "INDEX_MB_S", 1e-9)
    env.respond(env.stop("done", turn="turn-3", session="sess-3"))  # the store grows: the index is behind
    assert env.respond(env.prompt("how is the late_fee calculated?", turn="turn-4", session="sess-4")) == {}
    logged = env.log_text()
    assert "TooLargeCold" in logged and "search index cannot serve" in logged and "TimeoutError" not in logged
