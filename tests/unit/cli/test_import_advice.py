"""An imported call is advice, never a denial: it carries no record of what its inputs were.

A call captured live carries a fingerprint of what it read (reuse/fingerprint.py), so while
those inputs are unchanged PreToolUse may deny running it again. A transcript holds no
such record, so the same call imported is unverified: PreToolUse may hand its output over
as context, and never denies. Both halves run here against one real git project, through
egg-hook's own path (helpers.hooks), so the first proves the setup can deny at all.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from eggshell.cli import main as cli
from helpers.hook_env import Env, denied
from helpers.transcripts import codex_rollout

FILE = "src/billing/invoice.py"
TEXT = "def total(lines):\n    return sum(l.amount for l in lines)\n"
COMMAND = "cat " + FILE


def git(env: Env, *args: str) -> None:
    subprocess.run(["git", "-C", env.project, "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True, capture_output=True)


@pytest.fixture
def env(tmp_path, monkeypatch):
    e = Env(tmp_path)
    git(e, "init", "-q")
    os.makedirs(os.path.join(e.project, "src", "billing"))
    with open(os.path.join(e.project, ".gitignore"), "w") as f:
        f.write(".eggs/\n")
    with open(os.path.join(e.project, FILE), "w") as f:
        f.write(TEXT)
    git(e, "add", "-A")
    git(e, "commit", "-qm", "billing")
    for k in list(os.environ):
        if k.startswith(("EGGSHELL_", "CODEX_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("EGGSHELL_PREFIX", e.prefix)
    monkeypatch.setenv("EGGSHELL_DATA_ROOT", e.data)
    monkeypatch.setenv("CODEX_HOME", e.paths.codex_home)
    monkeypatch.chdir(e.project)
    return e


def proposed(env: Env, session: str = "chat-2") -> dict:
    """A later chat proposes the very call again (after an unrelated prompt, so nothing was handed over)."""
    env.respond(env.prompt("bake some bread", turn="u-" + session, session_id=session))
    return env.respond(env.ev("PreToolUse", session=session, turn_id="u-" + session, tool_name="Bash",
                              tool_input={"command": COMMAND}, tool_use_id="p-" + session))


def test_a_live_call_with_unchanged_inputs_is_denied(env):
    env.record_turn("look at the invoice code", [(COMMAND, TEXT)], "I read it", session="chat-1", turn="t-1")
    assert denied(proposed(env)) is not None


def test_the_same_call_imported_is_never_denied_only_offered(env, tmp_path, capsys):
    path = tmp_path / "rollout-old.jsonl"
    path.write_text(codex_rollout("chat-1", env.project, [{"turn": "t-1", "prompt": "look at the invoice code",
                                                            "calls": [(COMMAND, TEXT)], "answer": "I read it"}]))
    assert cli.main(["import", "codex", str(path)]) == 0
    assert "imported 1 turn" in capsys.readouterr().out
    assert [[t.work for t in v.tools] for v in env.views()] == [['Bash\n{"command":"%s"}' % COMMAND]]
    reply = proposed(env)
    assert denied(reply) is None, reply
    context = reply.get("hookSpecificOutput", {}).get("additionalContext", "")
    assert "def total(lines):" in context  # handed over as prior work to reuse or re-check
