"""One rule for every path Eggshell writes under (issue 31 item 6; paths.py, docs/security.md).

Requirements, each from a red team's finding:
  1. A data root, a socket directory or a store reached through a symbolic link that another
     user owns is refused, naming the link, its owner and the fix: nothing is created, written
     or chmodded through it. Links of this user's or root's along the way are followed.
  2. Eggshell never changes the mode of a directory it did not create: a data root (or view/,
     or the socket's directory) that others may enter is refused with the chmod that fixes it;
     one Eggshell makes is 0700 from the start. Hooks still fail open.
  3. A project's `.eggshell.toml` names write stores only under the project's `.eggs/`:
     `.git/hooks/x`, `../other`, an absolute path, a path through `..`, a symlink out of
     `.eggs` are a ConfigError naming the file, the key and the reason. The user's own global
     file may name stores anywhere (docs/config.md).

Everything is real: directories owned by root, links chowned to `nobody`, processes run as
`nobody` where the owner of a link must be "you".
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile

import pytest

from eggshell import config, paths as P
from eggshell.config import ConfigError
from eggshell.paths import PROJECT_CONFIG, UnsafePath
from eggshell.runtime import client, manager
from helpers import REPO
from helpers.hook_env import Env

NOBODY = 65534
OFF_ALL = "Eggshell is OFF (nothing is recorded or handed over, in any project): "

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chowns links to nobody: runs as root")


@pytest.fixture(autouse=True)
def no_explicit_config(monkeypatch):
    monkeypatch.delenv("EGGSHELL_CONFIG", raising=False)


def link_of(owner: int, target, link) -> str:
    """A symbolic link `link` -> `target`, owned by `owner` (lchown: the link itself)."""
    os.symlink(str(target), str(link))
    os.lchown(str(link), owner, owner)
    return str(link)


def system_dir(tmp_path, name: str = "system") -> str:
    """A root-owned directory others may read (like /etc): what the red team pointed a link at."""
    d = tmp_path / name
    d.mkdir()
    os.chmod(d, 0o755)
    (d / "keep").write_text("root's\n")
    return str(d)


def snapshot(d: str) -> tuple:
    """What must not change: the directory's owner and mode, and every name under it."""
    st = os.stat(d)
    names = sorted(os.path.relpath(os.path.join(r, n), d) for r, ds, fs in os.walk(d) for n in ds + fs)
    return st.st_uid, stat.S_IMODE(st.st_mode), names


def turn(env: Env, text: str = "where is late_fee?") -> list[dict]:
    """One whole chat turn through the production hook path; every reply."""
    return [env.respond(p) for p in (env.ev("SessionStart", source="startup"), env.prompt(text),
                                     env.tool("grep -rn late_fee src/", "src/billing.py:42\n"), env.stop("in billing"))]


def refuses_link(msg: str, link: str) -> None:
    assert "%s: refused: it is a symbolic link owned by nobody (uid 65534)" % link in msg, msg
    assert "`rm %s`" % link in msg, msg  # the fix


# -- 1. another user's link along the path ------------------------------------------------------


@pytest.mark.parametrize("where", ["the data root itself", "a parent of the data root"])
def test_a_data_root_through_another_users_link_is_refused_and_left_alone(tmp_path, where):
    target = system_dir(tmp_path)
    env = Env(tmp_path)
    if where == "the data root itself":
        link = link_of(NOBODY, target, tmp_path / "data-link")
        data = link
    else:
        link = link_of(NOBODY, target, tmp_path / "share")
        data = os.path.join(link, "eggshell", "data")
    env.paths = env.paths._replace(data_root=data)
    before = snapshot(target)
    replies = turn(env)
    assert replies[1:] == [{}, {}, {}]  # hooks fail open
    msg = replies[0]["systemMessage"]
    assert msg.startswith(OFF_ALL), msg
    refuses_link(msg, link)
    assert snapshot(target) == before  # not chmodded, nothing made or written there
    assert not os.path.exists(env.egg)


def test_egg_refuses_a_data_root_through_another_users_link(tmp_path):
    target = system_dir(tmp_path)
    link = link_of(NOBODY, target, tmp_path / "data-link")
    before = snapshot(target)
    e = Env(tmp_path)
    r = subprocess.run([os.path.join(REPO, "bin", "egg"), "status"], capture_output=True, text=True, timeout=60,
                       env=dict(e.proc_env(), EGGSHELL_DATA_ROOT=link), cwd=e.project)
    assert r.returncode == 2, (r.stdout, r.stderr)
    refuses_link(r.stderr, link)
    assert snapshot(target) == before


@pytest.mark.parametrize("owner", ["root", "another user"])
def test_links_of_root_are_followed_and_others_refused(tmp_path, owner):
    """As root, "yours" and "root's" are one uid: root's link to a data root is fine (like /tmp ->
    /private/tmp); test_your_own_link_is_followed runs as nobody for the other half."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = link_of(0 if owner == "root" else NOBODY, real, tmp_path / "via")
    data = os.path.join(link, "data")
    if owner == "root":
        P.check_data_root(data)
        env = Env(tmp_path)
        env.paths = env.paths._replace(data_root=data)
        turn(env)
        assert os.path.isdir(os.path.join(str(real), "data", "journal"))  # recorded through root's link
    else:
        with pytest.raises(UnsafePath) as e:
            P.check_data_root(data)
        refuses_link(str(e.value), link)


NOBODY_CHECK = """
import os, sys
from eggshell import paths
try:
    paths.check_data_root(sys.argv[1])
    print("ok")
except paths.UnsafePath as e:
    print("refused:", e)
"""


@pytest.fixture
def nobody_home():
    """A directory `nobody` owns, reachable by nobody (tmp_path's parents are root's alone)."""
    d = tempfile.mkdtemp(prefix="eggshell-paths-")
    os.chmod(d, 0o755)
    os.chown(d, NOBODY, NOBODY)
    yield d
    subprocess.run(["rm", "-rf", d], check=False)


def as_nobody(*argv: str) -> str:
    r = subprocess.run(["/usr/bin/python3", "-c", NOBODY_CHECK, *argv], capture_output=True, text=True, timeout=60,
                       user=NOBODY, group=NOBODY, extra_groups=[], cwd="/",
                       env={"PYTHONPATH": os.path.join(REPO, "lib"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.parametrize("owner,accepted", [(NOBODY, True), (0, True), (1, False)])
def test_your_own_link_is_followed(nobody_home, owner, accepted):
    """Run as nobody: nobody's own link and root's are followed; a third user's (uid 1) is refused."""
    real = os.path.join(nobody_home, "real")
    os.mkdir(real, 0o700)
    os.chown(real, NOBODY, NOBODY)
    link = link_of(owner, real, os.path.join(nobody_home, "data"))
    got = as_nobody(link)
    if accepted:
        assert got == "ok"
    else:
        assert got.startswith("refused: %s: refused: it is a symbolic link owned by " % link) and "uid 1)" in got, got


@pytest.mark.parametrize("where", ["the socket directory itself", "a parent of it"])
def test_a_socket_directory_through_another_users_link_is_never_made_or_used(tmp_path, where):
    """The fallback socket directory (a long data root): `eggshell-UID/` under $XDG_RUNTIME_DIR or /tmp."""
    target = system_dir(tmp_path)
    if where == "a parent of it":
        link = link_of(NOBODY, target, tmp_path / "xdg")
        sock_dir = os.path.join(link, "eggshell-0")
    else:
        link = sock_dir = link_of(NOBODY, target, tmp_path / "eggshell-0")
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    before = snapshot(target)
    got = manager.listen(str(run), os.path.join(sock_dir, "x.sock"))
    assert isinstance(got, str), got  # the manager refuses to listen there
    refuses_link(got, link)
    assert snapshot(target) == before
    if where == "a parent of it":
        os.mkdir(os.path.join(target, "eggshell-0"), 0o700)  # one made there anyway (by root): a hook never talks to it
    refuses_link(client.unsafe_dir(sock_dir) or "", link)


@pytest.mark.parametrize("where", ["the store's directory itself", "a parent of it"])
def test_a_store_through_another_users_link_is_refused_and_left_alone(tmp_path, monkeypatch, where):
    """A store named by the user's explicit config, reached through someone else's link."""
    target = system_dir(tmp_path)
    if where == "a parent of it":
        link = link_of(NOBODY, target, tmp_path / "shared")
        store = os.path.join(link, "team", "work.egg")
    else:
        link = link_of(NOBODY, target, tmp_path / "team")
        store = os.path.join(link, "work.egg")
    env = Env(tmp_path)
    explicit = tmp_path / "mine.toml"
    explicit.write_text('egg = "%s"\nmode = "lexical"\n' % store)
    monkeypatch.setenv("EGGSHELL_CONFIG", str(explicit))
    before = snapshot(target)
    refuses_link(P.store_problem(store) or "", link)
    replies = turn(env)
    assert replies[1:] == [{}, {}, {}]
    refuses_link(replies[0]["systemMessage"], link)
    assert snapshot(target) == before


# -- 2. no chmod of a directory Eggshell did not create ---------------------------------------------


@pytest.mark.parametrize("mode", [0o755, 0o750, 0o711])
def test_an_existing_data_root_open_to_others_is_refused_not_chmodded(tmp_path, mode):
    env = Env(tmp_path)
    os.mkdir(env.data)
    os.chmod(env.data, mode)
    before = snapshot(env.data)
    replies = turn(env)
    assert replies[1:] == [{}, {}, {}]
    msg = replies[0]["systemMessage"]
    assert msg.startswith(OFF_ALL + "%s: refused: others can read or enter it (mode %04o)" % (env.data, mode)), msg
    assert "`chmod 700 %s`" % env.data in msg, msg
    assert snapshot(env.data) == before


def test_a_data_root_eggshell_makes_is_0700_from_the_start(tmp_path):
    env = Env(tmp_path)
    env.paths = env.paths._replace(data_root=str(tmp_path / "new" / "data"))
    turn(env)
    for d in (tmp_path / "new", tmp_path / "new" / "data"):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700


def test_an_existing_socket_directory_open_to_others_is_refused_not_chmodded(tmp_path):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    sock_dir = tmp_path / "eggshell-0"
    sock_dir.mkdir()
    os.chmod(sock_dir, 0o755)
    before = snapshot(str(sock_dir))
    got = manager.listen(str(run), str(sock_dir / "x.sock"))
    assert isinstance(got, str) and "chmod 700 %s" % sock_dir in got, got
    assert snapshot(str(sock_dir)) == before


def test_an_existing_view_directory_open_to_others_is_refused_not_chmodded(tmp_path):
    from eggshell.cli.view import view_dir

    env = Env(tmp_path)
    d = os.path.join(env.data, "view")
    os.makedirs(d)
    os.chmod(env.data, 0o700)
    os.chmod(d, 0o755)
    before = snapshot(d)
    with pytest.raises(UnsafePath) as e:
        view_dir(env.paths)
    assert "`chmod 700 %s`" % d in str(e.value)
    assert snapshot(d) == before


# -- 3. a project file names write stores only under .eggs/ -------------------------------------


def project(tmp_path) -> str:
    d = tmp_path / "proj"
    d.mkdir(exist_ok=True)
    (d / ".git" / "hooks").mkdir(parents=True, exist_ok=True)
    return str(d)


ESCAPES = [
    ("egg", ".git/hooks/post-checkout", "outside .eggs/"),
    ("egg", "../other/work.egg", "goes through '..'"),
    ("egg", "work.egg", "outside .eggs/"),
    ("egg", ".envrc", "outside .eggs/"),  # red team IV cfg_store_new_dotfile: direnv sources it
    ("[eggs] team", ".bashrc", "outside .eggs/"),
    ("egg", ".eggs", "outside .eggs/"),  # the directory itself, not a store in it
    ("egg", "{proj}/.eggs/work.egg", "an absolute path"),
    ("egg", "~/work.egg", "an absolute path"),
    ("egg", ".eggs/../.git/hooks/x", "goes through '..'"),
    ("egg", ".eggs/../.eggs/work.egg", "goes through '..'"),
    ("egg", ".eggs/hook.egg", "a symbolic link"),  # .eggs/hook.egg -> ../.git/hooks/pre-commit
    ("[eggs] team", ".git/hooks/pre-push", "outside .eggs/"),
    ("[eggs] team", "/etc/team.egg", "an absolute path"),
]


@pytest.mark.parametrize("key,value,reason", ESCAPES)
def test_a_project_store_outside_eggs_is_a_config_error(tmp_path, key, value, reason):
    proj = project(tmp_path)
    value = value.format(proj=proj)
    os.mkdir(os.path.join(proj, ".eggs"), 0o700)
    os.symlink("../.git/hooks/pre-commit", os.path.join(proj, ".eggs", "hook.egg"))
    name = "egg" if key == "egg" else "[eggs]\nteam"
    path = os.path.join(proj, PROJECT_CONFIG)
    with open(path, "w") as f:
        f.write('%s = "%s"\n' % (name, value))
    with pytest.raises(ConfigError) as e:
        config.read_file(path, "project")
    msg = str(e.value)
    assert msg.startswith("%s: %s = %r" % (path, "'egg'" if key == "egg" else key, value)), msg
    assert reason in msg and "only under the project's .eggs/" in msg, msg


def test_a_project_store_in_git_hooks_is_never_created(tmp_path):
    """The red team's case end to end: a turn in that repository creates nothing in .git/hooks/."""
    env = Env(tmp_path)
    env.write_config('egg = ".git/hooks/post-checkout"\nmode = "lexical"\n')
    hooks = os.path.join(env.project, ".git", "hooks")
    os.makedirs(hooks)
    replies = turn(env)
    assert replies[1:] == [{}, {}, {}]
    assert "'egg' = '.git/hooks/post-checkout'" in replies[0]["systemMessage"], replies[0]
    assert os.listdir(hooks) == []


@pytest.mark.parametrize("text", ['egg = ".eggs/team/work.egg"\n', '[eggs]\nteam = ".eggs/team.egg"\n',
                                  'egg = "./.eggs/w.egg"\n'])
def test_stores_under_eggs_are_accepted(tmp_path, text):
    proj = project(tmp_path)
    path = os.path.join(proj, PROJECT_CONFIG)
    with open(path, "w") as f:
        f.write(text)
    config.read_file(path, "project")


def test_the_users_own_global_file_may_name_a_store_anywhere(tmp_path):
    """Your own file is trusted like your command line (docs/config.md): a shared store elsewhere."""
    g = tmp_path / "global.toml"
    g.write_text('[eggs]\nshared = "%s"\n' % (tmp_path / "team" / "shared.egg"))
    got = config.read_file(str(g), "global")
    assert dict(got["eggs"])["shared"] == str(tmp_path / "team" / "shared.egg")


def test_egg_init_writes_nothing_through_a_linked_eggs_directory(tmp_path):
    """A repository whose `.eggs` is a link to `.git/hooks/` (the default store, named by no key):
    `egg init` refuses it instead of writing `.gitignore` there, and a turn records nothing there."""
    env = Env(tmp_path)
    env.write_config('mode = "lexical"\n')  # no `egg` key: the default .eggs/work.egg
    hooks = os.path.join(env.project, ".git", "hooks")
    os.makedirs(hooks)
    os.symlink(".git/hooks", os.path.join(env.project, ".eggs"))
    r = subprocess.run([os.path.join(REPO, "bin", "egg"), "init", env.project], capture_output=True, text=True,
                       timeout=60, env=env.proc_env(), cwd=env.project)
    assert r.returncode != 0 and "%s: is a symbolic link" % os.path.join(env.project, ".eggs") in r.stderr, r.stderr
    replies = turn(env)
    assert replies[1:] == [{}, {}, {}]
    assert "is a symbolic link" in replies[0]["systemMessage"], replies[0]
    assert os.listdir(hooks) == []
