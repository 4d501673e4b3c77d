"""Issue 31.5: secret shapes that capture once kept, each with format-valid canaries.

Each case goes through the hooks' own path (helpers.hooks.answer_here) into the store, and
the canary's secret must be found in no stored byte.
"""

from __future__ import annotations

import pytest

from eggshell.graph.events import OUTPUT_CHARS
from helpers.canaries import canaries
from helpers.hook_env import Env

_CANARIES = canaries(315)


def _store_bytes(env: Env) -> bytes:
    with open(env.egg, "rb") as f:
        return f.read()


@pytest.mark.parametrize("c", _CANARIES, ids=lambda c: c.kind)
def test_a_secret_in_a_structured_output_past_the_cap_is_redacted(tmp_path, c):
    """A structured output (Claude Code's Read, an MCP result) over the 1 MiB cap was cut as its
    JSON text, where `"password": "..."` reads `\\"password\\": \\"...\\"` and no rule matched."""
    env = Env(tmp_path)
    env.respond(env.prompt("what does the deploy config hold?"))
    body = "x = 1\n" * (OUTPUT_CHARS // 6 + 10)
    out = {"type": "text", "file": {"filePath": "/p/deploy.cfg", "content": c.text + "\n" + body, "numLines": 3}}
    env.respond(env.tool("cat deploy.cfg", out))
    env.respond(env.stop("it holds the deploy settings"))
    stored = _store_bytes(env)
    assert c.secret.encode() not in stored
    assert b"output truncated by Eggshell at" in stored
