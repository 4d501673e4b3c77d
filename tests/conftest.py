"""Test-wide safety: no test may write into the real user's Eggshell data root, or phone home.

Every test process starts with EGGSHELL_DATA_ROOT pointing at a fresh temporary
directory; tests that need their own set it themselves. A warm manager that a test's
hook process starts exits after 20 idle seconds instead of 5 minutes, so a test run
leaves no process behind for long.
"""

import os
import shutil
import tempfile

# No test process may let the embedding runtime phone home (test_offline.py removes these
# again to prove that Eggshell's own processes set them).
os.environ.update(ORT_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_TELEMETRY="1")

_root = tempfile.mkdtemp(prefix="eggshell-test-data-")
os.environ["EGGSHELL_DATA_ROOT"] = _root
os.environ.setdefault("EGGSHELL_MANAGER_IDLE", "20")


def pytest_unconfigure(config):
    shutil.rmtree(_root, ignore_errors=True)
