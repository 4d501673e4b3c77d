"""config.py and paths.py: defaults < global file < project file, closed keys, profiles, paths from env."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, strategies as st

from eggshell import config
from eggshell.config import Config, ConfigError, Selection
from eggshell.paths import PROJECT_CONFIG, Paths, find_project, from_env, private_dir


@pytest.fixture(autouse=True)
def no_explicit_config(monkeypatch):
    monkeypatch.delenv("EGGSHELL_CONFIG", raising=False)


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
    assert cfg.default == "work" and cfg.profiles == ("work", "private", "off")
    # the template spells out the built-ins: same selections as an empty project file
    write_project(project, "")
    bare = config.load(paths, str(project))
    for name in ("work", "private", "off"):
        assert cfg.selection(name) == bare.selection(name)


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
    write_project(project, 'egg = ".eggs/outer.egg"\n')
    inner = project / "sub" / "inner"
    inner.mkdir(parents=True)
    (project / "sub" / PROJECT_CONFIG).write_text('egg = ".eggs/inner.egg"\n')
    cfg = config.load(paths, str(inner))
    assert cfg.project_root == str(project / "sub")
    assert cfg.write_egg == str(project / "sub" / ".eggs" / "inner.egg")


def test_read_stores_relative_to_root_write_store_first_without_repeats(paths, project):
    write_project(project, 'egg = ".eggs/w.egg"\nread = ["shared/team.egg", ".eggs/w.egg", "sub/../x.egg"]\n')
    cfg = config.load(paths, str(project))
    w = str(project / ".eggs" / "w.egg")
    assert cfg.write_egg == w
    assert cfg.read_eggs == [w, str(project / "shared" / "team.egg"), str(project / "x.egg")]


@pytest.mark.parametrize("entry", ["~/all.egg", "/abs/x.egg", "../other/.eggs/work.egg"])
def test_read_may_not_name_a_store_outside_the_project(paths, project, monkeypatch, entry):
    monkeypatch.setenv("HOME", "/home/someone")
    write_project(project, 'read = ["ok.egg", "%s"]\n' % entry)
    with pytest.raises(config.ConfigError, match=r"'read' entry = .* outside the project") as e:
        config.load(paths, str(project))
    assert PROJECT_CONFIG in str(e.value) and "global config" in str(e.value)


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


# -- profiles ---------------------------------------------------------------------------------


def test_builtin_profiles_in_a_bare_project(paths, project):
    write_project(project, 'read = ["shared/team.egg"]\n')
    cfg = config.load(paths, str(project))
    w, team = str(project / ".eggs" / "work.egg"), str(project / "shared" / "team.egg")
    assert cfg.default == "work" and cfg.profiles == ("work", "private", "off")
    assert cfg.egg_paths == {"project": w}
    assert cfg.selection() == Selection("work", True, (w, team), w, 8000, True)
    assert cfg.selection("work") == cfg.selection()
    assert cfg.selection("private") == Selection("private", True, (w, team), None, 8000, True)
    assert cfg.selection("off") == Selection("off", False, (), None, 8000, True)
    assert (cfg.write_egg, cfg.read_eggs) == (w, [w, team])


def test_outside_a_project_every_builtin_profile_is_off(paths, tmp_path):
    cfg = config.load(paths, str(tmp_path))
    for name in ("work", "private", "off"):
        sel = cfg.selection(name)
        assert (sel.enabled, sel.read, sel.write) == (False, (), None)


def test_profiles_inherit_the_top_level_defaults_and_may_override_them(paths, project):
    write_global(paths, "handoff_chars = 3000\nlocal_union = false\n")
    write_project(project, '[eggs]\nnotes = ".eggs/n.egg"\n[profiles.lean]\nread = ["notes"]\nhandoff_chars = 500\n'
                           '[profiles.wide]\nread = ["project", "notes"]\nwrite = "notes"\nlocal_union = true\n')
    cfg = config.load(paths, str(project))
    n, w = str(project / ".eggs" / "n.egg"), str(project / ".eggs" / "work.egg")
    assert cfg.selection("lean") == Selection("lean", True, (n,), None, 500, False)
    assert cfg.selection("wide") == Selection("wide", True, (n, w), n, 3000, True)  # write first, no repeats
    assert cfg.selection("work").handoff_chars == 3000 and cfg.selection("work").local_union is False
    assert (cfg.handoff_chars, cfg.local_union) == (3000, False)
    assert cfg.profiles == ("work", "private", "off", "lean", "wide")


def test_enabled_false_turns_every_profile_off(paths, project):
    write_project(project, "enabled = false\n")
    cfg = config.load(paths, str(project))
    assert not cfg.selection("work").enabled and cfg.selection("work").read == ()
    assert cfg.write_egg == str(project / ".eggs" / "work.egg")  # the paths stay known (egg init uses them)


def test_default_picks_the_profile_and_drives_write_and_read_eggs(paths, project):
    write_project(project, 'default = "private"\n')
    cfg = config.load(paths, str(project))
    assert cfg.selection().profile == "private" and cfg.selection().write is None
    assert cfg.write_egg is None and cfg.read_eggs == [str(project / ".eggs" / "work.egg")]


def test_a_redefined_builtin_replaces_it(paths, project):
    write_project(project, '[eggs]\nother = ".eggs/o.egg"\n[profiles.work]\nread = ["other"]\nwrite = "other"\n')
    cfg = config.load(paths, str(project))
    o = str(project / ".eggs" / "o.egg")
    assert cfg.selection("work") == Selection("work", True, (o,), o, 8000, True)
    assert cfg.profiles == ("work", "private", "off")


# What `egg init` wrote before: the built-in private and off spelled out.
OLD_TEMPLATE_PROFILES = '[profiles.private]\nread = ["project"]\n\n[profiles.off]\nread = []\n'


@pytest.mark.parametrize("where", ["project", "global", "explicit"])
@pytest.mark.parametrize(
    "name, body, key",
    [
        ("off", 'read = ["project"]\nwrite = "project"\n', "write"),
        ("off", 'read = ["project"]\n', "read"),
        ("off", 'write = "project"\n', "write"),
        ("off", "handoff_chars = 400\n", "handoff_chars"),
        ("private", 'read = ["project"]\nwrite = "project"\n', "write"),
        ("private", "read = []\n", "read"),
        ("private", 'read = ["project"]\nlocal_union = false\n', "local_union"),
    ],
)
def test_builtin_off_and_private_cannot_be_redefined(paths, project, tmp_path, where, name, body, key):
    text = "[profiles.%s]\n%s" % (name, body)
    env = {}
    if where == "project":
        write_project(project, text)
        path = str(project / PROJECT_CONFIG)
    elif where == "global":
        write_global(paths, text)
        path = paths.global_config
    else:
        path = str(tmp_path / "mine.toml")
        with open(path, "w") as f:
            f.write(text)
        env = {"EGGSHELL_CONFIG": path}
    with pytest.raises(ConfigError) as e:
        config.load(paths, str(project), env=env)
    msg = str(e.value)
    assert msg.startswith("%s: [profiles.%s]: %r = " % (path, name, key)), msg
    assert "is built in" in msg and "cannot be redefined" in msg


@pytest.mark.parametrize("where", ["project", "global"])
def test_a_definition_identical_to_the_builtin_is_accepted_and_changes_nothing(paths, project, where):
    write_project(project, 'read = ["shared/team.egg"]\n' + (OLD_TEMPLATE_PROFILES if where == "project" else ""))
    if where == "global":
        write_global(paths, OLD_TEMPLATE_PROFILES)
    cfg = config.load(paths, str(project))
    w, team = str(project / ".eggs" / "work.egg"), str(project / "shared" / "team.egg")
    assert cfg.profile_defs == ()
    assert cfg.profiles == ("work", "private", "off")
    assert cfg.selection("private") == Selection("private", True, (w, team), None, 8000, True)  # the built-in, legacy reads too
    assert cfg.selection("off") == Selection("off", False, (), None, 8000, True)
    write_project(project, config.PROJECT_TEMPLATE + OLD_TEMPLATE_PROFILES)  # an existing project, a global file spelling them out too
    write_global(paths, OLD_TEMPLATE_PROFILES)
    assert config.load(paths, str(project)).profiles == ("work", "private", "off")


def test_the_template_no_longer_spells_out_off_and_private():
    assert "[profiles.off]" not in config.PROJECT_TEMPLATE and "[profiles.private]" not in config.PROJECT_TEMPLATE


def test_eggs_project_names_the_builtin_egg(paths, project):
    write_project(project, '[eggs]\nproject = ".eggs/main.egg"\n')
    cfg = config.load(paths, str(project))
    assert cfg.egg == os.path.join(".eggs", "main.egg") and cfg.write_egg == str(project / ".eggs" / "main.egg")


def test_global_eggs_resolve_against_the_global_file_and_expand_home(paths, project, monkeypatch):
    monkeypatch.setenv("HOME", "/home/someone")
    write_global(paths, '[eggs]\npapers = "~/Research/papers.egg"\nlocal = "team.egg"\n'
                        '[profiles.research]\nread = ["project", "papers", "local"]\n')
    write_project(project, "")
    cfg = config.load(paths, str(project))
    gdir = os.path.dirname(paths.global_config)
    w = str(project / ".eggs" / "work.egg")
    assert cfg.selection("research").read == (w, "/home/someone/Research/papers.egg", os.path.join(gdir, "team.egg"))
    # outside a project the built-in egg is absent; the global ones stay
    outside = config.load(paths, os.path.dirname(str(project)))
    assert outside.selection("research").read == ("/home/someone/Research/papers.egg", os.path.join(gdir, "team.egg"))


def test_unknown_profile_names_the_known_ones_and_the_files(paths, project):
    write_project(project, '[profiles.mine]\nread = ["project"]\n')
    cfg = config.load(paths, str(project))
    with pytest.raises(ConfigError) as e:
        cfg.selection("nope")
    assert str(e.value) == "unknown profile 'nope' (known: work, private, off, mine; defined in %s)" % (project / PROJECT_CONFIG)
    with pytest.raises(ConfigError, match=r"known: work, private, off; defined in the built-in defaults"):
        Config().selection("x")


@pytest.mark.parametrize(
    "text, message",
    [
        ('[profiles.w]\nreed = ["project"]\n', "[profiles.w]: unknown key 'reed' (known: read, write, handoff_chars, local_union"),
        ('[profiles.w]\nread = "project"\n', "[profiles.w]: 'read' must be a list of egg names"),
        ('[profiles.w]\nwrite = true\n', "[profiles.w]: 'write' must be an egg name, or false for read-only"),
        ('[profiles.w]\nread = ["nope"]\n', "[profiles.w]: 'read' names unknown egg 'nope'"),
        ('[profiles.w]\nwrite = "nope"\n', "[profiles.w]: 'write' names unknown egg 'nope'"),
        ('[profiles.w]\nhandoff_chars = 100\n', "[profiles.w]: 'handoff_chars' must be an integer from 200 to 48000"),
        ('[profiles.w]\nhandoff_chars = true\n', "[profiles.w]: 'handoff_chars' must be an integer"),
        ('[profiles.w]\nlocal_union = 1\n', "[profiles.w]: 'local_union' must be true or false"),
        ('profiles = 3\n', "'profiles' must be tables [profiles.NAME]"),
        ('[profiles]\nw = 3\n', "'profiles.w' must be a table"),
        ('[profiles."a b"]\n', "a profile name may hold only letters"),
        ('[eggs]\nx = 3\n', "[eggs] x must be a path string"),
        ('[eggs]\n"a b" = "x.egg"\n', "an egg name may hold only letters"),
        ('default = "nope"\n', "'default' names profile 'nope', which is not defined (known: work, private, off)"),
        ('default = 3\n', "'default' must be a profile name"),
        ('egg = ".eggs/a.egg"\n[eggs]\nproject = ".eggs/b.egg"\n', "both 'egg' and [eggs] project name the project's store"),
    ],
)
def test_bad_profiles_and_eggs_name_the_file_and_key(paths, project, text, message):
    write_project(project, text)
    with pytest.raises(ConfigError) as e:
        config.load(paths, str(project))
    assert str(e.value).startswith(str(project / PROJECT_CONFIG) + ": ")
    assert message in str(e.value)


def test_a_project_default_may_name_its_own_profile(paths, project):
    write_project(project, 'default = "mine"\n[profiles.mine]\nread = ["project"]\n')
    assert config.load(paths, str(project)).selection().profile == "mine"


def test_a_global_default_must_name_a_global_or_builtin_profile(paths, project):
    write_global(paths, 'default = "research"\n')
    with pytest.raises(ConfigError, match="'default' names profile 'research'") as e:
        config.load(paths, str(project))
    assert str(e.value).startswith(paths.global_config)
    write_global(paths, 'default = "private"\n')
    write_project(project, "")
    assert config.load(paths, str(project)).selection().profile == "private"


# -- project-file rules -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, key",
    [
        ('egg = "/elsewhere/work.egg"\n', "'egg'"),
        ('egg = "../work.egg"\n', "'egg'"),
        ('egg = "sub/../../work.egg"\n', "'egg'"),
        ('egg = "."\n', "'egg'"),
        ('egg = "~/work.egg"\n', "'egg'"),
        ('[eggs]\nx = "/elsewhere/x.egg"\n', "[eggs] x"),
        ('[eggs]\nx = "../x.egg"\n', "[eggs] x"),
        ('[eggs]\nproject = "../x.egg"\n', "[eggs] project"),
    ],
)
def test_project_eggs_must_stay_under_eggs(paths, project, text, key):
    write_project(project, text)
    with pytest.raises(ConfigError) as e:
        config.load(paths, str(project))
    msg = str(e.value)
    assert msg.startswith(str(project / PROJECT_CONFIG) + ": %s = " % key)
    assert "only under the project's .eggs/" in msg and "global config" in msg


def test_project_egg_through_a_symlink_is_refused(paths, project, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (project / ".eggs").mkdir()
    (project / ".eggs" / "link").symlink_to(tmp_path / "elsewhere")
    for text, key in (('egg = ".eggs/link/work.egg"\n', "'egg'"), ('[eggs]\nx = ".eggs/link/deep/x.egg"\n', "[eggs] x")):
        write_project(project, text)
        with pytest.raises(ConfigError, match="goes through a symbolic link, %s" % (project / ".eggs" / "link")) as e:
            config.load(paths, str(project))
        assert str(e.value).startswith(str(project / PROJECT_CONFIG) + ": %s = " % key)
    # one that stays inside is refused too (a save never follows a link below the root)
    (project / ".eggs" / "real").mkdir()
    (project / ".eggs" / "inner").symlink_to(project / ".eggs" / "real")
    write_project(project, 'egg = ".eggs/inner/work.egg"\n')
    with pytest.raises(ConfigError, match="goes through a symbolic link, %s" % (project / ".eggs" / "inner")):
        config.load(paths, str(project))
    write_project(project, 'egg = ".eggs/real/work.egg"\n')
    assert config.load(paths, str(project)).write_egg == str(project / ".eggs" / "real" / "work.egg")


def test_a_project_under_a_symlinked_directory_is_fine(paths, tmp_path):
    (tmp_path / "real" / "proj").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    proj = tmp_path / "alias" / "proj"
    write_project(proj, '[eggs]\nx = ".eggs/x.egg"\n')
    assert config.load(paths, str(proj)).egg_paths["x"] == str(proj / ".eggs" / "x.egg")


@pytest.mark.parametrize(
    "global_text, project_text, label",
    [
        ('[eggs]\nshared = "s.egg"\n', '[eggs]\nshared = ".eggs/mine.egg"\n', "[eggs] shared"),
        ('[profiles.research]\nread = ["project"]\n', '[profiles.research]\nread = ["project"]\n', "[profiles.research]"),
        ('[profiles.work]\nread = ["project"]\nwrite = "project"\nhandoff_chars = 900\n', config.PROJECT_TEMPLATE, "[profiles.work]"),
    ],
)
def test_a_project_may_not_shadow_the_global_files_names(paths, project, global_text, project_text, label):
    write_global(paths, global_text)
    write_project(project, project_text)
    with pytest.raises(ConfigError) as e:
        config.load(paths, str(project))
    assert str(e.value).startswith("%s: %s is already defined in %s" % (project / PROJECT_CONFIG, label, paths.global_config))
    assert "shadow" in str(e.value)


def test_project_profiles_may_only_name_project_eggs(paths, project):
    write_global(paths, '[eggs]\nshared = "/data/shared.egg"\n')
    write_project(project, '[profiles.mix]\nread = ["project", "shared"]\n')
    with pytest.raises(ConfigError) as e:
        config.load(paths, str(project))
    msg = str(e.value)
    assert msg.startswith(str(project / PROJECT_CONFIG) + ": [profiles.mix]: 'read' names unknown egg 'shared'")
    assert "may only name eggs from its own [eggs] or 'project'" in msg


def test_global_profiles_may_not_name_project_eggs_and_global_may_not_define_project(paths, project):
    write_global(paths, '[profiles.g]\nread = ["local"]\n')
    write_project(project, '[eggs]\nlocal = "l.egg"\n')
    with pytest.raises(ConfigError, match="'read' names unknown egg 'local'") as e:
        config.load(paths, str(project))
    assert str(e.value).startswith(paths.global_config)
    write_global(paths, '[eggs]\nproject = "/x.egg"\n')
    with pytest.raises(ConfigError, match=r"\[eggs\] project: 'project' is the built-in egg of each project"):
        config.load(paths, str(project))


def test_the_global_file_may_name_stores_anywhere(paths, tmp_path):
    write_global(paths, '[eggs]\nabs = "/srv/team.egg"\nup = "../up.egg"\n[profiles.team]\nread = ["abs", "up"]\nwrite = "abs"\n')
    cfg = config.load(paths, str(tmp_path))
    gdir = os.path.dirname(paths.global_config)
    assert cfg.selection("team") == Selection("team", True, ("/srv/team.egg", os.path.normpath(os.path.join(gdir, "../up.egg"))),
                                              "/srv/team.egg", 8000, True)


# -- EGGSHELL_CONFIG ---------------------------------------------------------------------------


def test_explicit_config_is_read_alone_and_its_directory_is_the_root(paths, project, tmp_path):
    write_global(paths, "top_k = 9\n")
    write_project(project, "top_k = 3\n")
    d = tmp_path / "elsewhere"
    d.mkdir()
    f = d / "mine.toml"
    f.write_text('top_k = 7\negg = "w.egg"\nsemantic_matcher = ["/bin/prog", "x"]\n'
                 '[eggs]\nout = "/abs/out.egg"\n[profiles.both]\nread = ["project", "out"]\nwrite = "out"\n')
    cfg = config.load(paths, str(project), env={"EGGSHELL_CONFIG": str(f)})
    assert cfg.sources == (str(f),) and cfg.project_root == str(d) and cfg.top_k == 7
    assert cfg.semantic_matcher == ("/bin/prog", "x")  # trusted like the global file
    assert cfg.write_egg == str(d / "w.egg")
    assert cfg.selection("both") == Selection("both", True, ("/abs/out.egg", str(d / "w.egg")), "/abs/out.egg", 8000, True)
    # an empty value means unset
    assert config.load(paths, str(project), env={"EGGSHELL_CONFIG": ""}).top_k == 3


def test_explicit_config_from_the_process_environment(paths, project, tmp_path, monkeypatch):
    f = tmp_path / "x.toml"
    f.write_text("top_k = 4\n")
    monkeypatch.setenv("EGGSHELL_CONFIG", str(f))
    assert config.load(paths, str(project)).top_k == 4


def test_missing_explicit_config_is_an_error(paths, tmp_path):
    with pytest.raises(ConfigError, match="no such file \\(named by EGGSHELL_CONFIG\\)") as e:
        config.load(paths, str(tmp_path), env={"EGGSHELL_CONFIG": str(tmp_path / "none.toml")})
    assert str(e.value).startswith(str(tmp_path / "none.toml"))


def test_explicit_config_keeps_every_other_rule(paths, tmp_path):
    f = tmp_path / "x.toml"
    f.write_text('[profiles.w]\nread = ["nope"]\n')
    with pytest.raises(ConfigError, match="'read' names unknown egg 'nope'"):
        config.load(paths, str(tmp_path), env={"EGGSHELL_CONFIG": str(f)})


# -- Selection JSON ----------------------------------------------------------------------------

_paths_st = st.lists(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12).map(lambda s: "/" + s),
                     max_size=5, unique=True)


@st.composite
def selections(draw):
    enabled = draw(st.booleans())
    read = tuple(draw(_paths_st)) if enabled else ()
    write = draw(st.sampled_from([None, read[0]])) if read else None
    return Selection(draw(st.text(min_size=1, max_size=10)), enabled, read, write,
                     draw(st.integers(200, 48000)), draw(st.booleans()))


@given(selections())
def test_selection_json_round_trip(sel):
    import json

    assert Selection.from_json(json.loads(json.dumps(sel.to_json()))) == sel


def test_config_selections_round_trip(paths, project):
    write_project(project, config.PROJECT_TEMPLATE)
    cfg = config.load(paths, str(project))
    for name in cfg.profiles:
        assert Selection.from_json(cfg.selection(name).to_json()) == cfg.selection(name)


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.pop("profile"),
        lambda d: d.update(extra=1),
        lambda d: d.update(profile=""),
        lambda d: d.update(enabled="yes"),
        lambda d: d.update(read="/a.egg"),
        lambda d: d.update(read=["rel.egg"]),
        lambda d: d.update(read=["/a.egg", "/a.egg"]),
        lambda d: d.update(write="/other.egg"),
        lambda d: d.update(handoff_chars=True),
        lambda d: d.update(handoff_chars=100),
        lambda d: d.update(local_union=None),
        lambda d: d.update(enabled=False),
    ],
)
def test_selection_from_json_refuses_malformed_dicts(change):
    d = Selection("work", True, ("/a.egg", "/b.egg"), "/a.egg", 8000, True).to_json()
    change(d)
    with pytest.raises(ValueError):
        Selection.from_json(d)
    with pytest.raises(ValueError):
        Selection.from_json(["not", "a", "dict"])


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


def test_find_project_stops_at_the_repository_root(tmp_path):
    (tmp_path / PROJECT_CONFIG).write_text("")
    work = tmp_path / "repo" / "src"
    work.mkdir(parents=True)
    assert find_project(str(work)) == str(tmp_path)
    (tmp_path / "repo" / ".git").mkdir()
    assert find_project(str(work)) is None  # a file above the repository is not this repository's
    (tmp_path / "repo" / PROJECT_CONFIG).write_text("")
    assert find_project(str(work)) == str(tmp_path / "repo")  # the repository root itself is searched
    (tmp_path / "wt").mkdir()
    (tmp_path / "wt" / ".git").write_text("gitdir: elsewhere\n")  # a worktree's .git is a file
    assert find_project(str(tmp_path / "wt")) is None


def test_find_project_stops_at_home(tmp_path):
    (tmp_path / PROJECT_CONFIG).write_text("")
    home = tmp_path / "home"
    (home / "scratch").mkdir(parents=True)
    assert find_project(str(home / "scratch"), home=str(home)) is None
    assert find_project(str(home / "scratch"), home=str(tmp_path / "elsewhere")) == str(tmp_path)
    (home / PROJECT_CONFIG).write_text("")
    assert find_project(str(home / "scratch"), home=str(home)) == str(home)


def test_find_project_stops_at_a_directory_that_is_not_yours(tmp_path):
    (tmp_path / PROJECT_CONFIG).write_text("")
    theirs = tmp_path / "theirs"
    (theirs / "mine").mkdir(parents=True)
    os.chown(theirs, NOBODY, NOGROUP)
    assert find_project(str(theirs / "mine")) is None  # their directory is the last one searched
    (theirs / PROJECT_CONFIG).write_text("")
    assert find_project(str(theirs / "mine")) == str(theirs)  # found, and refused when read (below)


# -- who may have written a config file ------------------------------------------------------------

NOBODY, NOGROUP = 65534, 65534


def sticky_tmp(tmp_path):
    """A directory like /tmp: world-writable, sticky, root's."""
    d = tmp_path / "tmp"
    d.mkdir()
    d.chmod(0o1777)
    return d


@pytest.mark.parametrize(
    "setup, why",
    [
        (lambda f: os.chown(f, NOBODY, NOGROUP), "another user owns it (owner nobody (uid 65534), mode 0644)"),
        (lambda f: f.chmod(0o666), "every user can write it (owner root (uid 0), mode 0666)"),
        (lambda f: (os.chown(f, 0, NOGROUP), f.chmod(0o664)), "group nogroup (gid 65534) can write it (owner root (uid 0), mode 0664)"),
    ],
)
@pytest.mark.parametrize("where", ["project", "global", "explicit"])
def test_a_config_file_someone_else_could_write_is_refused(paths, project, tmp_path, where, setup, why):
    if where == "project":
        f, env = project / PROJECT_CONFIG, {}
    elif where == "global":
        f, env = tmp_path / "prefix" / "config" / "eggshell" / "config.toml", {}
        f.parent.mkdir(parents=True)
    else:
        f = tmp_path / "mine.toml"
        env = {"EGGSHELL_CONFIG": str(f)}
    f.write_text("top_k = 3\n")
    f.chmod(0o664)  # an umask of 002 does this; fine in your private group (root's here: group root, no other members)
    assert config.load(paths, str(project), env=env).top_k == 3
    f.chmod(0o644)
    setup(f)
    with pytest.raises(ConfigError) as e:
        config.load(paths, str(project), env=env)
    msg = str(e.value)
    assert msg.startswith("%s: refused: %s. " % (f, why)), msg
    assert "`chown root %s && chmod go-w %s`" % (f, f) in msg and "remove it" in msg


def test_a_config_file_in_a_directory_others_can_write_is_refused(paths, tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    write_project(d, "top_k = 3\n")
    d.chmod(0o777)  # anyone could replace the file
    with pytest.raises(ConfigError) as e:
        config.load(paths, str(d))
    assert str(e.value).startswith("%s: refused: its directory %s: every user can write it (owner root (uid 0), mode 0777)"
                                   % (d / PROJECT_CONFIG, d))
    d.chmod(0o1777)  # sticky, like /tmp: nobody else can replace what is yours
    assert config.load(paths, str(d)).top_k == 3


def test_a_config_file_of_another_user_in_a_sticky_tmp_is_refused(paths, tmp_path, umask022):
    t = sticky_tmp(tmp_path)
    (t / "work").mkdir()
    write_project(t, 'egg = ".eggs/work.egg"\n')
    os.chown(t / PROJECT_CONFIG, NOBODY, NOGROUP)
    with pytest.raises(ConfigError, match=r"refused: another user owns it \(owner nobody \(uid 65534\), mode 0644\)"):
        config.load(paths, str(t / "work"))


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
