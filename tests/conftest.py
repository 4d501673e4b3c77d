"""Test-wide safety: no test may write into the real user's Eggshell data root.

Every test process starts with EGGSHELL_DATA_ROOT pointing at a fresh temporary
directory; tests that need their own set it themselves.
"""

import os
import shutil
import tempfile

_root = tempfile.mkdtemp(prefix="eggshell-test-data-")
os.environ["EGGSHELL_DATA_ROOT"] = _root


def pytest_unconfigure(config):
    shutil.rmtree(_root, ignore_errors=True)
