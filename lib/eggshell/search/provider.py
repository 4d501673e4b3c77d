"""The client side of the search-provider protocol: a long-lived child spoken to in NDJSON.

    {"index":[{"id":...,"text":...}]}                   written, never answered
    {"query":{"id":...,"text":...},"candidates":[...]}   answered by one {"related":[i,...]}

The provider is any program the user configures (by default `egg-index`), so it is
untrusted: it may crash, hang, print garbage or answer out of turn. Memory must never
block the agent, so every call is bounded by one deadline and every way a provider can
go wrong ends in a result the caller can fall back from (`related is None`).

The rules:

- The child is started on first use (index or query) and reused. It runs in its own
  session, so on failure the whole process group is SIGKILLed, then reaped.
- A failure of any kind after a request was sent (exit, closed pipe, deadline, bad
  JSON, wrong shape, output beyond the one reply line, output nobody asked for) kills
  the child; the call reports the failure and the next call starts a fresh child. So
  a partly written request or a late reply never reaches a later query. A child found
  dead *before* anything was sent is simply replaced for this call.
- Replies cannot be matched to queries by content (the protocol has no reply id), so
  "in step" is enforced by silence: when no query is outstanding the child must not
  write anything. Stray output is noticed when it is seen (pending before a call, or
  in the same read as the reply) and the child is killed then; a stray line that
  arrives alone while a query is outstanding is indistinguishable from the reply and
  is caught, at the latest, at the next call. If a reply carries an "id", it must equal
  the query's id, which lets a provider that echoes ids close that gap.
- A well-formed reply with bad entries is cleaned, not failed: only ints (not bools)
  naming a candidate are kept, duplicates dropped, capped at top_k. The child stays,
  since it is still in step; `error` then notes what was dropped.
- Index messages are written without waiting for a reply, but the write itself is
  bounded by the deadline: a child that stops reading its stdin would otherwise block
  a large write forever.
- The child's stderr is never left to fill a pipe: with `log` it is read by a
  per-client thread and passed on line by line (the first 64 KiB, then one "dropped"
  note, the rest read and discarded); without `log` the child inherits our stderr.

A client is not thread-safe; `log` is called from the drain thread.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from eggshell.errors import EggshellError

MAX_REPLY_BYTES = 1 << 20  # a reply is a short list of ints; more is garbage, not a reply
LOG_BYTES = 64 * 1024  # stderr passed to `log` per child; the rest is drained unseen
LOG_LINE_CHARS = 500
CLOSE_GRACE_S = 1.0  # how long close() lets a child exit on EOF before killing it
REAP_S = 2.0  # how long to wait for a SIGKILLed child to be reaped
# A child's start (a model to load, a cache to map, every candidate to window) is not the
# query's fault: where the caller allows it (egg-query, a batch), the first query to a child
# just started may take this much longer. The warm manager allows none: its worker must not
# wait on a start.
STARTUP_S = 30.0
# After a query ran out of time the child is killed (its late reply would answer the next
# query); the next queries do not start another at once but wait this long, doubling per
# slow failure in a row up to BACKOFF_MAX_S, and are answered without it meanwhile.
BACKOFF_S = 30.0
BACKOFF_MAX_S = 600.0


@dataclass(frozen=True, slots=True)
class ProviderResult:
    related: tuple[int, ...] | None  # None: the provider failed or is unavailable; fall back
    error: str | None  # why it failed; with `related` set, a note about dropped indices
    elapsed_ms: float
    scores: tuple[float, ...] | None = None  # parallel to related, when the provider sent usable ones
    calibration: object = None  # background.Calibration, when the reply sent a usable [mean, sd]
    opening: tuple[float, ...] | None = None  # parallel to related: each record's opening-window cosine (clean_opening)


def _finite(x: Any) -> bool:
    return type(x) in (int, float) and x == x and abs(x) != float("inf")


def clean_related(reply: Any, n_candidates: int, top_k: int) -> tuple[tuple[int, ...] | None, str | None, tuple[float, ...] | None]:
    """(indices, note, scores) from a decoded reply; (None, why, None) if it is not a reply at all.

    Entries are filtered rather than the reply failed because a provider that gets one
    index wrong is still in step and its other indices are still its best guess. Scores
    are optional: used only when every one is a finite number and they pair one to one
    with `related`; otherwise the caller fuses by rank."""
    if not isinstance(reply, dict) or not isinstance(reply.get("related"), list):
        return None, 'reply is not {"related":[...]}', None
    raw = reply["related"]
    sc = reply.get("scores")
    paired = isinstance(sc, list) and len(sc) == len(raw) and all(_finite(x) for x in sc)
    seen: dict[int, float] = {}
    for n, i in enumerate(raw):
        if type(i) is int and 0 <= i < n_candidates and i not in seen:
            seen[i] = float(sc[n]) if paired else 0.0
    kept = tuple(seen)[: max(top_k, 0)]
    dropped = len(raw) - len(seen)
    notes = ["dropped %d invalid or repeated indices" % dropped] if dropped else []
    if sc is not None and not paired:
        notes.append("ignored \"scores\" (not one finite number per index)")
    return kept, ("; ".join(notes) or None), (tuple(seen[i] for i in kept) if paired else None)


def clean_opening(reply: dict, kept: tuple[int, ...]) -> tuple[float, ...] | None:
    """The reply's optional "opening" (each related record's opening-window cosine, from the
    built-in egg-index) for the kept indices; None unless one finite number pairs with each index."""
    raw, op = reply.get("related"), reply.get("opening")
    if not isinstance(op, list) or not isinstance(raw, list) or len(op) != len(raw) or not all(_finite(x) for x in op):
        return None
    first: dict[int, float] = {}
    for i, v in zip(raw, op):
        if type(i) is int:
            first.setdefault(i, float(v))
    return tuple(first[i] for i in kept)


def _encode(obj: Any) -> bytes:
    """One request line. Lone surrogates cannot be UTF-8, so they go as JSON escapes."""
    try:
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(obj, separators=(",", ":")) + "\n").encode("ascii")


def _wait(fd: int, event: int, timeout: float) -> bool:
    """Whether fd became ready for `event` within timeout seconds (0 polls)."""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, event)
        return bool(sel.select(max(timeout, 0.0)))


class _Failure(EggshellError):
    """A provider failure; the child is killed and the message reported. `slow`: it ran out of
    time (the client then backs off before starting another)."""

    def __init__(self, msg: str, slow: bool = False):
        super().__init__(msg)
        self.slow = slow


class ProviderClient:
    """A provider child, started on first use, killed on any failure, restarted on next use."""

    def __init__(self, argv: list[str], *, deadline_s: float = 15.0, env: dict | None = None,
                 log: Callable[[str], Any] | None = None, startup_s: float = 0.0, backoff_s: float = BACKOFF_S):
        if not argv:
            raise ValueError("provider argv must name a program")
        if not deadline_s > 0:
            raise ValueError("deadline_s must be positive, got %r" % deadline_s)
        self.argv = list(argv)
        self.deadline_s = float(deadline_s)
        self.env = env
        self.log = log
        self._proc: subprocess.Popen | None = None
        self._drain: threading.Thread | None = None
        self._buf = bytearray()
        self.startup_s, self.backoff_s = float(startup_s), float(backoff_s)
        self._slow = 0  # queries in a row that ran out of time
        self._retry_at = 0.0  # no child is started before this (monotonic) time
        self._fresh = False

    @property
    def pid(self) -> int | None:
        """The running child's pid (also its process group id), if one is running."""
        return self._proc.pid if self._proc is not None else None

    # -- the protocol -------------------------------------------------------------

    def index(self, items: list[dict]) -> bool:
        """Queue items with the provider; False if it could not take them (then it was killed)."""
        deadline = time.monotonic() + self.deadline_s
        try:
            line = _encode({"index": items})
        except (TypeError, ValueError, RecursionError):
            return False
        try:
            self._ready()
            self._write(line, deadline)
        except _Failure:
            self._kill()
            return False
        except BaseException:
            self._kill()  # interrupted mid-line: the child can no longer be trusted to be in step
            raise
        return True

    def query(self, text: str, candidates: list[dict], top_k: int, query_id: str = "q") -> ProviderResult:
        """Ask for the candidates related to text, best first, within the deadline."""
        t0 = time.monotonic()
        deadline = t0 + self.deadline_s

        def done(related: tuple[int, ...] | None, error: str | None, scores: tuple[float, ...] | None = None,
                 calibration: object = None, opening: tuple[float, ...] | None = None) -> ProviderResult:
            return ProviderResult(related, error, (time.monotonic() - t0) * 1000.0, scores, calibration, opening)

        try:
            line = _encode({"query": {"id": query_id, "text": text}, "candidates": candidates})
        except (TypeError, ValueError, RecursionError) as e:
            return done(None, "cannot encode the query: %s" % e)
        if self._proc is None and t0 < self._retry_at:
            return done(None, "provider %s: backing off after %d quer%s past the deadline (next try in %.0f s)"
                        % (self.argv[0], self._slow, "y" if self._slow == 1 else "ies", self._retry_at - t0))
        try:
            self._ready()
            if self._fresh:
                deadline += self.startup_s  # its start is not this query's time
                self._fresh = False
            self._write(line, deadline)
            raw = self._read_line(deadline)
            if self._buf:
                raise _Failure("more output after the reply (out of step)")
            try:
                reply = json.loads(raw)
            except (ValueError, RecursionError) as e:
                raise _Failure("reply is not JSON (%s): %.120r" % (e, raw)) from None
            if isinstance(reply, dict) and "id" in reply and reply["id"] != query_id:
                raise _Failure("reply id %.60r is not the query's %.60r (out of step)" % (reply["id"], query_id))
            related, note, scores = clean_related(reply, len(candidates), top_k)
            if related is None:
                raise _Failure("%s: %.120r" % (note, raw))
        except _Failure as e:
            self._kill()
            if e.slow:
                self._slow += 1
                self._retry_at = time.monotonic() + min(BACKOFF_MAX_S, self.backoff_s * 2 ** (self._slow - 1))
            return done(None, "provider %s: %s" % (self.argv[0], e))
        except BaseException:
            self._kill()  # interrupted with a query outstanding: its reply would answer the next one
            raise
        self._slow = 0
        from eggshell.search.background import Calibration

        return done(related, note, scores, Calibration.of(reply.get("calibration")), clean_opening(reply, related))

    # -- the child ----------------------------------------------------------------

    def _ready(self) -> None:
        """Make sure a usable child is running and nothing is pending from it."""
        p = self._proc
        if p is not None:
            if p.poll() is not None:
                self._kill()  # died while idle: replace it for this call
            elif _wait(p.stdout.fileno(), selectors.EVENT_READ, 0):
                try:
                    data = os.read(p.stdout.fileno(), 4096)
                except BlockingIOError:
                    data = None
                except OSError:
                    data = b""
                if data == b"":
                    self._kill()  # closed its stdout: unusable, replace it
                elif data:
                    raise _Failure("wrote %.80r when no query was outstanding (out of step)" % data)
        if self._proc is None:
            self._spawn()

    def _spawn(self) -> None:
        try:
            p = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE if self.log is not None else None,
                env=self.env, start_new_session=True, close_fds=True, bufsize=0, preexec_fn=_die_with_parent(),
            )
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            raise _Failure("cannot start: %s" % e) from None
        os.set_blocking(p.stdin.fileno(), False)
        os.set_blocking(p.stdout.fileno(), False)
        self._proc = p
        self._buf = bytearray()
        self._fresh = True  # its first query may take STARTUP_S longer
        if p.stderr is not None:
            self._drain = threading.Thread(target=_drain, args=(p.stderr, self.log, "%s[%d]" % (os.path.basename(self.argv[0]), p.pid)),
                                           name="provider-stderr-%d" % p.pid, daemon=True)
            self._drain.start()

    def _write(self, data: bytes, deadline: float) -> None:
        p = self._proc
        assert p is not None
        fd = p.stdin.fileno()
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view):]
                continue
            except BlockingIOError:
                pass
            except BrokenPipeError:
                raise _Failure(self._gone("closed its input")) from None
            except OSError as e:
                raise _Failure("write failed: %s" % e) from None
            left = deadline - time.monotonic()
            if left <= 0 or not _wait(fd, selectors.EVENT_WRITE, left):
                raise _Failure("not reading its input after %.1fs" % self.deadline_s, slow=True)

    def _read_line(self, deadline: float) -> bytes:
        """The next line from the child's stdout, without its newline; the rest stays in _buf."""
        p = self._proc
        assert p is not None
        fd = p.stdout.fileno()
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                return line
            if len(self._buf) > MAX_REPLY_BYTES:
                raise _Failure("reply longer than %d bytes" % MAX_REPLY_BYTES)
            left = deadline - time.monotonic()
            if left <= 0 or not _wait(fd, selectors.EVENT_READ, left):
                raise _Failure("no reply within %.1fs" % self.deadline_s, slow=True)
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            except OSError as e:
                raise _Failure("read failed: %s" % e) from None
            if not chunk:
                raise _Failure(self._gone("closed its output"))
            self._buf += chunk

    def _gone(self, what: str) -> str:
        """Say how the child went, waiting a moment for its exit status."""
        p = self._proc
        try:
            status = p.wait(timeout=0.2) if p is not None else None
        except subprocess.TimeoutExpired:
            status = None
        return "exited with status %s" % status if status is not None else what

    def _kill(self) -> None:
        """SIGKILL the child's whole process group, reap it, close its pipes."""
        p, self._proc, self._buf = self._proc, None, bytearray()
        if p is None:
            return
        try:
            os.killpg(p.pid, signal.SIGKILL)  # pgid == pid: start_new_session made it a leader
        except (ProcessLookupError, PermissionError):
            pass
        try:
            p.wait(timeout=REAP_S)
        except subprocess.TimeoutExpired:
            pass  # stuck in the kernel; Popen reaps it later
        self._finish(p)

    def _finish(self, p: subprocess.Popen) -> None:
        for f in (p.stdin, p.stdout):
            try:
                f.close()
            except OSError:
                pass
        d, self._drain = self._drain, None
        if d is not None:
            d.join(timeout=REAP_S)  # EOF once the group is gone; it owns p.stderr

    def close(self) -> None:
        """Send EOF, give the child a moment to exit, then kill what is left of its group."""
        p = self._proc
        if p is None:
            return
        try:
            p.stdin.close()
        except OSError:
            pass
        try:
            p.wait(timeout=CLOSE_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        self._kill()

    def __enter__(self) -> ProviderClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _die_with_parent():
    """A preexec function making the provider get SIGTERM when the process that started it dies.

    The warm manager may be killed with SIGKILL; its provider must not outlive it. Linux
    only (elsewhere the provider still exits when its stdin closes). The libc function is
    looked up here, before fork, so the child only makes one system call.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG

    return preexec


def _drain(stream, log: Callable[[str], Any], name: str) -> None:
    """Read a child's stderr to EOF, passing the first LOG_BYTES to log a line at a time.

    It must keep reading whatever log does: a child blocked on a full stderr pipe would
    stall every later query until its deadline."""
    budget = LOG_BYTES
    pending = b""
    fd = stream.fileno()

    def emit(raw: bytes) -> None:
        nonlocal budget
        if budget <= 0:
            return
        budget -= len(raw) + 1
        msg = raw.decode("utf-8", "replace").rstrip("\r")
        try:
            log("%s: %s" % (name, msg[:LOG_LINE_CHARS]))
            if budget <= 0:
                log("%s: further stderr dropped" % name)
        except Exception:
            pass

    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            if budget <= 0:
                continue
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                emit(raw)
            if len(pending) > LOG_LINE_CHARS * 4:  # one endless line: log its start, keep draining
                emit(pending)
                pending = b""
        if pending:
            emit(pending)
    except (OSError, ValueError):
        pass
    finally:
        try:
            stream.close()
        except OSError:
            pass
