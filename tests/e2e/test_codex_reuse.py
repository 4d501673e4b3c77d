"""End to end with the real Codex CLI: a repeated tool call is stopped and its recorded output reused.

Everything is real except the model: ./install.sh into a temporary prefix, `egg install
codex` into a temporary CODEX_HOME, `egg init` in a temporary project, then two `codex exec`
chats against the scripted local model server. An `rg` shim first on the PATH of Codex's
shell commands counts every search that really runs.

Chat 1 searches `rg -n parse_config src`, runs the project's tests and answers. Chat 2 (a new
session) proposes the same search spelled `rg -n parse_config ./src`: Eggshell's PreToolUse
hook must deny it (the shim never sees it) and the model's next request must carry chat 1's
recorded output in the blocked call's `function_call_output`. Chat 2 then proposes `rg -n
parse_config tests`, which no prior work covers: it runs, and its output is the real one.
"""

from __future__ import annotations

import json
import os
import shlex
import stat

import pytest

from codex_harness import CodexHome
from fake_model_server import FakeModelServer, developer_messages, function_call_outputs, function_calls
from test_codex_eggshell import _egg

pytestmark = pytest.mark.e2e

CHAT1 = "Where is parse_config defined, and do the config tests pass?"
SEARCH_SRC = "rg -n parse_config src"
RUN_TESTS = "sh tests/run.sh"
CHAT1_ANSWER = "parse_config is defined in src/config.py (line 1) and used by load_default; the config tests pass."
CHAT2 = "Add type hints to the INI reader before the release"
SEARCH_SRC_AGAIN = "rg -n parse_config ./src"  # the same Work, spelled differently
SEARCH_TESTS = "rg -n parse_config tests"  # not covered by chat 1
CHAT2_ANSWER = "Reused the recorded search of src; tests/test_config.py exercises parse_config."

BLOCKED = "Command blocked by PreToolUse hook:"

CONFIG_PY = '''def parse_config(path):
    """Read KEY=VALUE lines into a dict; blank lines and # comments are skipped."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition("=")
                out[key.strip()] = value.strip()
    return out


def load_default():
    return parse_config("app.cfg")
'''

TEST_CONFIG_PY = '''import os
import tempfile
import unittest

from config import parse_config


class ParseConfigTest(unittest.TestCase):
    def test_parse_config_reads_pairs(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "app.cfg")
            with open(path, "w", encoding="utf-8") as f:
                f.write("# comment\\nname = demo\\n\\nport=8080\\n")
            self.assertEqual(parse_config(path), {"name": "demo", "port": "8080"})


if __name__ == "__main__":
    unittest.main()
'''

RUN_SH = '''#!/bin/sh
# The project's test command.
cd "$(dirname "$0")/.." || exit 1
PYTHONPATH=src exec python3 -m unittest discover -s tests -p 'test_*.py'
'''

# `rg` as the model's commands see it: logs each run, then does the real search with a
# ripgrep further down PATH if there is one, else a minimal `rg [-n] PATTERN [PATH...]` on
# grep (the same output).
RG_SHIM = '''#!/bin/sh
printf '%s\\n' "$*" >> {log}
real=$(PATH={rest} command -v rg 2>/dev/null)
if [ -n "$real" ]; then exec "$real" "$@"; fi
[ "$1" = "-n" ] && shift
pat=$1
shift
[ $# -eq 0 ] && set -- .
exec grep -rn -- "$pat" "$@"
'''


def _project(root):
    (root / "src").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "src" / "config.py").write_text(CONFIG_PY)
    (root / "tests" / "test_config.py").write_text(TEST_CONFIG_PY)
    (root / "tests" / "run.sh").write_text(RUN_SH)
    return root


def _shim(directory, log, home):
    """Put the counting `rg` shim first on the PATH of every shell command Codex runs.

    Codex 0.169 runs the model's commands as `/bin/bash -lc CMD`: a login shell, so
    /etc/profile resets PATH and then `~/.bash_profile` of the isolated HOME runs; that is
    where the shim goes first. (With its shell snapshot on, Codex would instead replay a
    captured environment and prepend its own `codex-path` directory, which holds the ripgrep
    it ships, ahead of everything; and whether a command runs before or after the snapshot
    is ready is a race. The test's CodexHome turns `shell_snapshot` off.)
    Returns the PATH for Codex's own environment, with the shim first as well.
    """
    directory.mkdir(parents=True)
    rest = os.environ.get("PATH") or "/usr/bin:/bin"
    rg = directory / "rg"
    rg.write_text(RG_SHIM.format(log=shlex.quote(str(log)), rest=shlex.quote(rest)))
    rg.chmod(rg.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    (home / ".bash_profile").write_text('export PATH=%s:"$PATH"\n' % shlex.quote(str(directory)))
    return "%s:%s" % (directory, rest)


def _shim_runs(log):
    return log.read_text().splitlines() if log.exists() else []


def _output_of(request, call_id):
    """The function_call_output text for one call in a request's input (None if absent)."""
    for item in request.body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "function_call_output" and item.get("call_id") == call_id:
            value = item.get("output")
            if isinstance(value, str):
                return value
            if isinstance(value, list):
                return "".join(p.get("text", "") for p in value if isinstance(p, dict))
            return json.dumps(value)
    return None


def _call_id(request, cmd):
    """The call_id the model used for `exec_command` with this command, as echoed in `input`."""
    for fc in function_calls(request):
        try:
            args = json.loads(fc.get("arguments") or "{}")
        except ValueError:
            continue
        if args.get("cmd") == cmd:
            return fc.get("call_id")
    return None


def test_repeated_search_is_denied_and_its_output_reused(prefix, tmp_path):  # noqa: F811
    project = _project(tmp_path / "project")
    shim_log = tmp_path / "rg-runs.log"
    scripts = {
        CHAT1: [{"exec": SEARCH_SRC}, {"exec": RUN_TESTS}, {"say": CHAT1_ANSWER}],
        CHAT2: [{"exec": SEARCH_SRC_AGAIN}, {"exec": SEARCH_TESTS}, {"say": CHAT2_ANSWER}],
    }
    with FakeModelServer(scripts) as server:
        home = CodexHome(tmp_path / "codex", server, features={"shell_snapshot": False})
        path = _shim(tmp_path / "shim", shim_log, home.home)
        data_root = tmp_path / "data"
        env = {"EGGSHELL_PREFIX": str(prefix), "EGGSHELL_DATA_ROOT": str(data_root), "PATH": path}
        tool_env = home.env(env)
        _egg(prefix, ["install", "codex"], project, tool_env)
        _egg(prefix, ["init"], project, tool_env)
        egg_file = project / ".eggs" / "work.egg"

        # Chat 1: the search and the tests really run; Eggshell records the turn.
        run1 = home.run(CHAT1, project, env=env)
        assert run1.returncode == 0, str(run1)
        assert _shim_runs(shim_log) == ["-n parse_config src"], (_shim_runs(shim_log), str(run1))
        reqs1 = server.requests_for(CHAT1)
        assert len(reqs1) == 3, [r.reply for r in reqs1]
        search_out = _output_of(reqs1[1], _call_id(reqs1[1], SEARCH_SRC))
        assert search_out and "src/config.py:1:def parse_config(path):" in search_out, search_out
        tests_out = _output_of(reqs1[2], _call_id(reqs1[2], RUN_TESTS))
        assert tests_out and "Ran 1 test" in tests_out and "OK" in tests_out, tests_out
        assert egg_file.exists(), "chat 1 was not recorded:\n%s" % run1.stderr[-3000:]
        fsck = _egg(prefix, ["fsck", str(egg_file)], project, tool_env)
        assert "1 turn," in fsck, fsck

        # Chat 2, a new session: the same search, spelled `./src`, must be stopped.
        run2 = home.run(CHAT2, project, env=env)
        assert run2.returncode == 0, str(run2)
        reqs2 = server.requests_for(CHAT2)
        assert [r.step for r in reqs2] == [0, 1, 2], [(r.step, r.reply) for r in reqs2]
        # The prompt shares nothing with chat 1, so nothing was handed over before the call:
        # whatever the model learns of the prior search comes with the deny.
        assert not any("src/config.py:1:" in m for m in developer_messages(reqs2[0])), developer_messages(reqs2[0])

        runs = _shim_runs(shim_log)
        assert runs.count("-n parse_config src") == 1, runs  # chat 1's run only
        assert not any(r.endswith("./src") for r in runs), "the denied search ran: %r" % runs

        blocked_id = _call_id(reqs2[1], SEARCH_SRC_AGAIN)
        assert blocked_id, function_calls(reqs2[1])
        reason = _output_of(reqs2[1], blocked_id)
        assert reason is not None, function_call_outputs(reqs2[1])
        assert reason.startswith(BLOCKED), "the repeated search was not denied:\n%s\n%s" % (reason, run2.stderr[-3000:])
        assert "this call was not run, because earlier work already did it:\n$ %s\n" % SEARCH_SRC in reason, reason
        assert "| src/config.py:1:def parse_config(path):" in reason, reason  # chat 1's recorded output
        assert "| src/config.py:14:    return parse_config(\"app.cfg\")" in reason, reason
        # one sentence to its end: Codex appends ". Command: CMD" to the reason
        assert reason.rstrip().endswith("to run this call anyway, propose it again. Command: " + SEARCH_SRC_AGAIN), reason
        assert ".." not in reason, reason

        # The uncovered search is allowed: it runs and the model gets its real output.
        assert runs.count("-n parse_config tests") == 1, runs
        assert len(runs) == 2, runs
        allowed = _output_of(reqs2[2], _call_id(reqs2[2], SEARCH_TESTS))
        assert allowed is not None, function_call_outputs(reqs2[2])
        assert BLOCKED not in allowed, allowed
        assert "tests/test_config.py:5:from config import parse_config" in allowed, allowed
        # At most advice reaches the model for it: no second deny anywhere in the chat.
        later = [m for m in developer_messages(reqs2[2]) if "EGGSHELL" in m]
        assert not any("this call was not run" in m for m in later), later
        # The blocked call's output is still the deny in the last request (history is kept).
        assert _output_of(reqs2[2], blocked_id) == reason

        # Both chats were recorded, the store is sound, and no hook failed.
        fsck = _egg(prefix, ["fsck", str(egg_file)], project, tool_env)
        assert "2 turns" in fsck, fsck
        for run in (run1, run2):
            assert "hook: PreToolUse Completed" in run.stderr and " Failed" not in run.stderr, str(run)
        hook_log = data_root / "logs" / "hook.log"
        assert not hook_log.exists() or not hook_log.read_text().strip(), hook_log.read_text()
