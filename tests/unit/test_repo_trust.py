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

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(REPO, "bin")
SESSION = "thread-trust-1"
SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAA canary-7f3a9"


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
