"""Dispatch `python -m eggshell PROG ARGS...` to the module behind each command.

The bin/ bootstraps all end here, so the program name picks the module; modules
are imported lazily so a hook does not pay for the CLI's imports (or numpy's).
"""

import importlib
import os
import sys

PROGRAMS = {
    "egg": "eggshell.cli.main",
    "egg-hook": "eggshell.stages.hook",
    "egg-index": "eggshell.stages.index",
    "egg-query": "eggshell.stages.query",
    "egg-extract": "eggshell.stages.extract",
    "egg-save": "eggshell.stages.save",
    "egg-manager": "eggshell.runtime.manager",  # started by egg-hook, not a bin/ command
    "egg-embedder": "eggshell.runtime.embedder",  # started by the manager for a backlog, not a bin/ command
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in PROGRAMS:
        print("usage: python -m eggshell {%s} [ARGS...]" % "|".join(PROGRAMS), file=sys.stderr)
        return 2
    if argv[0] == "egg-hook":
        return _hook(argv[1:])
    private_tmp(os.environ)
    module = importlib.import_module(PROGRAMS[argv[0]])
    try:
        return module.main(argv[1:])
    except BrokenPipeError:  # `egg show KEY | head`: the reader has what it wanted
        from eggshell.stages.common import reader_gone

        reader_gone(sys.stdout)
        return 0


def private_tmp(env) -> None:
    """Keep this process's temporary files (and its children's) in `<data root>/tmp`, 0700.

    Nothing Eggshell writes may land outside the prefix, the data root and the project;
    even importing portalocker probes the system temp directory with a file of its own
    (tempfile.gettempdir). A data root that does not exist yet, or is refused (another user's,
    reached through another user's link, open to others), leaves TMPDIR as it was.
    """
    from eggshell.paths import UnsafePath, check_data_root, from_env, private_dir

    root = from_env(env).data_root
    try:
        check_data_root(root)
        if not os.path.isdir(root):
            return
        d = private_dir(os.path.join(root, "tmp"))
    except UnsafePath:
        return  # nothing goes in there (the hook or command says why)
    except OSError:  # none yet: a hook outside any project must create nothing
        return
    env.setdefault("EGGSHELL_SYSTEM_TMPDIR", env.get("TMPDIR") or "/tmp")  # where the socket fallback lives (client.py)
    env["TMPDIR"] = d


def _hook(argv: list[str]) -> int:
    """egg-hook fails open even if Eggshell itself cannot be imported.

    Once its reply is written and its effects are done, it ends at once (os._exit): the
    host waits for the process to end, and the interpreter's teardown would first free every
    object a cold answer loaded, 2 s of a 12 s cold prompt at 10,000 stored turns. Everything
    it wrote is already on disk (the journal, the log and the ledger are unbuffered appends).
    """
    try:
        private_tmp(os.environ)
        from eggshell.stages import hook

        rc = hook.main(argv)
    except BaseException as e:  # noqa: BLE001 - the agent must never be blocked
        sys.stdout.write("{}\n")
        print("egg-hook: failed open: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        rc = 0
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(rc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
