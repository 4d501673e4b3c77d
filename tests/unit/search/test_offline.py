"""Nothing leaves the machine, and nothing is written outside Eggshell's own places.

A whole warm session runs under `strace -f`, the embedding model loaded, for longer than
onnxruntime's telemetry takes to fire (about 10 s after a model loads it resolves
mobile.events.data.microsoft.com and writes a device id under ~/.cache/Microsoft/): the
warm manager, every hook of two chats, `egg-index` as a provider kept open past that
delay, `egg doctor`, `egg status` and `egg model check` (the installer's model check).
The test fails on any connect or sendto to an address that is not a Unix socket or
loopback, and on any file or directory created outside the prefix, the data root, the
project and the code itself (bytecode caches). HOME is a fresh directory no Eggshell
process may write to.

strace must be installed (.ci/run installs it); without it this test fails rather than
skips, since what it proves would silently stop being proved.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from helpers import REPO

from helpers.hook_env import Env

pytestmark = pytest.mark.slow

TELEMETRY_DELAY_S = 15.0  # onnxruntime's 1DS uploader fires about 10 s after a model loads
EGG = os.path.join(REPO, "bin", "egg")


# -- reading strace output ------------------------------------------------------------------

_CALL = re.compile(r"^(?P<name>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?\d+|\?)")
_STR = r'"((?:[^"\\]|\\.)*)"'
_DIRFD = r"(AT_FDCWD|\d+)(?:<(?P<dir>[^>]*)>)?"


def _unquote(s: str) -> str:
    return s.encode("latin-1", "backslashreplace").decode("unicode_escape")


def _abs(path: str, dirfd_dir: str | None, cwd: str) -> str:
    if os.path.isabs(path):
        return os.path.normpath(path)
    return os.path.normpath(os.path.join(dirfd_dir or cwd, path))


def _address_ok(args: str) -> bool:
    """A socket address that stays on this machine: a Unix socket, or loopback."""
    m = re.search(r"sa_family=(\w+)", args)
    if m is None:
        return True  # no address: a connected socket, whose connect was checked
    fam = m.group(1)
    if fam == "AF_UNIX":
        return True
    if fam == "AF_INET":
        a = re.search(r'inet_addr\("([\d.]+)"\)', args)
        return bool(a) and a.group(1).startswith("127.")
    if fam == "AF_INET6":
        a = re.search(r'inet_pton\(AF_INET6, "([^"]+)"', args)
        return bool(a) and a.group(1) in ("::1", "::ffff:127.0.0.1")
    return False


def violations(log_files: list[str], cwd: str, allowed: list[str]) -> list[str]:
    """Every network attempt off the machine and every creation outside `allowed`, as lines."""
    allowed = [os.path.realpath(a) for a in allowed]

    def outside(p: str) -> bool:
        p = os.path.realpath(p)
        return p != "/dev/null" and not any(p == a or p.startswith(a + os.sep) for a in allowed)

    bad = []
    for f in log_files:
        for line in open(f, encoding="utf-8", errors="replace"):
            m = _CALL.match(line)
            if m is None or m.group("ret") == "?":
                continue
            name, args, ok = m.group("name"), m.group("args"), not m.group("ret").startswith("-")
            where = "%s: %s" % (os.path.basename(f), line.strip()[:300])
            if name in ("connect", "sendto", "sendmsg") and not _address_ok(args):
                bad.append("network: " + where)  # attempted counts, successful or not
                continue
            if not ok:
                continue
            created: list[str] = []
            if name in ("open", "creat", "openat") and (name == "creat" or "O_CREAT" in args):
                mm = re.match(_DIRFD + ", " + _STR, args) if name == "openat" else re.match(_STR, args)
                if mm:
                    path = mm.group(3) if name == "openat" else mm.group(1)
                    created.append(_abs(_unquote(path), mm.groupdict().get("dir") if name == "openat" else None, cwd))
            elif name in ("mkdir", "mknod", "symlink", "link", "rename"):
                strs = re.findall(_STR, args)
                if strs:
                    created.append(_abs(_unquote(strs[-1]), None, cwd))
            elif name in ("mkdirat", "mknodat"):
                mm = re.match(_DIRFD + ", " + _STR, args)
                if mm:
                    created.append(_abs(_unquote(mm.group(3)), mm.group("dir"), cwd))
            elif name in ("renameat", "renameat2", "linkat", "symlinkat"):
                mm = re.search(_DIRFD + ", " + _STR + r"(?:, \w+)?$", args)
                if mm:
                    created.append(_abs(_unquote(mm.group(3)), mm.group("dir"), cwd))
            elif name == "bind" and "AF_UNIX" in args:
                mm = re.search(r'sun_path=' + _STR, args)
                if mm:
                    created.append(_abs(_unquote(mm.group(1)), None, cwd))
            elif name == "bind" and not _address_ok(args):
                bad.append("network: " + where)
            bad += ["file outside the allowed places: %s (%s)" % (p, where) for p in created if outside(p)]
    return bad


TRACED = "connect,sendto,sendmsg,bind,open,openat,creat,mkdir,mkdirat,mknod,mknodat,rename,renameat,renameat2,link,linkat,symlink,symlinkat"


def strace_argv(out_prefix: str) -> list[str]:
    exe = shutil.which("strace")
    if exe is None:
        pytest.fail("strace is not installed: apt-get install strace (.ci/run installs it)", pytrace=False)
    return [exe, "-f", "-ff", "-qq", "-y", "-s", "256", "-e", "trace=" + TRACED, "-o", out_prefix]


# -- the session ----------------------------------------------------------------------------


def test_a_warm_session_with_the_model_loaded_reaches_no_network_and_writes_only_its_own_places(tmp_path):
    env = Env(tmp_path)
    # A short data root: the socket path must fit in a Unix socket address.
    data = tempfile.mkdtemp(prefix="egoff-", dir="/tmp")
    home = str(tmp_path / "home")
    traces = str(tmp_path / "traces")
    os.makedirs(home)
    os.makedirs(traces)
    penv = env.proc_env()
    penv.pop("EGGSHELL_MANAGER", None)  # the warm manager serves these hooks
    penv.update(EGGSHELL_DATA_ROOT=data, HOME=home, EGGSHELL_MANAGER_IDLE="120")
    for k in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "ORT_DISABLE_TELEMETRY", "HF_HUB_DISABLE_TELEMETRY", "DO_NOT_TRACK"):
        penv.pop(k, None)  # nothing from the test's own environment may switch telemetry off
    cwd = env.project
    procs: list[subprocess.Popen] = []

    def traced(name: str, argv: list[str], **kw) -> subprocess.Popen:
        p = subprocess.Popen(strace_argv(os.path.join(traces, name)) + argv, env=penv, cwd=cwd, **kw)
        procs.append(p)
        return p

    def hook(name: str, payload: dict) -> dict:
        p = traced(name, [os.path.join(REPO, "bin", "egg-hook"), "codex"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(json.dumps(payload), timeout=60)
        assert p.returncode == 0, err
        return json.loads(out)

    manager = traced("manager", [EGG, "--as", "egg-manager", "serve"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not glob.glob(os.path.join(data, "run", "manager.sock")):
            assert time.monotonic() < deadline and manager.poll() is None, "the manager did not start"
            time.sleep(0.1)
        hook("h1-start", env.ev("SessionStart", session="chat-a", source="startup"))
        hook("h2-prompt", env.prompt("where is parse_config defined?", "t1", session_id="chat-a"))
        hook("h3-tool", env.tool("rg -n parse_config src", "src/config.py:3:def parse_config(path):\n", "t1", "c1",
                                 session_id="chat-a"))
        hook("h4-stop", env.stop("parse_config is defined in src/config.py, line 3", "t1", session_id="chat-a"))
        # A provider of its own, held open past the telemetry delay with the model loaded.
        index = traced("egg-index", [os.path.join(REPO, "bin", "egg-index"), "--mode", "semantic"], stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        index.stdin.write(json.dumps({"query": {"id": "q", "text": "parse config"},
                                      "candidates": [{"id": "a", "text": "def parse_config(path): read the settings"}]}) + "\n")
        index.stdin.flush()
        assert json.loads(index.stdout.readline())["related"] is not None
        loaded = time.monotonic()
        hook("h5-prompt", env.prompt("change parse_config to return a dict", "t2", session_id="chat-b"))
        for name, argv in (("egg-doctor", [EGG, "doctor"]), ("egg-status", [EGG, "status"]),
                           ("egg-model-check", [EGG, "model", "check"])):
            traced(name, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).wait(timeout=120)
        time.sleep(max(0.0, TELEMETRY_DELAY_S - (time.monotonic() - loaded)))
        hook("h6-prompt", env.prompt("where does parse_config read the file?", "t3", session_id="chat-c"))
        index.stdin.close()
        index.wait(timeout=30)
        stop = subprocess.run([EGG, "--as", "egg-manager", "stop"], env=penv, cwd=cwd, capture_output=True, text=True,
                              timeout=60)
        assert stop.returncode == 0, stop.stderr
        manager.wait(timeout=180)  # it settles, refreshes and snapshots first, every syscall traced
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
        shutil.rmtree(data + "-unused", ignore_errors=True)

    logs = sorted(glob.glob(os.path.join(traces, "*")))
    assert any(os.path.basename(f).startswith("manager.") for f in logs)
    # The model really was loaded in the traced processes (else nothing here was proved).
    assert any("model.onnx" in open(f, errors="replace").read() for f in logs if os.path.basename(f).startswith("manager."))
    assert any("model.onnx" in open(f, errors="replace").read() for f in logs if os.path.basename(f).startswith("egg-index."))
    lib = os.path.join(REPO, "lib")
    venv = os.path.realpath(os.path.join(env.prefix, "share", "eggshell", "venv"))
    allowed = [env.prefix, data, env.project, lib, venv]
    bad = violations(logs, cwd, allowed)
    assert bad == [], "\n".join(bad[:40])
    assert not os.path.exists(os.path.join(home, ".cache")), os.listdir(home)
    shutil.rmtree(data, ignore_errors=True)


# -- the checker itself ---------------------------------------------------------------------


def test_the_checker_catches_a_connect_off_the_machine_and_a_file_written_elsewhere(tmp_path):
    """The same strace run over a program that does what onnxruntime's telemetry did."""
    inside = tmp_path / "inside"
    inside.mkdir()
    elsewhere = tmp_path / "elsewhere"
    prog = (
        "import os, socket\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "try:\n    s.sendto(b'x', ('10.255.255.53', 53))\nexcept OSError:\n    pass\n"  # unreachable without network
        "c = socket.socket(socket.AF_INET, socket.SOCK_STREAM); c.setblocking(False)\n"
        "try:\n    c.connect(('192.0.2.1', 443))\nexcept OSError:\n    pass\n"
        "l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(); k = socket.create_connection(l.getsockname())\n"
        "open(%r, 'w').write('ok')\n"
        "os.makedirs(%r)\n"
        "open(os.path.join(%r, 'deviceid'), 'w').write('id')\n" % (str(inside / "fine"), str(elsewhere), str(elsewhere))
    )
    out = str(tmp_path / "t")
    subprocess.run(strace_argv(out) + [sys.executable, "-c", prog], check=True, timeout=60)
    bad = violations(glob.glob(out + ".*"), str(tmp_path), [str(inside), os.path.dirname(sys.executable)])
    assert any("network" in b and "10.255.255.53" in b for b in bad), bad
    assert any("network" in b and "192.0.2.1" in b for b in bad), bad
    assert not any("127.0.0.1" in b for b in bad), bad
    assert any(str(elsewhere) in b and "mkdir" in b for b in bad), bad
    assert any(os.path.join(str(elsewhere), "deviceid") in b for b in bad), bad
    assert not any(str(inside / "fine") in b for b in bad), bad
