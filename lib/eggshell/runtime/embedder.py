"""The background embedder: one low-priority process per data root that embeds a backlog of stored turns.

Why (issue 30): right after `egg import` or a `git pull` of thousands of turns, the warm manager
embedded them itself, a few windows between requests, and every prompt waited behind that work
(9 s a prompt after 2,000 turns). The model costs about 0.1 s a window on one core whatever the
batch, so a 10,000-turn backlog is an hour of CPU; it must never sit on a prompt's path.

So the manager, when its background steps find stored turns with windows not embedded (and not
its own just-saved turns, which it embeds itself so a follow-up finds them at once), starts this
process: nice 19, one model thread, one per data root (a lock), resumable (what it embedded is in
the shared vector cache, segment by segment, and a new run starts from what is missing). Memory
stays that of a chunk of turns: they are read through the store's search index (search/turnindex.py)
CHUNK at a time when it serves, else from one whole read. Until a turn is embedded, prompts find it
lexically; the manager's steps notice what this process added. It writes its progress to
`run/embedder.json` (`egg status` shows the backlog, the rate and the time left) and exits when
nothing is left. Tombstones are honoured as for every embedding: a turn forgotten before or while it
is embedded leaves nothing in the cache (graph/tombstones.Gate, through Provider.index).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Callable, Iterator

from eggshell.paths import Paths, from_env, private_dir
from eggshell.runtime.client import lib_dir, run_dir

PROG = "egg-embedder"
LOCK = "embedder.lock"
STATE = "embedder.json"
CHUNK = 64  # turns read and embedded per step: what the process holds at once
NICE = 19
SPAWN_EVERY_S = 30.0  # the manager starts one at most this often (one that exits at once costs a model load)


def state_path(data_root: str) -> str:
    return os.path.join(run_dir(data_root), STATE)


def progress(data_root: str) -> dict | None:
    """What a running embedder last wrote ({"turns", "done", "windows", "rate_turns_s", ...}); None when none runs."""
    try:
        with open(state_path(data_root), encoding="utf-8") as f:
            got = json.load(f)
        os.kill(int(got["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return got if isinstance(got, dict) else None


def describe(p: dict) -> str:
    """One line for `egg status`: the backlog, the rate and the time left."""
    turns, done, rate = int(p.get("turns") or 0), int(p.get("done") or 0), float(p.get("rate_turns_s") or 0.0)
    line = "embedding in the background: %d of %d turns looked at" % (done, turns)
    if rate > 0:
        left = (turns - done) / rate
        line += ", %.1f turns/s, about %s left" % (rate, ("%d min" % round(left / 60)) if left >= 90 else ("%d s" % round(left)))
    return line + " (until then those turns are found lexically)"


def spawn(data_root: str, stores: list[str], model: str | None, model_dir: str | None, cache_dir: str | None) -> bool:
    """Start an embedder in the background (one that finds another running exits at once)."""
    import subprocess

    argv = [sys.executable, "-m", "eggshell", PROG, "run"]
    for flag, v in (("--model", model), ("--model-dir", model_dir), ("--cache-dir", cache_dir)):
        if v:
            argv += [flag, v]
    argv += ["--"] + list(stores)
    e = dict(os.environ)
    e["EGGSHELL_DATA_ROOT"] = data_root
    e["PYTHONPATH"] = lib_dir() + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    try:
        with open(os.devnull, "rb") as null_in, open(os.devnull, "wb") as null_out:
            subprocess.Popen(argv, stdin=null_in, stdout=null_out, stderr=null_out, start_new_session=True, close_fds=True, env=e, cwd="/")
        return True
    except (OSError, ValueError, subprocess.SubprocessError):
        return False


def _views(path: str, data_root: str, floor: int = 0) -> tuple[int, int | None, Iterator[list]]:
    """(how many turns, the document count read up to or None, the turns newest first CHUNK at a time):
    through its search index when it is current (memory of a chunk; only documents from `floor` on,
    those a pass before this one did not see), else from one whole read of the store."""
    import sqlite3

    from eggshell.errors import EggshellError
    from eggshell.graph.commitindex import AppendStore
    from eggshell.search.turnindex import TurnIndex

    try:
        s = AppendStore.open(path, data_root)
        ix = TurnIndex(data_root, path)
        ix.update(s)
        docs = ix.docs()
    except (EggshellError, OSError, sqlite3.Error):
        docs = None
    if docs is None:
        from eggshell.graph.records import turn_views
        from eggshell.graph.store import Store

        views = turn_views(Store.open(path).graph)[::-1] if floor == 0 else []
        return len(views), None, (views[i:i + CHUNK] for i in range(0, len(views), CHUNK))

    def chunks() -> Iterator[list]:
        nonlocal s
        try:
            for hi in range(docs, floor, -CHUNK):
                s.close()
                s = AppendStore.open(path, data_root)  # a new one: the nodes the last chunk fetched are let go
                got = [ix.view(s, d) for d in range(hi - 1, max(floor, hi - CHUNK) - 1, -1)]
                yield [v for v, _ in filter(None, got)]
        finally:
            ix.close()
            s.close()

    return (ix.turns() if floor == 0 else docs - floor), docs, chunks()


def run(paths: Paths, stores: list[str], settings, log: Callable[[str], None]) -> int:
    import portalocker

    from eggshell.search.local import Provider

    d = private_dir(run_dir(paths.data_root))
    lock = open(os.path.join(d, LOCK), "a")
    try:
        portalocker.lock(lock, portalocker.LOCK_EX | portalocker.LOCK_NB)
    except portalocker.LockException:
        return 0  # one runs: it does this data root's backlog
    try:
        os.nice(NICE)
    except OSError:
        pass
    import signal

    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))  # stopped: its progress file goes with it (finally)
    provider = Provider(settings, paths.data_root, log)
    provider.threads = 1
    started = time.monotonic()
    state = {"pid": os.getpid(), "started": time.time(), "turns": 0, "done": 0, "windows": 0, "rate_turns_s": 0.0}
    _write(paths.data_root, state)  # running: the manager starts no second one
    try:
        # Passes until a pass finds nothing new: turns saved while it ran (the rest of a long
        # import) are taken by the next pass, from where the search index stood.
        upto: dict[str, int] = {}
        while True:
            found = False
            for path in stores:
                if not os.path.exists(path) or upto.get(path, 0) < 0:
                    continue
                total, docs, chunks = _views(path, paths.data_root, upto.get(path, 0))
                upto[path] = -1 if docs is None else docs  # a whole read: one pass
                if total <= 0:
                    continue
                found = True
                state["turns"] += total
                _embed(provider, chunks, state, started, paths.data_root)
            if not found:
                break
    finally:
        try:
            os.unlink(state_path(paths.data_root))
        except OSError:
            pass
        lock.close()
    log("embedded %d windows of %d turns in %.0f s" % (state["windows"], state["done"], time.monotonic() - started))
    return 0


def _embed(provider, chunks: Iterator[list], state: dict, started: float, data_root: str) -> None:
    from eggshell.graph.records import index_items

    for chunk in chunks:
        if not chunk:
            continue
        provider.index(index_items(chunk))
        state["windows"] += provider.last_embedded
        state["done"] += len(chunk)
        took = time.monotonic() - started
        state["rate_turns_s"] = state["done"] / took if took > 0 else 0.0
        state["updated"] = time.time()
        _write(data_root, state)


def _write(data_root: str, state: dict) -> None:
    p = state_path(data_root)
    tmp = "%s.%d.tmp" % (p, os.getpid())
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(state, f)
        os.replace(tmp, p)
    except OSError:
        pass


USAGE = """usage: egg-embedder run [--model M] [--model-dir D] [--cache-dir C] -- STORE...

Embeds, at low priority, the windows of the stores' turns the vector cache lacks, then exits
(started by the warm manager when it finds a backlog; not a bin/ command)."""


def main(argv: list[str]) -> int:
    import argparse

    if not argv or argv[0] != "run":
        print(USAGE, file=sys.stderr if argv[:1] not in (["-h"], ["--help"]) else sys.stdout)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    ap = argparse.ArgumentParser(prog=PROG)
    ap.add_argument("--model")
    ap.add_argument("--model-dir")
    ap.add_argument("--cache-dir")
    ap.add_argument("stores", nargs="*")
    a = ap.parse_args(argv[1:])
    from eggshell.log import log_failure
    from eggshell.search.rank import Settings

    paths = from_env()
    kw = {k: v for k, v in (("model", a.model), ("model_dir", a.model_dir), ("cache_dir", a.cache_dir)) if v}
    settings = Settings(mode="semantic", **kw)

    def log(msg: str) -> None:
        try:
            with open(os.path.join(run_dir(paths.data_root), "manager.log"), "a", encoding="utf-8") as f:
                f.write("%s %s: %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), PROG, msg))
        except OSError:
            pass

    try:
        return run(paths, a.stores, settings, log)
    except Exception as e:  # never a traceback on a detached process's stderr: the manager's log says it
        log_failure(paths, PROG, e)
        return 1
