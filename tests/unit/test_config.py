"""config.py and paths.py: defaults < global file < project file, closed keys, paths from env."""

from __future__ import annotations

import os

import pytest

from eggshell import config
from eggshell.config import Config, ConfigError
from eggshell.paths import PROJECT_CONFIG, Paths, find_project, from_env, private_dir


@pytest.fixture
def paths(tmp_path):
    prefix = tmp_path / "prefix"
    return Paths(str(prefix), str(tmp_path / "data"), str(prefix / "config" / "eggshell" / "config.toml"),
                 str(tmp_path / "codex"), str(tmp_path / "bin"))


@pytest.fixture
def project(tmp_path):
    d = tmp_path / "proj"
    d.mkdir()
    return d


def write_global(paths, text):
    os.makedirs(os.path.dirname(paths.global_config), exist_ok=True)
    with open(paths.global_config, "w") as f:
        f.write(text)


def write_project(project, text):
    (project / PROJECT_CONFIG).write_text(text)


# -- layering ---------------------------------------------------------------------------------


def test_defaults_outside_a_project(paths, tmp_path):
    cfg = config.load(paths, str(tmp_path))
    assert cfg == Config()
    assert (cfg.enabled, cfg.egg, cfg.read, cfg.handoff_chars, cfg.top_k, cfg.min_coverage) == (True, ".eggs/work.egg", (), 8000, 5, 0.2)
    assert cfg.project_root is None and cfg.write_egg is None and cfg.read_eggs == [] and cfg.sources == ()


def test_project_file_makes_a_project(paths, project):
    write_project(project, "")
    cfg = config.load(paths, str(project))
    assert cfg.project_root == str(project)
    assert cfg.write_egg == str(project / ".eggs" / "work.egg")
    assert cfg.read_eggs == [cfg.write_egg]
    assert cfg.sources == (str(project / PROJECT_CONFIG),)


def test_template_is_a_valid_project_file_with_the_defaults(paths, project):
    write_project(project, config.PROJECT_TEMPLATE)
    cfg = config.load(paths, str(project))
    assert (cfg.egg, cfg.read, cfg.handoff_chars, cfg.top_k) == (".eggs/work.egg", (), 8000, 5)


def test_global_then_project_later_wins(paths, project):
    write_global(paths, "top_k = 9\nhandoff_chars = 4000\nmin_coverage = 0.5\n")
    write_project(project, "top_k = 3\n")
    cfg = config.load(paths, str(project))
    assert (cfg.top_k, cfg.handoff_chars, cfg.min_coverage) == (3, 4000, 0.5)
    assert cfg.sources == (paths.global_config, str(project / PROJECT_CONFIG))


def test_global_file_applies_outside_projects(paths, tmp_path):
    write_global(paths, "enabled = false\n")
    cfg = config.load(paths, str(tmp_path))
    assert cfg.enabled is False and cfg.sources == (paths.global_config,)


def test_nearest_project_file_wins(paths, project):
    write_project(project, 'egg = "outer.egg"\n')
    inner = project / "sub" / "inner"
    inner.mkdir(parents=True)
    (project / "sub" / PROJECT_CONFIG).write_text('egg = "inner.egg"\n')
    cfg = config.load(paths, str(inner))
    assert cfg.project_root == str(project / "sub")
    assert cfg.write_egg == str(project / "sub" / "inner.egg")


def test_read_stores_relative_to_root_write_store_first_without_repeats(paths, project, monkeypatch):
    monkeypatch.setenv("HOME", "/home/someone")
    write_project(project, 'egg = "a/../w.egg"\nread = ["shared/team.egg", "w.egg", "~/all.egg", "/abs/x.egg"]\n')
    cfg = config.load(paths, str(project))
    assert cfg.write_egg == str(project / "w.egg")
    assert cfg.read_eggs == [str(project / "w.egg"), str(project / "shared" / "team.egg"), "/home/someone/all.egg", "/abs/x.egg"]


def test_min_coverage_integer_becomes_float(paths, project):
    write_project(project, "min_coverage = 1\n")
    cfg = config.load(paths, str(project))
    assert cfg.min_coverage == 1.0 and isinstance(cfg.min_coverage, float)


# -- closed keys and checked values -------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ("tpo_k = 5\n", "unknown key 'tpo_k'"),
        ("[section]\nx = 1\n", "unknown key 'section'"),
        ("enabled = 1\n", "'enabled' must be true or false"),
        ('egg = ""\n', "'egg' must not be empty"),
        ("egg = 5\n", "'egg' must be a path string"),
        ('read = "x.egg"\n', "'read' must be a list of path strings"),
        ('read = ["ok.egg", 3]\n', "'read' must be a list of path strings"),
        ('read = [""]\n', "'read' must be a list of path strings"),
        ("handoff_chars = 199\n", "'handoff_chars' must be an integer from 200 to 48000"),
        ("handoff_chars = 48001\n", "'handoff_chars' must be an integer from 200 to 48000"),
        ("handoff_chars = 8000.0\n", "'handoff_chars' must be an integer"),
        ("top_k = 0\n", "'top_k' must be an integer from 1 to 50"),
        ("top_k = 51\n", "'top_k' must be an integer from 1 to 50"),
        ("top_k = true\n", "'top_k' must be an integer"),
        ("min_coverage = 1.5\n", "'min_coverage' must be a number from 0 to 1"),
        ("min_coverage = -0.1\n", "'min_coverage' must be a number from 0 to 1"),
        ("min_coverage = false\n", "'min_coverage' must be a number"),
        ("top_k = \n", "not valid TOML"),
    ],
)
def test_bad_project_file_names_the_file_and_key(paths, project, text, message):
    write_project(project, text)
    with pytest.raises(ConfigError) as e:
        config.load(paths, str(project))
    assert str(e.value).startswith(str(project / PROJECT_CONFIG) + ": ")
    assert message in str(e.value)


@pytest.mark.parametrize("key, value", [("egg", '"x.egg"'), ("read", '["x.egg"]')])
def test_project_only_keys_are_refused_in_the_global_file(paths, tmp_path, key, value):
    write_global(paths, "%s = %s\n" % (key, value))
    with pytest.raises(ConfigError, match="can only be set in a project's .eggshell.toml") as e:
        config.load(paths, str(tmp_path))
    assert str(e.value).startswith(paths.global_config)


def test_bad_global_file_is_an_error_even_inside_a_project(paths, project):
    write_project(project, "")
    write_global(paths, "bogus = 1\n")
    with pytest.raises(ConfigError, match="unknown key 'bogus'"):
        config.load(paths, str(project))


@pytest.mark.parametrize("value", [200, 48000])
def test_handoff_chars_bounds_are_inclusive(paths, project, value):
    write_project(project, "handoff_chars = %d\n" % value)
    assert config.load(paths, str(project)).handoff_chars == value


def test_unreadable_file_is_a_config_error(paths, project, monkeypatch):
    write_project(project, "")

    def refuse(path, *a, **k):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(config, "open", refuse, raising=False)
    with pytest.raises(ConfigError, match="cannot read: Permission denied"):
        config.load(paths, str(project))


def test_read_file_missing_is_empty(tmp_path):
    assert config.read_file(str(tmp_path / "none.toml"), "project") == {}


# -- paths ----------------------------------------------------------------------------------------


def test_paths_from_env_defaults():
    p = from_env({"HOME": "/h"})
    assert p == Paths("/h/.local", "/h/.local/share/eggshell/data", "/h/.local/config/eggshell/config.toml", "/h/.codex", "/h/.local/bin")
    assert p.journal_dir == "/h/.local/share/eggshell/data/journal"
    assert p.log_file == "/h/.local/share/eggshell/data/logs/hook.log"


def test_paths_from_env_overrides():
    p = from_env({"HOME": "/h", "EGGSHELL_PREFIX": "/p", "EGGSHELL_DATA_ROOT": "/d", "CODEX_HOME": "/c", "EGGSHELL_BIN": "/b"})
    assert p == Paths("/p", "/d", "/p/config/eggshell/config.toml", "/c", "/b")


def test_empty_env_values_mean_default():
    p = from_env({"HOME": "/h", "EGGSHELL_PREFIX": "", "EGGSHELL_DATA_ROOT": ""})
    assert p.prefix == "/h/.local" and p.data_root == "/h/.local/share/eggshell/data"


def test_find_project(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert find_project(str(tmp_path / "a" / "b")) is None
    (tmp_path / "a" / PROJECT_CONFIG).write_text("")
    assert find_project(str(tmp_path / "a" / "b")) == str(tmp_path / "a")
    assert find_project(str(tmp_path / "a")) == str(tmp_path / "a")
    # a directory named like the config file does not make a project
    (tmp_path / "a" / "b" / PROJECT_CONFIG).mkdir()
    assert find_project(str(tmp_path / "a" / "b")) == str(tmp_path / "a")


def test_private_dir_creates_owner_only_parents(tmp_path):
    old = os.umask(0o022)
    try:
        d = tmp_path / "x" / "y" / "z"
        private_dir(str(d))
    finally:
        os.umask(old)
    for p in (tmp_path / "x", tmp_path / "x" / "y", d):
        assert p.is_dir() and p.stat().st_mode & 0o777 == 0o700
    private_dir(str(d))  # idempotent
