"""The built-in rules (core/redact.py, Python's `re`) never backtrack badly (issue 31.3).

Every trigger, repeated or followed by a long run of what its pattern reads next, is scanned
in time linear in the text: no configuration is involved, so these inputs are the whole attack
surface of the built-in rules. Measured (process time, 2 cores shared): 1 MB of the worst one
(`pwd='` repeated, a value judged at every occurrence) takes about 0.45 s and 4 MB 1.55 s.
"""

from __future__ import annotations

import time

import pytest

from eggshell.core import redact

SIZE = 128 << 10
FILLS = ("", "='", '="', ": ", "=", "\t", " ", "a" * 19, "A" * 8, "://a:", "-")
LIMIT_S = 1.0  # about 0.06 s is the worst measured at this size; a quadratic rule takes minutes
# (`cookie://a:` repeated once took 0.9 s: every `:` in a 4,000-character Cookie value began a
# cookie name read up to the value's end; names now stop at `:` and at 200 characters)


def _triggers() -> list[str]:
    out = set()
    for rule in redact._RULES:
        out.update([rule[2]] if isinstance(rule[2], str) else rule[2])
    return sorted(out)


def _repeated(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


@pytest.mark.slow
@pytest.mark.parametrize("trigger", _triggers())
def test_no_builtin_rule_backtracks_on_its_trigger_repeated(trigger):
    redact.redact_text(trigger)  # compile what it triggers
    slow = []
    for fill in FILLS:
        for text in (_repeated(trigger + fill, SIZE), trigger + _repeated(fill or "a", SIZE)):
            t = time.process_time()
            redact.redact_text(text)
            took = time.process_time() - t
            if took > LIMIT_S:
                slow.append((fill, round(took, 2)))
    assert not slow, slow


def test_the_worst_builtin_input_scales_linearly():
    redact.redact_text("pwd='x'")
    took = []
    for n in (SIZE, 4 * SIZE):
        text = _repeated("pwd='", n)
        t = time.process_time()
        redact.redact_text(text)
        took.append(time.process_time() - t)
    assert took[1] < 8 * max(took[0], 0.01), took  # 4x the text: about 4x the time, not 16x
