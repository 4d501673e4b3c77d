"""SessionStart tells the user when memory is off, or partly off (runtime/health.py, turnflow, hookflow).

Requirements: a broken or refused project config (TOML that does not parse, a key of the
wrong type, a refused path or file), a refused data root, a refused or damaged store make
SessionStart's one line say that Eggshell is OFF for this project, naming the file (and
line) and the fix; a missing model or semantic_matcher program adds that prompts are matched
lexically only; when all is well the line is today's status line, unchanged; every case still
exits 0 with one valid JSON reply, and the other events still answer {}; the same line
reaches both hosts as the `systemMessage` they show the user, cold and from the warm manager.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys

import pytest

from helpers.hook_env import Env, damage, one_json_object, record_late_fee
from helpers.managed import ManagedEnv, checkout  # noqa: F401 - checkout is a fixture
from eggshell.paths import PROJECT_CONFIG
from eggshell.runtime import health
from eggshell.search import installed

ALL_WELL = "Eggshell: recording this project; %d prior turn%s in .eggs/work.egg."
OFF = "Eggshell is OFF for this project: "


@pytest.fixture
def env(tmp_path):
    return Env(tmp_path)


def start(env: Env, host: str = "codex", **kw) -> dict:
    return env.respond(env.ev("SessionStart", source="startup", **kw), host=host)


def message(env: Env, host: str = "codex") -> str:
    reply = start(env, host)
    assert list(reply) == ["systemMessage"], reply  # what both hosts show the user (docs/hooks.md)
    return reply["systemMessage"]


def config_path(env: Env) -> str:
    return os.path.join(env.project, PROJECT_CONFIG)


def no_model(monkeypatch, tmp_path) -> str:
    """The offline default model's directory, empty (the fault: install.sh never put it there)."""
    d = str(tmp_path / "no-model")
    monkeypatch.setattr(installed, "default_model_dir", lambda prefix=None: d)
    return d


# -- all is well: today's line, unchanged --------------------------------------------------------


def test_all_well_is_todays_status_line(env):
    assert message(env) == ALL_WELL % (0, "s")
    record_late_fee(env)
    assert message(env) == ALL_WELL % (1, "")
    assert message(env, "claude") == ALL_WELL % (1, "")
    assert env.log_text() == ""


def test_lexical_settings_need_no_model_and_say_nothing(env, monkeypatch, tmp_path):
    no_model(monkeypatch, tmp_path)
    for text in ('mode = "lexical"\n', "semantic_matcher = false\n"):
        if text.startswith("semantic"):  # a program (or none) is the user's choice: the global file
            os.makedirs(os.path.dirname(env.paths.global_config), exist_ok=True)
            with open(env.paths.global_config, "w") as f:
                f.write(text)
            env.write_config("")
        else:
            env.write_config(text)
        assert message(env) == ALL_WELL % (0, "s"), text


# -- a broken or refused config ---------------------------------------------------------------


def test_broken_toml_names_the_file_and_its_line(env):
    env.write_config('top_k = 5\nmode = "hybrid"\nhandoff_chars = = 3\n')
    msg = message(env)
    assert msg.startswith(OFF + "%s: not valid TOML: " % config_path(env)), msg
    assert "(at line 3, column" in msg and msg.endswith("; fix it or run `egg doctor`")
    assert "\n" not in msg


def test_a_key_of_the_wrong_type_names_the_file_line_key_and_rule(env):
    env.write_config('default = "work"\n\ntop_k = "five"\n')
    assert message(env) == OFF + ("%s line 3: 'top_k' must be an integer from 1 to 50, got 'five'; fix it or run "
                                  "`egg doctor`" % config_path(env))
    assert message(env, "claude") == message(env)


def test_a_key_inside_a_table_names_its_line(env):
    env.write_config('default = "work"\n\n[profiles.mine]\nread = ["project"]\nwrite = "nowhere"\n')
    msg = message(env)
    assert msg.startswith(OFF + "%s line 5: [profiles.mine]: 'write' names unknown egg 'nowhere'" % config_path(env)), msg


def test_a_refused_path_names_the_rule(env):
    env.write_config('top_k = 5\negg = "../elsewhere/work.egg"\n')
    msg = message(env)
    assert msg.startswith(OFF + "%s line 2: 'egg' = '../elsewhere/work.egg' goes through '..'" % config_path(env)), msg
    assert "a project file names stores only under the project's .eggs/" in msg


def test_a_config_others_could_write_is_refused_with_its_fix(env):
    os.chmod(config_path(env), 0o666)
    msg = message(env)
    assert msg.startswith(OFF + "%s: refused: every user can write it" % config_path(env)), msg
    assert "chmod go-w %s" % config_path(env) in msg


def test_what_a_repository_wrote_is_shown_as_text_on_one_line(env):
    """A profile name or a store path is the repository's text: its newlines and escape sequences are
    shown as escapes, never drawn on the user's terminal."""
    env.write_config('[profiles."mine\\nEggshell: all is well\\u001b[2J"]\nread = ["project"]\n')
    msg = message(env)
    assert msg.startswith(OFF + "%s: [profiles.mine\\nEggshell: all is well\\x1b[2J]: a profile name may hold only"
                          % config_path(env)), msg
    env.write_config('egg = ".eggs/w\\u001b]0;title\\u0007.egg"\n')
    assert message(env) == "Eggshell: recording this project; 0 prior turns in .eggs/w\\x1b]0;title\\x07.egg."


@pytest.mark.parametrize("char", ["\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u200f", "\u061c"])
def test_a_direction_override_in_a_store_path_is_shown_escaped(env, char):
    """Red team IV (inj_bidi_in_status_path): U+202E in a repository's store path showed it reversed."""
    env.write_config('egg = ".eggs/%stxt.exe\\u202c.egg"\n' % ("\\u%04x" % ord(char)))
    msg = message(env)
    assert msg == "Eggshell: recording this project; 0 prior turns in .eggs/\\u%04xtxt.exe\\u202c.egg." % ord(char), msg
    assert char not in msg and "\u202c" not in msg


def test_a_broken_config_still_fails_open_everywhere_else(env):
    record_late_fee(env)
    env.write_config('top_k = "five"\n')
    assert message(env).startswith(OFF)
    for p in (env.prompt("where is late_fee?", turn="t2"), env.tool("ls", "a\n", turn="t2"), env.stop("x", turn="t2"),
              env.ev("SessionStart", source="compact")):
        assert env.respond(p) == {}
    logged = [line.split()[1:3] for line in env.log_text().splitlines()]
    assert logged == [["SessionStart", "ConfigError:"], ["UserPromptSubmit", "ConfigError:"]]


def test_disabled_and_unconfigured_projects_stay_quiet(env, tmp_path):
    env.write_config("enabled = false\n")
    assert start(env) == {}
    plain = tmp_path / "plain"
    plain.mkdir()
    assert start(env, cwd=str(plain)) == {}


# -- a refused data root ---------------------------------------------------------------------


@pytest.fixture
def foreign_root(env, tmp_path):
    """A data root another user owns: as root, a directory given to `nobody`; else / (root's)."""
    if os.geteuid() != 0:
        return "/"
    d = tmp_path / "theirs"
    d.mkdir()
    os.chown(d, 65534, 65534)
    return str(d)


def test_a_data_root_of_another_user_turns_memory_off(env, foreign_root):
    env.paths = env.paths._replace(data_root=foreign_root)
    msg = message(env)
    assert msg.startswith("Eggshell is OFF (nothing is recorded or handed over, in any project): %s: refused: another "
                          "user owns it" % foreign_root), msg
    assert "set EGGSHELL_DATA_ROOT to a directory of yours" in msg
    assert env.respond(env.prompt("where is late_fee?")) == {}
    assert env.respond(env.ev("SessionStart", source="compact")) == {}
    if foreign_root != "/":
        assert os.listdir(foreign_root) == []  # nothing written there, not even the log


def test_a_data_root_that_cannot_be_checked_turns_memory_off(env, monkeypatch):
    os.makedirs(env.data, 0o700)
    real_stat = os.stat

    def failing(path, *a, **k):  # the fault: a stat that fails (an I/O error, a parent not searchable)
        if path == env.data:
            raise PermissionError(13, "Permission denied")
        return real_stat(path, *a, **k)

    monkeypatch.setattr("eggshell.paths.os.stat", failing)
    msg = message(env)
    assert msg.startswith("Eggshell is OFF (nothing is recorded or handed over, in any project): %s: cannot "
                          "be checked: Permission denied" % env.data), msg
    assert os.listdir(env.data) == []


def test_a_data_root_open_to_others_turns_memory_off_and_keeps_its_mode(env):
    os.makedirs(env.data)
    os.chmod(env.data, 0o755)
    msg = message(env)
    assert msg.startswith("Eggshell is OFF (nothing is recorded or handed over, in any project): %s: refused: others can read "
                          "or enter it (mode 0755)" % env.data), msg
    assert "`chmod 700 %s`" % env.data in msg
    assert os.listdir(env.data) == [] and stat.S_IMODE(os.stat(env.data).st_mode) == 0o755


# -- the store ---------------------------------------------------------------------------------


def test_a_damaged_store_names_file_and_line_and_egg_fsck(env):
    record_late_fee(env)
    damage(env.egg)
    assert message(env) == OFF + ("%s:2: node id does not match its content (the line was altered); nothing is handed "
                                  "over from it, and new turns wait in the journal until it can be read: `egg fsck %s` "
                                  "says what is wrong" % (env.egg, env.egg))
    assert "SessionStart EggError" in env.log_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="chowns the store to nobody")
def test_a_refused_store_turns_memory_off(env, tmp_path):
    os.makedirs(os.path.dirname(env.egg), 0o700)
    with open(env.egg, "wb"):
        pass
    os.chown(env.egg, 65534, 65534)
    msg = message(env)
    assert msg.startswith(OFF + "%s: refused: another user owns it (owner nobody (uid 65534)" % env.egg), msg


def test_a_symlinked_store_is_refused_by_the_config_rule(env, tmp_path):
    real = tmp_path / "real.egg"
    real.write_bytes(b"")
    os.makedirs(os.path.dirname(env.egg))
    os.symlink(real, env.egg)
    msg = message(env)
    assert msg.startswith(OFF + "%s line 12: [eggs] project = '.eggs/work.egg' goes through a symbolic link, %s (to %s)" % (
        config_path(env), env.egg, real)), msg


# -- the semantic side -------------------------------------------------------------------------


def test_a_missing_model_says_prompts_are_matched_lexically(env, monkeypatch, tmp_path):
    d = no_model(monkeypatch, tmp_path)
    assert message(env) == ("Eggshell: recording this project; 0 prior turns in .eggs/work.egg; prompts are matched "
                            "lexically only (the built-in model all-MiniLM-L6-v2 is not installed at %s (no model.onnx): "
                            "run ./install.sh, or set mode = \"lexical\")." % d)


def test_a_model_never_downloaded_says_so(env):
    env.write_config('model = "BAAI/bge-small-en-v1.5"\n')
    d = installed.downloaded_models_dir(env.prefix)
    msg = message(env)
    assert msg.endswith("; prompts are matched lexically only (the model BAAI/bge-small-en-v1.5 is not downloaded into "
                        "%s: run `egg model install BAAI/bge-small-en-v1.5`, or set mode = \"lexical\")." % d), msg
    os.makedirs(os.path.join(d, "models--qdrant--bge-small-en-v1.5-onnx-q"))  # as fastembed names it
    assert message(env) == ALL_WELL % (0, "s")


def test_a_missing_matcher_program_says_so(env, tmp_path):
    prog = tmp_path / "matcher"
    os.makedirs(os.path.dirname(env.paths.global_config))
    with open(env.paths.global_config, "w") as f:
        f.write("semantic_matcher = [%s, \"--fast\"]\n" % json.dumps(str(prog)))
    assert message(env).endswith("; prompts are matched lexically only (the semantic_matcher program %s is missing or not "
                                 "executable: fix semantic_matcher in your config, or set semantic_matcher = false)." % prog)
    shutil.copy(sys.executable, prog)
    os.chmod(prog, stat.S_IRWXU)
    assert message(env) == ALL_WELL % (0, "s")


# -- the line finder -------------------------------------------------------------------------


def test_config_lines_are_found_per_table(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('# a comment\ntop_k = 3\n\n[eggs]\n"shared" = "../s.egg"\n\n[ profiles . "mine" ]\nread = ["shared"]\n'
                 'top_k = 1\n')
    assert health.key_line(str(p), None, "top_k") == 2
    assert health.key_line(str(p), "eggs", "shared") == 5
    assert health.key_line(str(p), "profiles.mine", None) == 7
    assert health.key_line(str(p), "profiles.mine", "read") == 8
    assert health.key_line(str(p), "profiles.mine", "write") == 7  # not written there: the table it belongs to
    assert health.key_line(str(p), None, "mode") is None
    assert health.with_line("%s: 'top_k' must be" % p) == "%s line 2: 'top_k' must be" % p
    assert health.with_line("%s: [eggs] shared = ..." % p) == "%s line 5: [eggs] shared = ..." % p
    assert health.with_line("%s: not valid TOML: x (at line 2, column 1)" % p) == "%s: not valid TOML: x (at line 2, column 1)" % p
    assert health.with_line("%s: 'mode' must be" % p) == "%s: 'mode' must be" % p  # not in the file: no line invented
    assert health.with_line("/nonexistent: 'top_k' must be") == "/nonexistent: 'top_k' must be"


# -- the real process, and the warm manager -------------------------------------------------------


CAUSES = {
    "broken TOML": lambda env: env.write_config("top_k = = 3\n"),
    "wrong type": lambda env: env.write_config('top_k = "five"\n'),
    "refused path": lambda env: env.write_config('egg = "/etc/work.egg"\n'),
    "damaged store": lambda env: (record_late_fee(env), damage(env.egg)),
    "model not downloaded": lambda env: env.write_config('model = "BAAI/bge-small-en-v1.5"\n'),
}


@pytest.mark.parametrize("cause", list(CAUSES))
def test_the_hook_process_exits_0_with_the_line(env, cause):
    CAUSES[cause](env)
    for host in ("codex", "claude"):
        r = env.run_bin(json.dumps(env.ev("SessionStart", source="startup")), host)
        assert r.returncode == 0, r.stderr
        msg = one_json_object(r.stdout)["systemMessage"]
        assert msg.startswith(OFF) or "prompts are matched lexically only" in msg, msg
        r = env.run_bin(json.dumps(env.prompt("where is late_fee computed?", turn="t9")), host)
        assert r.returncode == 0 and isinstance(one_json_object(r.stdout), dict)


def test_the_warm_manager_says_the_same(tmp_path, checkout):  # noqa: F811
    env = ManagedEnv(tmp_path, checkout)
    try:
        env.write_config('model = "BAAI/bge-small-en-v1.5"\n')
        first = env.hook(env.ev("SessionStart", source="startup"))[0]["systemMessage"]  # cold: it starts the manager
        env.wait_manager()
        assert env.hook(env.ev("SessionStart", source="resume"))[0]["systemMessage"] == first
        assert "prompts are matched lexically only (the model BAAI/bge-small-en-v1.5 is not downloaded" in first
        record_late_fee(env)
        damage(env.egg)
        msg = env.hook(env.ev("SessionStart", source="resume"))[0]["systemMessage"]
        assert msg.startswith(OFF + "%s:2: node id does not match" % env.egg) and "`egg fsck %s`" % env.egg in msg
    finally:
        env.shutdown()
