"""Fixtures for end-to-end tests that drive the real Codex CLI and Claude Code (see README.md here).

Every test under tests/e2e gets the ``e2e`` marker. A missing Codex CLI is a test *failure*
(CI installs it), never a skip. A missing Claude Code is a failure under CI (``$CI`` set) and
a skip elsewhere, so a checkout without the 370 MB Claude binary can still run the rest.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from codex_harness import CodexHome, CodexNotFound, codex_version, find_codex  # noqa: E402
from claude_harness import ClaudeNotFound, ci, find_claude  # noqa: E402
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
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def claude_bin() -> str:
    """Path of Claude Code; absent, a failure under CI (it installs it) and a skip elsewhere."""
    try:
        return find_claude()
    except ClaudeNotFound as exc:
        if ci() or os.environ.get("EGGSHELL_E2E_CLAUDE"):
            pytest.fail(str(exc), pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def codex_cli_version(codex_bin) -> str:
    return codex_version(codex_bin)


REPO = os.path.dirname(os.path.dirname(HERE))
WHEELS = os.path.join(REPO, ".cache", "wheels")


@pytest.fixture(scope="session")
def prefix(tmp_path_factory):
    """A real installation made by ./install.sh into a temporary prefix, shared by every e2e test.

    The suite runs without network (tests/offline.sh): pip takes every wheel from the
    wheelhouse `make test-tools` filled, through pip's own settings, which install.sh honours.
    """
    root = tmp_path_factory.mktemp("eggshell-prefix")
    env = dict(os.environ, EGGSHELL_PREFIX=str(root))
    env.pop("EGGSHELL_DATA_ROOT", None)
    if os.path.isfile(os.path.join(WHEELS, ".stamp")):
        env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=WHEELS)
    print("e2e: installing Eggshell into %s with ./install.sh (once for all end-to-end tests)" % root, file=sys.stderr)
    p = subprocess.run(["sh", os.path.join(REPO, "install.sh")], cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, "install.sh failed:\n%s\n%s" % (p.stdout[-3000:], p.stderr[-3000:])
    for cmd in ("egg", "egg-hook", "egg-index", "egg-query", "egg-extract", "egg-save"):
        assert os.access(root / "bin" / cmd, os.X_OK), cmd
    return root


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
