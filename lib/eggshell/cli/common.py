"""What every `egg` subcommand shares: its name, its one error type, how it speaks."""

from __future__ import annotations

from eggshell.errors import EggshellError

PROG = "egg"


class CliError(EggshellError):
    """A user-facing failure; exit status 2 unless `status` says otherwise."""

    def __init__(self, msg: str, status: int = 2):
        super().__init__(msg)
        self.status = status


def say(msg: str = "") -> None:
    print(msg, flush=True)


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 turn`, `2 turns`: every number the CLI prints with a noun goes through here, so none reads `1 turns`."""
    return "%d %s" % (n, noun if n == 1 else plural or noun + "s")
