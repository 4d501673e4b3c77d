"""One hook event through egg-hook's own path, in the test's process.

`answer_here` is `runtime.hookflow.managed` (what `egg-hook HOST` runs between reading
stdin and writing stdout) with EGGSHELL_MANAGER=off: the event is journaled, answered
cold from Resources (a cold set, or the warm one a test passes) and, when it seals a
turn, saved. The budget is wide, since these tests check what is answered, not how fast
(benchmarks measure that).
"""

from __future__ import annotations

import json
import os
import time

from eggshell.hosts import registry
from eggshell.runtime import hookflow


def answer_here(host: str, payload, paths, res=None, env: dict | None = None) -> dict:
    raw = payload if isinstance(payload, str) else json.dumps(payload)
    env = {**os.environ, "EGGSHELL_MANAGER": "off", "EGGSHELL_BUDGET_S": "600", "EGGSHELL_BUDGET_END_S": "600", **(env or {})}
    reply, after = hookflow.managed(registry.get(host), raw, paths, time.monotonic(), res=res, env=env)
    if after is not None:
        after()
    return reply
