"""cli/doctor.py's login-shell check: which egg a real `bash -lc` (or `zsh -lc`, `fish -lc`) finds.

Codex runs `!egg` in a login shell, whose profile sets PATH afresh; each test writes real
profiles into a temporary HOME and runs the real shell. The line the check suggests is the
one install.sh appends (tests/bats/install.bats checks the installer's side), so each test
that warns then appends that line where the check said and expects `ok`.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from eggshell.cli import doctor
from eggshell.paths import from_env
from eggshell.runtime.client import proc_state

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")


def executable(path, text: str = "#!/bin/sh\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


class World:
    """A HOME with no profile, an installed `egg` in ~/.local/bin (the default prefix), and the user's shell."""

    def __init__(self, tmp, shell: str | None = BASH):
        self.home = tmp / "home"
        self.home.mkdir()
        self.bin = self.home / ".local" / "bin"
        self.egg = executable(self.bin / "egg")
        # Only system dirs: an egg on the PATH that ran the tests must not leak into the login shell.
        self.env = {"HOME": str(self.home), "SHELL": shell or "", "EGGSHELL_PREFIX": str(self.home / ".local"),
                    "PATH": os.pathsep.join(dict.fromkeys([os.path.dirname(shell or BASH), "/usr/bin", "/bin"]))}

    def check(self, timeout: float = doctor.LOGIN_SHELL_TIMEOUT_S):
        c = doctor.Checkup(from_env(self.env), str(self.home), self.env)
        return doctor.check_login_shell(c, timeout=timeout)

    def follow_advice(self, text: str) -> None:
        """Append the line the WARN names to the file it names, as a user would."""
        where, line = text.split("add this line to the end of ", 1)[1].split(": ", 1)
        with open(where, "a") as f:
            f.write(line + "\n")


@pytest.fixture
def world(tmp_path):
    return World(tmp_path)


def test_no_egg_names_the_profile_and_the_line_that_fixes_it(world):
    status, text = world.check()
    profile = world.home / ".profile"
    line = 'export PATH="$HOME/.local/bin:$PATH"  # added by Eggshell install.sh'
    assert (status, text) == ("WARN", "a login shell (`bash -lc`, as Codex runs `!egg`) finds no egg: run ./install.sh "
                                      "again, or add this line to the end of %s: %s" % (profile, line))
    world.follow_advice(text)
    assert world.check() == ("ok", "a login shell (`bash -lc`, as Codex runs `!egg`) finds %s" % world.egg)


def test_a_profile_that_prints_still_reads_right(world):
    (world.home / ".profile").write_text('echo "welcome back"\nexport PATH="$HOME/.local/bin:$PATH"\necho bye\n')
    assert world.check() == ("ok", "a login shell (`bash -lc`, as Codex runs `!egg`) finds %s" % world.egg)


def test_bash_is_told_the_first_file_it_reads(world):
    # ~/.profile puts egg on the PATH, but bash -l reads ~/.bash_login instead once it exists.
    (world.home / ".profile").write_text('export PATH="$HOME/.local/bin:$PATH"\n')
    assert world.check()[0] == "ok"
    (world.home / ".bash_login").write_text("# mine\n")
    status, text = world.check()
    assert status == "WARN" and "the end of %s: " % (world.home / ".bash_login") in text
    (world.home / ".bash_profile").write_text("")
    status, text = world.check()
    assert status == "WARN" and "the end of %s: " % (world.home / ".bash_profile") in text
    world.follow_advice(text)
    assert world.check()[0] == "ok"


def test_another_egg_first_on_the_path_is_named(world, tmp_path):
    other = executable(tmp_path / "old" / "egg")
    (world.home / ".profile").write_text('export PATH="%s:$PATH"\n' % other.parent)
    status, text = world.check()
    assert status == "WARN" and text.startswith(
        "a login shell (`bash -lc`, as Codex runs `!egg`) finds another egg, %s, not %s: add this line" % (other, world.egg))
    world.follow_advice(text)
    assert world.check()[0] == "ok"


def test_a_bin_dir_outside_home_is_written_out_and_quoted(tmp_path):
    w = World(tmp_path)
    odd = tmp_path / 'dir with "quotes" and $dollar'
    w.env["EGGSHELL_BIN"] = str(odd / "bin")
    w.egg = executable(odd / "bin" / "egg")
    status, text = w.check()
    assert status == "WARN" and text.endswith('export PATH="%s:$PATH"  # added by Eggshell install.sh' % (
        str(odd / "bin").replace('"', '\\"').replace("$", "\\$")))
    w.follow_advice(text)
    assert w.check() == ("ok", "a login shell (`bash -lc`, as Codex runs `!egg`) finds %s" % w.egg)


def test_a_slow_profile_is_a_note_and_what_it_started_is_ended(world):
    pid_file = world.home / "sleep.pid"
    (world.home / ".profile").write_text('sleep 60 & echo $! > "$HOME/sleep.pid"; wait\n')
    start = time.monotonic()
    status, text = world.check(timeout=0.5)
    assert time.monotonic() - start < 3
    assert (status, text) == ("note", "a login shell (`bash -lc`, as Codex runs `!egg`) did not get to `command -v egg` "
                                      "within 0.5 s (a slow profile, or one waiting for input): see %s" % (world.home / ".profile"))
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and proc_state(pid) not in (None, "Z"):
        time.sleep(0.05)
    assert proc_state(pid) in (None, "Z"), "the profile's sleep outlived the doctor"


def test_a_profile_that_exits_is_a_note_with_its_error(world):
    (world.home / ".profile").write_text('echo "no such thing: nvm" >&2\nexit 4\n')
    assert world.check() == ("note", "a login shell (`bash -lc`, as Codex runs `!egg`) stopped (exit 4) before "
                                     "`command -v egg` finished (its last error: no such thing: nvm): see %s"
                             % (world.home / ".profile"))


def test_no_bash_and_no_login_shell_is_not_checked(tmp_path):
    w = World(tmp_path, shell="/nonexistent/zsh")
    w.env["PATH"] = str(tmp_path / "empty")
    assert w.check() is None


@pytest.mark.parametrize("family", ["zsh", "fish"])
def test_zsh_and_fish_read_their_own_files(tmp_path, family):
    exe = shutil.which(family)
    if exe is None:
        pytest.skip("%s is not installed" % family)
    w = World(tmp_path, shell=exe)
    status, text = w.check()
    expected = {"zsh": w.home / ".zprofile", "fish": w.home / ".config" / "fish" / "conf.d" / "eggshell.fish"}[family]
    assert status == "WARN" and "(`%s -lc`" % family in text and "the end of %s: " % expected in text
    expected.parent.mkdir(parents=True, exist_ok=True)
    w.follow_advice(text)
    assert w.check() == ("ok", "a login shell (`%s -lc`, as Codex runs `!egg`) finds %s" % (family, w.egg))


def test_the_check_is_one_of_the_doctors(world):
    assert doctor.check_login_shell in doctor.DOCTOR_CHECKS
