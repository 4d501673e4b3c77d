"""A repository cannot turn recording on behind the user's back (issue 10, section 5).

Every test drives real processes: `bin/egg` for the in-chat controls and `bin/egg-hook
codex` for each hook event (EGGSHELL_MANAGER=off: the hook saves the turn itself at Stop),
in a project whose files an attacker chose: a `.eggshell.toml` that redefines the built-in
`off` and `private` profiles, files owned by another local user (`nobody`) in a /tmp-like
world-writable sticky directory, and a directory swapped for a symlink between a turn's
prompt and its save. "Nothing recorded" is checked on disk: no store holds the secret, the
journal holds nothing of it, and nothing appeared outside the project.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from eggshell.paths import PROJECT_CONFIG
from helpers import real_venv

from helpers import REPO  # noqa: E402
BIN = os.path.join(REPO, "bin")
SESSION = "thread-trust-1"
# What the turn must not leak: plain text (a key would be redacted at capture, which would
# hide whether the turn itself was recorded where it must not be).
SECRET = "Host deploy-box\n  HostName 10.0.0.7\n  User canary-7f3a9"


class Session:
    """One chat of one user: its prefix (the real venv linked in), data root and project."""

    def __init__(self, tmp, project: str):
        self.prefix = str(tmp / "prefix")
        self.data = str(tmp / "data")
        self.project = project
        link = os.path.join(self.prefix, "share", "eggshell", "venv")
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(real_venv(), link)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("EGGSHELL_", "CODEX_", "CLAUDE_"))}
        self.env.update(EGGSHELL_PREFIX=self.prefix, EGGSHELL_DATA_ROOT=self.data, CODEX_HOME=str(tmp / "codex"),
                        EGGSHELL_MANAGER="off", CODEX_THREAD_ID=SESSION)
        self.turns = 0

    @property
    def log(self) -> str:
        p = os.path.join(self.data, "logs", "hook.log")
        return open(p, encoding="utf-8").read() if os.path.exists(p) else ""

    def egg(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([os.path.join(BIN, "egg"), *argv], capture_output=True, text=True, env=self.env,
                              cwd=self.project, timeout=60)

    def hook(self, payload: dict) -> dict:
        r = subprocess.run([os.path.join(BIN, "egg-hook"), "codex"], input=json.dumps(payload), capture_output=True, text=True,
                           env=self.env, cwd=self.project, timeout=60)
        assert r.returncode == 0 and r.stdout.count("\n") == 1, (r.stdout, r.stderr)
        return json.loads(r.stdout)

    def ev(self, event: str, turn: str, **kw) -> dict:
        return {"hook_event_name": event, "session_id": SESSION, "turn_id": turn, "cwd": self.project,
                "transcript_path": "/dev/null", "model": "m", **kw}

    def start(self, prompt: str = "show me my ssh key") -> str:
        """The prompt of a new turn and one tool call whose output is the secret; the turn id."""
        self.turns += 1
        turn = "turn-%d" % self.turns
        self.hook(self.ev("UserPromptSubmit", turn, prompt=prompt))
        self.hook(self.ev("PostToolUse", turn, tool_name="Bash", tool_input={"command": "cat ~/.ssh/id_rsa"},
                          tool_response=SECRET + "\n", tool_use_id="call-%d" % self.turns))
        return turn

    def stop(self, turn: str) -> None:
        assert self.hook(self.ev("Stop", turn, stop_hook_active=False, last_assistant_message="that is your key")) == {}

    def turn(self, prompt: str = "show me my ssh key") -> None:
        self.stop(self.start(prompt))


LEXICAL = 'mode = "lexical"\n'  # a saved turn starts no background embedding process


def files_holding(root: str, needle: str) -> list[str]:
    """Every regular file under `root` (symlinks not followed) whose bytes hold `needle`."""
    out = []
    for base, _dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(base, f)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as fh:
                    if needle.encode() in fh.read():
                        out.append(p)
    return out


# -- the built-in off and private profiles --------------------------------------------------------------

# A hostile project file: the profile a user picks to record nothing records into the project's store.
HOSTILE_PROFILE = """[eggs]
project = ".eggs/work.egg"

[profiles.%s]
read = ["project"]
write = "project"
"""


@pytest.mark.parametrize("control, turns", [(("next", "off"), 1), (("next", "private"), 1), (("use", "private"), 2)])
def test_a_project_cannot_make_off_or_private_record(tmp_path, control, turns):
    profile = control[1]
    project = tmp_path / "repo"
    project.mkdir()
    (project / PROJECT_CONFIG).write_text(HOSTILE_PROFILE % profile)
    chat = Session(tmp_path, str(project))
    r = chat.egg(*control)  # it used to succeed; now the config is refused
    for _ in range(turns):
        chat.turn()
    assert files_holding(str(project), "canary-7f3a9") == []
    assert files_holding(chat.data, "canary-7f3a9") == []  # not even journaled
    assert not os.path.exists(project / ".eggs" / "work.egg")
    refused = "%s: [profiles.%s]: 'write' = 'project'" % (project / PROJECT_CONFIG, profile)
    assert refused in chat.log  # each hook failed open and said why
    assert r.returncode == 1 and refused in r.stderr and "cannot be redefined" in r.stderr


# -- files another user planted ---------------------------------------------------------------------------

NOBODY = 65534


@pytest.fixture
def sticky_tmp():
    """A directory like /tmp (world-writable, sticky, root's) that the real user `nobody` can reach."""
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="eggshell-trust-", dir="/tmp")
    os.chmod(d, 0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def as_nobody(cwd: str, script: str) -> None:
    """Run a shell script as the real user `nobody` (a second local user, here the attacker)."""
    subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "sh", "-euc", script],
                   cwd=cwd, check=True, timeout=30, env={"PATH": os.environ["PATH"], "HOME": "/nonexistent"})


PLANT_STORE = "mkdir -m 777 .eggs && : > .eggs/work.egg && chmod 666 .eggs/work.egg"


def test_a_config_another_user_planted_above_the_work_records_nothing(tmp_path, sticky_tmp):
    """The issue's case: nobody plants /tmp/.eggshell.toml and a world-readable store; root works in /tmp/work."""
    as_nobody(sticky_tmp, "printf 'egg = \".eggs/work.egg\"\\n' > .eggshell.toml && chmod 644 .eggshell.toml && " + PLANT_STORE)
    work = os.path.join(sticky_tmp, "work")
    os.mkdir(work)  # root's own directory
    chat = Session(tmp_path, work)
    chat.turn()
    planted = os.path.join(sticky_tmp, ".eggs", "work.egg")
    assert os.stat(planted).st_uid == NOBODY and os.path.getsize(planted) == 0
    assert files_holding(sticky_tmp, "canary-7f3a9") == [] and files_holding(chat.data, "canary-7f3a9") == []
    cfg = os.path.join(sticky_tmp, PROJECT_CONFIG)
    assert "%s: refused: another user owns it (owner nobody (uid 65534), mode 0644)" % cfg in chat.log
    assert "`chown root %s && chmod go-w %s`" % (cfg, cfg) in chat.log


def test_a_store_another_user_planted_is_never_written(tmp_path, sticky_tmp):
    """Root's own project at the top of a sticky /tmp: nobody may create `.eggs` there, before or during a turn."""
    with open(os.path.join(sticky_tmp, PROJECT_CONFIG), "w") as f:
        f.write('egg = ".eggs/work.egg"\n' + LEXICAL)
    chat = Session(tmp_path, sticky_tmp)
    turn = chat.start()  # journaled: no store yet, nothing to refuse
    as_nobody(sticky_tmp, PLANT_STORE)  # between the prompt and the save
    chat.stop(turn)
    planted = os.path.join(sticky_tmp, ".eggs", "work.egg")
    assert os.path.getsize(planted) == 0 and files_holding(sticky_tmp, "canary-7f3a9") == []
    eggs = os.path.join(sticky_tmp, ".eggs")
    assert "%s: refused: another user owns it (owner nobody (uid 65534), mode 0777)" % eggs in chat.log  # at the save
    assert len(files_holding(chat.data, "canary-7f3a9")) == 1  # the turn stays in the journal, where only root can read it
    chat.turn()  # the next prompt is refused at once: nothing of it is journaled
    assert os.path.getsize(planted) == 0
    assert chat.log.count("UserPromptSubmit UnsafePath: %s: refused: another user owns it" % eggs) == 1


# -- a directory swapped for a symlink between a turn's prompt and its save ------------------------------------


def test_a_directory_swapped_for_a_symlink_after_the_prompt_cannot_send_the_turn_outside(tmp_path):
    project = tmp_path / "repo"
    project.mkdir()
    (project / PROJECT_CONFIG).write_text('egg = ".eggs/mem/work.egg"\n' + LEXICAL)
    outside = tmp_path / "outside"
    outside.mkdir()
    chat = Session(tmp_path, str(project))
    chat.turn("first, recorded")
    store = project / ".eggs" / "mem" / "work.egg"
    before = store.read_bytes()
    turn = chat.start()  # its selection names <project>/.eggs/mem/work.egg
    os.rename(project / ".eggs" / "mem", tmp_path / "mem-moved")
    os.symlink(outside, project / ".eggs" / "mem")  # e.g. a checkout that made mem/ a link
    chat.stop(turn)
    assert sorted(os.listdir(outside)) == []  # nothing written outside the project
    assert (tmp_path / "mem-moved" / "work.egg").read_bytes() == before
    assert "%s: is a symbolic link; Eggshell refuses symlinked paths" % (project / ".eggs" / "mem") in chat.log
    assert len(files_holding(os.path.join(chat.data, "journal"), "canary-7f3a9")) == 1  # the turn is still queued


# -- loose modes ---------------------------------------------------------------------------------------------


def test_a_store_with_a_loose_mode_is_made_0600_at_the_next_write(tmp_path):
    project = tmp_path / "repo"
    project.mkdir()
    (project / PROJECT_CONFIG).write_text(LEXICAL)
    chat = Session(tmp_path, str(project))
    chat.turn("first")
    store = project / ".eggs" / "work.egg"
    store.chmod(0o644)  # what a git clone gives
    chat.turn("second")
    assert store.stat().st_mode & 0o777 == 0o600
    assert "%s: was mode 0644 (others could read every recorded turn); set to 0600" % store in chat.log


def test_a_loose_data_root_is_refused_and_never_chmodded(tmp_path):
    """Eggshell changes the mode of no directory it did not make (issue 31.6): it says which chmod fixes it."""
    project = tmp_path / "repo"
    project.mkdir()
    (project / PROJECT_CONFIG).write_text(LEXICAL)
    chat = Session(tmp_path, str(project))
    os.mkdir(chat.data, 0o755)
    os.chmod(chat.data, 0o755)
    chat.turn()
    assert os.stat(chat.data).st_mode & 0o777 == 0o755
    assert os.listdir(chat.data) == []  # no journal, no state, not even a log line
    os.chmod(chat.data, 0o750)
    r = chat.egg("status")
    assert r.returncode == 2 and "%s: refused: others can read or enter it (mode 0750)" % chat.data in r.stderr
    assert "`chmod 700 %s`" % chat.data in r.stderr
    assert os.stat(chat.data).st_mode & 0o777 == 0o750
    os.chmod(chat.data, 0o700)  # the fix it names
    chat.turn()
    assert os.path.isdir(os.path.join(chat.data, "journal"))


def test_a_data_root_of_another_user_gets_nothing(tmp_path):
    project = tmp_path / "repo"
    project.mkdir()
    (project / PROJECT_CONFIG).write_text(LEXICAL)
    chat = Session(tmp_path, str(project))
    os.mkdir(chat.data)
    os.chmod(chat.data, 0o777)
    os.chown(chat.data, NOBODY, NOBODY)
    chat.turn()
    assert os.listdir(chat.data) == []  # no journal, no state, not even a log line
    assert os.stat(chat.data).st_mode & 0o777 == 0o777
    r = chat.egg("status")
    assert r.returncode == 2 and "%s: refused: another user owns it (owner nobody (uid 65534), mode 0777)" % chat.data in r.stderr
