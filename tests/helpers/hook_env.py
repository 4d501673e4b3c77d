"""The isolated environment of the hook tests: a project, a data root, payload builders, egg-hook's answer.

Shared by the tests of every folder that drive hooks (stages, runtime, reuse, graph): one
place, imported as `helpers.hook_env`.
"""

from __future__ import annotations

import json
import os
import subprocess

from helpers import REPO, read_bytes, real_venv
from helpers.hooks import answer_here
from eggshell import config
from eggshell.graph.records import turn_views
from eggshell.graph.store import Store
from eggshell.paths import PROJECT_CONFIG, Paths


EGG_HOOK = os.path.join(REPO, "bin", "egg-hook")


class Env:
    """An isolated prefix (with the real venv linked in), data root, Codex home and project."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.prefix = str(tmp / "prefix")
        self.data = str(tmp / "data")
        self.project = str(tmp / "proj")
        os.makedirs(self.project)
        self.paths = Paths(self.prefix, self.data, os.path.join(self.prefix, "config", "eggshell", "config.toml"),
                           str(tmp / "codex"), os.path.join(REPO, "bin"))
        self.write_config()

    @property
    def egg(self) -> str:
        return os.path.join(self.project, ".eggs", "work.egg")

    @property
    def log(self) -> str:
        return self.paths.log_file

    def write_config(self, text: str = config.PROJECT_TEMPLATE, project: str | None = None) -> None:
        with open(os.path.join(project or self.project, PROJECT_CONFIG), "w", encoding="utf-8") as f:
            f.write(text)

    def log_text(self) -> str:
        return open(self.log, encoding="utf-8").read() if os.path.exists(self.log) else ""

    def respond(self, payload, host: str = "codex") -> dict:
        """egg-hook HOST's answer to one payload (helpers.hooks.answer_here: the production path)."""
        return answer_here(host, payload, self.paths)

    def proc_env(self) -> dict:
        link = os.path.join(self.prefix, "share", "eggshell", "venv")
        if not os.path.exists(link):
            os.makedirs(os.path.dirname(link), exist_ok=True)
            os.symlink(real_venv(), link)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("EGGSHELL_", "CODEX_"))}
        # The hook process answers and saves by itself here; test_manager.py covers the warm manager.
        env.update(EGGSHELL_PREFIX=self.prefix, EGGSHELL_DATA_ROOT=self.data, CODEX_HOME=self.paths.codex_home, EGGSHELL_MANAGER="off")
        return env

    def run_bin(self, stdin: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([EGG_HOOK, *(args or ("codex",))], input=stdin, capture_output=True, text=True,
                              env=env or self.proc_env(), cwd=self.project, timeout=30)

    # payload builders (Codex's shapes, see tests/e2e/README.md)
    def ev(self, event: str, session: str = "sess-1", **kw) -> dict:
        return {"hook_event_name": event, "session_id": session, "cwd": self.project, "transcript_path": "/dev/null",
                "model": "m", **kw}

    def prompt(self, text: str, turn: str = "turn-1", **kw) -> dict:
        return self.ev("UserPromptSubmit", turn_id=turn, prompt=text, **kw)

    def tool(self, command: str, output, turn: str | None = "turn-1", use: str = "call-1", **kw) -> dict:
        p = self.ev("PostToolUse", tool_name="Bash", tool_input={"command": command}, tool_response=output, tool_use_id=use, **kw)
        if turn is not None:
            p["turn_id"] = turn
        return p

    def stop(self, answer: str | None, turn: str | None = "turn-1", **kw) -> dict:
        p = self.ev("Stop", stop_hook_active=False, **kw)
        if answer is not None:
            p["last_assistant_message"] = answer
        if turn is not None:
            p["turn_id"] = turn
        return p

    def record_turn(self, prompt, tools, answer, session="sess-0", turn="turn-1") -> None:
        """A turn of an earlier chat (sess-0): the default chat (sess-1) does not hold it in context."""
        assert self.respond(self.prompt(prompt, turn, session_id=session)) is not None
        for i, (cmd, out) in enumerate(tools):
            assert isinstance(self.respond(self.tool(cmd, out, turn, "call-%s-%d" % (turn, i), session_id=session)), dict)
        assert self.respond(self.stop(answer, turn, session_id=session)) == {}

    def views(self):
        return turn_views(Store.open(self.egg).graph)


LATE_FEE_ANSWER = "late_fee is computed in src/billing.py, line 42"


def record_late_fee(env: Env) -> None:
    env.record_turn("where is late_fee computed?", [("grep -rn late_fee src/", "src/billing.py:42: def late_fee(days):\n")],
                    LATE_FEE_ANSWER)


def damage(path: str) -> bytes:
    """Alter one node line in the middle (its id no longer matches); returns the damaged bytes."""
    lines = read_bytes(path).splitlines(keepends=True)
    i = next(i for i, ln in enumerate(lines) if b'"text":"' in ln)
    lines[i] = lines[i].replace(b'"text":"', b'"text":"tampered ', 1)
    data = b"".join(lines)
    with open(path, "wb") as f:
        f.write(data)
    return data


def one_json_object(stdout: str) -> dict:
    assert stdout.endswith("\n") and stdout.count("\n") == 1, repr(stdout)
    obj = json.loads(stdout)
    assert isinstance(obj, dict)
    return obj


def pre(env: Env, command: str, session: str = "chat-2", turn: str = "u1", tool: str = "Bash", tool_input=None) -> dict:
    env.respond(env.prompt("add type hints to the reader", turn=turn, session_id=session))
    return env.respond(env.ev("PreToolUse", session=session, turn_id=turn, tool_name=tool,
                              tool_input=tool_input if tool_input is not None else {"command": command}, tool_use_id="c-" + command))


def denied(reply: dict) -> str | None:
    out = reply.get("hookSpecificOutput", {})
    return out.get("permissionDecisionReason") if out.get("permissionDecision") == "deny" else None
