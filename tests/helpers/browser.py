"""A real headless Chromium for the tests, driven over the DevTools protocol on a pipe.

No port is opened: Chromium speaks the protocol on its fds 3 and 4 (--remote-debugging-pipe),
which a small shell wrapper connects to our stdin/stdout pipes. As root (CI) it runs in a network
namespace of its own whose default routes (IPv4 and IPv6) lead to a veth pair, so that anything
it tried to send would really leave (not fail at the route lookup); the namespace's own counters
(/proc/net/snmp, /proc/net/snmp6), read before and after, then say whether it opened a TCP
connection or sent a datagram. Without root it runs as it is, and `isolated` says so.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from typing import Any

APT_PACKAGE = "chromium"  # Debian's package of the browser (what .ci/run installs)
NAMES = ("chromium", "chromium-browser")

# Everything a fresh profile would fetch on its own is off; the page itself may fetch nothing (its CSP).
FLAGS = (
    "--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-extensions", "--disable-default-apps",
    "--disable-domain-reliability", "--disable-client-side-phishing-detection", "--disable-breakpad", "--no-pings",
    "--metrics-recording-only", "--mute-audio", "--password-store=basic", "--use-mock-keychain",
    # No name is ever resolved (Chromium looks up accounts.google.com, clients2.google.com, ... at start),
    # and no address reached but SINK's: a fetch the page's policy let through would really be tried there.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 10.99.0.2",
)
SINK = "10.99.0.2"  # the veth's far end, the namespace's default route: nothing answers there

# The counters that move when something is sent off the machine: a TCP connection opened, a UDP
# datagram (IPv4 or IPv6) or an IPv4 packet sent. (IPv6's own neighbour discovery on the veth moves
# Ip6OutRequests, so that one is not among them.)
SENT = ("Tcp.ActiveOpens", "Udp.OutDatagrams", "Ip.OutRequests", "Icmp.OutMsgs", "Udp6OutDatagrams")

_NETNS = r"""
set -e
out=$1; shift
ip link set lo up
ip link add egg0 type veth peer name egg1
ip link set egg1 up
ip addr add 10.99.0.1/24 dev egg0
ip link set egg0 up
ip route add default via 10.99.0.2 dev egg0
ip -6 addr add fd00:99::1/64 dev egg0 nodad
ip -6 route add default via fd00:99::2 dev egg0
cat /proc/net/snmp /proc/net/snmp6 >"$out.before"
set +e
"$@" 3<&0 4>&1 0</dev/null 1>&2
rc=$?
cat /proc/net/snmp /proc/net/snmp6 >"$out.after"
exit $rc
"""
_PLAIN = 'exec "$@" 3<&0 4>&1 0</dev/null 1>&2'


class NoChromium(RuntimeError):
    pass


def find_chromium() -> str:
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    raise NoChromium("no Chromium found (looked for %s on PATH): the browser tests need it; install the Debian package "
                     "with `apt-get install %s` (.ci/run installs it)" % (", ".join(NAMES), APT_PACKAGE))


def can_isolate() -> bool:
    return os.geteuid() == 0 and shutil.which("unshare") is not None and shutil.which("ip") is not None


def counters(text: str) -> dict[str, int]:
    """/proc/net/snmp ("Tcp: names" / "Tcp: values" line pairs) and snmp6 ("Name value" lines) as one dict."""
    out: dict[str, int] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if ":" in line.split(" ", 1)[0] and i + 1 < len(lines) and lines[i + 1].split(" ", 1)[0] == line.split(" ", 1)[0]:
            kind = line.split(":", 1)[0]
            names, values = line.split()[1:], lines[i + 1].split()[1:]
            if values and values[0].lstrip("-").isdigit():
                out.update(("%s.%s" % (kind, n), int(v)) for n, v in zip(names, values))
        elif ":" not in line:
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("-").isdigit():
                out[parts[0]] = int(parts[1])
    return out


class DevToolsError(RuntimeError):
    pass


class Chromium:
    """One headless Chromium; `page(url)` opens a tab and waits for it to load."""

    def __init__(self, workdir: str, isolate: bool | None = None):
        self.exe = find_chromium()
        self.dir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.isolated = can_isolate() if isolate is None else isolate
        self.stats = os.path.join(workdir, "netstat")
        self.log = os.path.join(workdir, "chromium.log")
        args = [self.exe, *FLAGS, "--user-data-dir=%s" % os.path.join(workdir, "profile"), "--remote-debugging-pipe"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
        args.append("about:blank")
        wrap = ["unshare", "-n", "sh", "-c", _NETNS, "sh", self.stats] if self.isolated else ["sh", "-c", _PLAIN, "sh"]
        self._err = open(self.log, "wb")
        # A session of its own: closing kills the whole group, so no renderer outlives a failed test.
        self.proc = subprocess.Popen(wrap + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                     start_new_session=True)
        self._next = 0
        self._lock = threading.Lock()
        self._replies: dict[int, dict] = {}
        self._cv = threading.Condition(self._lock)
        self.events: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buf = b""
        while True:
            chunk = self.proc.stdout.read1(65536)
            if not chunk:
                with self._cv:
                    self._replies[-1] = {}
                    self._cv.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self._cv:
                    if "id" in msg:
                        self._replies[msg["id"]] = msg
                    else:
                        self.events.append(msg)
                    self._cv.notify_all()

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30) -> dict:
        with self._lock:
            self._next += 1
            mid = self._next
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.proc.stdin.write(json.dumps(msg).encode() + b"\0")
        self.proc.stdin.flush()
        end = time.monotonic() + timeout
        with self._cv:
            while mid not in self._replies:
                if -1 in self._replies:
                    raise DevToolsError("Chromium exited (see %s):\n%s" % (self.log, self.stderr()[-2000:]))
                left = end - time.monotonic()
                if left <= 0:
                    raise DevToolsError("no answer to %s within %s s" % (method, timeout))
                self._cv.wait(left)
            reply = self._replies.pop(mid)
        if "error" in reply:
            raise DevToolsError("%s: %s" % (method, reply["error"]))
        return reply.get("result", {})

    def page(self, url: str, timeout: float = 60) -> "Page":
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        p = Page(self, session)
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.call(domain + ".enable", session=session)
        self.call("Page.navigate", {"url": url}, session=session)
        p.wait_for("document.readyState === 'complete' && document.location.href !== 'about:blank'", timeout)
        return p

    def stderr(self) -> str:
        self._err.flush()
        with open(self.log, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def close(self) -> None:
        """Close the browser, then kill whatever is left of its process group. The wrapper is not reaped
        before that (waitid WNOWAIT), so the group id cannot have passed to another process."""
        def exited() -> bool:
            return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

        if not exited():
            try:
                self.call("Browser.close", timeout=10)
            except DevToolsError:
                pass
            end = time.monotonic() + 20
            while not exited() and time.monotonic() < end:
                time.sleep(0.05)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.proc.stdin.close()
        self._err.close()

    def sent(self) -> dict[str, int]:
        """After close, when isolated: how much each SENT counter moved while Chromium ran."""
        with open(self.stats + ".before") as f:
            before = counters(f.read())
        with open(self.stats + ".after") as f:
            after = counters(f.read())
        missing = [k for k in SENT if k not in before]
        if missing:
            raise AssertionError("the namespace's counters lack %s" % missing)
        return {k: after[k] - before[k] for k in SENT}

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Page:
    def __init__(self, browser: Chromium, session: str):
        self.browser, self.session = browser, session

    def js(self, expression: str, timeout: float = 30) -> Any:
        r = self.browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                              session=self.session, timeout=timeout)
        if "exceptionDetails" in r:
            raise DevToolsError("%s: %s" % (expression, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        end = time.monotonic() + timeout
        while True:
            v = self.js(expression)
            if v:
                return v
            if time.monotonic() > end:
                raise DevToolsError("still false after %s s: %s" % (timeout, expression))
            time.sleep(0.05)

    def type(self, selector: str, text: str) -> None:
        """Focus an input and type into it as a user does (input events and all)."""
        self.js("document.querySelector(%s).focus()" % json.dumps(selector))
        self.browser.call("Input.insertText", {"text": text}, session=self.session)

    def errors(self) -> list[str]:
        """Uncaught exceptions, console errors and CSP reports this page produced."""
        out = []
        for e in self.browser.events:
            if e.get("sessionId") != self.session:
                continue
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append("exception: %s" % p.get("exceptionDetails", {}).get("exception", {}).get("description"))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                out.append("log: %s" % p["entry"].get("text"))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append("console: %s" % [a.get("value") for a in p.get("args", [])])
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.browser.events
                if e.get("sessionId") == self.session and e.get("method") == "Network.requestWillBeSent"]
