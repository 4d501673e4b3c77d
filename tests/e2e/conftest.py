"""Fixtures for end-to-end tests that drive the real Codex CLI and Claude Code (see README.md here).

Every test under tests/e2e gets the ``e2e`` marker. A missing Codex CLI is a test *failure*
(CI installs it), never a skip. A missing Claude Code is a failure under CI (``$CI`` set) and
a skip elsewhere, so a checkout without the 370 MB Claude binary can still run the rest.
"""

from __future__ import annotations

import os
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
