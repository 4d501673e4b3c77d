"""Calls that only look like reads are never denied (red-team round IV §9, §11).

Requirements: a `sed` whose script writes (`w`, `W`, `s///w`), runs (`e`, `s///e`) or reads
another file (`r`), an `awk` whose program writes (`print >`), runs (`system`, `|`) or reads
a command (`| getline`), a `find` that writes (`-fprint*`, `-fls`) or runs (`-exec`, `-ok*`):
a denied repeat would skip its side effect, so each always runs. A program whose answer
depends on the environment (`which`, `pwd`, `df`) is never verified. Plain reads by the
same programs are still denied.
"""

from __future__ import annotations

import os

import pytest

from eggshell.reuse import commands, effects
from eggshell.reuse.fingerprint import needs
from helpers.fresh import chat1, denied, pre, project

SIDE_EFFECTS = [
    ("sed -n 'w out.txt' a.txt", "out.txt"),
    ("sed -n 's/alpha/A/w out.txt' a.txt", "out.txt"),
    ("sed -n -e '1p' -e 'W out.txt' a.txt", "out.txt"),
    ("sed --expression='2w out.txt' -n a.txt", "out.txt"),
    ("sed -n '1e touch out.txt' a.txt", "out.txt"),
    ("sed -n 's/.*/touch out.txt/ep' b.txt", "out.txt"),
    ("awk 'BEGIN{system(\"touch out.txt\")}'", "out.txt"),
    ("awk '{print > \"out.txt\"}' a.txt", "out.txt"),
    ("awk 'BEGIN{while ((\"touch out.txt\" | getline l) > 0) n++}'", "out.txt"),
    ("find . -name a.txt -fprint out.txt", "out.txt"),
    ("find . -name a.txt -fprintf out.txt '%p'", "out.txt"),
    ("find . -name a.txt -fprint0 out.txt", "out.txt"),
]


@pytest.mark.parametrize("command,made", SIDE_EFFECTS)
def test_a_read_with_a_side_effect_is_never_denied(tmp_path, command, made):
    env = project(tmp_path)
    chat1(env, command)
    path = os.path.join(env.project, made)
    assert os.path.exists(path)
    os.unlink(path)
    assert denied(pre(env, command)) is None


@pytest.mark.parametrize("command", SIDE_EFFECTS + [("jq -n env.HOME", None)])
def test_the_command_lists_say_it_writes(command):
    assert commands.reads_only("Bash\n" + command[0], 2) == (False, False)


@pytest.mark.parametrize("command", ["sed -n 2p a.txt", "sed -n '/two/p' a.txt", "awk '{print $1}' a.txt",
                                     "find src -name app.py"])
def test_a_plain_read_by_the_same_programs_is_still_denied(tmp_path, command):
    env = project(tmp_path)
    chat1(env, command)
    assert denied(pre(env, command)) is not None


@pytest.mark.parametrize("script,writes", [
    ("p", False), ("1,5p", False), ("/x/,/y/d", False), ("s/a/b/g", False), ("s|a/w|b|", False), ("y/ab/ba/", False),
    ("$!N;P;D", False), ("/x/{p;q}", False), ("\\%w%p", False), ("1~2p", False),
    ("w f", True), ("1W f", True), ("s/a/b/w f", True), ("s/a/b/gw f", True), ("e ls", True), ("s/a/b/e", True),
    ("r other", True), ("/x/R other", True), ("s/a/b", True), ("v", True),
])
def test_sed_scripts(script, writes):
    assert effects.sed_script_has_effects(script) is writes


@pytest.mark.parametrize("command", ["which python3", "pwd", "df -h .", "jq -n env.HOME", "jq -n '$ENV.PATH'"])
def test_an_environment_dependent_program_is_never_denied(tmp_path, command):
    env = project(tmp_path)
    chat1(env, command)
    assert denied(pre(env, command)) is None


@pytest.mark.parametrize("prog", ["which", "command -v", "type", "whereis", "env", "printenv", "date", "hostname", "whoami", "pwd"])
def test_an_environment_dependent_program_names_no_verifiable_input(prog):
    assert needs("Bash", {"command": prog + " a.txt"}, "/p").unknown
