"""The warm manager's test environment: a copied checkout, real egg-hook processes, the manager they start.

Shared by the runtime tests (the manager, its channel, forgetting under it, redaction under
it): imported as `helpers.managed`; `checkout` is a module-scoped pytest fixture.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from helpers import REPO, alive, parent_pid, pids_by_data_root, proc_text, wait_for
from helpers.hook_env import Env, one_json_object
from eggshell.graph.records import turn_views
from eggshell.graph.store import Store
from eggshell.paths import Paths
from eggshell.runtime import client
from eggshell.runtime.journal import Journal


PROVIDERS = os.path.join(REPO, "tests", "fixtures", "providers")


SLACK = 3.0  # seconds over a hook's budget a shared 2-core machine may add


WAIT = 15.0  # how long to poll for something the manager does in the background


RG = "rg -n parse_config src"


RG_OUT = "src/config.py:3:def parse_config(path):\n"


RG_ANSWER = "parse_config is defined in src/config.py, line 3"


class ManagedEnv(Env):
    """test_hook's isolated environment, with the warm manager on and a short data root."""

    def __init__(self, tmp, checkout: str):
        super().__init__(tmp)
        self.egg_hook = os.path.join(checkout, "bin", "egg-hook")
        self.lib = os.path.join(checkout, "lib")
        self.data = tempfile.mkdtemp(prefix="egm-", dir="/tmp")  # tmp_path can be too long for a socket
        self.paths = Paths(self.paths.prefix, self.data, self.paths.global_config, self.paths.codex_home, self.paths.bin_dir)
        self.extra: dict[str, str] = {"EGGSHELL_MANAGER_IDLE": "60"}
        self.proc_env()  # links the venv into the prefix now, not in racing threads

    @property
    def run(self) -> str:
        return client.run_dir(self.data)

    @property
    def sock(self) -> str:
        return client.socket_path(self.data)

    def proc_env(self) -> dict:
        env = super().proc_env()
        env.pop("EGGSHELL_MANAGER", None)  # on: the hook asks (and starts) the manager
        env.update(self.extra)
        return env

    def hook_proc(self, **env: str) -> subprocess.Popen:
        """A real egg-hook started now, waiting for its payload on stdin."""
        return subprocess.Popen([self.egg_hook, "codex"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=dict(self.proc_env(), **env), cwd=self.project)

    def hook(self, payload: dict, preexec_fn=None, **env: str) -> tuple[dict, float]:
        """Run one real egg-hook: (its one JSON reply, seconds it took); it must exit 0."""
        t0 = time.monotonic()
        r = subprocess.run([self.egg_hook, "codex"], input=json.dumps(payload), capture_output=True, text=True,
                           env=dict(self.proc_env(), **env), cwd=self.project, timeout=60, preexec_fn=preexec_fn)
        took = time.monotonic() - t0
        assert r.returncode == 0, r.stderr
        return one_json_object(r.stdout), took

    # -- the manager -------------------------------------------------------------------------

    def ping(self, timeout: float = 2.0) -> dict | None:
        return client.request(self.data, {"op": "ping"}, timeout)

    def wait_manager(self) -> dict:
        status = wait_for(self.ping, WAIT)
        assert status is not None, "no manager answered within %ss; log:\n%s" % (WAIT, self.manager_log())
        return status

    def pidfile(self) -> int | None:
        try:
            with open(os.path.join(self.run, "manager.pid")) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def python(self, *args: str, **kw) -> subprocess.CompletedProcess:
        """`python -m eggshell ARGS` from the copied checkout, in the hooks' environment."""
        return subprocess.run([sys.executable, "-m", "eggshell", *args], env=dict(self.proc_env(), PYTHONPATH=self.lib),
                              cwd="/", capture_output=True, text=True, timeout=60, **kw)

    def managers(self) -> list[int]:
        """Live egg-manager processes of this data root."""
        return [p for p in pids_by_data_root(self.data) if b"egg-manager" in proc_text(p, "cmdline")]

    def manager_log(self) -> str:
        out = []
        for p in (os.path.join(self.run, client.LOG), self.log):
            if os.path.exists(p):
                out.append(open(p, encoding="utf-8", errors="replace").read())
        return "\n".join(out)

    def shutdown(self) -> None:
        """Stop the manager (SIGKILL after 10 s) and kill anything left with this data root."""
        pid = self.pidfile()
        if pid is not None and alive(pid):
            try:
                os.kill(pid, signal.SIGCONT)  # a test may have stopped it
            except OSError:
                pass
            client.request(self.data, {"op": "stop"}, 2.0)
            if not wait_for(lambda: not alive(pid), 10.0):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        for p in pids_by_data_root(self.data):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        wait_for(lambda: not pids_by_data_root(self.data), 5.0)
        shutil.rmtree(self.data, ignore_errors=True)

    # -- the store and the journal --------------------------------------------------------------

    def views(self):
        return turn_views(Store.open(self.egg).graph) if os.path.exists(self.egg) else []

    def view(self, session: str, turn: str):
        """The store's view of one turn (the last one, should there be several), or None."""
        vs = [v for v in self.views() if (v.session, v.turn) == (session, turn)]
        return vs[-1] if vs else None

    def journal_path(self, session: str, turn: str) -> str:
        return Journal(self.paths.journal_dir).turn_path(session, turn)

    def record_chat1(self) -> None:
        """Chat 1 (s1/t1) through hooks: it searched for parse_config and answered; saved (polled)."""
        s = dict(session_id="s1")
        assert self.hook(self.prompt("where is parse_config defined?", "t1", **s))[0] is not None
        self.hook(self.tool(RG, RG_OUT, "t1", "c-rg", **s))
        assert self.hook(self.stop(RG_ANSWER, "t1", **s))[0] == {}
        assert wait_for(lambda: (v := self.view("s1", "t1")) is not None and v.answer == RG_ANSWER, WAIT), self.manager_log()


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> str:
    """A copy of bin/, lib/ (with its byte code) and pyproject.toml: what bin/egg runs as a checkout."""
    root = tmp_path_factory.mktemp("checkout")
    for d in ("bin", "lib"):
        shutil.copytree(os.path.join(REPO, d), root / d, symlinks=True)
    shutil.copy2(os.path.join(REPO, "pyproject.toml"), root / "pyproject.toml")
    return str(root)


def pre_tool(env: ManagedEnv, command: str, session: str, turn: str) -> dict:
    return env.ev("PreToolUse", session=session, turn_id=turn, tool_name="Bash", tool_input={"command": command},
                  tool_use_id="pre-" + session)


def denial(reply: dict) -> str | None:
    out = reply.get("hookSpecificOutput", {})
    return out.get("permissionDecisionReason") if out.get("permissionDecision") == "deny" else None


def use_provider(env: ManagedEnv, setting: str) -> None:
    """The global config's semantic_matcher (TOML text): where only the user may name a program."""
    os.makedirs(os.path.dirname(env.paths.global_config), exist_ok=True)
    with open(env.paths.global_config, "w", encoding="utf-8") as f:
        f.write("semantic_matcher = %s\n" % setting)


def stall_provider(env: ManagedEnv) -> None:
    """stall.py: a provider that starts, reads its queries and never answers one."""
    use_provider(env, json.dumps([sys.executable, os.path.join(PROVIDERS, "stall.py")]))


def provider_child(env: ManagedEnv, manager: int, script: str) -> int | None:
    """The live provider process running `script` that this manager started, if any."""
    kids = [p for p in pids_by_data_root(env.data) if script.encode() in proc_text(p, "cmdline") and parent_pid(p) == manager]
    return kids[0] if kids else None


def gone(env: ManagedEnv, pid: int) -> bool:
    """The killed manager is dead and its socket closed (a multi-threaded process shows as a zombie
    while its other threads still hold its files: a hook could then connect and get no answer)."""
    if alive(pid):
        return False
    conn = client.connect(env.data, time.monotonic() + 0.5)
    if conn is None:
        return True
    conn.close()
    return False


def big_output(i: int, j: int, size: int = 50_000) -> str:
    """About `size` bytes of output, different for every call of every turn (nothing shared to deduplicate)."""
    lines, n, k = [], 0, 0
    while n < size:
        line = "%d.%d.%d %s\n" % (i, j, k, hashlib.sha256(b"%d.%d.%d" % (i, j, k)).hexdigest())
        lines.append(line)
        n += len(line)
        k += 1
    return "".join(lines)


@pytest.fixture
def env(tmp_path, checkout):
    e = ManagedEnv(tmp_path, checkout)
    try:
        yield e
    finally:
        e.shutdown()
        assert not pids_by_data_root(e.data), "processes left behind for %s" % e.data
