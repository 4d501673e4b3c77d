"""Issue 31.2: `egg forget` and `egg compact --purge` reach every copy, not only the stores.

A red team found the text of a forgotten turn left in quarantine/events.ndjson, in the
journal of an open chat (its prompt held it) and of a `private`-profile chat, and when the
open chat's turn ended it was back in the store and in a new chat's handoff. Here, through
the hooks' own path (helpers.hooks.answer_here) and the CLI in-process:

  1. the acceptance test: a canary sent through every place (the stored turn's prompt, tool
     output or answer; an open chat; a private chat; a quarantined event and turn; an `egg view`
     page; hook.log, run/manager.log and the matcher trace; the vector cache; a warm manager's snapshot), then
     `egg forget` (by --match or by key) and `egg compact --purge`: no file under the data
     root or the project holds it; then the open chat's Stop (which repeats it) and a new
     chat asking about it: it is in no store, no handoff and no file;
  2. the pieces: a journaled turn marked forgotten keeps nothing of its later calls and Stop;
     `egg recover` never saves a forgotten quarantined turn; forgetting one tool call of an
     open turn keeps the rest of that turn; a log line or quarantined event that does not
     hold the text is kept.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from eggshell.cli import main as egg_main
from eggshell.graph.records import searchable_text, turn_views
from eggshell.graph.store import Store
from eggshell.runtime import quarantine
from eggshell.runtime.chat import Chat
from eggshell.runtime.commits import settle_all
from eggshell.runtime.journal import Journal
from eggshell.search import vectors
from helpers import regular_files
from helpers.hook_env import Env
from helpers.vectors import DIM, MODEL, vecs_for

CANARY = "CANARY-31b2-every-copy"
OTHER = "the docker build needs a fresh lockfile"


def files_holding(needle: str, *roots: str) -> list[str]:
    """Every regular file under these directories (symlinks not followed) whose bytes hold `needle`."""
    return sorted(os.path.relpath(p, root) for root in roots for p, data in regular_files(root) if needle.encode() in data)


@pytest.fixture
def env(tmp_path, monkeypatch):
    e = Env(tmp_path)
    for k in list(os.environ):
        if k.startswith(("EGGSHELL_", "CODEX_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("EGGSHELL_PREFIX", e.prefix)
    monkeypatch.setenv("EGGSHELL_DATA_ROOT", e.data)
    monkeypatch.setenv("CODEX_HOME", e.paths.codex_home)
    monkeypatch.chdir(e.project)
    return e


def egg(capsys, *args: str) -> tuple[int, str, str]:
    rc = egg_main.main(list(args))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def append_line(path: str, line: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def stored_turn(where: str) -> tuple[str, list[tuple[str, str]], str]:
    """The turn of an earlier chat that holds the canary in its prompt, a tool output or its answer."""
    prompt = "where is the deploy token %s read?" % CANARY if where == "prompt" else "where is the deploy token read?"
    out = "deploy.py:9: # the deploy name is %s\n" % CANARY if where == "tool" else "deploy.py:9: # the deploy name\n"
    answer = "it is %s, read in deploy.py" % CANARY if where == "answer" else "in deploy.py, line 9"
    return prompt, [("grep -rn deploy .", out)], answer


def quarantined_turn(env: Env, session: str, turn: str, text: str) -> None:
    """A whole turn the save queue could not save, as quarantine.keep_turn leaves it."""
    j = Journal(os.path.join(env.data, "held-journal"))
    j.append(session, turn, {"event": "prompt", "session": session, "turn": turn, "cwd": env.project, "prompt": text,
                             "write": env.egg, "root": env.project})
    j.append(session, turn, {"event": "stop", "answer": "noted", "why": "Stop"})
    quarantine.keep_turn(env.data, j.turn_path(session, turn), session, turn, env.egg, "injected: could not be saved")


def context(reply: dict) -> str:
    return reply.get("hookSpecificOutput", {}).get("additionalContext", "") if isinstance(reply, dict) else ""


# -- 1. the acceptance test -----------------------------------------------------------------------------


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
@pytest.mark.parametrize("where", ["prompt", "tool", "answer"])
@pytest.mark.parametrize("how", ["match", "key"])
def test_forget_and_purge_reach_every_copy_and_a_later_stop_brings_nothing_back(env, capsys, how, where, warm):
    from eggshell.runtime.warm import Resources

    prompt, tools, answer = stored_turn(where)
    env.record_turn(prompt, tools, answer, session="sess-0", turn="t-s")
    env.record_turn("why does the docker build fail?", [("docker build .", "error: lockfile is stale\n")], OTHER,
                    session="sess-k", turn="t-k")
    (s_view,) = [v for v in env.views() if v.session == "sess-0"]

    # An open chat: its prompt and a tool output hold the canary; its Stop comes after the purge.
    o = dict(session_id="sess-open")
    env.respond(env.prompt("what is %s used for?" % CANARY, "t-o", **o))
    env.respond(env.tool("grep -rn %s ." % CANARY, "deploy.py:9: # the deploy name is %s\n" % CANARY, "t-o", "c-o", **o))
    if warm or how == "key":  # a manager's pass saves an open turn's calls as they come (as interrupted)
        settle_all(Journal(env.paths.journal_dir), Store.open, log=lambda m: None)
        assert any(v.session == "sess-open" for v in env.views())
    data_root_places = ["journal/"]
    if how == "match":  # never in a store: no key names them
        Chat(env.paths.state_dir, "sess-priv").update(lambda c: replace(c, profile="private"))
        env.respond(env.prompt("keep this off the record: %s" % CANARY, "t-p", session_id="sess-priv"))
        env.respond(env.tool("cat NOTES", "call it %s\n" % CANARY, "t-p", "c-p", session_id="sess-priv"))
        quarantined_turn(env, "sess-q", "t-q", "rotate %s tonight" % CANARY)
        data_root_places.append("quarantine/turns/")
    # A quarantined event of the stored turn, and log lines quoting what it held.
    held = prompt if where == "prompt" else tools[0][1] if where == "tool" else answer
    quarantine.add(env.data, "sess-0", "t-s", "PostToolUse", "input nested too deep", quarantine.payload_text({"output": held}))
    append_line(env.log, "2026-12-06T07:00:00Z PostToolUse ValueError: bad output %s" % held)
    append_line(os.path.join(env.data, "run", "manager.log"), "manager: slow prompt %s" % held)
    append_line(os.path.join(env.data, "semantic", "matcher-trace.jsonl"), json.dumps({"query": held, "hits": 1}))
    append_line(env.log, "2026-12-06T07:00:01Z a line about something else")
    data_root_places += ["quarantine/events.ndjson", "logs/hook.log", "run/manager.log", "semantic/matcher-trace.jsonl"]

    # A new chat is handed the stored turn; the page of `egg view`; a warm manager's snapshot.
    reply = env.respond(env.prompt("where is the deploy token read?", "t-n", session_id="sess-h"))
    if where != "tool":  # an output whose files changed since is not handed over
        assert CANARY in context(reply) and CANARY in Chat(env.paths.state_dir, "sess-h").load().last_handoff
        data_root_places.append("state/chats/")
    assert egg(capsys, "view")[0] == 0
    data_root_places.append("view/")
    texts = [searchable_text(v) for v in env.views()]  # what the model embeds of each stored turn, and windows of it
    windows = texts + [t[i:i + 80] for t in texts for i in range(0, len(t), 40)]
    vectors.VectorCache(vectors.vectors_root(env.data), MODEL, DIM, log=lambda m: None).put(windows, vecs_for(windows))
    data_root_places.append("semantic/vectors/")
    if warm:
        res = Resources(env.data, env.paths.bin_dir, warm=True)
        res.workspace((env.egg,))
        res.turn_count(env.egg)
        assert res.save_snapshots() == 1
        data_root_places.append("run/snapshots/")
    held_by = files_holding(CANARY, env.data, env.project)
    for place in data_root_places:
        assert any(h.startswith(place) for h in held_by), (place, held_by)
    assert ".eggs/work.egg" in held_by

    if how == "match":
        rc, out, err = egg(capsys, "forget", "--match", CANARY)
    else:
        keys = [s_view.key] + [v.key for v in env.views() if v.session == "sess-open"]
        for key in keys:
            rc, out, err = egg(capsys, "forget", key)
            assert rc == 0, err
    assert rc == 0, err
    assert CANARY not in out
    rc, out, err = egg(capsys, "compact", "--purge", env.egg)
    assert rc == 0, err
    assert files_holding(CANARY, env.data, env.project) == []

    # The open chat's turn ends, repeating the canary; a new chat asks about it.
    env.respond(env.tool("cat deploy.py", "# named %s\n" % CANARY, "t-o", "c-o2", **o))
    assert env.respond(env.stop("it is %s, the deploy token" % CANARY, "t-o", **o)) == {}
    env.respond(env.stop("kept off the record: %s" % CANARY, "t-p", session_id="sess-priv"))
    settle_all(Journal(env.paths.journal_dir), Store.open, log=lambda m: None)  # what a manager's next pass does
    rc, out, err = egg(capsys, "recover")  # nothing forgotten is left to save
    assert rc == 0 and "no quarantined turns" in out, out + err
    reply = env.respond(env.prompt("what is %s used for?" % CANARY.split("-")[0], "t-z", session_id="sess-z"))
    assert CANARY not in context(reply)
    assert CANARY not in Chat(env.paths.state_dir, "sess-z").load().last_handoff
    assert not any(CANARY in (v.prompt + (v.answer or "") + "".join(t.outcome for t in v.tools)) for v in env.views())
    assert files_holding(CANARY, env.data, env.project) == []
    assert [v.session for v in turn_views(Store.open(env.egg).graph)] == ["sess-k"]  # the rest stays
    assert "a line about something else" in env.log_text()
    assert egg(capsys, "fsck", env.egg)[0] == 0


# -- 2. the pieces ---------------------------------------------------------------------------------------


def test_an_open_turn_whose_prompt_held_the_text_saves_nothing_at_its_stop(env, capsys):
    """The red team's case: the open turn's prompt alone held the text, so no store did when it was forgotten."""
    env.record_turn("rotate %s tonight" % CANARY, [], "rotated", session="sess-0", turn="t-s")
    o = dict(session_id="sess-open")
    env.respond(env.prompt("is %s rotated?" % CANARY, "t-o", **o))
    assert egg(capsys, "forget", "--match", CANARY)[0] == 0
    journal = Journal(env.paths.journal_dir)
    assert [e["event"] for e in journal.read("sess-open", "t-o")] == ["forgotten"]
    env.respond(env.tool("cat ROTATION", "rotated %s at 02:00\n" % CANARY, "t-o", "c-1", **o))
    assert [e["event"] for e in journal.read("sess-open", "t-o")] == ["forgotten"]  # a later call is not journaled
    assert env.respond(env.stop("yes, %s was rotated" % CANARY, "t-o", **o)) == {}
    assert not journal.has("sess-open", "t-o")  # the save queue removed it, saving nothing
    assert env.views() == [] and CANARY.encode() not in open(env.egg, "rb").read().split(b'"forget"')[-1]
    reply = env.respond(env.prompt("is it rotated?", "t-n", session_id="sess-new"))
    assert CANARY not in context(reply)
    assert egg(capsys, "compact", "--purge", env.egg)[0] == 0
    assert files_holding(CANARY, env.data, env.project) == []


def test_a_private_chat_journal_is_swept_and_its_stop_leaves_nothing(env, capsys):
    """No store holds the text at all: `--match` still finds it (and exits 0) where it is."""
    Chat(env.paths.state_dir, "sess-priv").update(lambda c: replace(c, profile="private"))
    env.respond(env.prompt("off the record: %s" % CANARY, "t-p", session_id="sess-priv"))
    assert files_holding(CANARY, env.paths.journal_dir)
    rc, out, err = egg(capsys, "forget", "--match", CANARY)
    assert rc == 0 and "marked 1 journaled turn forgotten" in out, out + err
    assert files_holding(CANARY, env.paths.journal_dir) == []
    env.respond(env.stop("noted %s" % CANARY, "t-p", session_id="sess-priv"))
    assert files_holding(CANARY, env.data) == [] and Journal(env.paths.journal_dir).files() == []


@pytest.mark.parametrize("how", ["match", "key"])
def test_egg_recover_never_saves_a_forgotten_quarantined_turn(env, capsys, how):
    env.record_turn("rotate %s tonight" % CANARY, [("cat ROTATION", "due at 02:00\n")], "rotated", session="sess-0", turn="t-s")
    quarantined_turn(env, "sess-0", "t-s", "rotate %s tonight" % CANARY)  # a copy of the same turn, kept aside
    if how == "match":
        quarantined_turn(env, "sess-q", "t-q", "and %s again" % CANARY)  # a turn no store holds
    copy = {h.path: open(h.path, "rb").read() for h in quarantine.held_turns(env.data)}
    (key,) = [v.key for v in env.views()]
    rc, out, err = egg(capsys, *(("forget", "--match", CANARY) if how == "match" else ("forget", key)))
    assert rc == 0, err
    assert quarantine.held_turns(env.data) == []
    before = open(env.egg, "rb").read()
    for p, data in copy.items():  # put back from a backup: still never saved
        with open(p, "wb") as f:
            f.write(data)
    rc, out, err = egg(capsys, "recover")
    assert rc == 0, out + err
    assert env.views() == [] and open(env.egg, "rb").read() == before  # the tombstones name both turns
    assert quarantine.held_turns(env.data) == []


def test_forgetting_one_call_of_an_open_turn_keeps_the_rest_of_it(env, capsys):
    o = dict(session_id="sess-open")
    env.respond(env.prompt("what is in the notes?", "t-o", **o))
    env.respond(env.tool("ls", "NOTES\nREADME\n", "t-o", "c-1", **o))
    env.respond(env.tool("cat NOTES", "remember %s\n" % CANARY, "t-o", "c-2", **o))
    settle_all(Journal(env.paths.journal_dir), Store.open, log=lambda m: None)  # saved as interrupted, as a manager does
    (v,) = env.views()
    call = next(t for t in v.tools if CANARY in t.outcome)
    assert egg(capsys, "forget", call.id[:12])[0] == 0
    assert egg(capsys, "compact", "--purge", env.egg)[0] == 0
    assert env.respond(env.stop("the notes list two files", "t-o", **o)) == {}
    (v,) = env.views()
    assert v.answer == "the notes list two files" and [t.outcome for t in v.tools] == ["NOTES\nREADME\n"]
    assert CANARY.encode() not in open(env.egg, "rb").read()


def test_a_sweep_keeps_lines_and_turns_that_do_not_hold_the_text(env):
    from eggshell.runtime.copies import Needles, sweep

    quarantine.add(env.data, "sess-1", "t-1", "PostToolUse", "too deep", quarantine.payload_text({"a": CANARY}))
    quarantine.add(env.data, "sess-2", "t-2", "PostToolUse", "too deep", quarantine.payload_text({"a": "kept"}))
    quarantine.add(env.data, "sess-3", "t-3", "PostToolUse", "too deep", quarantine.payload_text({"a": "of a forgotten turn"}))
    append_line(env.log, json.dumps({"query": "one %s" % CANARY.replace("-", "\n")}))  # a trace line: its text escaped
    append_line(env.log, "two")
    env.respond(env.prompt("a turn that stays", "t-4", session_id="sess-4"))
    swept = sweep(env.data, env.paths.journal_dir, Needles(frozenset((CANARY, CANARY.replace("-", "\n"))), frozenset(),
                                                         frozenset({("sess-3", "t-3")})))
    assert swept.quarantined == 2 and swept.log_lines == 1 and swept.journal == ()
    assert env.log_text() == "two\n"
    kept = [json.loads(line)["session"] for line in open(quarantine.path(env.data), encoding="utf-8")]
    assert kept == ["sess-2"]
    assert Journal(env.paths.journal_dir).read("sess-4", "t-4")[0]["prompt"] == "a turn that stays"
