"""Fixtures for end-to-end tests that drive the real agent CLIs (see README.md here).

Every test under tests/e2e gets the ``e2e`` marker. A missing agent CLI (Codex, Claude Code, Gemini CLI, OpenCode) is a
test *failure* that says how to install it (`make test-tools`), never a skip: a run without
one of them must say so, not pass. Leave them out on purpose with ``-m "not e2e"``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from codex_harness import CodexHome, CodexNotFound, codex_version, dev_cache, find_codex  # noqa: E402
from claude_harness import ClaudeNotFound, find_claude  # noqa: E402
from gemini_harness import GeminiNotFound, find_gemini  # noqa: E402
from opencode_harness import OpenCodeNotFound, find_opencode  # noqa: E402
from fake_model_server import FakeModelServer  # noqa: E402


def pytest_collection_modifyitems(config, items):
    for item in items:
        if str(item.fspath).startswith(HERE + os.sep):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def codex_bin() -> str:
    """Path of the Codex CLI; fails the test (not skip) with install instructions if absent."""
    try:
        return find_codex()
    except CodexNotFound as exc:
        missing = str(exc)
    pytest.fail(missing, pytrace=False)  # outside the except: the message alone, not twice


@pytest.fixture(scope="session")
def claude_bin() -> str:
    """Path of Claude Code; fails the test (not skip) with install instructions if absent."""
    try:
        return find_claude()
    except ClaudeNotFound as exc:
        missing = str(exc)
    pytest.fail(missing, pytrace=False)


@pytest.fixture(scope="session")
def gemini_bin() -> str:
    """Path of Gemini CLI; fails the test (not skip) with install instructions if absent."""
    try:
        return find_gemini()
    except GeminiNotFound as exc:
        missing = str(exc)
    pytest.fail(missing, pytrace=False)


@pytest.fixture(scope="session")
def opencode_bin() -> str:
    """Path of OpenCode; fails the test (not skip) with install instructions if absent."""
    try:
        return find_opencode()
    except OpenCodeNotFound as exc:
        missing = str(exc)
    pytest.fail(missing, pytrace=False)


@pytest.fixture(scope="session")
def codex_cli_version(codex_bin) -> str:
    return codex_version(codex_bin)


REPO = os.path.dirname(os.path.dirname(HERE))
INSTALL_TIMEOUT = 1800


def wheelhouse() -> str | None:
    """The wheels `make test-tools` fetched for install.sh (``$EGGSHELL_WHEELS``, else the
    default cache), or None when they are not all there."""
    wheels = os.environ.get("EGGSHELL_WHEELS") or str(dev_cache() / "wheels")
    return wheels if os.path.isfile(os.path.join(wheels, ".stamp")) else None


def announce(config, line: str) -> None:
    """Print a line on the terminal now, even from inside a fixture whose output pytest
    captures: a step that takes minutes must not look like a hang."""
    capman = config.pluginmanager.getplugin("capturemanager")
    reporter = config.pluginmanager.getplugin("terminalreporter")
    with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
        if reporter is None or os.environ.get("PYTEST_XDIST_WORKER"):  # a worker's reporter is not shown: its stderr is
            print(line, file=sys.stderr, flush=True)
        else:
            reporter.ensure_newline()
            reporter.write_line(line)
            reporter.flush()


@pytest.fixture(scope="session")
def prefix(request, tmp_path_factory):
    """A real installation made by ./install.sh into a temporary prefix, shared by every e2e test.

    The suite runs without network (tests/offline.sh): pip takes every wheel from the
    wheelhouse `make test-tools` filled, through pip's own settings, which install.sh honours.
    It takes half a minute or more, so its steps and its time are shown as it goes. It runs in
    a HOME of its own: install.sh may add a PATH line to the shell profile there, which in the
    developer's real HOME would point at this temporary prefix (pip keeps its usual cache).
    Under pytest-xdist the workers share one installation: the first to get here installs,
    under a lock, and the others wait for it and use it (or its failure).
    """
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's own temp dir
    root = shared / "eggshell-prefix"
    done = shared / "eggshell-prefix.result.json"
    with open(shared / "eggshell-prefix.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            rc, took, out = _install(request, root, shared)
            done.write_text(json.dumps({"rc": rc, "took": took, "out": out[-6000:]}))
    result = json.loads(done.read_text())
    rc, took = result["rc"], result["took"]
    assert rc == 0, "install.sh failed (exit %d%s):\n%s" % (
        rc, ", killed after %ds" % INSTALL_TIMEOUT if took >= INSTALL_TIMEOUT else "", result["out"])
    for cmd in ("egg", "egg-hook", "egg-index", "egg-query", "egg-extract", "egg-save"):
        assert os.access(root / "bin" / cmd, os.X_OK), cmd
    return root


def _install(request, root, shared) -> tuple[int, float, str]:
    """Run ./install.sh into `root`, announcing its steps; (exit status, seconds, output)."""
    root.mkdir()
    home = shared / "eggshell-install-home"
    home.mkdir()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    env = dict(os.environ, EGGSHELL_PREFIX=str(root), HOME=str(home),
               PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR") or os.path.join(cache, "pip"))
    for name in ("EGGSHELL_DATA_ROOT", "ZDOTDIR", "XDG_CONFIG_HOME"):
        env.pop(name, None)
    wheels = wheelhouse()
    if wheels:
        env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=wheels)
    announce(request.config, "e2e: installing Eggshell into %s with ./install.sh, once for all end-to-end tests (%s)"
             % (root, "wheels from " + wheels if wheels else "no wheelhouse: pip uses the network"))
    start = time.monotonic()
    p = subprocess.Popen(["sh", os.path.join(REPO, "install.sh")], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watchdog = threading.Timer(INSTALL_TIMEOUT, p.kill)
    watchdog.start()
    out = []
    try:
        for line in p.stdout:
            out.append(line)
            if line.startswith(("eggshell install: [", "eggshell install: FAILED", "eggshell install: done")):
                announce(request.config, "e2e:   %s (%.0fs)" % (line.rstrip(), time.monotonic() - start))
        rc = p.wait()
    finally:
        watchdog.cancel()
        p.stdout.close()
    took = time.monotonic() - start
    announce(request.config, "e2e: ./install.sh %s in %.0fs" % ("done" if rc == 0 else "FAILED (exit %d)" % rc, took))
    return rc, took, "".join(out)


@pytest.fixture
def fake_model():
    """A started :class:`FakeModelServer` with no scripts; add them with ``add_script``."""
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def codex_home(tmp_path, fake_model, codex_bin):
    """An isolated HOME/CODEX_HOME under ``tmp_path/codex`` wired to ``fake_model``."""
    return CodexHome(tmp_path / "codex", fake_model, codex=codex_bin)


@pytest.fixture
def project_dir(tmp_path):
    """An empty project directory to run Codex in."""
    path = tmp_path / "project"
    path.mkdir()
    return path
