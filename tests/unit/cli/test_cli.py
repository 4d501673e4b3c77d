"""cli/main.py (`egg`): init, install/uninstall codex, show, find, fsck, compact, merge, status."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from eggshell.cli import main as cli
from eggshell.graph.ignorefile import INIT_TEXT as EGGS_GITIGNORE
from eggshell import config
from eggshell.paths import PROJECT_CONFIG
from eggshell.graph.records import turn_views
from eggshell.graph.save import save_turn
from eggshell.graph.store import Store
from eggshell.core.identity import content_hex, display_key
from eggshell.core.values import Atom
from helpers import bash, read_bytes, turn_record
from helpers.cli_env import Egg

from helpers import REPO  # noqa: E402
BIN = os.path.join(REPO, "bin")
HOOK_CMD = "%s codex" % os.path.join(BIN, "egg-hook")
EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostCompact", "Stop", "SessionEnd"]


@pytest.fixture
def egg(tmp_path, monkeypatch, capsys):
    return Egg(tmp_path, monkeypatch, capsys)


def ours(data: dict) -> dict[str, int]:
    """How many egg-hook entries each event has."""
    out = {}
    for ev, groups in data.get("hooks", {}).items():
        groups = [g for g in groups if isinstance(g, dict)] if isinstance(groups, list) else []
        n = sum(1 for g in groups for h in g.get("hooks", []) if isinstance(h, dict) and h.get("command") == HOOK_CMD)
        if n:
            out[ev] = n
    return out


# -- init -----------------------------------------------------------------------------------------


def test_init_writes_config_and_private_eggs_dir(egg):
    rc, out, _ = egg("init")
    assert rc == 0
    cfg = egg.cwd / PROJECT_CONFIG
    assert cfg.read_text() == config.PROJECT_TEMPLATE
    eggs = egg.cwd / ".eggs"
    assert eggs.is_dir() and eggs.stat().st_mode & 0o777 == 0o700
    assert (eggs / ".gitignore").read_text() == EGGS_GITIGNORE
    assert "wrote    %s" % cfg in out and "egg install codex" in out


def test_init_is_idempotent_and_keeps_an_existing_config(egg, tmp_path):
    proj = tmp_path / "p"
    proj.mkdir()
    assert egg("init", str(proj))[0] == 0
    custom = 'egg = ".eggs/store/mine.egg"\ntop_k = 2\n'
    (proj / PROJECT_CONFIG).write_text(custom)
    (proj / ".eggs" / ".gitignore").write_text("mine\n")
    rc, out, _ = egg("init", str(proj))
    assert rc == 0 and "kept" in out
    assert (proj / PROJECT_CONFIG).read_text() == custom
    assert (proj / ".eggs" / ".gitignore").read_text() == "mine\n"
    # the configured store's directory is made, with its own .gitignore
    assert (proj / ".eggs" / "store" / ".gitignore").read_text() == EGGS_GITIGNORE


def test_init_never_writes_the_gitignore_through_a_dangling_link(egg, tmp_path):
    """A repository ships `.eggs/.gitignore` as a link to a file that does not exist yet: init must not create it."""
    proj = tmp_path / "p"
    (proj / ".eggs").mkdir(parents=True, mode=0o700)
    victim = tmp_path / "created-through-the-link"
    os.symlink(victim, proj / ".eggs" / ".gitignore")
    rc, out, _ = egg("init", str(proj))
    assert rc == 0 and not victim.exists() and "wrote    %s" % (proj / ".eggs" / ".gitignore") not in out


def test_init_gitignore_keeps_stores_out_of_git(egg):
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    egg("init")
    subprocess.run(["git", "init", "-q"], cwd=egg.cwd, check=True)
    (egg.cwd / ".eggs" / "work.egg").write_text("x\n")
    r = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=egg.cwd, capture_output=True, text=True, check=True)
    assert sorted(r.stdout.splitlines()) == ["?? .eggs/.gitignore", "?? " + PROJECT_CONFIG]


def test_init_refuses_a_missing_directory(egg, tmp_path):
    rc, _, err = egg("init", str(tmp_path / "nope"))
    assert rc == 2 and "is not a directory" in err


# -- install / uninstall codex ---------------------------------------------------------------------

OTHERS = {
    "description": "my hooks",
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PostToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit-log"}, {"type": "command", "command": "/old/bin/egg-hook codex"}]}
        ],
        "Notification": [{"hooks": [{"type": "command", "command": "say hi"}]}],
    },
}
OTHERS_WITHOUT_OURS = {
    "description": "my hooks",
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit-log"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "say hi"}]}],
    },
}


def test_install_into_a_fresh_codex_home(egg):
    rc, out, _ = egg("install", "codex")
    assert rc == 0
    data = egg.hooks_json()
    assert set(data) == {"hooks"} and list(data["hooks"]) == EVENTS
    for ev in EVENTS:
        # Codex 0.169 cuts a SessionEnd timeout over 3 s down, warning in every chat: 3 is what it allows
        timeout = 3 if ev == "SessionEnd" else 30
        assert data["hooks"][ev] == [{"hooks": [{"type": "command", "command": HOOK_CMD, "timeout": timeout}]}], ev
    assert "command: %s" % HOOK_CMD in out and "/hooks" in out


def test_install_keeps_every_other_hook_and_key(egg):
    egg.codex.mkdir()
    egg.hooks.write_text(json.dumps(OTHERS))
    assert egg("install", "codex")[0] == 0
    data = egg.hooks_json()
    assert data["description"] == "my hooks"
    assert ours(data) == {ev: 1 for ev in EVENTS}
    # the other hooks, and the other command sharing a group with an old egg-hook, are kept
    assert data["hooks"]["Stop"][0] == OTHERS["hooks"]["Stop"][0]
    assert data["hooks"]["PostToolUse"][0] == OTHERS_WITHOUT_OURS["hooks"]["PostToolUse"][0]
    assert data["hooks"]["Notification"] == OTHERS["hooks"]["Notification"]
    # an egg-hook from another location counts as ours and is replaced, not duplicated
    assert "/old/bin/egg-hook codex" not in json.dumps(data)


def test_install_twice_leaves_one_entry_per_event(egg):
    egg.codex.mkdir()
    egg.hooks.write_text(json.dumps(OTHERS))
    egg("install", "codex")
    once = egg.hooks_json()
    rc, out, _ = egg("install", "codex")
    assert rc == 0 and out.startswith("updated")
    assert egg.hooks_json() == once
    assert ours(once) == {ev: 1 for ev in EVENTS}


def test_uninstall_removes_only_ours(egg):
    egg.codex.mkdir()
    egg.hooks.write_text(json.dumps(OTHERS))
    egg("install", "codex")
    rc, out, _ = egg("uninstall", "codex")
    assert rc == 0 and "removed %d Eggshell hooks" % len(EVENTS) in out
    assert egg.hooks_json() == OTHERS_WITHOUT_OURS
    # and again: nothing to do, nothing written
    before = read_bytes(str(egg.hooks))
    rc, out, _ = egg("uninstall", "codex")
    assert rc == 0 and "nothing to do" in out
    assert read_bytes(str(egg.hooks)) == before


def test_unusual_entries_of_other_tools_survive_install_and_uninstall(egg):
    odd = {
        "hooks": {
            "Stop": [
                {"hooks": [{"type": "command", "command": "echo 'unterminated"}, {"type": "prompt", "prompt": "no command"}, "a string"]},
                {"matcher": "x"},
                "not a group",
            ],
            "Custom": {"not": "a list"},
        },
        "version": 3,
    }
    egg.codex.mkdir()
    egg.hooks.write_text(json.dumps(odd))
    assert egg("install", "codex")[0] == 0
    data = egg.hooks_json()
    assert data["hooks"]["Stop"][:3] == odd["hooks"]["Stop"] and data["hooks"]["Custom"] == odd["hooks"]["Custom"]
    assert ours(data) == {ev: 1 for ev in EVENTS}
    assert egg("uninstall", "codex")[0] == 0
    assert egg.hooks_json() == odd


def test_install_uninstall_round_trip_from_empty(egg):
    egg("install", "codex")
    egg("uninstall", "codex")
    assert egg.hooks_json() == {"hooks": {}}


def test_uninstall_without_a_hooks_file_creates_nothing(egg):
    rc, out, _ = egg("uninstall", "codex")
    assert rc == 0 and "nothing to do" in out
    assert not egg.codex.exists()


def test_codex_home_option(egg, tmp_path):
    other = tmp_path / "other-codex"
    assert egg("install", "codex", "--codex-home", str(other))[0] == 0
    assert ours(json.loads((other / "hooks.json").read_text())) == {ev: 1 for ev in EVENTS}
    assert not egg.hooks.exists()
    assert egg("uninstall", "codex", "--codex-home", str(other))[0] == 0
    assert ours(json.loads((other / "hooks.json").read_text())) == {}


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"hooks": {', "not valid JSON"),
        ("[]", 'expected {"hooks": {EVENT: [...]}}'),
        ('{"hooks": []}', 'expected {"hooks": {EVENT: [...]}}'),
    ],
)
@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_malformed_hooks_file_is_refused_and_left_unchanged(egg, content, message, command):
    egg.codex.mkdir()
    egg.hooks.write_text(content)
    rc, out, err = egg(command, "codex")
    assert rc == 2
    assert err.startswith("egg: %s: " % egg.hooks) and message in err and "nothing was changed" in err
    assert egg.hooks.read_text() == content
    assert sorted(os.listdir(egg.codex)) == ["hooks.json"]


def test_install_and_uninstall_with_a_space_in_the_path(egg, monkeypatch, tmp_path):
    bin_dir = tmp_path / "my tools" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "egg-hook").write_text("#!/bin/sh\nprintf '{}\\n'\n")
    (bin_dir / "egg-hook").chmod(0o755)
    monkeypatch.setenv("EGGSHELL_BIN", str(bin_dir))
    assert egg("install", "codex")[0] == 0
    cmd = "'%s/egg-hook' codex" % bin_dir
    data = egg.hooks_json()
    assert {g["hooks"][0]["command"] for ev in EVENTS for g in data["hooks"][ev]} == {cmd}
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, input="{}")
    assert r.returncode == 0 and r.stdout == "{}\n"  # the command runs as written in hooks.json
    rc, out, _ = egg("uninstall", "codex")
    assert rc == 0 and "removed %d" % len(EVENTS) in out and egg.hooks_json() == {"hooks": {}}


def test_install_needs_the_hook_command(egg, monkeypatch, tmp_path):
    monkeypatch.setenv("EGGSHELL_BIN", str(tmp_path))
    rc, _, err = egg("install", "codex")
    assert rc == 2 and "egg-hook is missing or not executable" in err
    assert not egg.hooks.exists()


def test_install_only_knows_codex(egg):
    with pytest.raises(SystemExit) as e:
        egg("install", "vim")
    assert e.value.code == 2


# -- reading stores: show and find -----------------------------------------------------------------

LATE_FEE = turn_record(session="sess-a", turn="t1", prompt="where is late_fee computed?",
                       tools=[bash("grep -rn late_fee src/", "src/billing.py:42: def late_fee(days):\n")],
                       answer="late_fee is computed in src/billing.py, line 42")
DOCKER = turn_record(session="sess-a", turn="t2", prompt="why does the docker build fail?",
                     tools=[bash("docker build .", "ERROR: python:3.99 not found\n")], answer=None)


@pytest.fixture
def store(egg):
    path = str(egg.tmp / "w.egg")
    s = Store.open(path)
    save_turn(s, LATE_FEE, root="/")
    save_turn(s, DOCKER, root="/")
    return Store.open(path)


def view_of(store, turn):
    return next(v for v in turn_views(store.graph) if v.turn == turn)


def test_show_a_turn_by_key_and_by_prefix(egg, store):
    v = view_of(store, "t1")
    rc, out, _ = egg("show", v.key, "--egg", store.path)
    assert rc == 0
    assert out.startswith("turn %s  session sess-a  turn t1" % v.key)
    request, work = store_key(store, Atom.text(v.prompt)), store_key(store, Atom.text(v.tools[0].work))
    assert "REQUEST  [request %s]\nwhere is late_fee computed?\n" % request in out
    assert ("TOOL %s Bash: grep -rn late_fee src/  [work %s]\nsrc/billing.py:42: def late_fee(days):\n"
            % (display_key(v.tools[0].id), work)) in out
    assert out.endswith("OUTCOME\nlate_fee is computed in src/billing.py, line 42\n")
    for prefix in (v.id, v.key[:8], v.key.upper()):
        assert egg("show", prefix, "--egg", store.path) == (0, out, "")


def store_key(store, value) -> str:
    """The display key of a node the store holds (so a key `egg show` prints names something there)."""
    key = display_key(content_hex(value))
    assert content_hex(value) in store.graph.nodes
    return key


def test_show_prints_the_keys_egg_union_takes_and_they_name_those_texts(egg, store):
    v = view_of(store, "t1")
    out = egg("show", v.key, "--egg", store.path)[1]
    work = out.split("  [work ")[1][:12]
    request = out.split("REQUEST  [request ")[1][:12]
    assert egg("show", work, "--egg", store.path)[1] == 'Bash\n{"command":"grep -rn late_fee src/"}\n'
    assert egg("show", request, "--egg", store.path)[1] == "where is late_fee computed?\n"


def test_show_an_interrupted_turn(egg, store):
    v = view_of(store, "t2")
    rc, out, _ = egg("show", v.key, "--egg", store.path)
    assert rc == 0 and out.endswith("OUTCOME none (interrupted before a final answer)\n")


def test_show_a_tool_outcome(egg, store):
    t = view_of(store, "t1").tools[0]
    rc, out, _ = egg("show", t.id[:12], "--egg", store.path)
    assert rc == 0
    assert "WORK\nBash\n{\"command\":\"grep -rn late_fee src/\"}\n" in out
    assert "OUTCOME\nsrc/billing.py:42: def late_fee(days):\n" in out


def test_show_unknown_and_ambiguous_keys_exit_1(egg, store):
    ids = list(store.graph.nodes)
    assert len(ids) > 16  # so, by pigeonhole, some first hex digit is shared
    first = [i[0] for i in ids]
    shared = next(c for c in first if first.count(c) > 1)
    rc, out, err = egg("show", shared, "--egg", store.path)
    assert rc == 1 and out == "" and "ambiguous key %s" % shared in err
    unknown = next(k for k in ("0" * 12, "f" * 12) if not any(i.startswith(k) for i in ids))
    rc, out, err = egg("show", unknown, "--egg", store.path)
    assert rc == 1 and out == "" and "unknown key %s" % unknown in err
    rc, _, err = egg("show", "not-hex", "--egg", store.path)
    assert rc == 1 and "is not a key" in err


def test_show_uses_the_projects_stores(egg, store):
    egg("init")
    shutil.copy(store.path, egg.cwd / ".eggs" / "work.egg")
    v = view_of(store, "t1")
    rc, out, _ = egg("show", v.key)
    assert rc == 0 and "late_fee is computed" in out


def test_show_outside_a_project_without_egg_is_a_usage_error(egg):
    rc, _, err = egg("show", "abc")
    assert rc == 2 and "not in an Eggshell project" in err


def test_show_missing_store_file(egg):
    rc, _, err = egg("show", "abc", "--egg", str(egg.tmp / "none.egg"))
    assert rc == 2 and "no such file" in err


def test_find(egg, store):
    v = view_of(store, "t1")
    rc, out, _ = egg("find", "late_fee", "calculation", "--egg", store.path)
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith(v.key + "  ") and "where is late_fee computed?" in lines[0]
    assert lines[1].strip() == "=> late_fee is computed in src/billing.py, line 42"
    assert "docker" not in out


# Red team IV (inj_terminal_egg_show): recorded escape sequences never reach the terminal raw.
EVIL_OUT = "ok\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b]0;EGGPWN\x07\x1b[2J\x9b2J done ZZTERMCANARY\rfake\n"
EVIL = turn_record(session="sess-e\x1b[1A", turn="t\u202e9", prompt="check ZZTERMCANARY \u202eoutput\u202c please",
                   tools=[bash("cat notes.txt\x1b]0;t\x07", EVIL_OUT)], answer="done \x1b[31mred\x1b[0m ZZTERMCANARY")
RAW = ["\x1b", "\x07", "\x9b", "\u202e", "\u202c", "\rfake"]


@pytest.fixture
def evil_store(egg):
    path = str(egg.tmp / "evil.egg")
    save_turn(Store.open(path), EVIL, root="/")
    return Store.open(path)


def _keys_of_evil(store) -> dict[str, str]:
    v = next(iter(turn_views(store.graph)))
    return {"turn": v.key, "tool": display_key(v.tools[0].id), "request": store_key(store, Atom.text(v.prompt)),
            "work": store_key(store, Atom.text(v.tools[0].work)), "output": store_key(store, Atom.text(v.tools[0].outcome))}


@pytest.mark.parametrize("what", ["turn", "tool", "request", "work", "output", "find"])
def test_recorded_escape_sequences_are_shown_escaped_never_raw(egg, evil_store, what):
    argv = ["find", "ZZTERMCANARY"] if what == "find" else ["show", _keys_of_evil(evil_store)[what]]
    rc, out, err = egg(*argv, "--egg", evil_store.path)
    assert rc == 0 and ("ZZTERMCANARY" in out or what == "work")
    assert [r for r in RAW if r in out + err] == []
    if what in ("turn", "tool", "output"):
        assert "ok\\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07" in out  # the rest of the text as recorded
        assert "ZZTERMCANARY\\rfake\n" in out


def test_an_error_quoting_a_repository_path_is_escaped_too(egg):
    rc, _, err = egg("show", "abc", "--egg", str(egg.tmp / "no\x1b]0;t\x07such\u202e.egg"))
    assert rc == 2 and "no\\x1b]0;t\\x07such\\u202e.egg: no such file" in err
    assert [r for r in RAW if r in err] == []


def test_find_lists_as_many_turns_as_a_chats_search_would(egg):
    """One default for every search: the config's top_k (5 unless set), which --top-k overrides."""
    path = str(egg.tmp / "many.egg")
    s = Store.open(path)
    for i in range(9):
        save_turn(s, turn_record(session="s", turn="t%d" % i, prompt="late_fee question %d" % i,
                                 tools=[bash("grep late_fee %d" % i, "late_fee %d\n" % i)], answer="late_fee answer %d" % i), root="/")
    listed = lambda *more: sum(1 for x in egg("find", "late_fee", "--egg", path, *more)[1].splitlines() if not x.startswith(" "))  # noqa: E731
    assert listed() == config.Config().top_k == 5
    assert listed("--top-k", "7") == 7
    (egg.cwd / PROJECT_CONFIG).write_text("top_k = 2\n")
    assert listed() == 2


def test_find_and_egg_query_read_min_coverage_from_the_config(egg, monkeypatch, capsys):
    """Like top_k: a search tried by hand keeps the floor a chat's search here gets, unless overridden."""
    import io

    from eggshell.stages import query

    path = str(egg.tmp / "cov.egg")
    s = Store.open(path)
    save_turn(s, turn_record(session="s", turn="t1", prompt="where is late_fee computed", tools=[bash("grep -rn late_fee src", "src/billing.py:42\n")],
                             answer="late_fee is in src/billing.py"), root="/")
    save_turn(s, turn_record(session="s", turn="t2", prompt="docker build fails", tools=[bash("docker build .", "error\n")], answer="pin the base image"), root="/")
    found = lambda *more: egg("find", "late_fee", "docker", "--egg", path, *more)[0]  # noqa: E731

    def hits(*more) -> int:
        monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({"query": {"text": "late_fee docker"}}) + "\n"))
        assert query.main(["--egg", path, "--mode", "lexical", "--no-trace", *more]) == 0
        return len(json.loads(capsys.readouterr().out)["hits"])

    assert found() == 0 and hits() == 2  # each turn holds one of the two words: about half the query
    (egg.cwd / PROJECT_CONFIG).write_text("min_coverage = 0.9\n")
    assert found() == 1 and hits() == 0
    assert found("--min-coverage", "0.2") == 0 and hits("--min-coverage", "0.2") == 2
    assert config.Config().min_coverage == config.DEFAULT_MIN_COVERAGE == 0.2


def test_every_search_has_the_one_default_top_k(capsys):
    from eggshell.search import rank
    from eggshell.stages import index, query

    assert config.Config().top_k == config.DEFAULT_TOP_K == rank.Settings().top_k == rank.DEFAULT_TOP_K == 5
    assert "top_k = 5\n" in config.PROJECT_TEMPLATE
    for main, argv, said in ((cli.main, ["find", "--help"], "else 5)"), (query.main, ["--help"], "else 5)"),
                             (index.main, ["--help"], "(default 5)")):
        with pytest.raises(SystemExit):
            main(argv)
        assert said in " ".join(capsys.readouterr().out.split())


def test_find_refuses_a_negative_top_k(egg, store):
    with pytest.raises(SystemExit) as e:
        egg("find", "late_fee", "--top-k", "-1", "--egg", store.path)
    assert e.value.code == 2


def test_find_nothing_exits_1(egg, store):
    rc, out, _ = egg("find", "kubernetes", "helm", "--egg", store.path)
    assert rc == 1 and out == "no matching turns\n"


# -- fsck, compact, merge ---------------------------------------------------------------------------


def test_fsck_good_file(egg, store):
    before = read_bytes(store.path)
    rc, out, _ = egg("fsck", store.path)
    assert rc == 0
    assert out.startswith("%s: ok: " % store.path) and "2 commits, 2 turns" in out
    one = str(egg.tmp / "one.egg")
    save_turn(Store.open(one), LATE_FEE, root="/")
    assert egg("fsck", one)[1].endswith(": ok: %d lines, 1 commit, 1 turn, %d roots, 0 unions\n" % (
        Store.open(one).graph.lines, len(Store.open(one).graph.root_ids)))
    assert read_bytes(store.path) == before


def test_fsck_damaged_file_names_the_line_and_changes_nothing(egg, store):
    lines = read_bytes(store.path).splitlines(keepends=True)
    lines[3] = lines[3].replace(b'"', b"'", 1)  # not JSON any more
    damaged = b"".join(lines)
    open(store.path, "wb").write(damaged)
    rc, out, _ = egg("fsck", store.path)
    assert rc == 1
    assert out.splitlines()[0].startswith("%s:4: not valid JSON" % store.path)
    assert "DAMAGED (1 bad line)" in out and "the file was not changed" in out
    assert read_bytes(store.path) == damaged


def test_fsck_semantic_damage_is_found_too(egg, store):
    data = read_bytes(store.path).replace(b"line 42", b"line 43")  # well-formed, but ids no longer match
    open(store.path, "wb").write(data)
    rc, out, _ = egg("fsck", store.path)
    assert rc == 1 and "node id does not match its content" in out and "DAMAGED" in out
    assert read_bytes(store.path) == data


def test_fsck_torn_tail_is_reported_as_damage_not_trimmed(egg, store):
    data = read_bytes(store.path) + b'{"node":"ab'
    open(store.path, "wb").write(data)
    rc, out, _ = egg("fsck", store.path)
    assert rc == 1 and "DAMAGED: it ends in the middle of a line (11 bytes after byte %d" % (len(data) - 11) in out
    assert read_bytes(store.path) == data


def test_fsck_several_files_and_missing(egg, store):
    rc, out, _ = egg("fsck", store.path, str(egg.tmp / "none.egg"))
    assert rc == 1 and "none.egg: no such file" in out and "%s: ok" % store.path in out


def test_compact_drops_duplicate_lines_and_keeps_the_turns(egg, store):
    views = turn_views(store.graph)
    data = read_bytes(store.path)
    body = data.split(b"\n", 1)[1]
    open(store.path, "wb").write(data + body)  # every record twice
    n = len(data.splitlines()) + len(body.splitlines())
    rc, out, _ = egg("compact", store.path)
    assert rc == 0 and out == "%s: compacted, %d lines -> %d\n" % (store.path, n, len(data.splitlines()))
    assert turn_views(Store.open(store.path).graph) == views
    assert egg("fsck", store.path)[0] == 0


def test_compact_refuses_a_damaged_file(egg, store):
    data = read_bytes(store.path).replace(b"line 42", b"line 43")
    open(store.path, "wb").write(data)
    rc, _, err = egg("compact", store.path)
    assert rc == 1 and "does not match" in err
    assert read_bytes(store.path) == data


def test_compact_missing_file(egg):
    rc, _, err = egg("compact", str(egg.tmp / "none.egg"))
    assert rc == 2 and "no such file" in err


def test_merge_and_refusing_to_overwrite(egg, store):
    b = str(egg.tmp / "b.egg")
    save_turn(Store.open(b), turn_record(session="sess-b", turn="t9", prompt="deploy", answer="deployed"), root="/")
    out_path = str(egg.tmp / "c.egg")
    rc, out, _ = egg("merge", store.path, b, "-o", out_path)
    assert rc == 0 and out.startswith("merged ")
    assert sorted(v.turn for v in turn_views(Store.open(out_path).graph)) == ["t1", "t2", "t9"]
    merged = read_bytes(out_path)
    rc, _, err = egg("merge", b, "-o", out_path)
    assert rc == 2 and "exists" in err and "--force" in err
    assert read_bytes(out_path) == merged
    rc, _, _ = egg("merge", b, "-o", out_path, "--force")
    assert rc == 0 and [v.turn for v in turn_views(Store.open(out_path).graph)] == ["t9"]


# -- status, help -----------------------------------------------------------------------------------


def test_status_outside_and_inside_a_project(egg, store):
    rc, out, _ = egg("status")
    assert rc == 0
    assert "prefix     %s\n" % egg.prefix in out and "data root  %s\n" % (egg.tmp / "data") in out
    assert "project    none here" in out
    egg("init")
    shutil.copy(store.path, egg.cwd / ".eggs" / "work.egg")
    rc, out, _ = egg("status")
    assert rc == 0 and "project    %s\n" % egg.cwd in out
    assert "store      %s (2 turns)  [write]" % (egg.cwd / ".eggs" / "work.egg") in out
    assert egg("forget", view_of(store, "t2").key)[0] == 0
    assert "store      %s (1 turn)  [write]\n" % (egg.cwd / ".eggs" / "work.egg") in egg("status")[1]
    assert "profiles   work, private, off (default work; a chat picks one with `egg use`)\n" in out


def test_status_counts_from_current_indexes_without_reading_the_store(egg, store, monkeypatch):
    """Issue 30: with its commit and search indexes current, `egg status` (no manager) counts the
    turns and the trust standing from them, the same lines a whole read prints, never reading the store."""
    from eggshell.cli import controls

    egg("init")
    shutil.copy(store.path, egg.cwd / ".eggs" / "work.egg")
    whole = egg("status")[1]  # small and unindexed: read whole (and its indexes made on the way)
    monkeypatch.setattr(controls.Store, "open", lambda path: (_ for _ in ()).throw(AssertionError("read whole")))
    rc, out, _ = egg("status")
    assert rc == 0 and out == whole and "(2 turns)" in out and "trusted (all 2 commits" in out


@pytest.mark.parametrize("path", [".eggs/\\u202etxt.exe\\u202c.egg", ".eggs/\\u2066w\\u2069\\u200f.egg", ".eggs/w\\u001b]0;PWN\\u0007.egg"])
def test_status_shows_a_repository_store_path_escaped(egg, path):
    """Red team IV (inj_bidi_in_status_path): a store path a repository chose reaches `egg status` escaped."""
    (egg.cwd / PROJECT_CONFIG).write_text('egg = "%s"\n' % path)
    rc, out, _ = egg("status")
    assert rc == 0 and "store      " in out
    assert [r for r in RAW + ["\u2066", "\u2069", "\u200f"] if r in out] == []


def test_status_with_a_bad_config_is_a_usage_error(egg):
    (egg.cwd / PROJECT_CONFIG).write_text("bogus = 1\n")
    rc, _, err = egg("status")
    assert rc == 2 and "unknown key 'bogus'" in err


@pytest.mark.parametrize("argv", [["--help"], *[[c, "--help"] for c in
                                  ["init", "install", "uninstall", "show", "find", "fsck", "compact", "merge", "status"]]])
def test_help_exits_0(egg, argv):
    with pytest.raises(SystemExit) as e:
        egg(*argv)
    assert e.value.code == 0
    assert "usage: egg" in egg.capsys.readouterr().out


def test_no_command_outside_a_chat_is_egg_status(egg):
    # `egg` alone is the in-chat status line (cli/controls.py); outside a chat it is `egg status`
    rc, out, _ = egg()
    assert rc == 0 and out == egg("status")[1]


def test_an_unknown_command_is_a_usage_error(egg):
    with pytest.raises(SystemExit) as e:
        egg("frobnicate")
    assert e.value.code == 2


def test_bin_egg_runs_the_checkout(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EGGSHELL_", "CODEX_"))}
    venv = next((p for p in (os.path.expanduser("~/.local/share/eggshell/venv"), sys.prefix)
                 if os.path.exists(os.path.join(p, "bin", "python"))), None)
    prefix = tmp_path / "prefix"
    (prefix / "share" / "eggshell").mkdir(parents=True)
    os.symlink(venv, prefix / "share" / "eggshell" / "venv")
    env.update(EGGSHELL_PREFIX=str(prefix), EGGSHELL_DATA_ROOT=str(tmp_path / "data"), CODEX_HOME=str(tmp_path / "codex"))
    r = subprocess.run([os.path.join(BIN, "egg"), "--version"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("eggshell ")
    r = subprocess.run([os.path.join(BIN, "egg"), "status"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=30)
    assert r.returncode == 0 and "prefix     %s" % prefix in r.stdout
    r = subprocess.run([os.path.join(BIN, "egg"), "--help"], capture_output=True, text=True,
                       env=dict(env, EGGSHELL_PREFIX=str(tmp_path / "empty")), cwd=tmp_path, timeout=30)
    assert r.returncode == 127 and "no Eggshell environment" in r.stderr


# -- egg index / egg model -------------------------------------------------------------------------


def _project_with_turns(tmp_path, monkeypatch, n=5):
    from eggshell import config as _cfg
    from eggshell.graph.save import save_turn
    proj = tmp_path / "idxproj"
    proj.mkdir()
    (proj / ".eggshell.toml").write_text(_cfg.PROJECT_TEMPLATE)
    store = Store.open(str(proj / ".eggs" / "work.egg"))
    for i in range(n):
        save_turn(store, {"session": "s", "turn": "t%d" % i, "cwd": str(proj), "prompt": "where is loader_%d defined" % i,
                                "tools": [], "answer": "loader_%d is in src/m%d.py" % (i, i)}, str(proj))
    monkeypatch.chdir(proj)
    return proj


def test_index_embeds_what_the_cache_lacks_then_nothing(tmp_path, monkeypatch, capsys):
    from eggshell.cli import main as _cli
    from eggshell.search.embed import Encoder
    from eggshell.search.vectors import VectorCache

    _project_with_turns(tmp_path, monkeypatch)
    data = tmp_path / "data"
    monkeypatch.setenv("EGGSHELL_DATA_ROOT", str(data))
    monkeypatch.setenv("EGGSHELL_PREFIX", str(tmp_path / "prefix"))
    assert _cli.main(["index"]) == 0
    out, err = capsys.readouterr()
    assert "5 turns indexed" in out and "5/5 new windows embedded" in err
    enc = Encoder()
    enc.load()
    cache = VectorCache(str(data / "semantic" / "vectors"), enc.model_id, enc.dim)
    cache.refresh()
    assert len(cache) == 5
    assert _cli.main(["index"]) == 0
    out, err = capsys.readouterr()
    assert "new windows embedded" not in err  # everything was cached already
    again = VectorCache(str(data / "semantic" / "vectors"), enc.model_id, enc.dim)
    again.refresh()
    assert len(again) == 5


def test_index_progress_off_a_terminal_is_a_line_every_30_s_with_the_rate_and_time_left(capsys):
    """A backfill into a log (no terminal) shows it is moving: a line each 30 s, none between."""
    from eggshell.cli.main import _Progress

    now = [100.0]
    bar = _Progress("embedding")
    bar.tty, bar.clock, bar.started, bar.said = False, lambda: now[0], 100.0, 100.0
    now[0] = 110.0
    bar(100, 1000)
    assert capsys.readouterr().err == ""  # 10 s in: nothing yet
    now[0] = 130.0
    bar(300, 1000)
    assert capsys.readouterr().err == "embedding: 300/1000 windows embedded, 10.0 a second, about 1 min 10 s left\n"
    now[0] = 140.0
    bar(400, 1000)
    assert capsys.readouterr().err == ""
    stuck = _Progress("embedding")
    stuck.tty, stuck.clock, stuck.started, stuck.said = False, lambda: now[0], 100.0, 100.0
    now[0] = 140.0
    stuck(0, 1000)  # the first batch is not back yet: no rate to guess from
    assert capsys.readouterr().err == "embedding: 0/1000 windows embedded, 0.0 a second, time left not known yet\n"
    now[0] = 200.0
    bar(1000, 1000)
    bar.done()
    assert capsys.readouterr().err == "embedding: 1000/1000 new windows embedded\n"


def test_index_with_semantic_search_off_does_nothing(tmp_path, monkeypatch, capsys):
    from eggshell.cli import main as _cli

    proj = _project_with_turns(tmp_path, monkeypatch, n=1)
    (proj / ".eggshell.toml").write_text('mode = "lexical"\n')
    monkeypatch.setenv("EGGSHELL_DATA_ROOT", str(tmp_path / "data"))
    assert _cli.main(["index"]) == 0
    assert "semantic search is off" in capsys.readouterr().out
    assert not (tmp_path / "data").exists()


def test_model_install_of_the_default_reports_where_it_is(monkeypatch, capsys):
    from eggshell.cli import main as _cli

    monkeypatch.delenv("EGGSHELL_PREFIX", raising=False)
    assert _cli.main(["model", "install", "all-MiniLM-L6-v2"]) == 0
    assert "nothing to download" in capsys.readouterr().out


HUB_DOWN = [{"HTTPS_PROXY": "http://127.0.0.1:1"},  # a proxy that refuses: the same answer with or without a network
            {"HF_ENDPOINT": "https://10.255.255.1"}]  # an address nothing routes to (the suite also runs in `unshare -n`)


@pytest.mark.parametrize("env", HUB_DOWN, ids=["refusing-proxy", "unroutable-hub"])
def test_model_install_fails_fast_and_changes_nothing_when_the_hub_cannot_be_reached(egg, monkeypatch, env):
    import time

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    t = time.monotonic()
    rc, out, err = egg("model", "install", "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2")
    took = time.monotonic() - t
    assert (rc, out) == (1, "")
    assert took < 10, took  # fastembed alone retries for 40 s before it gives up
    host = "10.255.255.1" if "HF_ENDPOINT" in env else "huggingface.co"
    assert err.startswith("egg: could not install sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2: its model "
                          "hub cannot be reached from here (%s: " % host), err
    assert err.endswith("within 3 s).\nNothing was changed; the default model stays in use. Run this where %s can be "
                        "reached, or point HF_ENDPOINT at a mirror (or HTTPS_PROXY at a proxy) that can reach it.\n" % host)
    assert not egg.prefix.exists()  # not even an empty model directory


def test_model_install_offline_reports_a_model_an_earlier_install_fetched(egg, monkeypatch):
    """A model already in the download cache loads offline: it is installed, though the hub is down."""
    from eggshell.search.installed import default_model_dir, downloaded_models_dir

    model = default_model_dir()  # the offline default's files, laid out as fastembed's cache holds a download
    assert os.path.isfile(os.path.join(model, "model.onnx")), "the offline default model is not installed (./install.sh)"
    snap = os.path.join(downloaded_models_dir(), "models--Qdrant--all-MiniLM-L6-v2-onnx")
    os.makedirs(os.path.join(snap, "snapshots", "abc123"))
    os.makedirs(os.path.join(snap, "refs"))
    with open(os.path.join(snap, "refs", "main"), "w") as f:
        f.write("abc123")
    for name in os.listdir(model):
        os.symlink(os.path.join(model, name), os.path.join(snap, "snapshots", "abc123", name))
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    rc, out, err = egg("model", "install", "sentence-transformers/all-MiniLM-L6-v2")
    assert (rc, err) == (0, ""), err
    assert out.startswith("sentence-transformers/all-MiniLM-L6-v2 is already installed in %s (384 dimensions); its model "
                          "hub cannot be reached (huggingface.co: " % downloaded_models_dir())
    assert out.endswith("so nothing was downloaded. Use it with `model = \"sentence-transformers/all-MiniLM-L6-v2\"` in "
                        "your config.\n")


# -- union / split ----------------------------------------------------------------------------------


def test_union_and_split_a_pair_of_works(egg, store):
    from eggshell.core.identity import content_hex, display_key
    from eggshell.graph.store import Store

    t1 = view_of(store, "t1").tools[0]
    other = next(t for v in turn_views(store.graph) for t in v.tools if t.work != t1.work)
    w1 = store.graph.nodes[t1.id].args[0].target
    w2 = store.graph.nodes[other.id].args[0].target
    k1, k2 = display_key(content_hex(w1)), display_key(content_hex(w2))
    rc, out, _ = egg("union", k1, k2, "--egg", store.path)
    assert rc == 0 and "egg split" in out
    assert Store.open(store.path).graph.unions() == [(w1, w2)] or Store.open(store.path).graph.unions() == [(w2, w1)]
    assert egg("union", k1, k2, "--egg", store.path)[1].startswith("already equal")  # a replay writes nothing
    rc, out, _ = egg("split", k1, "--egg", store.path)  # one union: one key is enough
    assert rc == 0 and Store.open(store.path).graph.unions() == []
    rc, _, err = egg("split", k1, "--egg", store.path)
    assert rc == 1 and "no union in force" in err


def test_union_refuses_values_with_different_provenance(egg, store):
    t1 = view_of(store, "t1").tools[0]
    w = store.graph.nodes[t1.id].args[0].target
    from eggshell.core.identity import content_hex, display_key

    rc, _, err = egg("union", t1.id[:12], display_key(content_hex(w)), "--egg", store.path)  # an Outcome edge vs a Work
    assert rc == 1 and err.startswith("egg: %s is a tool outcome (the TOOL key; its work is %s) and %s is a recorded text: "
                                      % (t1.id[:12], display_key(content_hex(w)), display_key(content_hex(w))))
    assert "For these two" not in err  # a tool outcome and a text: no pair of Works to offer
    assert store.graph.unions() == []


def test_union_of_two_tool_keys_says_what_it_takes_and_where_the_keys_are(egg, store):
    """The TOOL keys `egg show` prints name outcomes, which carry provenance: the refusal names the
    kinds a union takes, where `egg show` prints their keys, and the command for these two."""
    t1, t2 = view_of(store, "t1").tools[0], view_of(store, "t2").tools[0]
    k1, k2 = display_key(t1.id), display_key(t2.id)
    w1, w2 = display_key(content_hex(Atom.text(t1.work))), display_key(content_hex(Atom.text(t2.work)))
    rc, out, err = egg("union", k1, k2, "--egg", store.path)
    assert (rc, out) == (1, "")
    assert err == ("egg: %s is a tool outcome (the TOOL key; its work is %s) and %s is a tool outcome (the TOOL key; its work "
                   "is %s): their provenance (the session, turn and call that observed them) differs, and no union may "
                   "change provenance. A union joins two Works, which carry none: two tool calls' works or two requests. "
                   "`egg show TURN` prints their keys: [work KEY] on each TOOL line, [request KEY] on REQUEST. For these "
                   "two: egg union %s %s\n" % (k1, w1, k2, w2, w1, w2))
    assert Store.open(store.path).graph.unions() == []
    # the command it names works
    rc, out, _ = egg("union", w1, w2, "--egg", store.path)
    assert rc == 0 and len(Store.open(store.path).graph.unions()) == 1
    # two turns (the keys `egg find` prints): their requests
    a, b = view_of(store, "t1"), view_of(store, "t2")
    err = egg("union", a.key, b.key, "--egg", store.path)[2]
    assert err.endswith("For these two: egg union %s %s\n" % (display_key(content_hex(Atom.text(a.prompt))),
                                                           display_key(content_hex(Atom.text(b.prompt)))))
    assert "a turn (interrupted; its request is " in err  # t2 never answered


def test_union_help_names_the_keys_egg_show_prints(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["union", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert e.value.code == 0
    assert "[work KEY] on every TOOL line, [request KEY] on REQUEST" in out and "a tool outcome or a turn" in out


def test_every_exception_eggshell_defines_has_the_one_base():
    import importlib
    import inspect
    import pkgutil

    import eggshell
    from eggshell.errors import EggshellError

    found = []
    for m in pkgutil.walk_packages(eggshell.__path__, "eggshell."):
        if m.name == "eggshell.__main__":
            continue
        mod = importlib.import_module(m.name)
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ == m.name and issubclass(cls, BaseException):
                found.append(cls)
                assert issubclass(cls, EggshellError), "%s.%s" % (m.name, cls.__name__)
    assert len(found) >= 20, found
