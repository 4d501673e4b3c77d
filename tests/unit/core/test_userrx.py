"""core/userrx.py: a repository's `redact` patterns run on RE2 (issue 31.3).

What RE2 cannot run in linear time is refused with its file, line and reason, and `egg doctor`
says so; what it runs is bounded by one deadline per payload, past which the rest is withheld.
The hook-process tests of the same promise are in stages/test_hook_budget.py.
"""

from __future__ import annotations


import pytest

from eggshell.cli.doctor import Checkup, check_config
from eggshell.config import ConfigError, PROJECT_TEMPLATE, load
from eggshell.core import userrx
from eggshell.core.redact import redact_payload, redact_text, rules
from helpers.hook_env import Env


@pytest.mark.parametrize("pattern", [
    r"(a)\1",  # backreference
    r"foo(?=bar)",  # lookahead
    r"(?<!x)secret",  # lookbehind
    r"(?>a+)b",  # atomic group
    r"a++",  # possessive
    r"x{1001}",  # past RE2's repetition limit
])
def test_a_pattern_re2_refuses_is_a_config_error_with_file_line_and_reason(tmp_path, pattern):
    env = Env(tmp_path)
    env.write_config("# rules\nredact = [\n  'ACME-[0-9]{6}',\n  '%s',\n]\n" % pattern + PROJECT_TEMPLATE)
    with pytest.raises(ConfigError) as e:
        load(env.paths, env.project)
    says = str(e.value)
    assert says.startswith("%s/.eggshell.toml:4: 'redact' entry %r" % (env.project, pattern)), says
    assert "not a valid regular expression for RE2" in says
    status, text = check_config(Checkup(env.paths, env.project, {}))
    assert status == "FAIL" and ".eggshell.toml:4:" in text and "RE2" in text


def test_the_line_is_found_for_a_basic_string_with_escapes(tmp_path):
    env = Env(tmp_path)
    env.write_config('redact = ["ok-[0-9]+", "(\\\\w+)\\\\1"]\n' + PROJECT_TEMPLATE)
    with pytest.raises(ConfigError) as e:
        load(env.paths, env.project)
    assert str(e.value).startswith("%s/.eggshell.toml:1: 'redact' entry '(\\\\w+)\\\\1'" % env.project), str(e.value)


def test_the_red_team_pattern_loads_doctor_says_the_config_is_fine_and_it_runs_at_once(tmp_path):
    env = Env(tmp_path)
    env.write_config("redact = ['^(\\w+\\s?)+$']\n" + PROJECT_TEMPLATE)
    cfg = load(env.paths, env.project)
    assert cfg.redact == (r"^(\w+\s?)+$",)
    assert check_config(Checkup(env.paths, env.project, {}))[0] == "ok"
    prompt = "please fix the parse_config function so that it returns a dict!"
    # Scanned whole within the event's deadline (past it the text would be withheld); Python's `re` took minutes here.
    assert redact_text(prompt, rules(cfg.redact).extra) == prompt
    assert redact_text("all tests pass now", rules(cfg.redact).extra) == "[redacted: custom]"


def test_re2_refusal_is_not_printed_on_stderr(capfd):
    with pytest.raises(ValueError):
        userrx.compile_user(r"(a)\1")
    assert capfd.readouterr().err == ""  # RE2 logs refusals unless told not to; a host may show hook stderr


@pytest.mark.parametrize("pattern,attack", [
    (r"^(\w+\s?)+$", "please fix the parse_config function so that it returns a dict!"),
    (r"(x+x+)+y", "x" * 5000),
    (r"(a|aa)+$", "a" * 5000 + "!"),
    (r"(.*a){20}", "a" * 19 + "b" * 100_000),
])
def test_catastrophic_patterns_run_in_linear_time(pattern, attack):
    extra = rules((pattern,)).extra
    assert redact_text(attack, extra) == attack  # scanned whole within the deadline: a stalled search would be withheld


def test_the_secret_group_is_replaced_alone_and_positions_survive_non_ascii():
    extra = rules((r"pin (?P<secret>\d{4})", r"ACME-\d{6}")).extra
    text = "héllo ✓ pin 9876 and ACME-123456, ünd pin 12"
    assert redact_text(text, extra) == "héllo ✓ pin [redacted: custom] and [redacted: custom], ünd pin 12"


def test_an_optional_secret_group_that_did_not_take_part_redacts_the_whole_match():
    extra = rules((r"tik(?:et=(?P<secret>\d+))?!",)).extra
    assert redact_text("a tik! b tiket=1234!", extra) == "a [redacted: custom] b tiket=[redacted: custom]!"


def test_a_pattern_that_matches_everywhere_stops_at_the_deadline_and_withholds_the_rest(monkeypatch):
    monkeypatch.setattr(userrx, "TIME_S", 0.05)
    text = "abc " * 1_000_000  # 4 MB, a million matches
    p = {"hook_event_name": "PostToolUse", "tool_response": text, "prompt": "see abc"}
    out = redact_payload(p, rules((r"abc",)))  # the deadline, not the text's end, stops it: the rest is withheld
    assert "abc" not in out["tool_response"]  # what was not scanned is not kept
    head, sep, _ = out["tool_response"].partition("[withheld: ")  # the scanned head, or none of it
    assert sep and out["tool_response"].endswith(" characters past the redaction time limit]")
    assert set(head.split()) <= {"[redacted:", "custom]"}


def test_a_search_too_slow_for_its_text_is_abandoned_at_the_deadline(monkeypatch, capfd):
    monkeypatch.setattr(userrx, "TIME_S", 0.2)
    extra = rules((r"(\w+\s?){1000}!",)).extra  # 8,005 instructions: RE2's NFA, about 30 s per MB
    text = "ab " * 100_000
    # Abandoned, not awaited: a search that ran to its end (about 9 s here) would return the text redacted.
    assert redact_text(text, extra) == "[withheld: %d characters past the redaction time limit]" % len(text)
    assert redact_text("ab ab!", extra) == "ab ab!"  # a short text runs here, at once
    assert capfd.readouterr().err == ""  # nor does RE2 log its DFA running out of memory
