"""Shared test helpers: turn-record factories and `.egg` file utilities.

Importable as `helpers` once `tests/` is on sys.path (tests/unit/conftest.py puts it
there). Nothing here depends on pytest, so subprocesses started by tests (durability,
id stability) can import it too.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import sys
from typing import Any, Iterable

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(TESTS_DIR)
LIB = os.path.join(REPO, "lib")
if LIB not in sys.path:
    sys.path.insert(0, LIB)

from eggshell.graph import eggfile as ef  # noqa: E402
from eggshell.core.identity import content_hex  # noqa: E402
from eggshell.core.values import Value, walk  # noqa: E402


def subprocess_env(**extra: str) -> dict[str, str]:
    """An environment whose Python finds both the checkout's lib/ and tests/helpers."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([LIB, TESTS_DIR] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(extra)
    return env


def regular_files(*roots: str):
    """(path, bytes) of every regular file under these directories, symlinks not followed: what a
    search for leftover text (a canary after forget, a secret after redaction) must look through."""
    import stat

    for root in roots:
        for d, _, names in os.walk(root):
            for n in names:
                p = os.path.join(d, n)
                try:
                    if not stat.S_ISREG(os.lstat(p).st_mode):
                        continue
                    with open(p, "rb") as f:
                        yield p, f.read()
                except FileNotFoundError:
                    continue  # removed meanwhile (a manager's temporary file)


# -- turn records -----------------------------------------------------------------


def tool_call(name: str = "Bash", id: str = "call_1", input: Any = None, output: Any = "ok\n") -> dict:
    """One tool call as it appears in a turn record."""
    return {"name": name, "id": id, "input": {"command": "ls"} if input is None else input, "output": output}


def bash(command: str, output: Any = "", id: str | None = None) -> dict:
    """A Bash call; its use id is derived from the command (deterministic across processes)."""
    return tool_call("Bash", id or "call_" + hashlib.sha256(command.encode()).hexdigest()[:10], {"command": command}, output)


def turn_record(
    session: str = "sess-1",
    turn: str = "turn-1",
    cwd: str = "",
    prompt: str = "why does the build fail?",
    tools: list[dict] | None = None,
    answer: str | None = "because the lockfile is stale",
    **extra: Any,
) -> dict:
    """A valid host-neutral turn record; override any field, or add/remove some after."""
    rec = {
        "session": session,
        "turn": turn,
        "cwd": cwd,
        "prompt": prompt,
        "tools": [tool_call()] if tools is None else copy.deepcopy(tools),
        "answer": answer,
    }
    rec.update(extra)
    return rec


def turn_line(**kw: Any) -> str:
    return json.dumps(turn_record(**kw)) + "\n"


# -- .egg files -------------------------------------------------------------------


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def egg_lines(path: str) -> list[bytes]:
    """The complete lines of a file (without newlines); a torn tail is left out."""
    data = read_bytes(path)
    return data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]


def egg_records(path: str) -> list[dict]:
    return [json.loads(line) for line in egg_lines(path)]


def node_ids_in_file(path: str) -> list[str]:
    return [r["node"] for r in egg_records(path) if "node" in r]


def commit_ids_in_file(path: str) -> list[str]:
    return [r["commit"] for r in egg_records(path) if "commit" in r]


def write_bytes(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def header_line(authority: str = "00000000-0000-4000-8000-000000000001") -> bytes:
    return ef.header_line(ef.Header(authority, ef.VERSION, "2024-01-01T00:00:00.000000Z"))


def node_lines(values: Iterable[Value]) -> list[bytes]:
    """Node records for every distinct sub-Value, children first, each once."""
    out: list[bytes] = []
    ids: dict = {}
    seen: set[str] = set()
    for v in values:
        for node in walk(v):
            nid = content_hex(node)
            ids[node] = nid
            if nid not in seen:
                seen.add(nid)
                out.append(ef.node_line(nid, node, ids))
    return out


def commit_line(roots: Iterable[Value] = (), unions: Iterable[tuple[Value, Value]] = (), *, time: str = "2024-01-01T00:00:01.000000Z",
                session: str = "s", turn: str = "t") -> bytes:
    """A commit record with a correct id (unions written as given, not sorted)."""
    c = ef.Commit("", time, session, turn, tuple(content_hex(r) for r in roots),
                  tuple((content_hex(a), content_hex(b)) for a, b in unions))
    c = ef.Commit(ef.commit_id(c), c.time, c.session, c.turn, c.roots, c.unions)
    return ef.commit_line(c)


def hand_written_egg(path: str, roots: list[Value], unions: list[tuple[Value, Value]] = (), *, authority: str | None = None) -> bytes:
    """Write a one-commit `.egg` by hand (not through Store); returns its bytes."""
    vals = list(roots) + [x for p in unions for x in p]
    data = b"".join([header_line(authority) if authority else header_line()] + node_lines(vals) + [commit_line(roots, unions)])
    write_bytes(path, data)
    return data


def listing(d: str) -> dict[str, bytes]:
    """Every regular file under d with its bytes (for 'nothing changed on disk' checks)."""
    out = {}
    for base, _dirs, files in os.walk(d):
        for f in files:
            p = os.path.join(base, f)
            if os.path.isfile(p) and not os.path.islink(p):
                out[os.path.relpath(p, d)] = read_bytes(p)
    return out


def real_venv() -> str:
    """The installed Eggshell environment the bin/ bootstraps run with (install.sh makes it).

    A missing environment fails the test: `make test` runs after ./install.sh, so skipping
    would hide a broken install.
    """
    import pytest

    for base in (os.environ.get("EGGSHELL_PREFIX"), os.path.expanduser("~/.local")):
        if base and os.access(os.path.join(base, "share", "eggshell", "venv", "bin", "python"), os.X_OK):
            return os.path.join(base, "share", "eggshell", "venv")
    if os.path.exists(os.path.join(sys.prefix, "pyvenv.cfg")):
        return sys.prefix
    pytest.fail("no installed Eggshell environment for the bin/ commands: run ./install.sh first", pytrace=False)


# -- processes (for tests that start background processes) ------------------------------


def wait_for(cond, timeout: float = 15.0, interval: float = 0.05):
    """Poll `cond` until it returns something true (returned) or `timeout` seconds pass (its last value)."""
    import time

    end = time.monotonic() + timeout
    while True:
        got = cond()
        if got or time.monotonic() >= end:
            return got
        time.sleep(interval)


def proc_state(pid: int) -> str | None:
    """The process's state letter from /proc/PID/stat, or None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Whether the process exists and has not exited (a zombie nobody reaped counts as gone)."""
    return proc_state(pid) not in (None, "Z", "X")


def proc_text(pid: int, what: str) -> bytes:
    """/proc/PID/<what> (environ, cmdline, status), or b"" once it is gone or unreadable."""
    try:
        with open("/proc/%d/%s" % (pid, what), "rb") as f:
            return f.read()
    except OSError:
        return b""


def pids_with_env(key: str, value: str) -> list[int]:
    """Live processes (other than this one) whose environment has key=value exactly."""
    want = ("%s=%s" % (key, value)).encode("utf-8", "surrogateescape")
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        if want in proc_text(int(name), "environ").split(b"\0") and alive(int(name)):
            out.append(int(name))
    return out


def pids_by_data_root(data_root: str) -> list[int]:
    """Live processes started for this EGGSHELL_DATA_ROOT (hooks, managers, their children)."""
    return pids_with_env("EGGSHELL_DATA_ROOT", data_root)


def parent_pid(pid: int) -> int | None:
    for line in proc_text(pid, "status").decode("utf-8", "replace").splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    return None
