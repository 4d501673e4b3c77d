"""`egg import codex|claude` (cli/importer.py): transcripts into each project's store, as live capture would.

Everything is real: `egg init` projects, the real transcripts of tests/fixtures/transcripts/
(placed with the test's own root), the real hook path for live capture (helpers.hooks,
egg-hook's own code) and real `.egg` files read back with a full Store.
"""

from __future__ import annotations

import io
import json
import os

import pytest

from eggshell.cli import importer
from eggshell.graph.events import OUTPUT_CHARS, TRUNCATED
from eggshell.graph.records import turn_views
from eggshell.graph.save import save_turn
from eggshell.graph.store import Store
from eggshell.graph.turns import observed_text
from eggshell.paths import from_env
from eggshell.runtime.journal import Journal
from helpers import read_bytes
from helpers.cli_env import Egg
from helpers.hooks import answer_here
from helpers.transcripts import codex_rollout, hook_payloads, place, text

BASIC_SESSION = "01a234ee-4575-7ba1-afdc-cb54bb2d929a"
BASIC_TURN = "01a234ee-458e-70d0-ab2e-a3ad07d246f5"


@pytest.fixture
def egg(tmp_path, monkeypatch, capsys):
    return Egg(tmp_path, monkeypatch, capsys)


def project(egg, root, config: str | None = None):
    proj = root / "proj"
    proj.mkdir(parents=True, exist_ok=True)
    rc, out, err = egg("init", str(proj))
    assert rc == 0, err
    if config is not None:  # top-level keys: before the template's tables
        cfg = proj / ".eggshell.toml"
        cfg.write_text(config + cfg.read_text())
    return proj


def store_of(proj) -> str:
    return str(proj / ".eggs" / "work.egg")


def views(proj):
    return turn_views(Store.open(store_of(proj)).graph)


def summary(out: str) -> str:
    return [ln for ln in out.splitlines() if "already present" in ln and "bad line" in ln][-1]


def live(host: str, hooks: str, root) -> None:
    """Replay what the hooks received in the fixture's chat through egg-hook's own path."""
    paths = from_env()
    for p in hook_payloads(hooks, root):
        answer_here(host, p, paths)


# -- what lands ---------------------------------------------------------------------------


def test_a_codex_chat_lands_in_its_project_store_as_the_hooks_would_have_stored_it(egg, tmp_path):
    root = tmp_path / "r"
    proj = project(egg, root)
    path = place("codex/basic.jsonl", root)
    rc, out, err = egg("import", "codex", path)
    assert rc == 0, err
    assert summary(out) == "imported 1 turn from 1 session into 1 store, skipped 0 already present, 0 bad lines"
    (v,) = views(proj)
    assert (v.session, v.turn, v.prompt, v.answer, v.cwd) == (BASIC_SESSION, BASIC_TURN, "PROMPT do things", "Final: done", ".")
    assert [(t.work, t.outcome) for t in v.tools] == [('Bash\n{"command":"cat a.txt"}', "hello\nworld\n"),
                                                      ('Bash\n{"command":"echo err >&2; exit 3"}', "err\n")]
    assert v.time == "2026-12-02T04:06:00.340000Z"  # when the turn ran, not when it was imported
    g = Store.open(store_of(proj)).graph
    assert all(observed_text(g.nodes[t.id]) is None for t in v.tools)  # no fingerprint: advice only


def test_a_claude_chat_lands_with_every_call_and_no_image_data(egg, tmp_path):
    root = tmp_path / "r"
    proj = project(egg, root)
    rc, out, err = egg("import", "claude", place("claude/basic.jsonl", root))
    assert rc == 0, err
    (v,) = views(proj)
    assert v.answer == "Final: claude done" and len(v.tools) == 9
    failed = next(t for t in v.tools if '"echo oops' in t.work)
    assert failed.outcome == "Exit code 4\noops"  # PostToolUseFailure's error, as live capture stores it
    assert b"iVBORw0KGgo" not in read_bytes(store_of(proj))  # the PNG's base64 never reaches the store
    assert any("[image/png not stored by Eggshell" in t.outcome for t in v.tools)


def test_a_second_run_adds_nothing(egg, tmp_path):
    root = tmp_path / "r"
    proj = project(egg, root)
    path = place("codex/basic.jsonl", root)
    assert egg("import", "codex", path)[0] == 0
    before = read_bytes(store_of(proj))
    rc, out, err = egg("import", "codex", path)
    assert rc == 0 and read_bytes(store_of(proj)) == before
    assert summary(out) == "imported 0 turns from 0 sessions into 0 stores, skipped 1 already present, 0 bad lines"


def test_a_transcript_that_grew_adds_only_its_new_turns(egg, tmp_path):
    root = tmp_path / "r"
    proj = project(egg, root)
    path = place("codex/edge.jsonl", root)  # turn t2 is still running: its last line is cut
    rc, out, err = egg("import", "codex", path)
    assert rc == 0, err
    assert [(v.turn, v.answer) for v in views(proj)] == [("t1", "compute_late_fee in src/billing.py"), ("t2", None)]
    assert "1 turn still running (or cut short) imported as far as its transcript goes" in out
    grown = text("codex/edge.jsonl", root).rsplit("\n", 1)[0] + "\n" + "\n".join([
        json.dumps({"timestamp": "2026-11-20T10:00:12.000Z", "type": "event_msg",
                    "payload": {"type": "task_complete", "turn_id": "t2", "last_agent_message": "capped at 10%"}}),
        *codex_rollout("edge-sess", str(root / "proj"), [{"turn": "t3", "prompt": "and the tests?", "calls": [("pytest -q", "3 passed\n")],
                                                          "answer": "they pass"}], start="2026-11-20T10:01:00").splitlines()[1:],
    ]) + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(grown)
    rc, out, err = egg("import", "codex", path)
    assert rc == 0, err
    assert summary(out) == "imported 2 turns from 1 session into 1 store, skipped 1 already present, 2 bad lines"
    got = {v.turn: v for v in views(proj)}
    assert sorted(got) == ["t1", "t2", "t3"] and got["t2"].answer == "capped at 10%" and got["t3"].answer == "they pass"
    assert [t.work for t in got["t2"].tools] == ['Bash\n{"command":"sed -n 1,20p src/billing.py"}']  # once, not twice


def test_a_turn_captured_live_is_not_stored_again(egg, tmp_path):
    root = tmp_path / "r"
    proj = project(egg, root)
    live("codex", "codex/basic.hooks.ndjson", root)
    (v,) = views(proj)
    g = Store.open(store_of(proj)).graph
    assert all(observed_text(g.nodes[t.id]) for t in v.tools), "the live capture took fingerprints"
    before = read_bytes(store_of(proj))
    rc, out, err = egg("import", "codex", place("codex/basic.jsonl", root))
    assert rc == 0, err
    assert read_bytes(store_of(proj)) == before
    assert summary(out).startswith("imported 0 turns") and "skipped 1 already present" in summary(out)


def test_a_claude_turn_captured_live_is_not_stored_again(egg, tmp_path):
    root = tmp_path / "r"
    proj = project(egg, root)
    live("claude", "claude/basic.hooks.ndjson", root)
    before = read_bytes(store_of(proj))
    rc, out, err = egg("import", "claude", place("claude/basic.jsonl", root))
    assert rc == 0 and read_bytes(store_of(proj)) == before, out


def test_live_and_imported_turns_compile_to_the_same_work(egg, tmp_path):
    """The same chat, captured live in one project and imported into another: the same Works and outputs."""
    a, b = tmp_path / "a", tmp_path / "b"
    for host, name in (("codex", "codex/basic"), ("claude", "claude/basic")):
        pa, pb = project(egg, a / host), project(egg, b / host)
        live(host, name + ".hooks.ndjson", a / host)
        assert egg("import", host, place(name + ".jsonl", b / host))[0] == 0
        la, lb = views(pa), views(pb)
        assert [v.turn for v in la] == [v.turn for v in lb]
        def works(vs, top, image=False):  # each project's own root named alike
            return sorted((t.work.replace(str(top), "@"), t.outcome.replace(str(top), "@")) for v in vs for t in v.tools
                          if ("not stored by Eggshell" in t.outcome or "iVBORw0KGgo" in t.outcome) == image)

        assert works(la, a / host) == works(lb, b / host), host
        assert [w for w, _ in works(la, a / host, True)] == [w for w, _ in works(lb, b / host, True)]  # live keeps the PNG's base64


def test_a_turn_stored_in_part_is_completed_and_keeps_its_stored_calls(egg, tmp_path):
    root = tmp_path / "r"
    proj = project(egg, root)
    seen = {"kind": "files", "files": {"a.txt": "deadbeef"}}
    partial = {"session": BASIC_SESSION, "turn": BASIC_TURN, "cwd": str(proj), "prompt": "PROMPT do things", "answer": None,
               "tools": [{"name": "Bash", "id": "call_1", "input": {"command": "cat a.txt"}, "output": "hello\nworld\n", "observed": seen}]}
    s = Store.open(store_of(proj))
    save_turn(s, partial, str(proj))  # what the save queue commits of an open turn
    rc, out, err = egg("import", "codex", place("codex/basic.jsonl", root))
    assert rc == 0, err
    (v,) = views(proj)
    assert v.answer == "Final: done" and sorted(t.use_id for t in v.tools) == ["call_1", "call_2"]  # each call once
    g = Store.open(store_of(proj)).graph
    assert observed_text(g.nodes[next(t.id for t in v.tools if t.use_id == "call_1")]) is not None  # as stored, fingerprint and all


def test_an_answered_turn_in_the_store_is_left_as_it_is(egg, tmp_path):
    """Live capture may hold more of a turn than its transcript (a subagent's call it attached): kept as it is."""
    root = tmp_path / "r"
    proj = project(egg, root)
    calls = [{"name": "Bash", "id": "call_1", "input": {"command": "cat a.txt"}, "output": "hello\nworld\n"},
             {"name": "Bash", "id": "toolu_sub", "input": {"command": "echo from-sub"}, "output": "from-sub\n"}]
    save_turn(Store.open(store_of(proj)), {"session": BASIC_SESSION, "turn": BASIC_TURN, "cwd": str(proj), "prompt": "PROMPT do things",
                                           "tools": calls, "answer": "Final: done"}, str(proj))
    before = read_bytes(store_of(proj))
    rc, out, err = egg("import", "codex", place("codex/basic.jsonl", root))
    assert rc == 0 and read_bytes(store_of(proj)) == before and "skipped 1 already present" in summary(out)


def test_a_turn_the_hooks_are_recording_is_left_to_them(egg, tmp_path):
    root = tmp_path / "r"
    proj = project(egg, root)
    Journal(from_env().journal_dir).append(BASIC_SESSION, BASIC_TURN, {"event": "prompt", "prompt": "PROMPT do things"})
    rc, out, err = egg("import", "codex", place("codex/basic.jsonl", root))
    assert rc == 0 and not os.path.exists(store_of(proj))
    assert "1 turn the hooks are recording right now" in out


def test_a_forgotten_turn_is_not_brought_back(egg, tmp_path):
    root = tmp_path / "r"
    proj = project(egg, root)
    path = place("codex/basic.jsonl", root)
    assert egg("import", "codex", path)[0] == 0
    (v,) = views(proj)
    assert egg("forget", v.key, "--egg", store_of(proj))[0] == 0
    assert egg("compact", "--purge", store_of(proj))[0] == 0
    assert b"hello" not in read_bytes(store_of(proj))
    rc, out, err = egg("import", "codex", path)
    assert rc == 0 and views(proj) == [] and b"hello" not in read_bytes(store_of(proj)), out


# -- what is left out, and said -------------------------------------------------------------


def test_dry_run_says_what_would_be_imported_per_project_and_writes_nothing(egg, tmp_path):
    root = tmp_path / "r"
    proj = project(egg, root)
    path = place("codex/basic.jsonl", root)
    rc, out, err = egg("import", "codex", "--dry-run", path)
    assert rc == 0 and not os.path.exists(store_of(proj))
    assert "%s (project %s): would import 1 turn from 1 session" % (store_of(proj), proj) in out
    assert summary(out) == ("dry run: would import 1 turn from 1 session into 1 store, skipped 0 already present, "
                            "0 bad lines; nothing was written")
    assert egg("import", "codex", path)[0] == 0
    before = read_bytes(store_of(proj))
    rc, out, err = egg("import", "codex", "--dry-run", path)
    assert read_bytes(store_of(proj)) == before and "would import 0 turns" in summary(out)


def test_since_and_project_choose_what_is_imported(egg, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    p1, p2 = project(egg, one), project(egg, two)
    place("codex/basic.jsonl", one, tmp_path / "t" / "rollout-a.jsonl")  # ran 2026-12-02
    with open(tmp_path / "t" / "rollout-b.jsonl", "w") as f:
        f.write(codex_rollout("s-two", str(p2), [{"turn": "old", "prompt": "old", "calls": [("ls", "x\n")], "answer": "a",
                                                   "time": "2026-10-01T08:00:00.000Z"},
                                                  {"turn": "new", "prompt": "new", "calls": [("ls", "y\n")], "answer": "b",
                                                   "time": "2026-12-05T08:00:00.000Z"}]))
    rc, out, err = egg("import", "codex", "--since", "2026-12-03", str(tmp_path / "t"))
    assert rc == 0, err
    assert not os.path.exists(store_of(p1)) and [v.turn for v in views(p2)] == ["new"]
    rc, out, err = egg("import", "codex", "--project", str(p1), str(tmp_path / "t"))
    assert rc == 0 and [v.turn for v in views(p1)] == [BASIC_TURN] and [v.turn for v in views(p2)] == ["new"]
    with pytest.raises(SystemExit) as e:
        egg("import", "codex", "--since", "yesterday-ish", str(tmp_path / "t"))
    assert e.value.code == 2 and "'yesterday-ish' is not a date: give YYYY-MM-DD" in egg.capsys.readouterr().err


def test_a_chat_outside_any_project_is_skipped_unless_egg_names_a_store(egg, tmp_path):
    root = tmp_path / "r"
    (root / "proj").mkdir(parents=True)  # no .eggshell.toml
    path = place("codex/basic.jsonl", root)
    rc, out, err = egg("import", "codex", path)
    assert rc == 0 and "skipped 1 session: not in an Eggshell project" in out
    target = tmp_path / "mine.egg"
    rc, out, err = egg("import", "codex", path, "--egg", str(target))
    assert rc == 0 and [v.turn for v in turn_views(Store.open(str(target)).graph)] == [BASIC_TURN]


def test_the_hosts_default_folders_are_searched(egg, tmp_path, monkeypatch):
    root = tmp_path / "r"
    proj = project(egg, root)
    place("codex/basic.jsonl", root, egg.codex / "sessions" / "2026" / "12" / "02" / "rollout-2026-12-02T04-06-00-x.jsonl")
    place("codex/tools.jsonl", root, egg.codex / "sessions" / "history.jsonl")  # not a rollout file name
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    sid = "59ed3417-f638-4127-9f09-0ecfa33bdc72"
    place("claude/agent/%s.jsonl" % sid, root, tmp_path / "claude" / "projects" / "-p" / (sid + ".jsonl"))
    place("claude/agent/%s/subagents/agent-af8f9ce208069f1ab.jsonl" % sid, root,
          tmp_path / "claude" / "projects" / "-p" / sid / "subagents" / "agent-af8f9ce208069f1ab.jsonl")
    assert egg("import", "codex")[0] == 0
    assert [v.turn for v in views(proj)] == [BASIC_TURN]
    rc, out, err = egg("import", "claude")
    assert rc == 0 and len(views(proj)) == 3, out
    assert "subagent line" not in out  # the subagents/ folder is not read at all


def test_nothing_to_import_says_where_it_looked(egg, tmp_path):
    rc, out, err = egg("import", "claude")
    assert rc == 0 and "no Claude Code transcripts found in" in out


def test_a_named_file_that_is_not_a_transcript_fails_and_the_rest_is_imported(egg, tmp_path):
    root = tmp_path / "r"
    proj = project(egg, root)
    bad = place("not-a-transcript.jsonl", root)
    rc, out, err = egg("import", "codex", bad, place("codex/basic.jsonl", root))
    assert rc == 1 and "%s: not a Codex rollout file (no session_meta record); skipped" % bad in err
    assert [v.turn for v in views(proj)] == [BASIC_TURN]
    os.rename(bad, os.path.join(os.path.dirname(bad), "rollout-odd.jsonl"))
    rc, out, err = egg("import", "codex", os.path.dirname(bad))  # found in a folder: reported, not a failure
    assert rc == 0 and "not a Codex rollout file" in err


def test_a_path_that_does_not_exist_is_a_usage_error(egg, tmp_path):
    rc, out, err = egg("import", "codex", str(tmp_path / "nope.jsonl"))
    assert rc == 2 and "nope.jsonl: no such file or directory" in err


def test_bad_lines_are_named_counted_and_the_rest_is_read(egg, tmp_path):
    root = tmp_path / "r"
    project(egg, root)
    path = place("codex/edge.jsonl", root)
    rc, out, err = egg("import", "codex", path)
    assert rc == 0
    assert "%s: 3 lines are not a JSON object (line 3, 4, 28); skipped, the rest was read" % path in err
    assert summary(out).endswith("3 bad lines")
    assert "1 call the transcript shows no result for" in out and "1 tool result whose call is not in its transcript" in out
    assert "1 turn without a user request (started by the agent itself): left out" in out


def test_claude_side_chains_are_counted_and_left_out(egg, tmp_path):
    root = tmp_path / "r"
    proj = project(egg, root)
    rc, out, err = egg("import", "claude", place("claude/edge.jsonl", root))
    assert rc == 0, err
    assert "3 subagent lines skipped" in out
    assert [v.turn for v in views(proj)] == ["p1", "claude-u-15"]  # p3 shows nothing yet: not stored
    assert all("find ." not in t.work for v in views(proj) for t in v.tools)


# -- the same redaction and caps as live capture ----------------------------------------------


SECRET = "AKIAIOSFODNN7EXAMPLE"
RULES = 'never_record = ["echo err*"]\nredact = ["planet-[0-9]+"]\n'


def test_redaction_and_never_record_apply_as_in_live_capture(egg, tmp_path):
    """A secret and a never_record call, captured live in one project and imported into another: stored alike."""
    a, b = tmp_path / "a", tmp_path / "b"
    pa, pb = project(egg, a, RULES), project(egg, b, RULES)
    dirty = lambda s: s.replace("hello\\nworld", "hello %s planet-42\\nworld" % SECRET)  # noqa: E731
    paths = from_env()
    for line in dirty(text("codex/basic.hooks.ndjson", a)).splitlines():
        answer_here("codex", json.loads(line), paths)
    t = tmp_path / "t.jsonl"
    t.write_text(dirty(text("codex/basic.jsonl", b)))
    assert egg("import", "codex", str(t))[0] == 0
    (va,), (vb,) = views(pa), views(pb)
    assert [x.outcome for x in va.tools] == [x.outcome for x in vb.tools]
    assert vb.tools[0].outcome == "hello [redacted: aws-access-key-id] [redacted: custom]\nworld\n"
    assert vb.tools[1].outcome == "[withheld by never_record: echo err*]"
    assert SECRET.encode() not in read_bytes(store_of(pb))


def test_a_huge_output_is_cut_as_live_capture_cuts_it(egg, tmp_path):
    root = tmp_path / "r"
    proj = project(egg, root)
    big = "x" * (OUTPUT_CHARS + 5000)
    t = tmp_path / "big.jsonl"
    t.write_text(codex_rollout("s-big", str(proj), [{"turn": "t", "prompt": "print a lot", "calls": [("yes x | head", big)], "answer": "done"}]))
    assert egg("import", "codex", str(t))[0] == 0
    (v,) = views(proj)
    assert v.tools[0].outcome == big[:OUTPUT_CHARS] + TRUNCATED % (OUTPUT_CHARS, len(big))


def test_an_unsafe_store_is_refused(egg, tmp_path):
    root = tmp_path / "r"
    proj = project(egg, root)
    os.makedirs(proj / ".eggs", exist_ok=True)
    os.chmod(proj / ".eggs", 0o777)
    rc, out, err = egg("import", "codex", place("codex/basic.jsonl", root))
    assert rc == 1 and "refused" in err and not os.path.exists(store_of(proj))


def test_progress_is_one_rewritten_line_on_a_terminal_only():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty, pipe = Tty(), io.StringIO()
    bar, quiet = importer.Progress(tty), importer.Progress(pipe)
    for p in (bar, quiet):
        p.last = -1.0
        p(12, 3)
        p.clear()
    assert tty.getvalue().startswith("\regg import: 12 turns from 3 sessions, ") and tty.getvalue().endswith("\r\033[K")
    assert pipe.getvalue() == ""
