"""Run the real Codex CLI offline, in an isolated home, against a :class:`FakeModelServer`.

    with FakeModelServer({"say hi": [{"exec": "echo hi"}, {"say": "done"}]}) as server:
        home = CodexHome(tmp_path / "codex", server)
        home.write_hooks(hooks_json({"Stop": "python3 /path/to/hook.py"}))
        rc, out, err = home.run("say hi", cwd=project_dir)

Isolation: ``HOME`` is ``<root>/home`` and ``CODEX_HOME`` is ``<root>/home/.codex``, so the
user's real ``~/.codex`` is never read or written (``egg install codex`` run with the same env
lands in the same place). ``XDG_*`` and inherited ``CODEX_*``/``OPENAI_*`` variables are dropped.

Offline: ``config.toml`` turns off everything that Codex 0.169 reaches the network for at
startup (see ``OFFLINE_CONFIG``); the only traffic left is to the fake model server.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
PINNED_CODEX_VERSION = "0.169.0"
CODEX_ENV_OVERRIDE = "EGGSHELL_E2E_CODEX"  # path to a codex binary, wins over the search
DEFAULT_TIMEOUT = 120.0
DEFAULT_MODEL = "mock-model"

# What Codex 0.169 contacts at startup, and the switch that stops it (observed through a
# refusing HTTPS proxy plus RUST_LOG=debug):
#   github.com, api.github.com, chatgpt.com  curated plugin sync (git ls-remote of
#                                            openai/plugins, then GitHub API, then an export
#                                            archive)            -> [features] plugins = false
#   ab.chatgpt.com                           OpenTelemetry metrics export
#                                                                 -> [analytics] enabled = false
# check_for_update_on_startup and [feedback] are belt and braces (the TUI uses them; exec made
# no such call).  All keys pass `codex exec --strict-config`.
OFFLINE_CONFIG = """\
check_for_update_on_startup = false
[analytics]
enabled = false
[feedback]
enabled = false
[features]
plugins = false
"""  # documentation; CodexHome.config_toml() writes these (merging [features])
OFFLINE_FEATURES = {"plugins": False}

# Hook event names found in the Codex 0.169 binary's hook schemas. Codex silently ignores any
# other key under "hooks" (no warning), so a typo in an event name just never fires.
HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "PreModelRequest", "PreToolUse", "PermissionRequest",
               "PostToolUse", "PreCompact", "PostCompact", "Stop", "SessionEnd", "SubagentStart",
               "SubagentStop", "Interrupt")


class CodexNotFound(RuntimeError):
    pass


# --------------------------------------------------------------------------------------------
# Finding Codex


def dev_cache() -> Path:
    """Where `make test-tools` keeps the test tools, outside the checkout: the Makefile's
    ``$EGGSHELL_DEV_CACHE``, else its default ``${XDG_CACHE_HOME:-~/.cache}/eggshell-dev``."""
    if os.environ.get("EGGSHELL_DEV_CACHE"):
        return Path(os.environ["EGGSHELL_DEV_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / "eggshell-dev"


def find_pinned(name: str, env_var: str, package: str, version: str, not_found: type[Exception]) -> str:
    """Path of an agent CLI: ``$env_var``, else the pinned install under ``dev_cache()/npm``
    (`make test-tools`), else ``name`` on PATH; or raise ``not_found`` saying how to install it."""
    override = os.environ.get(env_var)
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override
        raise not_found(f"${env_var}={override!r} is not an executable file")
    local = dev_cache() / "npm" / "node_modules" / ".bin" / name
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    on_path = shutil.which(name)
    if on_path:
        return on_path
    raise not_found(
        "%s was not found (looked at $%s, %s and PATH). Install the pinned version with:\n"
        "    make test-tools    (or: npm install --prefix %s %s@%s)"
        % (name, env_var, local, dev_cache() / "npm", package, version))


def find_codex() -> str:
    """Path of the ``codex`` executable, or raise :class:`CodexNotFound` with a how-to message."""
    return find_pinned("codex", CODEX_ENV_OVERRIDE, "@openai/codex", PINNED_CODEX_VERSION, CodexNotFound)


def codex_version(codex: str | None = None, timeout: float = 60.0) -> str:
    """``codex --version`` output, e.g. ``"codex-cli 0.169.0"``. Runs with a throwaway HOME and
    CODEX_HOME: even ``--version`` creates ``$CODEX_HOME/tmp/arg0-linux/`` helper links."""
    with tempfile.TemporaryDirectory(prefix="eggshell-codex-version-") as tmp:
        env = _base_env({"HOME": tmp, "CODEX_HOME": os.path.join(tmp, ".codex")})
        out = subprocess.run([codex or find_codex(), "--version"], capture_output=True, text=True,
                             timeout=timeout, stdin=subprocess.DEVNULL, env=env)
    return (out.stdout or out.stderr).strip()


# --------------------------------------------------------------------------------------------
# hooks.json


def hooks_json(commands: Mapping[str, str | Sequence[str]], *, timeout: int | Mapping[str, int] = 60,
               matchers: Mapping[str, str] | None = None, description: str | None = None,
               extra_handler_fields: Mapping[str, Mapping[str, Any]] | None = None) -> dict:
    """Build a Codex 0.169 ``hooks.json`` document.

    ``commands`` maps an event name (``SessionStart``, ``UserPromptSubmit``, ``PreToolUse``,
    ``PostToolUse``, ``Stop``, ...) to a shell command string, or a list of them (one handler
    each, run concurrently by Codex). ``timeout`` is in seconds (one value, or per event).
    ``matchers`` adds a per-event ``matcher`` regex (tool name for Pre/PostToolUse, e.g.
    ``^Bash$``; source for SessionStart, e.g. ``^(startup|resume|clear)$``).
    ``extra_handler_fields`` adds fields per event, e.g. ``{"UserPromptSubmit":
    {"additionalContextLimit": 48000}}``.

    Shape: ``{"description"?: str, "hooks": {Event: [{"matcher"?: str, "hooks": [{"type":
    "command", "command": str, "timeout": int}]}]}}``. Any other top-level key makes Codex
    ignore the whole file (with only a warning on stderr).
    """
    doc: dict[str, Any] = {}
    if description is not None:
        doc["description"] = description
    events: dict[str, list] = {}
    for event, cmds in commands.items():
        if isinstance(cmds, str):
            cmds = [cmds]
        t = timeout[event] if isinstance(timeout, Mapping) else timeout
        handlers = []
        for cmd in cmds:
            handler = {"type": "command", "command": cmd, "timeout": int(t)}
            handler.update((extra_handler_fields or {}).get(event, {}))
            handlers.append(handler)
        group: dict[str, Any] = {}
        if matchers and event in matchers:
            group["matcher"] = matchers[event]
        group["hooks"] = handlers
        events[event] = [group]
    doc["hooks"] = events
    return doc


LOGGING_HOOK_SOURCE = r'''
import json, os, sys, time
raw = sys.stdin.read()
try:
    payload = json.loads(raw)
except ValueError:
    payload = {"_unparsed": raw}
event = payload.get("hook_event_name") if isinstance(payload, dict) else None
record = {"time": time.time(), "argv": sys.argv[1:], "cwd": os.getcwd(), "payload": payload}
with open(LOG_PATH, "a", encoding="utf-8") as f:
    f.write(json.dumps(record) + "\n")
reply = REPLIES.get(event)
sys.stdout.write(json.dumps(reply) if reply is not None else "{}")
sys.stdout.write("\n")
'''


def write_logging_hook(directory: str | os.PathLike, log_path: str | os.PathLike,
                       replies: Mapping[str, Any] | None = None, name: str = "log_hook.py") -> str:
    """Write a Python hook script that appends every stdin payload to ``log_path`` (JSON lines:
    ``{"time", "argv", "cwd", "payload"}``) and prints ``replies[event]`` as JSON (``{}`` when
    absent). Returns the shell command to put in ``hooks.json``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / name
    header = "import json\nLOG_PATH = %r\nREPLIES = json.loads(%r)\n" % (
        str(log_path), json.dumps(dict(replies or {})))
    script.write_text(header + LOGGING_HOOK_SOURCE, encoding="utf-8")
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def read_hook_log(log_path: str | os.PathLike) -> list[dict]:
    """The records written by :func:`write_logging_hook`, oldest first ([] if none yet)."""
    try:
        text = Path(log_path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# --------------------------------------------------------------------------------------------
# Running Codex


class CodexRun(tuple):
    """``(returncode, stdout, stderr)``, plus ``.duration`` (s), ``.argv``, ``.cwd`` and
    ``.timed_out``. ``str(run)`` is a readable dump for assertion messages. Other agents'
    harnesses (claude_harness.ClaudeRun) reuse it under their own `name`."""

    name = "codex"

    def __new__(cls, returncode: int, stdout: str, stderr: str, *, duration: float, argv: list[str],
                cwd: str, timed_out: bool = False):
        obj = super().__new__(cls, (returncode, stdout, stderr))
        obj.duration, obj.argv, obj.cwd, obj.timed_out = duration, argv, cwd, timed_out
        return obj

    returncode = property(lambda self: self[0])
    stdout = property(lambda self: self[1])
    stderr = property(lambda self: self[2])

    def __str__(self) -> str:
        state = "TIMED OUT" if self.timed_out else f"exit {self.returncode}"
        return (f"{self.name} run ({state}, {self.duration:.1f}s) in {self.cwd}: {shlex.join(self.argv)}\n"
                f"--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}")

    def check(self) -> "CodexRun":
        """Raise AssertionError (with the full output) unless the agent exited 0."""
        if self.timed_out or self.returncode != 0:
            raise AssertionError(str(self))
        return self


def agent_env(drop: tuple[str, ...], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the variables (by prefix) that would point an agent
    CLI elsewhere, loopback always past any proxy, and `extra` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop) and k != "EGGSHELL_CONFIG"}
    no_proxy = ",".join(x for x in (env.get("NO_PROXY") or env.get("no_proxy"), "127.0.0.1", "localhost") if x)
    env["NO_PROXY"] = env["no_proxy"] = no_proxy
    env.update(extra or {})
    return env


def cli_version(binary: str, drop: tuple[str, ...], timeout: float = 60.0, **env: str) -> str:
    """`BINARY --version`, run with a throwaway HOME, without the `drop` variables, with `env`."""
    with tempfile.TemporaryDirectory(prefix="eggshell-%s-version-" % os.path.basename(binary)) as tmp:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=timeout,
                             stdin=subprocess.DEVNULL, env=agent_env(drop, {"HOME": tmp, **env}))
    return (out.stdout or out.stderr).strip()


def run_agent(kind: type, argv: list[str], cwd: str | os.PathLike, env: Mapping[str, str], timeout: float,
              stdin: str | None = None):
    """Run one agent CLI chat in its own process group and wait for it: a ``kind`` (CodexRun or a
    subclass). Never raises on a non-zero exit or a timeout (the group is killed; ``.timed_out``
    is set, returncode is -9)."""
    cwd = str(cwd)
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=dict(env), text=True,
                            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        timed_out = True
    return kind(proc.returncode, out or "", err or "", duration=time.monotonic() - start, argv=argv, cwd=cwd,
                timed_out=timed_out)


def _base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CODEX_", "OPENAI_", "XDG_", "RUST_LOG"))
           and k not in ("MOCK_API_KEY", "EGGSHELL_CONFIG")}
    no_proxy = ",".join(x for x in (env.get("NO_PROXY") or env.get("no_proxy"), "127.0.0.1", "localhost") if x)
    env["NO_PROXY"] = env["no_proxy"] = no_proxy
    env.update(extra or {})
    return env


class CodexHome:
    """An isolated ``HOME`` + ``CODEX_HOME`` wired to a fake model server.

    ``server`` is a :class:`FakeModelServer` (or anything with ``.base_url``) or a base URL
    string ``http://127.0.0.1:PORT/v1``. ``root`` defaults to a fresh temp dir (removed by
    :meth:`cleanup`; a given ``root`` is never removed). ``offline`` adds the switches in
    ``OFFLINE_CONFIG``/``OFFLINE_FEATURES``. ``features`` sets ``[features]`` flags (merged over
    the offline ones, e.g. ``{"plugins": True}`` if a test needs Codex plugins). ``extra_config``
    is raw TOML placed right after the top-level keys (it may hold top-level keys and tables,
    but not ``[features]``, ``[analytics]``, ``[feedback]`` or ``[model_providers.mock]``).
    One-off overrides can also go through ``extra_args=["-c", "key=value"]`` in :meth:`run`.
    ``env`` is extra environment for every run (e.g. ``EGGSHELL_PREFIX``).
    """

    def __init__(self, root: str | os.PathLike | None = None, server: Any = None, *,
                 model: str = DEFAULT_MODEL, offline: bool = True, features: Mapping[str, bool] | None = None,
                 extra_config: str = "", env: Mapping[str, str] | None = None, codex: str | None = None):
        if server is None:
            raise TypeError("CodexHome needs the fake model server (or its base URL)")
        self._owns_root = root is None
        self.root = Path(root if root is not None else tempfile.mkdtemp(prefix="eggshell-codex-e2e-"))
        self.home = self.root / "home"
        self.codex_home = self.home / ".codex"
        self.codex_home.mkdir(parents=True, exist_ok=True)
        self.base_url = server if isinstance(server, str) else server.base_url
        self.model = model
        self.extra_env = dict(env or {})
        self.codex = codex or find_codex()
        self.offline = offline
        self.features = {**(OFFLINE_FEATURES if offline else {}), **dict(features or {})}
        self.extra_config = extra_config
        self.write_config()

    # ---- files

    @property
    def config_path(self) -> Path:
        return self.codex_home / "config.toml"

    @property
    def hooks_path(self) -> Path:
        return self.codex_home / "hooks.json"

    @property
    def sessions_dir(self) -> Path:
        return self.codex_home / "sessions"

    def config_toml(self) -> str:
        """The text written to ``config.toml``."""
        parts = [f'model = "{self.model}"\nmodel_provider = "mock"\n']
        if self.offline:
            parts.append("check_for_update_on_startup = false\n")
        if self.extra_config:
            parts.append(self.extra_config.rstrip("\n") + "\n")
        parts.append("[model_providers.mock]\n"
                     'name = "mock"\n'
                     f'base_url = "{self.base_url}"\n'
                     'wire_api = "responses"\n'
                     'env_key = "MOCK_API_KEY"\n'
                     # fail fast instead of retrying with backoff if the fake server misbehaves
                     "request_max_retries = 0\n"
                     "stream_max_retries = 0\n"
                     "stream_idle_timeout_ms = 60000\n")
        if self.offline:
            parts.append("[analytics]\nenabled = false\n")
            parts.append("[feedback]\nenabled = false\n")
        if self.features:
            parts.append("[features]\n" + "".join(f"{k} = {'true' if v else 'false'}\n"
                                                  for k, v in self.features.items()))
        return "\n".join(parts)

    def write_config(self) -> Path:
        """(Re)write ``config.toml`` from the current attributes (``model``, ``base_url``,
        ``offline``, ``features``, ``extra_config``)."""
        self.config_path.write_text(self.config_toml(), encoding="utf-8")
        return self.config_path

    def write_hooks(self, hooks: Mapping[str, Any]) -> Path:
        """Write ``$CODEX_HOME/hooks.json`` (e.g. from :func:`hooks_json`). Runs need
        ``--dangerously-bypass-hook-trust`` (the default in :meth:`run`) for it to take effect."""
        self.hooks_path.write_text(json.dumps(hooks, indent=2) + "\n", encoding="utf-8")
        return self.hooks_path

    def rollout_files(self) -> list[Path]:
        """Session transcripts (``sessions/YYYY/MM/DD/rollout-*.jsonl``), oldest first."""
        return sorted(self.sessions_dir.glob("*/*/*/rollout-*.jsonl"), key=lambda p: p.name)

    # ---- environment and runs

    def env(self, extra_env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment Codex (and so every hook) runs with."""
        env = _base_env()
        env.update({"HOME": str(self.home), "CODEX_HOME": str(self.codex_home), "MOCK_API_KEY": "x"})
        env.update(self.extra_env)
        env.update(extra_env or {})
        return env

    def command(self, prompt: str, *, bypass_hook_trust: bool = True,
                extra_args: Sequence[str] = ()) -> list[str]:
        argv = [self.codex, "exec"]
        if bypass_hook_trust:
            argv.append("--dangerously-bypass-hook-trust")
        argv += ["--skip-git-repo-check", "-s", "danger-full-access", *extra_args, "--", prompt]
        return argv

    def run(self, prompt: str, cwd: str | os.PathLike, *, env: Mapping[str, str] | None = None,
            timeout: float = DEFAULT_TIMEOUT, extra_args: Sequence[str] = (),
            bypass_hook_trust: bool = True, stdin: str | None = None) -> CodexRun:
        """Run one ``codex exec`` chat and wait for it. Never raises on a non-zero exit or a
        timeout (the process group is killed; ``.timed_out`` is set, returncode is -9): use
        ``.check()`` or assert on the tuple. ``stdin`` (None = /dev/null) is appended by Codex
        to the prompt as a ``<stdin>`` block."""
        argv = self.command(prompt, bypass_hook_trust=bypass_hook_trust, extra_args=extra_args)
        return run_agent(CodexRun, argv, cwd, self.env(env), timeout, stdin)

    def cleanup(self) -> None:
        if self._owns_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "CodexHome":
        return self

    def __exit__(self, *exc) -> None:
        self.cleanup()


def _kill_group(proc: subprocess.Popen) -> None:
    import signal
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def run_codex(prompt: str, cwd: str | os.PathLike, server: Any, *, root: str | os.PathLike | None = None,
              hooks: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
              timeout: float = DEFAULT_TIMEOUT, extra_args: Sequence[str] = ()) -> CodexRun:
    """One-shot: a fresh :class:`CodexHome` under ``root`` (temp dir if None, then removed),
    optional ``hooks.json``, one chat."""
    home = CodexHome(root, server)
    try:
        if hooks is not None:
            home.write_hooks(hooks)
        return home.run(prompt, cwd, env=env, timeout=timeout, extra_args=extra_args)
    finally:
        home.cleanup()


def wait_until(predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.05,
               message: str = "condition") -> Any:
    """Poll ``predicate()`` until it is truthy and return its value; AssertionError after
    ``timeout`` seconds. For effects that happen after ``codex exec`` returns (e.g. a background
    saver): wait on the effect, never on a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def events_by_name(records: Iterable[Mapping[str, Any]]) -> dict[str, list[dict]]:
    """Group :func:`read_hook_log` records' payloads by ``hook_event_name``."""
    out: dict[str, list[dict]] = {}
    for rec in records:
        payload = rec.get("payload", rec)
        out.setdefault(payload.get("hook_event_name"), []).append(payload)
    return out
