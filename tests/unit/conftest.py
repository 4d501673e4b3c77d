"""Unit-test setup: import paths, hypothesis profiles, small fixtures.

Run with `PYTHONPATH=lib python3 -m pytest tests/unit -q`. Set
HYPOTHESIS_PROFILE=thorough for many more examples per property.
"""

from __future__ import annotations

import os
import sys

import pytest

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIB = os.path.join(os.path.dirname(_TESTS), "lib")
for p in (_LIB, _TESTS):
    if p not in sys.path:
        sys.path.insert(0, p)

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "default",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def egg(tmp_path):
    """Path of a not-yet-existing .egg in a private directory."""
    d = tmp_path / "eggs"
    d.mkdir(mode=0o700)
    return str(d / "work.egg")


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)
