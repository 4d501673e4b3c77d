"""What every `egg` subcommand shares: its name, its one error type, how it speaks."""

from __future__ import annotations

import sys

from eggshell.core.printable import terminal
from eggshell.errors import EggshellError

PROG = "egg"


class CliError(EggshellError):
    """A user-facing failure; exit status 2 unless `status` says otherwise."""

    def __init__(self, msg: str, status: int = 2):
        super().__init__(msg)
        self.status = status


def say(msg: str = "", err: bool = False) -> None:
    """Print one message (to stderr with `err`). Every `egg` command prints through here, and what it
    prints often quotes recorded text (a tool output, a prompt, a config's path), so control and
    direction characters are escaped on the way (core/printable.terminal): an OSC 52 sequence in
    a recorded output must not write the user's clipboard when `egg show` prints it."""
    print(terminal(str(msg)), file=sys.stderr if err else sys.stdout, flush=True)


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 turn`, `2 turns`: every number the CLI prints with a noun goes through here, so none reads `1 turns`."""
    return "%d %s" % (n, noun if n == 1 else plural or noun + "s")


SETTLE_WAIT_S = 15.0  # how long a reading command lets the manager save what the chats just finished


def caught_up(paths) -> None:
    """Have the warm manager save the turns that ended before this command ran, so `egg find`
    run just after a chat sees that chat. The manager saves a few seconds after a Stop; a
    reader that came first would show a turn without its end. Without a manager the hooks
    saved at Stop already; one that cannot answer in time gets a note, and the command goes on.
    """
    from eggshell.runtime import client
    from eggshell.runtime.journal import Journal, sealed

    journal = Journal(paths.journal_dir)
    if not any(sealed(journal.read_file(f)) is not None for f in journal.files()):
        return
    reply = client.request(paths.data_root, {"op": "settle", "budget": SETTLE_WAIT_S}, timeout=SETTLE_WAIT_S + 1.0)
    if reply is not None and not reply.get("settled"):
        say("%s: note: the manager is still saving finished turns; what it has not saved is not shown yet" % PROG, err=True)
