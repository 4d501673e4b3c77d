"""Issue 31.1: a journaled turn leaves the journal only when it is in the store.

A turn of six 1 MB outputs was once deleted whole: the save-time redaction spent one scan
budget on the whole record, cut a later tool's name with its "withheld" line, the compiler
refused the name, and the save queue took that for "nothing storable" and unlinked the file.
Here, through the hooks' own path (helpers.hooks.answer_here):
- big turns of every shape reach the store whole (outputs capped per call as documented);
- capture then save never raises and save-time redaction leaves a journaled record as it is
  (a hypothesis property over tool counts, sizes around the caps, names and every canary kind);
- a turn whose save fails is moved whole to quarantine/turns/ with its reason, named by
  `egg doctor`, and `egg recover` saves it once it can be saved, or says why not.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from eggshell.cli import main as egg_main
from eggshell.core import redact
from eggshell.graph import events as graph_events
from eggshell.graph import save as graph_save
from eggshell.graph.events import OUTPUT_CHARS, TRUNCATED
from eggshell.runtime import quarantine
from eggshell.runtime.journal import Journal, turn_record
from helpers.canaries import canaries
from helpers.hook_env import Env


def _turn(env: Env, outputs: list, names=None, session="sess-1", turn="turn-1") -> None:
    env.respond(env.prompt("why does the nightly job fail?", turn, session_id=session))
    for i, out in enumerate(outputs):
        p = env.tool("cat log%d" % i, out, turn, "call-%d" % i, session_id=session)
        if names is not None:
            p["tool_name"] = names[i]
        env.respond(p)
    env.respond(env.stop("the job fails on a full disk", turn, session_id=session))


def _journal_files(env: Env) -> list[str]:
    return Journal(env.paths.journal_dir).files()


def _stored(out: str) -> str:
    """What the store keeps of one Bash output: itself, or its first OUTPUT_CHARS and the mark."""
    return out if len(out) <= OUTPUT_CHARS else out[:OUTPUT_CHARS] + TRUNCATED % (OUTPUT_CHARS, len(out))


def _log_block(i: int, size: int) -> str:
    line = "2026-12-06T06:%02d:00Z worker[%d] retrying upload chunk, disk at 97%%\n" % (i % 60, i)
    return (line * (size // len(line) + 1))[:size]


@pytest.mark.parametrize("calls,size", [
    (6, 1_000_000),  # the red team's turn: about 6 MB in one turn
    (45, 100_000),  # 4.5 MB in many calls
    (200, 2_000),  # a 200-call turn
    (5, 4_300_000),  # each output over the 1 MiB cap and over the old whole-turn scan budget
    (50, 1 << 20),  # a 50 MB turn
])
def test_a_big_turn_reaches_the_store_whole(tmp_path, calls, size):
    env = Env(tmp_path)
    outputs = [_log_block(i, size) for i in range(calls)]
    _turn(env, outputs)
    assert _journal_files(env) == []
    (v,) = env.views()
    assert [t.outcome for t in v.tools] == [_stored(o) for o in outputs]
    assert v.answer == "the job fails on a full disk"
    assert not os.path.exists(quarantine.turns_dir(env.data))


def test_a_fifty_megabyte_output_is_kept_as_its_capped_head(tmp_path):
    env = Env(tmp_path)
    out = _log_block(7, 50 << 20)
    _turn(env, ["small first output\n", out, "small last output\n"])
    (v,) = env.views()
    assert [t.outcome for t in v.tools] == ["small first output\n", _stored(out), "small last output\n"]


def test_tool_names_and_fingerprints_are_never_rewritten_by_save_time_redaction():
    long_text = "x" * (redact.SCAN_CAP + 10)
    observed = {"kind": "file", "sha256": "ab" * 32}
    record = {"session": "s", "turn": "t", "cwd": "/p", "prompt": long_text, "answer": long_text,
              "tools": [{"name": "mcp__db__query", "id": "toolu_%d" % i, "input": {"q": long_text}, "output": long_text,
                         "observed": observed} for i in range(3)]}
    out = redact.redact_record(record)
    assert [(t["name"], t["id"], t["observed"]) for t in out["tools"]] == [("mcp__db__query", "toolu_%d" % i, observed) for i in range(3)]
    assert all("[withheld: " in t["output"] and len(t["output"]) < 5000 for t in out["tools"])  # each call spent its own budget on its input
    assert out["prompt"].startswith("x" * 1000) and out["answer"].startswith("x" * 1000)


# -- the property: capture, then save, never raises and changes nothing ---------------------------

_CANARIES = canaries(31)
_NAMES = ["Bash", "exec_command", "mcp__github__search_code", "run_shell_command", "apply_patch", "Read", "t\u00e9l\u00e9charger"]


@st.composite
def _outputs(draw):
    n = draw(st.integers(1, 24))
    out = []
    for _ in range(n):
        size = draw(st.sampled_from([0, 1, 200, 1499, 1500, 1501, 1999, 2000, 2001, 2200, 4000, 9000]))
        body = draw(st.sampled_from(["plain text line\n", "k=v, a: b\n", "\u00e9t\u00e9 \u2603\n", "x" * 77]))
        text = (body * (size // max(1, len(body)) + 1))[:size]
        if draw(st.booleans()):
            c = draw(st.sampled_from(_CANARIES))
            at = draw(st.integers(0, len(text)))
            text = text[:at] + "\n" + c.text + "\n" + text[at:]
        shape = draw(st.sampled_from(["str", "claude", "json"]))
        out.append(text if shape == "str" else {"stdout": text, "stderr": "", "interrupted": False} if shape == "claude"
                   else {"content": [{"type": "text", "text": text}], "isError": False})
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(outputs=_outputs(), names=st.lists(st.sampled_from(_NAMES), min_size=24, max_size=24))
def test_capture_then_save_never_raises_and_save_changes_nothing(monkeypatch, outputs, names):
    """Small caps (the code reads them at call time) let a few hundred characters explore every
    shape the 4 MiB scan budget and the 1 MiB output cap give at full size."""
    monkeypatch.setattr(redact, "SCAN_CAP", 2000)
    monkeypatch.setattr(redact, "TAIL_KEPT", 100)
    monkeypatch.setattr(graph_events, "OUTPUT_CHARS", 1500)
    with tempfile.TemporaryDirectory() as d:
        env = Env(Path(d))
        env.respond(env.prompt("why does the nightly job fail?"))
        for i, out in enumerate(outputs):
            p = env.tool("cat log%d" % i, out, use="call-%d" % i)
            p["tool_name"] = names[i]
            env.respond(p)
        record = turn_record(Journal(env.paths.journal_dir).read("sess-1", "turn-1"))
        record["answer"] = "done"
        assert redact.redact_record(record) == record  # what capture kept, save keeps as it is
        graph_save.prepare_turn(record, env.project)  # and it compiles
        env.respond(env.stop("done"))
        assert _journal_files(env) == [] and not os.path.exists(quarantine.turns_dir(env.data))
        (v,) = env.views()
        assert len(v.tools) == len(outputs)
        stored = "\n".join(t.outcome for t in v.tools)
        assert not any(c.secret in stored for c in _CANARIES)


# -- a save that fails keeps the turn whole ---------------------------------------------------------


def _fail_compile(monkeypatch, why="injected: the compiler broke"):
    def broken(*a, **k):
        raise ValueError(why)

    monkeypatch.setattr(graph_save, "compile_turn", broken)


def _egg(env: Env, *args: str, capsys) -> tuple[int, str]:
    env_vars = {"EGGSHELL_PREFIX": env.prefix, "EGGSHELL_DATA_ROOT": env.data, "CODEX_HOME": env.paths.codex_home}
    old = {k: os.environ.get(k) for k in env_vars}
    os.environ.update(env_vars)
    try:
        rc = egg_main.main(list(args))
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return rc, capsys.readouterr().out


def test_a_turn_whose_save_fails_is_kept_whole_then_recovered(tmp_path, monkeypatch, capsys):
    env = Env(tmp_path)
    env.respond(env.prompt("where is parse_config?"))
    env.respond(env.tool("grep -rn parse_config src", "src/config.py:3:def parse_config(text):\n"))
    (path,) = _journal_files(env)
    _fail_compile(monkeypatch)
    env.respond(env.stop("in src/config.py"))
    assert not os.path.exists(path) and _journal_files(env) == []  # it left the queue...
    (held,) = quarantine.held_turns(env.data)  # ...only to quarantine, whole, with why
    assert held.why["turn"] == "turn-1" and "injected: the compiler broke" in held.reason and held.why["store"] == env.egg
    events = Journal(env.paths.journal_dir).read_file(held.path)
    assert [e["event"] for e in events] == ["prompt", "tool", "stop"]
    assert oct(os.stat(held.path).st_mode & 0o777) == "0o600"
    assert "egg recover" in env.log_text() and "injected" in env.log_text()
    assert not os.path.exists(env.egg) or env.views() == []

    rc, out = _egg(env, "recover", capsys=capsys)  # still broken: it stays, saying why
    assert rc == 1 and "still cannot be saved" in out and "injected" in out
    assert len(quarantine.held_turns(env.data)) == 1

    monkeypatch.undo()
    rc, out = _egg(env, "recover", "--list", capsys=capsys)
    assert rc == 0 and "injected" in out and "1 turn quarantined" in out
    rc, out = _egg(env, "recover", capsys=capsys)
    assert rc == 0 and "1 turn saved, 0 turns left" in out
    (v,) = env.views()
    assert (v.prompt, [t.outcome for t in v.tools], v.answer) == (
        "where is parse_config?", ["src/config.py:3:def parse_config(text):\n"], "in src/config.py")
    assert quarantine.held_turns(env.data) == [] and os.listdir(quarantine.turns_dir(env.data)) == []
    rc, out = _egg(env, "recover", capsys=capsys)
    assert rc == 0 and "no quarantined turns" in out


def test_doctor_warns_of_a_quarantined_turn(tmp_path, monkeypatch):
    from eggshell.cli import doctor

    env = Env(tmp_path)
    _fail_compile(monkeypatch, "injected for doctor")
    _turn(env, ["one output\n"])
    level, text = doctor.check_quarantine(doctor.Checkup(env.paths, os.getcwd(), dict(os.environ)))
    assert level == "WARN" and "1 turn could not be saved" in text and "egg recover" in text and "injected for doctor" in text


def test_an_open_turn_that_cannot_be_saved_stays_in_the_queue(tmp_path, monkeypatch):
    """Before its seal, a turn that fails to save is neither moved nor removed: its chat goes on."""
    env = Env(tmp_path)
    env.respond(env.prompt("where is parse_config?"))
    env.respond(env.tool("grep -rn parse_config src", "src/config.py:3:def parse_config(text):\n"))
    _fail_compile(monkeypatch)
    from eggshell.runtime.commits import settle
    from eggshell.graph.store import Store

    journal = Journal(env.paths.journal_dir)
    done = settle(journal, journal.turn_path("sess-1", "turn-1"), Store.open)
    assert (done.committed, done.removed) == (False, False)
    assert len(_journal_files(env)) == 1 and quarantine.held_turns(env.data) == []


def test_a_store_that_cannot_be_opened_keeps_the_turn_in_the_queue(tmp_path):
    """The store's fault, not the record's: nothing moves, the next pass tries again."""
    env = Env(tmp_path)
    env.respond(env.prompt("where is parse_config?"))
    env.respond(env.tool("grep -rn parse_config src", "x\n"))
    from eggshell.runtime.commits import settle_all

    journal = Journal(env.paths.journal_dir)
    journal.append("sess-1", "turn-1", {"event": "stop", "answer": "a", "why": "Stop", "time": "t"})

    def no_store(path):
        raise OSError(28, "No space left on device")

    logged = []
    assert settle_all(journal, no_store, log=logged.append) == []
    assert len(_journal_files(env)) == 1 and quarantine.held_turns(env.data) == []
    assert "kept for the next pass" in logged[0]


def test_two_turns_held_under_one_name_do_not_overwrite_each_other(tmp_path):
    data = str(tmp_path / "data")
    j = Journal(os.path.join(data, "journal"))
    kept = []
    for answer in ("first", "second"):
        j.append("s", "t", {"event": "prompt", "session": "s", "turn": "t", "cwd": "/", "prompt": "p"})
        j.append("s", "t", {"event": "stop", "answer": answer, "why": "Stop"})
        kept.append(quarantine.keep_turn(data, j.turn_path("s", "t"), "s", "t", "/x.egg", "why %s" % answer))
    assert len(set(kept)) == 2
    assert [h.reason for h in quarantine.held_turns(data)] == ["why first", "why second"]
    assert [json.loads(open(p).read().splitlines()[1])["answer"] for p in kept] == ["first", "second"]


# -- a tool result that arrives after its turn was saved ----------------------------------------------


def _events_quarantined(env: Env) -> list[dict]:
    p = quarantine.path(env.data)
    return [json.loads(line) for line in open(p, encoding="utf-8")] if os.path.exists(p) else []


@pytest.mark.parametrize("event", ["PostToolUse", "PostToolUseFailure"])
def test_a_tool_result_after_its_turn_was_saved_is_kept_aside_redacted(tmp_path, event):
    """A host delivering out of order (or a background call ending late): the stored turn stays as
    the agent answered it, and the late result is kept aside instead of vanishing (red team: loss_late_tool_after_stop)."""
    env = Env(tmp_path)
    env.respond(env.prompt("run the slow job"))
    env.respond(env.stop("started it"))
    late = env.tool("./slow-job.sh", "LATE-RESULT-77 password=hunter2hunter2\n", use="late-1")
    late["hook_event_name"] = event
    assert env.respond(late) == {}
    (v,) = env.views()
    assert v.tools == () and v.answer == "started it"
    (q,) = _events_quarantined(env)
    assert (q["turn"], q["event"]) == ("turn-1", event) and "after its turn was saved" in q["why"]
    assert "LATE-RESULT-77" in q["payload"] and "hunter2hunter2" not in q["payload"]
    assert "kept in" in env.log_text()


def test_a_tool_result_of_a_turn_never_recorded_is_not_kept(tmp_path):
    env = Env(tmp_path)
    env.respond(env.prompt("run the slow job"))
    env.respond(env.stop("started it"))
    env.respond(env.tool("./other.sh", "OTHER-TURN-OUTPUT\n", turn="turn-9", use="x-1"))  # not this chat's recorded turn
    env.respond(env.tool("./other.sh", "OTHER-CHAT-OUTPUT\n", use="x-2", session_id="sess-never"))  # a chat never recorded
    assert _events_quarantined(env) == []


# -- the second redaction pass is skipped only for what this very code redacted ---------------------


def test_a_turn_redacted_at_capture_by_this_code_is_not_redacted_again(tmp_path, monkeypatch):
    env = Env(tmp_path)

    def second_pass(record):
        raise AssertionError("redacted again")

    monkeypatch.setattr(graph_save, "redact_record", second_pass)
    _turn(env, ["one output\n", "another\n"])
    (v,) = env.views()
    assert [t.outcome for t in v.tools] == ["one output\n", "another\n"]


@pytest.mark.parametrize("stamp", [None, "0123456789abcdef", 7])
def test_a_journal_not_redacted_by_this_code_is_redacted_at_save(tmp_path, stamp):
    """A journal written before the stamp existed, or by other redaction code (an upgrade between
    the prompt and the save), gets the whole second pass: a secret in it never reaches the store."""
    from eggshell.graph.store import Store
    from eggshell.runtime.commits import settle

    env = Env(tmp_path)
    secret = "ghp_" + "Q7x2LmN9pR4sT6vW8yZ1aB3cD5eF7gH9iJ0k"
    j = Journal(env.paths.journal_dir)
    prompt = {"event": "prompt", "session": "s", "turn": "t", "cwd": env.project, "prompt": "why?", "write": env.egg,
              "root": env.project}
    if stamp is not None:
        prompt["redacted"] = stamp
    j.append("s", "t", prompt)
    j.append("s", "t", {"event": "tool", "name": "Bash", "id": "c1", "input": {"command": "env"}, "output": "GH=%s\n" % secret})
    j.append("s", "t", {"event": "stop", "answer": "done", "why": "Stop"})
    done = settle(j, j.turn_path("s", "t"), Store.open)
    assert done.committed and done.removed
    stored = open(env.egg, "rb").read()
    assert secret.encode() not in stored and b"[redacted: " in stored
