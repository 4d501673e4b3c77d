"""No configuration can stall a hook (issue 31.3): real `bin/egg-hook codex` processes.

A red team's `redact = ["^(\\w+\\s?)+$"]` once kept a prompt unanswered past 60 s (budget 10 s)
and unjournaled: Python's `re` backtracked, holding the GIL. User patterns now run on RE2
(core/userrx.py), and stdin is read under the budget (runtime/hookinput.py).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time

import pytest

from eggshell.config import PROJECT_TEMPLATE
from eggshell.runtime.journal import Journal
from helpers.hook_env import EGG_HOOK, Env, one_json_object

BUDGET_S = 10.0  # the default budget of prompt and tool events (runtime/hookflow.budget_s)
WELL_WITHIN_S = BUDGET_S / 2

# (pattern, an input Python's `re` backtracks on for minutes, an answer the pattern must redact, that answer redacted)
CATASTROPHIC = {
    "red team": (r"^(\w+\s?)+$", "please fix the parse_config function so that it returns a dict!",
                 "all tests pass now", "[redacted: custom]"),
    "nested quantifiers": (r"(x+x+)+y", "check " + "x" * 40, "ok xxy", "ok [redacted: custom]"),
    "alternation overlap": (r"(\w+|\w)+!", "abc" * 15, "done!", "[redacted: custom]"),
    "identical alternatives": (r"(x|x)+y", "x" * 40, "got xy", "got [redacted: custom]"),
    "(a|aa)+$": (r"(a|aa)+$", "a" * 60 + "!", "baaa", "b[redacted: custom]"),
    "(.*a){20}": (r"(.*a){20}", "a" * 19 + "b" * 10_000, "x" + "a" * 20 + " end", "[redacted: custom] end"),
}


def timed(env: Env, payload: dict) -> tuple[dict, float]:
    """egg-hook codex's reply and how long it took; a hook past its budget fails the test."""
    t = time.monotonic()
    r = subprocess.run([EGG_HOOK, "codex"], input=json.dumps(payload), capture_output=True, text=True,
                       env=env.proc_env(), cwd=env.project, timeout=BUDGET_S)
    took = time.monotonic() - t
    assert r.returncode == 0, r.stderr
    return one_json_object(r.stdout), took


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CATASTROPHIC))
def test_a_catastrophic_redact_pattern_never_stalls_a_hook(tmp_path, case):
    pattern, attack, answer, redacted = CATASTROPHIC[case]
    env = Env(tmp_path)
    env.write_config("redact = ['%s']\n" % pattern + PROJECT_TEMPLATE)
    took = {}
    _, took["prompt"] = timed(env, env.prompt(attack))
    (e,) = Journal(env.paths.journal_dir).read("sess-1", "turn-1")
    assert e["prompt"] == attack and e["redact"] == [pattern]  # journaled, before any answer
    _, took["tool"] = timed(env, env.tool("cat notes.txt", attack + "\n" + attack + "\n"))
    _, took["stop"] = timed(env, env.stop(answer))
    assert max(took.values()) < WELL_WITHIN_S, took
    (v,) = env.views()  # the turn is saved
    assert v.prompt == attack
    assert [t.outcome for t in v.tools] == [attack + "\n" + attack + "\n"]
    assert v.answer == redacted  # the user's pattern still redacts what it should
    assert "budget" not in env.log_text()


def _reply_within(proc: subprocess.Popen, seconds: float) -> str | None:
    """The first line proc writes on stdout within `seconds`, or None."""
    end = time.monotonic() + seconds
    buf = b""
    fd = proc.stdout.fileno()
    while b"\n" not in buf:
        left = end - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
    return buf.decode()


@pytest.mark.parametrize("written", ["", '{"hook_event_name": "UserPromptSubmit", "prompt": "half a payl'])
def test_a_stdin_never_closed_answers_empty_within_the_budget_and_logs_why(tmp_path, written):
    env = Env(tmp_path)
    budget = 3.0
    t = time.monotonic()
    proc = subprocess.Popen([EGG_HOOK, "codex"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**env.proc_env(), "EGGSHELL_BUDGET_S": str(budget)}, cwd=env.project)
    try:
        if written:
            proc.stdin.write(written.encode())
            proc.stdin.flush()
        line = _reply_within(proc, budget)  # stdin stays open all along
        took = time.monotonic() - t
        assert line is not None, "no answer within the budget while stdin was held open"
        assert one_json_object(line) == {} and took < budget + 1.5  # the hook aims at its budget less 0.25 s; process start on a loaded machine
        assert proc.wait(2) == 0
        assert "stdin was not closed within the hook's budget (%d bytes read)" % len(written) in env.log_text()
    finally:
        proc.stdin.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_a_whole_payload_on_a_stdin_left_open_is_journaled_and_answered(tmp_path):
    env = Env(tmp_path)
    proc = subprocess.Popen([EGG_HOOK, "codex"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**env.proc_env(), "EGGSHELL_BUDGET_S": "3"}, cwd=env.project)
    try:
        proc.stdin.write(json.dumps(env.prompt("where is late_fee computed?")).encode() + b"\n")
        proc.stdin.flush()
        line = _reply_within(proc, 3.0)
        assert line is not None and isinstance(one_json_object(line), dict)
        (e,) = Journal(env.paths.journal_dir).read("sess-1", "turn-1")
        assert e["prompt"] == "where is late_fee computed?"
        assert "stdin was not closed" not in env.log_text()
    finally:
        proc.stdin.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.slow
def test_a_pattern_too_slow_for_its_text_withholds_that_text_and_the_hook_answers_in_time(tmp_path):
    """Linear is not always fast: this pattern's 8,005-instruction program runs on RE2's NFA at
    about 30 s per MB, in one search no check between matches can stop (core/userrx.py)."""
    env = Env(tmp_path)
    env.write_config("redact = ['(\\w+\\s?){1000}!', 'ACME-[0-9]{6}']\n" + PROJECT_TEMPLATE)
    output = "ab " * 300_000
    took = {}
    _, took["prompt"] = timed(env, env.prompt("summarise the log for ACME-123456"))
    _, took["tool"] = timed(env, env.tool("cat big.log", output))
    _, took["stop"] = timed(env, env.stop("nothing in it for ACME-654321"))
    assert max(took.values()) < WELL_WITHIN_S, took
    (v,) = env.views()
    assert v.prompt == "summarise the log for [redacted: custom]"
    assert [t.outcome for t in v.tools] == ["[withheld: %d characters past the redaction time limit]" % len(output)]
    assert v.answer == "nothing in it for [redacted: custom]"
