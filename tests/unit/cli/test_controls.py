"""cli/controls.py: the in-chat `egg` controls, run in-process as `!egg ...` would run them in Codex."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys

import pytest

from eggshell.cli import main as cli
from eggshell import config
from eggshell.cli import doctor
from eggshell.core import printable
from eggshell.hosts import registry
from eggshell.hosts.codex import HOST as CODEX
from eggshell.runtime.chat import Chat, ChatControl
from eggshell.runtime.journal import Journal
from eggshell.paths import PROJECT_CONFIG, from_env, private_dir
from eggshell.graph.records import turn_views
from eggshell.graph.save import save_turn
from eggshell.graph.store import Store

from helpers import REPO  # noqa: E402
BIN = os.path.join(REPO, "bin")
THREAD = "thread-0001"
NO_CHAT = "egg: no chat: run this inside Codex as !egg ... (CODEX_THREAD_ID is unset), or pass --chat ID\n"


class Egg:
    """`egg` in-process, in an initialized project, with a private prefix, data root, HOME and chat."""

    def __init__(self, tmp, monkeypatch, capsys):
        self.tmp, self.mp, self.capsys = tmp, monkeypatch, capsys
        for k in list(os.environ):
            if k.startswith(("EGGSHELL_", "CODEX_", "CLAUDE_")):
                monkeypatch.delenv(k)
        self.prefix = tmp / "prefix"
        self.home = tmp / "home"
        self.home.mkdir()
        monkeypatch.setenv("HOME", str(self.home))
        monkeypatch.setenv("EGGSHELL_PREFIX", str(self.prefix))
        monkeypatch.setenv("EGGSHELL_DATA_ROOT", str(tmp / "data"))
        monkeypatch.setenv("CODEX_HOME", str(tmp / "codex"))
        monkeypatch.setenv("EGGSHELL_BIN", BIN)
        monkeypatch.setenv("CODEX_THREAD_ID", THREAD)
        self.proj = tmp / "proj"
        self.proj.mkdir()
        (self.proj / PROJECT_CONFIG).write_text(config.PROJECT_TEMPLATE)
        monkeypatch.chdir(self.proj)
        self.paths = from_env()
        self.egg = str(self.proj / ".eggs" / "work.egg")
        self.journal = Journal(self.paths.journal_dir)

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        rc = cli.main(list(argv))
        cap = self.capsys.readouterr()
        return rc, cap.out, cap.err

    def chat(self, session: str = THREAD) -> Chat:
        return Chat(self.paths.state_dir, session)

    def cfg(self) -> config.Config:
        return config.load(self.paths, str(self.proj))

    def prompt(self, turn: str = "turn-aaaa1111", text: str = "list the files", profile: str | None = None, session: str = THREAD):
        """Journal a prompt as the UserPromptSubmit hook does, with the turn's snapshotted selection."""
        sel = self.chat(session).begin_turn(self.cfg(), turn) if profile is None else self.cfg().selection(profile)
        self.journal.append(session, turn, {"event": "prompt", "session": session, "turn": turn, "cwd": str(self.proj),
                                            "prompt": text, "selection": sel.to_json(), "write": sel.write,
                                            "root": str(self.proj), "time": "2026-01-01T00:00:00Z"})
        self.journal.set_current(session, turn)
        return sel

    def tool(self, command: str, output: str, call: str = "c1", turn: str = "turn-aaaa1111", session: str = THREAD):
        self.journal.append(session, turn, {"event": "tool", "name": "Bash", "id": call, "input": {"command": command},
                                            "output": output, "time": "2026-01-01T00:00:01Z"})

    def stop(self, answer: str | None, turn: str = "turn-aaaa1111", session: str = THREAD):
        self.journal.append(session, turn, {"event": "stop", "answer": answer, "why": "Stop", "time": "2026-01-01T00:00:02Z"})

    def turns(self, path: str | None = None) -> list:
        path = path or self.egg
        return turn_views(Store.open(path).graph) if os.path.exists(path) else []


@pytest.fixture
def egg(tmp_path, monkeypatch, capsys):
    return Egg(tmp_path, monkeypatch, capsys)


# -- choosing the chat -----------------------------------------------------------------------------

CHAT_COMMANDS = [["on"], ["off"], ["use", "work"], ["next", "private"], ["keep"], ["drop"], ["diff"], ["graph"], ["why"], ["inspect"]]


@pytest.mark.parametrize("argv", CHAT_COMMANDS)
def test_chat_controls_need_a_chat(egg, argv):
    egg.mp.delenv("CODEX_THREAD_ID")
    assert egg(*argv) == (1, "", NO_CHAT)


def test_the_chat_comes_from_the_option_then_codex_then_eggshell_chat(egg):
    egg.mp.delenv("CODEX_THREAD_ID")
    egg.mp.setenv("EGGSHELL_CHAT", "claude-1")
    assert egg("off")[0] == 0
    assert egg.chat("claude-1").load().enabled is False
    egg.mp.setenv("CODEX_THREAD_ID", "codex-1")
    assert egg("off")[0] == 0 and egg.chat("codex-1").load().enabled is False
    assert egg("off", "--chat", "mine")[0] == 0 and egg("--chat", "other", "off")[0] == 0
    assert egg.chat("mine").load().enabled is False and egg.chat("other").load().enabled is False
    assert egg.chat(THREAD).load() == ChatControl()


def test_doctor_needs_no_chat(egg):
    egg.mp.delenv("CODEX_THREAD_ID")
    rc, out, _ = egg("doctor")
    assert out.startswith("ok   egg-hook is installed")


# -- the status line -------------------------------------------------------------------------------


def test_bare_egg_prints_the_status_line(egg):
    assert egg() == (0, "egg on: profile work records each turn to project and reads project; no turn journaled yet\n", "")
    egg.prompt()
    egg.tool("ls", "a\nb\n")
    egg.tool("wc -l a", "2 a\n", call="c2")
    egg.tool("ls", "a\nb\n")  # a replayed event is one call
    assert egg()[1] == "egg on: profile work records each turn to project and reads project; turn turn-aaa: 2 tool calls journaled, open\n"


def test_bare_egg_outside_a_chat_is_egg_status(egg):
    egg.mp.delenv("CODEX_THREAD_ID")
    rc, out, _ = egg()
    assert rc == 0 and out.startswith("eggshell ") and "project    %s" % egg.proj in out
    assert out == egg("status")[1]


def test_status_line_shows_off_read_only_next_and_legacy_reads(egg):
    (egg.proj / PROJECT_CONFIG).write_text('read = ["shared/team.egg", "./.eggs/work.egg"]\n')
    (egg.proj / "sub").mkdir()
    egg.mp.chdir(egg.proj / "sub")  # names stay relative to the project root, not the shell's directory
    assert egg("use", "private")[0] == 0 and egg("next", "off")[0] == 0
    assert egg()[1] == "egg on: profile private records nothing and reads project, shared/team.egg; the next turn uses off; no turn journaled yet\n"
    egg("off")
    assert egg()[1] == ("egg off: profile private records nothing and reads project, shared/team.egg; "
                        "no turn journaled yet  [memory is off for this chat until `egg on`]\n")  # off also drops `next`


def test_status_line_names_a_config_that_turns_memory_off(egg):
    (egg.proj / PROJECT_CONFIG).write_text("enabled = false\n")
    assert egg()[1] == "egg off: profile work records each turn to project and reads project; no turn journaled yet  [enabled = false in %s]\n" % (egg.proj / PROJECT_CONFIG)


def test_status_with_a_broken_config_is_an_error(egg):
    (egg.proj / PROJECT_CONFIG).write_text("bogus = 1\n")
    rc, out, err = egg()
    assert rc == 1 and out == "" and err.startswith("egg: %s: unknown key 'bogus'" % (egg.proj / PROJECT_CONFIG))


# -- on / off / use / next ----------------------------------------------------------------------------


def test_off_and_on(egg):
    assert egg("off") == (0, "egg off (memory disabled for this chat: nothing is read, recorded or sent until `egg on`)\n", "")
    assert egg.chat().load().enabled is False
    sel = egg.chat().begin_turn(egg.cfg(), "t1")
    assert (sel.enabled, sel.read, sel.write) == (False, (), None)
    assert egg("on") == (0, "egg on (memory enabled for this chat)\n", "")
    assert egg.chat().begin_turn(egg.cfg(), "t2").enabled is True


def test_off_works_with_a_corrupt_config_and_state(egg):
    (egg.proj / PROJECT_CONFIG).write_text("this is [not toml\n")
    chat = egg.chat()
    private_dir(os.path.dirname(chat.path))  # 0700, as Eggshell makes it (a looser data root gets a note)
    with open(chat.path, "w") as f:
        f.write("{garbage")
    rc, out, err = egg("off")
    assert rc == 0 and out.startswith("egg off")
    assert err.startswith("egg: %s: unreadable chat state" % chat.path) and ".corrupt-" in err  # the user learns where it went
    ctl = chat.load()
    assert (ctl.enabled, ctl.corrupt, ctl.profile, ctl.next_profile) == (False, False, None, None)
    assert [n for n in os.listdir(os.path.dirname(chat.path)) if ".corrupt-" in n]
    # on needs no config either; the config error shows up where the config is used
    assert egg("on")[0] == 0
    rc, _, err = egg("use", "work")
    assert rc == 1 and "not valid TOML" in err


def test_a_corrupt_state_turns_memory_off_until_egg_on(egg):
    egg.chat().update(lambda c: ChatControl(profile="private"))
    with open(egg.chat().path, "w") as f:
        f.write("[1, 2")
    rc, out, _ = egg()
    assert out.startswith("egg off: profile work records each turn to project and reads project; no turn journaled yet  [chat state was unreadable")
    assert egg.chat().begin_turn(egg.cfg(), "t1").enabled is False
    assert egg("on")[1] == "egg on (memory enabled for this chat; the profile is the config's default again)\n"
    assert egg()[1] == "egg on: profile work records each turn to project and reads project; no turn journaled yet\n"
    assert egg.chat().load().last_reason == ""


WORK_DOES = "records each turn to project and reads project"


def test_use_sets_the_chats_profile(egg):
    assert egg("use", "private") == (0, "egg: from the next prompt on, this chat records nothing and reads project "
                                        "(profile private; was work, which %s)\n" % WORK_DOES, "")
    assert egg.chat().load().profile == "private"
    sel = egg.chat().begin_turn(egg.cfg(), "t1")
    assert (sel.profile, sel.write) == ("private", None) and sel.read == (egg.egg,)
    assert egg.chat().begin_turn(egg.cfg(), "t2").profile == "private"


def test_use_says_in_words_what_changed_for_every_mode(egg):
    (egg.proj / PROJECT_CONFIG).write_text(config.PROJECT_TEMPLATE + '\n[profiles.lean]\nread = ["project"]\nhandoff_chars = 400\n')
    said = lambda *argv: egg(*argv)[1]  # noqa: E731
    assert said("use", "work") == "egg: this chat already uses profile work: it %s (nothing changed)\n" % WORK_DOES
    assert said("use", "off") == ("egg: from the next prompt on, this chat records nothing and reads nothing "
                                  "(profile off; was work, which %s)\n" % WORK_DOES)
    assert said("use", "private") == ("egg: from the next prompt on, this chat records nothing and reads project "
                                      "(profile private; was off, which records nothing and reads nothing)\n")
    assert said("use", "lean") == ("egg: from the next prompt on, this chat records nothing and reads project "
                                   "(profile lean; was private, which records nothing and reads project)\n")
    assert said("use", "work") == ("egg: from the next prompt on, this chat %s (profile work; was lean, which records "
                                   "nothing and reads project)\n" % WORK_DOES)
    assert said("use", "work") == "egg: this chat already uses profile work: it %s (nothing changed)\n" % WORK_DOES
    # what the words say is what the next turn gets
    egg("use", "off")
    sel = egg.chat().begin_turn(egg.cfg(), "t1")
    assert (sel.enabled, sel.read, sel.write) == (False, (), None)


def test_use_and_next_refuse_an_unknown_profile(egg):
    for cmd in ("use", "next"):
        rc, out, err = egg(cmd, "nope")
        assert (rc, out) == (1, "")
        assert err == "egg: unknown profile 'nope' (known: work, private, off; defined in %s)\n" % (egg.proj / PROJECT_CONFIG)
    assert egg.chat().load() == ChatControl()


def test_next_is_used_by_one_turn_only(egg):
    assert egg("next", "private") == (0, "egg next private (the next turn only; then work again)\n", "")
    first = egg.prompt("t1")
    assert (first.profile, first.write) == ("private", None)
    second = egg.prompt("t2")
    assert (second.profile, second.write) == ("work", egg.egg)


def test_next_off_and_use_while_off_say_memory_is_off(egg):
    egg("off")
    assert egg("next", "off")[1] == "egg next off (the next turn only; then work again); memory is off for this chat until `egg on`\n"
    assert egg("use", "work")[1].endswith("; memory is off for this chat until `egg on`\n")


# -- keep / drop / diff ------------------------------------------------------------------------------


def test_keep_with_nothing_journaled_is_an_error(egg):
    rc, out, err = egg("keep")
    assert (rc, out) == (1, "") and err.startswith("egg: nothing journaled in this chat: no turn to keep")
    egg.prompt()
    rc, _, err = egg("keep")
    assert rc == 1 and err == "egg: nothing journaled for turn turn-aaa yet: no tool call and no answer to keep\n"


def test_keep_saves_a_read_only_turn_to_a_named_egg(egg):
    egg("use", "private")
    egg.prompt()
    egg.tool("ls", "a\nb\n")
    rc, _, err = egg("keep")
    assert rc == 1 and err == "egg: turn turn-aaa is read-only (profile private): name the egg to save it to, e.g. `egg keep project`\n"
    assert egg.turns() == []
    assert egg("keep", "project") == (0, "egg kept turn-aaa -> %s (1 tool call)\n" % egg.egg, "")
    (v,) = egg.turns()
    assert (v.turn, v.answer, [t.use_id for t in v.tools]) == ("turn-aaaa1111", None, ["c1"])
    assert v.cwd == "."  # stored relative to the project root, as a hook save would
    # keeping again adds nothing; the answer, once sealed, is kept too
    assert egg("keep", "project")[1].endswith("(1 tool call; it was already there, nothing new written)\n")
    egg.stop("two files")
    egg("keep", "project")
    assert any(v.answer == "two files" for v in egg.turns())


def test_keep_saves_to_the_turns_write_egg(egg):
    egg.prompt()
    egg.tool("ls", "a\n")
    egg.stop("one file")
    assert egg("keep") == (0, "egg kept turn-aaa -> %s (1 tool call)\n" % egg.egg, "")
    (v,) = egg.turns()
    assert v.answer == "one file"


def test_keep_to_an_egg_from_the_config(egg):
    (egg.proj / PROJECT_CONFIG).write_text(config.PROJECT_TEMPLATE.replace('project = ".eggs/work.egg"\n', 'project = ".eggs/work.egg"\nnotes = ".eggs/notes.egg"\n'))
    egg.prompt()
    egg.tool("ls", "a\n")
    assert egg("keep", "notes")[1] == "egg kept turn-aaa -> %s (1 tool call)\n" % (egg.proj / ".eggs" / "notes.egg")
    assert len(egg.turns(str(egg.proj / ".eggs" / "notes.egg"))) == 1 and egg.turns() == []
    rc, _, err = egg("keep", "nope")
    assert rc == 1 and err == "egg: unknown egg 'nope' (known: project, notes; define it under [eggs] in %s)\n" % (egg.proj / PROJECT_CONFIG)


def test_keep_uses_the_last_turn_when_the_session_has_no_current_one(egg):
    egg.prompt()
    egg.tool("ls", "a\n")
    os.unlink(os.path.join(os.path.dirname(egg.journal.turn_path(THREAD, "turn-aaaa1111")), "current"))
    assert egg("keep")[0] == 0 and len(egg.turns()) == 1


def test_drop_discards_the_journal_and_marks_the_turn(egg):
    rc, _, err = egg("drop")
    assert rc == 1 and err == "egg: nothing journaled in this chat: no turn to drop\n"
    egg.prompt()
    egg.tool("ls", "a\n")
    rc, out, _ = egg("drop")
    assert rc == 0 and out == ("egg dropped turn turn-aaa: nothing of it was saved, and its journal was discarded, so "
                               "nothing of it will be.\nTo keep a turn out of memory from its start, run `egg next "
                               "private` (read-only) or `egg next off` before sending it.\n")
    assert not egg.journal.has(THREAD, "turn-aaaa1111")
    assert egg.chat().is_dropped("turn-aaaa1111")
    rc, _, err = egg("keep")
    assert rc == 1 and "nothing journaled" in err


def test_drop_after_keep_says_the_turn_is_saved_already_and_how_to_forget_it(egg):
    egg.prompt()
    egg.tool("ls", "a\n")
    egg.stop("one file")
    assert egg("keep")[0] == 0
    (v,) = egg.turns()
    rc, out, _ = egg("drop")
    assert rc == 0 and out == ("egg dropped turn turn-aaa: its journal was discarded and nothing more of it will be "
                               "saved, but it was already saved to %s (1 tool call and its answer): `egg forget %s` "
                               "takes it out of memory, and `egg compact --purge %s` then removes its text from the "
                               "file.\n" % (egg.egg, v.key, egg.egg))
    # what it says works: the key forgets that turn
    assert egg("forget", v.key)[0] == 0 and egg.turns() == []
    # a turn kept to another egg than its target is found there too
    (egg.proj / PROJECT_CONFIG).write_text(config.PROJECT_TEMPLATE.replace('project = ".eggs/work.egg"\n', 'project = ".eggs/work.egg"\nnotes = ".eggs/notes.egg"\n'))
    egg.prompt("turn-bbbb2222")
    egg.tool("ls", "b\n", turn="turn-bbbb2222")
    assert egg("keep", "notes")[0] == 0
    rc, out, _ = egg("drop")
    assert rc == 0 and "but it was already saved to %s (1 tool call)" % (egg.proj / ".eggs" / "notes.egg") in out


def test_drop_with_nothing_journaled_names_a_last_turn_that_was_saved(egg):
    egg.prompt()
    egg.tool("ls", "a\n")
    egg.stop("one file")
    assert egg("keep")[0] == 0
    (v,) = egg.turns()
    egg.journal.discard(THREAD, "turn-aaaa1111")  # as the save queue does once a sealed turn landed
    rc, out, err = egg("drop")
    assert (rc, out) == (1, "") and err == ("egg: nothing journaled in this chat: no turn to drop (the last turn, turn-aaa: "
                                           "it was already saved to %s (1 tool call and its answer): `egg forget %s` takes "
                                           "it out of memory, and `egg compact --purge %s` then removes its text from the "
                                           "file)\n" % (egg.egg, v.key, egg.egg))


def test_keep_refuses_a_dropped_turn_whose_journal_came_back(egg):
    egg.prompt()
    egg.tool("ls", "a\n")
    egg.chat().drop("turn-aaaa1111")
    rc, _, err = egg("keep")
    assert rc == 1 and err == "egg: turn turn-aaa was dropped (`egg drop`); it is not kept\n"


def test_diff_shows_what_would_be_saved_without_writing(egg):
    rc, _, err = egg("diff")
    assert rc == 1 and "nothing journaled" in err
    egg.prompt()
    assert egg("diff")[1] == ("target  %s\nturn    turn-aaa (open)\nanswer  none yet\nnew     nothing to save yet\n" % egg.egg)
    egg.tool("ls   -la", "a\nb\n")
    rc, out, _ = egg("diff")
    lines = out.splitlines()
    assert rc == 0 and lines[0] == "target  %s" % egg.egg
    assert lines[2] == "tool    Bash: ls -la  (4 bytes of output)"
    assert lines[3] == "answer  none yet"
    total = int(lines[4].split("(of ")[1].split()[0])
    assert lines[4] == "new     %d graph nodes (of %d in this turn)" % (total, total)
    assert not os.path.exists(egg.egg)  # nothing written
    egg("keep")
    assert egg("diff")[1].splitlines()[4] == "new     0 graph nodes (of %d in this turn)" % total
    egg.stop("two files")
    out = egg("diff")[1].splitlines()
    assert out[1] == "turn    turn-aaa (finished)" and out[3] == "answer  yes (9 characters)"
    assert 0 < int(out[4].split()[1]) < total


def test_diff_of_a_read_only_turn(egg):
    egg("use", "private")
    egg.prompt()
    egg.tool("ls", "a\n")
    out = egg("diff")[1].splitlines()
    assert out[0] == "target  none: the turn is read-only (`egg keep EGG` saves it to a named egg)"
    assert out[-1].startswith("new     ") and out[-1].endswith("in this turn (no target store to compare with)")
    assert egg("diff", "project")[1].splitlines()[0] == "target  %s" % egg.egg


# -- graph / why / inspect ----------------------------------------------------------------------------


def test_graph_and_why_show_the_last_delivered_handoff(egg):
    assert egg("graph") == (0, "no handoff was sent to this chat\n", "")
    assert egg("why") == (0, "no handoff was sent to this chat\n", "")
    egg.chat().delivered("WORK GRAPH abc\n  PRIOR OUTCOME def", "hit abc123 score 0.82")
    assert egg("graph")[1] == "WORK GRAPH abc\n  PRIOR OUTCOME def\n"
    assert egg("why")[1] == "hit abc123 score 0.82\n"


@pytest.mark.parametrize("cmd", ["graph", "why"])
@pytest.mark.parametrize("evil", ["\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07", "\x1b]0;PWN\x07\x1b[2J", "\x9b2J", "txt\u202eexe.sh\u202c",
                                  "\u2066x\u2069\u200e\u061c", "over\rwrite"])
def test_graph_and_why_show_recorded_control_characters_escaped(egg, cmd, evil):
    """Red team IV (inj_terminal_egg_show): a handoff quotes recorded output as the model reads it,
    raw; `!egg graph` and `!egg why` print it on the user's terminal, escaped."""
    egg.chat().delivered("| output %s end\n| next line" % evil, "retrieved abc %s" % evil)
    rc, out, _ = egg(cmd)
    assert rc == 0 and out.endswith("end\n| next line\n" if cmd == "graph" else "\n")
    assert not any(c in out for c in "\x1b\x07\x9b\u202e\u202c\u2066\u2069\u200e\u061c") and "\rwrite" not in out
    assert printable.terminal(evil) in out


def test_inspect_lists_every_path(egg):
    rc, out, _ = egg("inspect")
    lines = out.splitlines()
    chat = egg.chat()
    assert rc == 0 and lines[0] == "egg on: profile work records each turn to project and reads project; no turn journaled yet"
    assert "config     %s" % (egg.proj / PROJECT_CONFIG) in lines and "project    %s" % egg.proj in lines
    assert "read       project = %s (missing)" % egg.egg in lines
    assert "write      %s" % egg.egg in lines and "data root  %s" % egg.paths.data_root in lines
    assert "journal    none (no turn journaled for this chat)" in lines
    assert "state      %s (not written yet)" % chat.path in lines
    egg.prompt()
    egg.tool("ls", "a\n")
    egg("keep")
    lines = egg("inspect")[1].splitlines()
    (read,) = [x for x in lines if x.startswith("read ")]
    assert read.startswith("read       project = %s (" % egg.egg) and ", 1 commit, header {" in read
    assert "journal    %s (2 events)" % egg.journal.turn_path(THREAD, "turn-aaaa1111") in lines
    assert "state      %s" % chat.path in lines


# -- doctor ---------------------------------------------------------------------------------------------


def no_agent_clis_on_path(monkeypatch) -> None:
    """The doctor names an agent CLI on PATH that lacks Eggshell (tests/unit/hosts/test_gemini.py):
    `make test` puts every host's CLI there, so these checklists run without them."""
    clis = [h.binary for h in registry.every() if h.binary]
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                                               if d and not any(os.path.exists(os.path.join(d, b)) for b in clis)))


def install_codex_hooks(egg, events=CODEX.events):
    hooks = {e: [{"hooks": [{"type": "command", "command": "%s codex" % os.path.join(BIN, "egg-hook")}]}] for e in events}
    os.makedirs(egg.paths.codex_home, exist_ok=True)
    with open(os.path.join(egg.paths.codex_home, "hooks.json"), "w") as f:
        json.dump({"hooks": hooks}, f)


def test_doctor_all_good(egg, monkeypatch):
    no_agent_clis_on_path(monkeypatch)
    install_codex_hooks(egg)
    model = egg.tmp / "model"
    model.mkdir()
    (model / "model.onnx").write_bytes(b"x")
    (model / "model.safetensors").write_bytes(b"x")
    monkeypatch.setattr("eggshell.search.installed.default_model_dir", lambda prefix=None: str(model))
    monkeypatch.setenv("SHELL", shutil.which("bash"))
    (egg.home / ".profile").write_text('export PATH="%s:$PATH"\n' % BIN)  # what Codex's login shell reads
    rc, out, err = egg("doctor")
    lines = out.splitlines()
    assert (rc, err) == (0, "")
    assert lines == [
        "ok   egg-hook is installed at %s" % os.path.join(BIN, "egg-hook"),
        "ok   Codex hooks: %s runs egg-hook for %s" % (os.path.join(egg.paths.codex_home, "hooks.json"), ", ".join(CODEX.events)),
        "note Codex runs new or changed hooks only once you review and trust them: open /hooks in Codex",
        "ok   config loads: %s (default profile work)" % (egg.proj / PROJECT_CONFIG),
        "ok   semantic matcher: built-in model all-MiniLM-L6-v2 at %s" % model,
        "ok   data root %s is writable (it will be created)" % egg.paths.data_root,
        "note warm manager: not running (the next hook starts one); 0 turns journaled",
        "ok   a login shell (`bash -lc`, as Codex runs `!egg`) finds %s" % os.path.join(BIN, "egg"),
    ]
    (egg.home / ".profile").unlink()  # a WARN is to fix, but the hooks work without it
    rc, out, _ = egg("doctor")
    assert rc == 0 and out.splitlines()[-1].startswith("WARN a login shell (`bash -lc`, as Codex runs `!egg`) finds no egg")


def test_doctor_warns_of_an_installed_timeout_the_host_cuts_down(egg):
    hooks = os.path.join(egg.paths.codex_home, "hooks.json")
    assert egg("install", "codex")[0] == 0  # writes what Codex allows: nothing to warn of
    line = lambda label: next(x for x in egg("doctor")[1].splitlines() if "%s hooks: " % label in x)  # noqa: E731
    assert line("Codex").startswith("ok   Codex hooks: %s runs egg-hook" % hooks)
    with open(hooks) as f:
        data = json.load(f)
    data["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] = 30  # what `egg install` wrote before
    with open(hooks, "w") as f:
        json.dump(data, f)
    rc, out, _ = egg("doctor")
    assert ("WARN Codex hooks: %s gives egg-hook more time than Codex allows, so it is cut down: SessionEnd 30 s "
            "(at most 3 s); run `egg install codex`, which writes what it allows" % hooks) in out.splitlines()
    assert egg("install", "codex")[0] == 0 and line("Codex").startswith("ok   ")
    # Claude Code's limit is its own: 30 s is within it, 90 s is not
    settings = egg.home / ".claude" / "settings.json"
    assert egg("install", "claude")[0] == 0 and line("Claude Code").startswith("ok   ")
    data = json.loads(settings.read_text())
    data["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] = 90
    settings.write_text(json.dumps(data))
    assert line("Claude Code") == ("WARN Claude Code hooks: %s gives egg-hook more time than Claude Code allows, so it is "
                                   "cut down: SessionEnd 90 s (at most 60 s); run `egg install claude`, which writes what it "
                                   "allows" % settings)


def test_doctor_reports_a_saved_turn_stuck_in_the_queue(egg):
    from eggshell.runtime.journal import Journal

    j = Journal(egg.paths.journal_dir)
    j.append("s", "t", {"event": "prompt", "session": "s", "turn": "t", "cwd": str(egg.proj), "prompt": "p",
                        "write": str(egg.proj / ".eggs" / "work.egg"), "root": str(egg.proj)})
    j.append("s", "t", {"event": "stop", "answer": "a", "why": "Stop"})
    j.append("s", "r", {"event": "prompt", "session": "s", "turn": "r", "cwd": str(egg.proj), "prompt": "p", "write": None})
    j.append("s", "r", {"event": "stop", "answer": "a", "why": "Stop"})  # read-only: waits for `egg keep`, not stuck
    rc, out, _ = egg("doctor")
    assert "note warm manager: not running" in out and "FAIL" not in out.split("warm manager")[0][-5:]
    old = os.stat(j.turn_path("s", "t")).st_mtime - 600
    for t in ("t", "r"):
        os.utime(j.turn_path("s", t), (old, old))
    rc, out, _ = egg("doctor")
    (line,) = [x for x in out.splitlines() if "waiting" in x]
    assert rc == 1 and line.startswith("FAIL 1 finished turn waiting over 2 minutes to be saved") and "egg keep" in line


def test_doctor_reports_each_failure_with_its_fix(egg, monkeypatch):
    no_agent_clis_on_path(monkeypatch)
    install_codex_hooks(egg, events=CODEX.events[:2])
    (egg.proj / PROJECT_CONFIG).write_text("top_k = 0\n")
    monkeypatch.setattr("eggshell.search.installed.default_model_dir", lambda prefix=None: str(egg.tmp / "nomodel"))
    bindir = egg.tmp / "bin"
    bindir.mkdir()
    (bindir / "egg-hook").write_text("#!/bin/sh\n")  # not executable
    monkeypatch.setenv("EGGSHELL_BIN", str(bindir))
    ro = egg.tmp / "ro"
    ro.mkdir()
    os.chmod(ro, stat.S_IRUSR | stat.S_IXUSR)
    monkeypatch.setenv("EGGSHELL_DATA_ROOT", str(ro / "data"))
    rc, out, _ = egg("doctor")
    os.chmod(ro, 0o700)
    lines = out.splitlines()
    assert rc == 1
    assert lines[0] == "FAIL egg-hook is missing or not executable at %s: run ./install.sh" % (bindir / "egg-hook")
    assert lines[1].startswith("FAIL Codex hooks: ") and lines[1].endswith(
        "lacks egg-hook for %s: run `egg install codex`" % ", ".join(CODEX.events[2:]))
    assert lines[3].startswith("FAIL config: %s: 'top_k' must be" % (egg.proj / PROJECT_CONFIG))
    assert lines[4] == ("FAIL semantic matcher: the built-in model all-MiniLM-L6-v2 is not installed at %s (no model.onnx): "
                        "run ./install.sh, or set mode = \"lexical\"; until then prompts are matched lexically only (under the "
                        "built-in settings: the config does not load)" % (egg.tmp / "nomodel"))
    if os.geteuid() != 0:  # root writes anywhere
        assert lines[5].startswith("FAIL data root %s is not writable" % (ro / "data"))


def test_doctor_without_codex_hooks_and_with_claude_settings(egg):
    claude = egg.home / ".claude"
    claude.mkdir()
    (claude / "settings.json").write_text(json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "egg-hook claude"}]}]}}))
    out = egg("doctor")[1].splitlines()
    assert out[1] == "FAIL Codex hooks: %s does not exist: run `egg install codex`" % os.path.join(egg.paths.codex_home, "hooks.json")
    lacking = [x for x in out if x.startswith("note Claude Code hooks: %s lacks egg-hook for SessionStart, " % (claude / "settings.json"))]
    assert len(lacking) == 1 and "Stop" not in lacking[0] and lacking[0].endswith(": run `egg install claude`"), out
    (claude / "settings.json").write_text("{}")
    assert any(x.startswith("note Claude Code hooks: ") and "lacks egg-hook for SessionStart, UserPromptSubmit" in x
               for x in egg("doctor")[1].splitlines())


def global_config(egg, text: str) -> None:
    """The user's own config file: the only one that may name a semantic_matcher program."""
    os.makedirs(os.path.dirname(egg.paths.global_config), exist_ok=True)
    with open(egg.paths.global_config, "w") as f:
        f.write(text)


def matcher_lines(egg) -> tuple[str, str]:
    """(`egg status`'s matcher line, `egg doctor`'s semantic matcher line)."""
    status = [x for x in egg("status")[1].splitlines() if x.startswith("matcher ")]
    doctor = [x for x in egg("doctor")[1].splitlines() if "semantic matcher: " in x]
    assert len(status) == len(doctor) == 1, (status, doctor)
    return status[0], doctor[0]


def test_status_and_doctor_name_the_semantic_matcher_in_force(egg, monkeypatch):
    model = egg.tmp / "model"
    model.mkdir()
    (model / "model.onnx").write_bytes(b"x")
    (model / "model.safetensors").write_bytes(b"x")
    monkeypatch.setattr("eggshell.search.installed.default_model_dir", lambda prefix=None: str(model))
    assert matcher_lines(egg) == ("matcher    built-in model all-MiniLM-L6-v2 at %s, mode hybrid" % model,
                                  "ok   semantic matcher: built-in model all-MiniLM-L6-v2 at %s" % model)
    (egg.proj / PROJECT_CONFIG).write_text('mode = "lexical"\n')
    assert matcher_lines(egg) == ('matcher    lexical only (mode = "lexical")',
                                  'ok   semantic matcher: lexical only (mode = "lexical")')
    (egg.proj / PROJECT_CONFIG).write_text("")
    global_config(egg, "semantic_matcher = false\n")
    assert matcher_lines(egg) == ("matcher    lexical only (semantic_matcher = false)",
                                  "ok   semantic matcher: lexical only (semantic_matcher = false)")
    prog = egg.tmp / "my matcher"
    global_config(egg, 'semantic_matcher = [%s, "--top", "8"]\n' % json.dumps(str(prog)))
    shown = "program `'%s' --top 8` (semantic_matcher)" % prog  # the command line as a shell reads it
    assert matcher_lines(egg) == ("matcher    lexical only: the semantic_matcher program %s is missing or not executable: "
                                  "fix semantic_matcher in your config, or set semantic_matcher = false" % prog,
                                  "FAIL semantic matcher: the semantic_matcher program %s is missing or not executable: fix "
                                  "semantic_matcher in your config, or set semantic_matcher = false; until then prompts "
                                  "are matched lexically only" % prog)
    shutil.copy(sys.executable, prog)
    os.chmod(prog, stat.S_IRWXU)
    assert matcher_lines(egg) == ("matcher    %s, mode hybrid" % shown, "ok   semantic matcher: %s" % shown)


def test_status_and_doctor_say_when_the_model_is_missing(egg, monkeypatch):
    monkeypatch.setattr("eggshell.search.installed.default_model_dir", lambda prefix=None: str(egg.tmp / "nomodel"))
    missing = ("the built-in model all-MiniLM-L6-v2 is not installed at %s (no model.onnx): run ./install.sh, or set "
               "mode = \"lexical\"" % (egg.tmp / "nomodel"))
    assert matcher_lines(egg) == ("matcher    lexical only: " + missing,
                                  "FAIL semantic matcher: %s; until then prompts are matched lexically only" % missing)
    (egg.proj / PROJECT_CONFIG).write_text('mode = "lexical"\n')  # not needed then
    assert matcher_lines(egg)[1] == 'ok   semantic matcher: lexical only (mode = "lexical")'
    (egg.proj / PROJECT_CONFIG).write_text('model = "BAAI/bge-small-en-v1.5"\n')
    d = os.path.join(str(egg.prefix), "share", "eggshell", "models", "fastembed")
    assert matcher_lines(egg)[0] == ("matcher    lexical only: the model BAAI/bge-small-en-v1.5 is not downloaded into %s: "
                                     "run `egg model install BAAI/bge-small-en-v1.5`, or set mode = \"lexical\"" % d)
    os.makedirs(os.path.join(d, "models--qdrant--bge-small-en-v1.5-onnx-q"))  # what `egg model install` leaves
    assert matcher_lines(egg) == ("matcher    model BAAI/bge-small-en-v1.5 from %s, mode hybrid" % d,
                                  "ok   semantic matcher: model BAAI/bge-small-en-v1.5 from %s" % d)


def test_doctor_names_quarantined_events_and_leftover_telemetry(egg, monkeypatch):
    from eggshell.runtime import quarantine

    monkeypatch.setenv("HOME", str(egg.home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    out = egg("doctor")[1]
    assert "could not be stored" not in out and "Microsoft" not in out
    quarantine.add(egg.paths.data_root, "s", "t", "tool", "a tool name over two lines", "{}")
    quarantine.add(egg.paths.data_root, "s", "t", "tool", "NaN in its input", "{}")
    (egg.home / ".cache" / "Microsoft" / "DeveloperTools").mkdir(parents=True)
    rc, out, _ = egg("doctor")
    assert "note 2 hook events could not be stored and are kept in %s" % quarantine.path(egg.paths.data_root) in out
    assert "note %s exists: onnxruntime telemetry" % (egg.home / ".cache" / "Microsoft") in out and "delete it" in out


def test_doctor_checks_are_a_list_another_check_can_join(egg):
    def manager(c):
        return "note", "manager: not running"

    def crashes(c):
        raise RuntimeError("boom")

    results = doctor.checkup(doctor.Checkup(egg.paths, str(egg.proj), {}), (*doctor.DOCTOR_CHECKS[:1], manager, crashes))
    assert results[1:] == [("note", "manager: not running"), ("FAIL", "crashes crashed: RuntimeError: boom")]


# -- with the hook's own save --------------------------------------------------------------------------


def test_keep_matches_a_hook_save_of_the_same_turn(egg):
    """What `egg keep` writes is what the Stop hook's save would write: a second save adds nothing."""
    egg.prompt()
    egg.tool("ls", "a\n")
    egg.stop("one")
    egg("keep")
    from eggshell.runtime.journal import turn_record

    record = turn_record(egg.journal.read(THREAD, "turn-aaaa1111"), "one")
    assert save_turn(Store.open(egg.egg), record, str(egg.proj)).commit_id is None


# -- egg init with profiles ------------------------------------------------------------------------------


def test_init_with_a_read_only_default_still_makes_the_eggs_dir(egg, tmp_path):
    proj = tmp_path / "ro"
    proj.mkdir()
    (proj / PROJECT_CONFIG).write_text('default = "private"\n')
    rc, out, _ = egg("init", str(proj))
    assert rc == 0 and (proj / ".eggs" / ".gitignore").exists()
    assert "The default profile 'private' records nothing" in out


def test_init_reads_the_projects_own_file_even_with_eggshell_config(egg, tmp_path):
    other = tmp_path / "other.toml"
    other.write_text('egg = "elsewhere/x.egg"\n')
    egg.mp.setenv("EGGSHELL_CONFIG", str(other))
    proj = tmp_path / "fresh"
    proj.mkdir()
    assert egg("init", str(proj))[0] == 0
    assert (proj / ".eggs").is_dir() and not (tmp_path / "elsewhere").exists()
