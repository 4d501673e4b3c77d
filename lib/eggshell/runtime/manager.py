"""egg-manager: one warm process per data root that answers hooks and drains the save queue.

A hook that loads 10,000 stored turns and the embedding model pays seconds per event;
this process pays that once. It holds Resources (warm.py: stores that read only what was
appended, reuse workspaces that grow by each commit, the model) and serves hooks over a
Unix socket in `<data root>/run/` (0700 directory, 0600 socket: only the owner can
connect). It is started by the first hook that finds none (client.spawn), is the only
one per data root (an exclusive lock held for its life), exits after an idle period, and
starts no child process of its own except a configured provider program, which dies
with it (PR_SET_PDEATHSIG), so a kill -9 leaves nothing behind.

Hooks journal before they ask (turnflow.record), so this process losing a request, or
dying, loses no work: the journal is the save queue, and the next manager drains it. Work on
stores, workspaces and the model runs on one long-lived main worker thread (they are not
thread-safe, and a provider's death signal is tied to the thread that started it), answers
before background work (saving, refreshing indexes, embedding), which runs at low CPU
priority (Background) while the main worker waits for it. A tool event (journal-and-acknowledge: the
hook has journaled it already) is answered on a second thread, the tool worker, from the
reuse workspaces as the main worker last grew them (warm.Grown), so it never waits behind a
search, a save or an embedding: the two take turns on one lock (StateLock), which the main
worker lets go inside its long phases that only read the stores (a search's rebuild and
ranking, embedding). Connection threads only move bytes. Delivery effects run only after the
hook acknowledges that it wrote the reply.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import signal
import socket
import sys
import threading
import time

from eggshell import __version__
from eggshell.runtime.client import (HELLO, LOCK, LOG, REFUSED, UNRESPONSIVE, Connection, not_a_socket, peer, run_dir, socket_path,
                                     source_stamp, unsafe_dir)
from eggshell.paths import Paths, UnsafePath, check_data_root, foreign_link, from_env, private_dir

PROG = "egg-manager"
IDLE_S = 300.0  # exit after this long without a request (EGGSHELL_MANAGER_IDLE overrides)
SETTLE_EVERY_S = 3.0  # an open turn's new observations reach the store at most this often
ACK_WAIT_S = 3.0
SETTLE_WAIT_S = 30.0  # the longest an `egg` command may have the save queue drained for it
ANSWER, BACKGROUND = 0, 1  # the main worker's queue: what a hook waits for first, then saving and embedding
REFRESH_EVERY_S = 15.0  # after a turn is saved, search indexes are rebuilt ahead of the next prompt at most this often


MAIN_NICE = 5  # the main worker's CPU priority, below the hooks' (see Manager.worker)
SLOW_JOB_S = 2.0  # a job this long on a worker is logged (hooks behind it waited as long)
TRIM_AFTER_S = 1.0  # after a job this long (a store read, an index built), the heap it freed goes back to the system


def trim_heap() -> bool:
    """Give the pages glibc holds free back to the system (malloc_trim); whether it could.

    Reading a store parses every line into short-lived objects between the long-lived graph;
    what they leave is free to this process but counted in its resident memory until trimmed
    (at 10,000 turns, 338 MB after a store read and 273 MB after a trim). A few ms.
    """
    import ctypes

    try:
        return bool(ctypes.CDLL(None).malloc_trim(0))
    except (OSError, AttributeError):  # not glibc
        return False


class Background:
    """One thread at a lower CPU priority (nice +10) that runs what the main worker hands it and
    waits for: saving, index refreshes and embedding yield the cores to the hooks and to the
    answers (the main worker waits meanwhile, so nothing runs beside it that would not anyway)."""

    NICE = 10

    def __init__(self):
        self._jobs: "queue.Queue" = queue.Queue()
        self._thread = threading.Thread(target=self._serve, name="background", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.NICE)  # Linux: this thread only
        except (OSError, AttributeError):
            pass
        while True:
            fn, args, box, done = self._jobs.get()
            try:
                box["result"] = fn(*args)
            except BaseException as e:  # handed back to the caller
                box["error"] = e
            finally:
                done.set()

    def run(self, fn, *args):
        if threading.current_thread() is self._thread:
            return fn(*args)  # already here
        box: dict = {}
        done = threading.Event()
        self._jobs.put((fn, args, box, done))
        done.wait()
        if "error" in box:
            raise box["error"]
        return box.get("result")


class StateLock:
    """Which thread may use the manager's Resources now: one at a time, the tool worker first.

    The main worker holds it for each job and lets go (`released`) inside long phases that
    read only what the tool worker never changes; the tool worker holds it for each answer
    (tens of milliseconds), and a waiting tool answer goes before the main worker takes it again.
    """

    def __init__(self):
        self._cv = threading.Condition()
        self._owner: int | None = None
        self._urgent = 0

    @contextlib.contextmanager
    def held(self, urgent: bool = False):
        self._acquire(urgent)
        try:
            yield
        finally:
            self._release()

    @contextlib.contextmanager
    def released(self):
        """Let the tool worker in meanwhile; nothing to let go on a thread that does not hold it."""
        if self._owner != threading.get_ident():
            yield
            return
        self._release()
        try:
            yield
        finally:
            self._acquire(False)

    def _acquire(self, urgent: bool) -> None:
        with self._cv:
            self._urgent += urgent
            try:
                while self._owner is not None or (not urgent and self._urgent):
                    self._cv.wait()
            finally:
                self._urgent -= urgent
            self._owner = threading.get_ident()

    def _release(self) -> None:
        with self._cv:
            self._owner = None
            self._cv.notify_all()


def rss_kb() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Manager:
    def __init__(self, paths: Paths, idle_s: float = IDLE_S):
        from eggshell.runtime.journal import Journal
        from eggshell.runtime.warm import Grown, Resources

        self.paths = paths
        self.idle_s = idle_s
        self.jobs: "queue.PriorityQueue" = queue.PriorityQueue()  # (rank, order, job): the main worker's
        self.tool_jobs: "queue.Queue" = queue.Queue()  # the tool worker's
        self._order = itertools.count()
        self.state = StateLock()
        self.background = Background()
        self.res = Resources(paths.data_root, paths.bin_dir, warm=True, log=self.log, note=self.note, unlocked=self.state.released,
                             background=self.background.run)
        self.grown = Grown(self.res, want=self.build_workspace)
        self.journal = Journal(paths.journal_dir)
        self.started = time.time()
        self.last = time.monotonic()
        self.busy = 0
        self._count = threading.Lock()
        self.requests = 0
        self.skipped = 0  # jobs whose hook had stopped waiting before they began
        self.stamp = source_stamp()
        self.retire = False
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self._seen: dict[str, tuple] = {}
        self._said: dict[str, float] = {}
        self._refreshed = -REFRESH_EVERY_S

    def log(self, msg: str) -> None:
        from eggshell.log import log_failure

        log_failure(self.paths, "manager", RuntimeError(msg))

    @staticmethod
    def note(msg: str) -> None:
        """What is worth knowing but no failure (a slow job, a rebuild): the manager's own log,
        run/manager.log (its stderr), not hook.log, which counts what went wrong."""
        print("%s %s" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), msg), file=sys.stderr, flush=True)

    def log_once(self, key: str, msg: str, every_s: float = 300.0) -> None:
        """Log what may recur on every pass (a store lock held elsewhere, connections from
        another uid) once per `every_s` per key, not thousands of times a day."""
        now = time.monotonic()
        if now - self._said.get(key, -every_s) >= every_s:
            self._said[key] = now
            self.log(msg)

    # -- the save queue ----------------------------------------------------------------

    def settle(self, force: bool = False) -> None:
        """Commit what the journal holds: sealed turns whole, open ones as observed so far.

        A file is looked at again when it changed (an open turn at most every
        SETTLE_EVERY_S), or a minute after the last look (a read-only turn may expire);
        `force` looks at every file now (at exit).
        """
        from eggshell.runtime.commits import settle_all
        from eggshell.runtime.turnflow import resolver

        now = time.monotonic()
        marks: dict[str, tuple] = {}

        def due(path: str) -> bool:
            self.res.grow()  # what the last file committed, for the tool worker (warm.Grown)
            with self.state.released():
                pass  # between two files' commits: a waiting tool answer goes first
            try:
                st = os.stat(path)
            except OSError:
                return False
            mark = marks[path] = (st.st_size, st.st_mtime_ns, self.journal.is_current(path))
            seen = self._seen.get(path)
            if not force and seen is not None and seen[0] == mark and now - seen[1] < 60.0:
                return False
            if not force and seen is not None and now - seen[1] < SETTLE_EVERY_S and not _sealed_tail(path):
                return False
            return True

        # A store locked elsewhere fails at once (warm.WARM_LOCK_S) and is tried again next pass: said once, not every 3 s.
        done = settle_all(self.journal, self.res.store, resolver(self.paths), lambda m: self.log_once(m, m), only=due)
        for d in done:  # only what settled counts as seen: a failed save is tried again on the next pass
            if d.removed:
                self._seen.pop(d.path, None)
            else:
                self._seen[d.path] = (marks[d.path], now)
            self.res.index(list(d.index))  # embedded soon, a few windows at a time (backfiller)
        self.res.grow()  # what the tool worker answers from: every commit, and what other processes appended
        # A turn ended: index it now, before the next prompt asks. With one chat that prompt
        # comes seconds later and finds the indexes current; under many chats at once a turn
        # ends every second, and a rebuild at each would only burn the cores the hooks need,
        # so then (other requests in flight) at most every REFRESH_EVERY_S.
        quiet = self.busy == 0 and self.jobs.empty()
        if any(d.removed and d.committed for d in done) and (force or quiet or time.monotonic() - self._refreshed >= REFRESH_EVERY_S):
            self.res.refresh()
            self._refreshed = time.monotonic()

    def build_workspace(self, read: tuple[str, ...]) -> None:
        """Queue the reuse workspace of `read` on the main worker, not waiting (warm.Grown asks)."""
        def build() -> None:
            self.res.workspace(read)

        self.jobs.put((BACKGROUND, next(self._order), (build, None, {}, threading.Event())))

    def settler(self) -> None:
        while not self.stopping.is_set():
            self.wake.wait(SETTLE_EVERY_S)
            self.wake.clear()
            self.call(self.settle, None)

    def backfiller(self) -> None:
        """When the main worker has nothing queued, embed saved turns (just saved ones first) that
        have no vectors yet, a few windows at a time, and bring the stores' search indexes up to
        date a step at a time: a prompt waits for one step at most, and the tool worker not at all
        (the model runs outside the lock)."""
        rest = 0.5
        while not self.stopping.wait(rest):
            if not self.jobs.empty():
                rest = 0.1
                continue
            n = self.call(self.res.backfill, time.monotonic() + 60.0)
            # and keep each store's on-disk search index current, a step at a time: what a cold
            # hook ranks from once this manager is gone (search/turnindex.py)
            m = self.call(self.res.index_step, time.monotonic() + 60.0) if self.jobs.empty() else 0
            rest = 0.05 if (n or m) else 2.0  # nothing left: look again later

    # -- the worker ------------------------------------------------------------------------

    def call(self, fn, deadline: float | None, rank: int = BACKGROUND, tool: bool = False):
        """Run `fn` on the main worker (answers before background work; FIFO within a rank), or
        on the tool worker; its result, or None if the deadline passes first.

        A job whose deadline passed while it waited is skipped: its hook has already
        answered without memory.
        """
        box: dict = {}
        done = threading.Event()
        job = (fn, deadline, box, done)
        if tool:
            self.tool_jobs.put(job)
        else:
            self.jobs.put((rank, next(self._order), job))
        if deadline is None:
            done.wait()
        elif not done.wait(max(0.0, deadline - time.monotonic())):
            return None
        return box.get("result")

    def worker(self) -> None:
        # Prompt searches run here, and at 10,000 turns under eight chats a search with the
        # index refresh it needs takes seconds of CPU. The hooks the host is waiting on (short
        # processes that journal, then ask the tool worker) must not queue behind it for a
        # core: this thread yields to them (nice +5; the tool worker keeps the process's own).
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), MAIN_NICE)
        except (OSError, AttributeError):
            pass
        while True:
            rank, _, job = self.jobs.get()
            if job is None:
                return
            if rank == BACKGROUND:
                self.background.run(self._run, job, False)  # at low CPU priority, this thread waiting
            else:
                self._run(job, urgent=False)

    def tool_worker(self) -> None:
        while True:
            job = self.tool_jobs.get()
            if job is None:
                return
            self._run(job, urgent=True)

    def _run(self, job: tuple, urgent: bool) -> None:
        fn, deadline, box, done = job
        try:
            if deadline is None or time.monotonic() < deadline:
                started = time.monotonic()
                with self.state.held(urgent):
                    box["result"] = fn()
                took = time.monotonic() - started
                if took >= TRIM_AFTER_S:
                    trim_heap()
                if took >= SLOW_JOB_S:  # every hook queued behind it waited as long: say so in the log
                    self.note("slow job: %s took %.1f s on the %s worker" % (getattr(fn, "__qualname__", "job"), took,
                                                                           "tool" if urgent else "main"))
            else:
                self.skipped += 1  # its hook answered without it
        except Exception as e:  # one failed job never stops a worker
            self.log("%s: %s: %s" % (getattr(fn, "__name__", "job"), type(e).__name__, e))
        finally:
            done.set()

    # -- requests ------------------------------------------------------------------------

    def serve_one(self, conn: Connection) -> None:
        try:
            req = conn.receive(time.monotonic() + 5.0)
            if req is None:
                return
            op = req.get("op")
            if op == "ping":
                conn.send(self.status(), time.monotonic() + 1.0)
            elif op == "nudge":
                self.wake.set()
            elif op == "settle":  # `egg find` and friends: what ended before they ran is in the store first
                budget = req.get("budget")
                budget = budget if isinstance(budget, (int, float)) and not isinstance(budget, bool) else 10.0
                deadline = time.monotonic() + min(max(budget, 0.0), SETTLE_WAIT_S)
                done = self.call(lambda: self.settle() or True, deadline, rank=ANSWER)
                conn.send({"settled": bool(done), "queued_turns": len(self.journal.files())}, time.monotonic() + 1.0)
            elif op == "counts":  # `egg status`: what a loaded store holds and how much of it is embedded
                paths = [p for p in req.get("stores") or [] if isinstance(p, str)][:64]
                got = self.call(lambda: {p: self.res.counts(p) for p in paths}, time.monotonic() + 5.0, rank=ANSWER)
                conn.send({"counts": got or {}}, time.monotonic() + 1.0)
            elif op == "stop":
                conn.send({"ok": True}, time.monotonic() + 1.0)
                self.stopping.set()
            elif op == "answer":
                self.answer(conn, req)
        finally:
            conn.close()
            with self._count:
                self.busy -= 1
            self.last = time.monotonic()

    def answer(self, conn: Connection, req: dict) -> None:
        from eggshell.log import log_failure
        from eggshell.runtime.hookflow import run_effects
        from eggshell.runtime.turnflow import TOOL_EVENTS, Step, answer
        from eggshell.runtime.warm import NotGrown

        budget = req.get("budget")
        deadline = time.monotonic() + max(0.0, float(10.0 if budget is None else budget))
        effects: list = []
        try:
            st = Step.from_json(req["step"])
            payload = req["payload"]
        except (KeyError, TypeError, AttributeError) as e:
            log_failure(self.paths, "?", e)
            return

        def job(res):
            try:
                return answer(payload, st, self.paths, res, effects, req.get("cap"))
            except NotGrown:
                effects.clear()
                return None  # no workspace for these stores yet: the main worker builds it
            except Exception as e:
                log_failure(self.paths, st.event, e)
                effects.clear()
                return {}

        reply = self.call(lambda: job(self.grown), deadline, tool=True) if st.event in TOOL_EVENTS else None
        if reply is None and time.monotonic() < deadline:
            reply = self.call(lambda: job(self.res), deadline, rank=ANSWER)
        if reply is None:
            return  # the hook has given up by now: it answered without memory
        if not conn.send({"reply": reply}, deadline + 0.5):
            return
        if effects:
            ack = conn.receive(time.monotonic() + ACK_WAIT_S)
            if ack is not None and ack.get("op") == "ack":
                run_effects(effects, self.paths)  # delivered: the hook wrote it to the host
        if st.event in ("UserPromptSubmit", "Stop", "SessionEnd", "Interrupt"):
            self.wake.set()

    def status(self) -> dict:
        return {"pid": os.getpid(), "version": __version__, "uptime_s": round(time.time() - self.started, 1),
                "idle_s": round(time.monotonic() - self.last, 1), "rss_kb": rss_kb(), "requests": self.requests,
                "queued_turns": len(self.journal.files()), "skipped": self.skipped, "data_root": self.paths.data_root}

    def admit(self, s: socket.socket) -> bool:
        """Say hello to a client of this user, on the accept thread, before reading a byte;
        drop any other. The hello tells the hook at once that this process runs, whatever
        the worker is doing (client.reach)."""
        try:
            pid, uid = peer(s)
        except (OSError, AttributeError):
            pid, uid = -1, -1
        if uid != os.geteuid():
            s.close()
            self.log_once("uid %d" % uid, "dropped a connection from pid %d, uid %d (this manager serves uid %d only); "
                          "nothing was read or sent" % (pid, uid, os.geteuid()))
            return False
        self.responsive()
        try:
            s.settimeout(0.05)  # a fresh socket's buffer takes these bytes at once
            s.sendall(HELLO)
        except OSError:
            pass  # a hook that sent a nudge and went: what it sent is still there to read
        return True

    def responsive(self) -> None:
        """This process runs: drop a hook's note that it did not answer (client.UNRESPONSIVE)."""
        try:
            os.unlink(os.path.join(run_dir(self.paths.data_root), UNRESPONSIVE))
        except OSError:
            pass

    # -- the life of the process ------------------------------------------------------

    def run(self, listener: socket.socket) -> None:
        worker = threading.Thread(target=self.worker, name="worker", daemon=True)
        worker.start()
        threading.Thread(target=self.tool_worker, name="tool worker", daemon=True).start()
        threading.Thread(target=self.settler, name="settler", daemon=True).start()
        threading.Thread(target=self.backfiller, name="backfiller", daemon=True).start()
        self.wake.set()  # drain what earlier hooks queued while no manager ran
        listener.settimeout(1.0)
        while not self.stopping.is_set():
            try:
                s, _ = listener.accept()
            except socket.timeout:
                self.responsive()
                if self.busy == 0 and (time.monotonic() - self.last > self.idle_s or self.retire):
                    break
                if source_stamp() != self.stamp:
                    self.retire = True  # reinstalled: let the next hook start the new code
                continue
            except OSError:
                break
            if not self.admit(s):
                continue
            with self._count:
                self.busy += 1
            self.requests += 1
            self.last = time.monotonic()
            threading.Thread(target=self.serve_one, args=(Connection(s),), daemon=True).start()
        self.stopping.set()
        self.call(lambda: self.settle(force=True), time.monotonic() + 30.0)  # leave nothing behind this process could save
        if not self.retire:  # new code would not read the old snapshot anyway
            self.call(self.res.refresh, time.monotonic() + 30.0)
            self.call(self.res.save_snapshots, time.monotonic() + 60.0)  # the next cold hook starts from here
        self.call(self.res.close, time.monotonic() + 5.0)
        self.jobs.put((BACKGROUND + 1, next(self._order), None))
        self.tool_jobs.put(None)


def _sealed_tail(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
            return b'"event":"stop"' in f.read()
    except OSError:
        return False


def _private(d: str) -> str | None:
    """Make `d` (and missing parents) 0700 unless another user's link is on the way; why it is
    not private, or None. An existing one is never chmodded (paths.private_dir): refused instead."""
    why = foreign_link(d)
    if why is not None:
        return why
    try:
        private_dir(d)
    except OSError as e:
        return "%s cannot be made (%s)" % (d, e.strerror)
    return unsafe_dir(d)


def refuse(run: str, why: str) -> int:
    """Exit without serving, and say why where hooks and `egg doctor` look (run/REFUSED): no hook
    starts another manager for client.REFUSED_S, so a manager that cannot serve never crash-loops."""
    print("%s: not serving: %s" % (PROG, why), file=sys.stderr)
    if unsafe_dir(run) is None:
        try:
            fd = os.open(os.path.join(run, REFUSED), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, why.encode("utf-8", "replace") + b"\n")
            finally:
                os.close(fd)
        except OSError:
            pass
    return 1


def listen(run: str, path: str) -> socket.socket | str:
    """A listening socket at `path`, bound by this process in a directory only this user can
    enter (made, or verified without following symlinks); or why not."""
    sock_dir = os.path.dirname(path)
    if sock_dir != run:  # the short fallback directory (a long data root): it must be ours alone
        why = _private(sock_dir)
        if why is not None:
            return "%s; not listening there (remove it: a manager makes it anew, 0700)" % why
    why = not_a_socket(path)
    if why is not None:
        return why
    try:
        os.unlink(path)  # left by a manager that was killed
    except FileNotFoundError:
        pass
    except OSError as e:
        return "cannot remove the old socket %s (%s)" % (path, e.strerror)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)  # under the umask above: 0600 from the start
        os.chmod(path, 0o600)
        listener.listen(64)
    except OSError as e:
        listener.close()
        return "cannot listen at %s (%s)" % (path, e.strerror)
    return listener


def serve(paths: Paths, idle_s: float) -> int:
    """Run until idle; 0 also when another manager already holds the lock, 1 when it may not serve."""
    import portalocker

    os.umask(0o077)  # everything this process writes (stores, journal, state, vectors) is the owner's alone
    d = run_dir(paths.data_root)
    why = _private(d)
    if why is not None:
        return refuse(d, why + "; fix it (chmod 700, or remove it: a manager makes it anew)")
    lock = open(os.path.join(d, LOCK), "a")
    try:
        portalocker.lock(lock, portalocker.LOCK_EX | portalocker.LOCK_NB)
    except portalocker.LockException:
        return 0  # one is running: it serves this data root
    path = socket_path(paths.data_root)
    listener = listen(d, path)
    if isinstance(listener, str):
        lock.close()
        return refuse(d, listener)
    try:
        os.unlink(os.path.join(d, REFUSED))  # serving: an earlier refusal no longer holds
    except FileNotFoundError:
        pass
    ino = os.stat(path).st_ino
    m = Manager(paths, idle_s)
    signal.signal(signal.SIGTERM, lambda *a: m.stopping.set())
    signal.signal(signal.SIGINT, lambda *a: m.stopping.set())
    with open(os.path.join(d, "manager.pid"), "w") as f:
        f.write("%d\n" % os.getpid())
    try:
        m.run(listener)
    finally:
        try:
            if os.stat(path).st_ino == ino:  # still ours (never remove a successor's socket)
                os.unlink(path)
        except OSError:
            pass
        listener.close()
        lock.close()
    return 0


STOP_WAIT_S = 15.0

USAGE = """usage: egg-manager serve | status | stop

The warm manager hooks talk to (one per data root, started on demand by egg-hook).
  serve    run it in the foreground until it has been idle EGGSHELL_MANAGER_IDLE
           seconds (default 300)
  status   print the running manager's status as JSON; exit 1 if none runs
  stop     ask it to save what is queued and exit; exit 1 if none runs"""


def main(argv: list[str]) -> int:
    import json

    from eggshell.runtime.client import request

    paths = from_env()
    cmd = argv[0] if argv else ""
    if cmd in ("-h", "--help"):
        print(USAGE)
        return 0
    if cmd == "serve":
        import gc

        gc.set_threshold(50_000, 20, 20)  # a large, long-lived heap: collect rarely
        idle = float(os.environ.get("EGGSHELL_MANAGER_IDLE") or IDLE_S)
        try:
            check_data_root(paths.data_root)
        except UnsafePath as e:
            print("%s: %s" % (PROG, e), file=sys.stderr)
            return 1
        _redirect_log(paths)
        return serve(paths, idle)
    if cmd in ("status", "stop"):
        # A person or a script waits here, not an agent: a manager busy saving gets its time.
        reply = request(paths.data_root, {"op": "ping" if cmd == "status" else "stop"}, timeout=STOP_WAIT_S)
        if reply is None:
            print("%s: no manager is running for %s" % (PROG, paths.data_root), file=sys.stderr)
            return 1
        print(json.dumps(reply))
        return 0
    print(USAGE, file=sys.stderr)
    return 2


def _redirect_log(paths: Paths) -> None:
    """A detached manager's own stderr (a crash before logging starts) goes to run/manager.log."""
    try:
        d = private_dir(run_dir(paths.data_root))
        if unsafe_dir(d) is not None:
            return  # serve() refuses it, and says so
        fd = os.open(os.path.join(d, LOG), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        os.dup2(fd, 2)
        os.close(fd)
    except OSError:
        pass
