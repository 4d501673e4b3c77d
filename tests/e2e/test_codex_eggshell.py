"""End to end with the real Codex CLI: install, record a chat, hand its outcome to the next.

Everything is real except the model: ./install.sh into a temporary prefix, `egg install
codex` into a temporary CODEX_HOME, `egg init` in a temporary project, then `codex exec`
three times against the scripted local model server. Chat 1 searches and reads a file and
answers; chat 2 asks a related question and its model must receive chat 1's outcome in
the handoff; chat 3 is unrelated and must receive none.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from fake_model_server import FakeModelServer, developer_messages

from eggshell.reuse import render as handoff_mod

from codex_harness import CodexHome, wait_until

pytestmark = pytest.mark.e2e

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHAT1 = "Find where the late_fee for overdue invoices is computed in this project"
CHAT1_CMD = "grep -rn late_fee src"
CHAT1_READ = "sed -n 1,40p src/billing.py"
BILLING = '''"""Invoice billing: balances, late fees and totals."""

from datetime import date

LATE_FEE_RATE = 0.02  # of the balance, per overdue month


def months_overdue(due: date, today: date) -> int:
    months = (today.year - due.year) * 12 + today.month - due.month
    return max(0, months - (today.day < due.day))


def compute_late_fee(balance, months):
    late_fee = balance * LATE_FEE_RATE * months
    return late_fee


def total_due(invoice, today):
    return invoice.balance + compute_late_fee(invoice.balance, months_overdue(invoice.due, today))
'''
CHAT1_ANSWER = "The late_fee is computed by compute_late_fee in src/billing.py: 2% of the balance per overdue month."
CHAT2 = "Does compute_late_fee in billing cap the late_fee for very old invoices?"
CHAT3 = "Write a haiku about autumn leaves"


def _egg(prefix, args, cwd, env):
    p = subprocess.run([str(prefix / "bin" / "egg"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, "egg %s failed (%d):\n%s\n%s" % (" ".join(args), p.returncode, p.stdout, p.stderr)
    return p.stdout


def test_handoff_reaches_the_next_chat(prefix, tmp_path):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "billing.py").write_text(BILLING)
    scripts = {
        CHAT1: [{"exec": CHAT1_CMD}, {"exec": CHAT1_READ}, {"say": CHAT1_ANSWER}],
        CHAT2: [{"say": "It does not cap it; see the recorded outcome."}],
        CHAT3: [{"say": "Leaves drift and settle."}],
    }
    with FakeModelServer(scripts) as server:
        home = CodexHome(tmp_path / "codex", server)
        data_root = tmp_path / "data"
        env = {"EGGSHELL_PREFIX": str(prefix), "EGGSHELL_DATA_ROOT": str(data_root)}
        tool_env = home.env(env)

        out = _egg(prefix, ["install", "codex"], project, tool_env)
        assert str(home.hooks_path) in out
        hooks = json.loads(home.hooks_path.read_text())
        for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostCompact", "Stop"):
            commands = [h["command"] for g in hooks["hooks"][event] for h in g["hooks"]]
            assert any("egg-hook" in c for c in commands), event
        _egg(prefix, ["init"], project, tool_env)
        egg_file = project / ".eggs" / "work.egg"

        # Chat 1: runs a shell command and answers; Eggshell records the turn.
        run1 = home.run(CHAT1, project, env=env)
        assert run1.returncode == 0, str(run1)
        # SessionEnd is registered with what Codex allows (3 s), so it warns of nothing it cut down
        assert "clamping" not in run1.stderr and "hook timeout" not in run1.stderr, run1.stderr[-3000:]
        # The warm manager saves a turn within seconds of its Stop (a fresh manager loads first).
        assert wait_until(egg_file.exists, timeout=60), "chat 1 was not recorded:\n%s" % run1[2][-3000:]
        fsck = _egg(prefix, ["fsck", str(egg_file)], project, tool_env)
        assert "1 turn," in fsck, fsck
        first = server.requests_for(CHAT1)
        assert not any("EGGSHELL PRIOR WORK" in m for r in first for m in developer_messages(r)), "chat 1 had nothing to reuse"

        # Chat 2: a related question; its model must receive chat 1's outcome as a handoff.
        run2 = home.run(CHAT2, project, env=env)
        assert run2.returncode == 0, str(run2)
        reqs = server.requests_for(CHAT2)
        assert reqs, "the model never saw chat 2"
        handoffs = [m for m in developer_messages(reqs[0]) if "EGGSHELL PRIOR WORK" in m]
        assert len(handoffs) == 1, "chat 2's first request carries no handoff: %r" % developer_messages(reqs[0])
        h = handoffs[0]
        assert "> " + CHAT1 in h  # the prior request, quoted (the current one is not repeated)
        assert "| " + CHAT1_ANSWER in h  # the prior answer
        assert "$ " + CHAT1_CMD in h and "| src/billing.py:14:    late_fee = balance * LATE_FEE_RATE * months" in h  # the tool evidence, verbatim
        assert "$ " + CHAT1_READ in h and "| def total_due(invoice, today):" in h
        assert "(it changed no files)" in h  # chat 1 changed no files
        share = handoff_mod.data_share(h)
        # Most of it is recorded data (issue 11: at least 0.60; the swe runs' median is 0.82)
        assert share >= 0.60, (share, h)
        # every item is labelled with its owner's key, which `egg show` reads back in full
        blocks = {b[:12]: b for b in h.split("\n[")[1:]}
        turn_key = next(k for k, b in blocks.items() if "> " + CHAT1 in b)  # the block of chat 1's own request
        assert CHAT1_ANSWER in _egg(prefix, ["show", turn_key], project, tool_env)
        tool_key = next(k for k, b in blocks.items() if "$ " + CHAT1_CMD in b)
        assert "src/billing.py:14:" in _egg(prefix, ["show", tool_key], project, tool_env)

        # Chat 3: unrelated; no handoff at all.
        run3 = home.run(CHAT3, project, env=env)
        assert run3.returncode == 0, str(run3)
        assert not [ln for r in (run2, run3) for ln in r.stderr.splitlines() if "clamping" in ln], run3.stderr[-3000:]
        reqs3 = server.requests_for(CHAT3)
        assert reqs3
        assert not any("EGGSHELL" in m for r in reqs3 for m in developer_messages(r)), developer_messages(reqs3[0])

        # Every chat was recorded, and the store is sound.
        fsck = _egg(prefix, ["fsck", str(egg_file)], project, tool_env)
        assert "3 turns" in fsck, fsck
        assert not (data_root / "logs" / "hook.log").exists(), (data_root / "logs" / "hook.log").read_text()


def test_a_broken_config_is_shown_when_a_chat_starts(prefix, tmp_path):
    """SessionStart names a broken .eggshell.toml, its line and the fix, where Codex shows the user
    (its interactive screen: `codex exec` prints no systemMessage, tests/e2e/screen.py)."""
    from screen import screen_until

    project = tmp_path / "project"
    project.mkdir()
    with FakeModelServer({"hello": [{"say": "Hello."}]}) as server:
        home = CodexHome(tmp_path / "codex", server)
        env = {"EGGSHELL_PREFIX": str(prefix), "EGGSHELL_DATA_ROOT": str(tmp_path / "data")}
        tool_env = home.env(env)
        _egg(prefix, ["install", "codex"], project, tool_env)
        _egg(prefix, ["init"], project, tool_env)
        config = project / ".eggshell.toml"
        config.write_text('default = "work"\ntop_k = "five"\n')
        told = ("Eggshell is OFF for this project: %s line 2: 'top_k' must be an integer from 1 to 50, got 'five'; "
                "fix it or run `egg doctor`" % config)
        argv = [home.codex, "--dangerously-bypass-hook-trust", "-s", "danger-full-access", "-a", "never", "hello"]
        shown, screen = screen_until(argv, str(project), tool_env, "Hook · " + told)
        assert shown, "Codex's screen does not show %r:\n%s" % (told, screen[-3000:])
