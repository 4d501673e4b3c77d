"""What every NDJSON stage shares: the line loop, writing records, errors, argument types.

Stages are filters: one JSON object per input line, what it answers per output line,
flushed as soon as it is complete so a stage can sit in a long-lived pipeline. A stage is
a `step(message) -> [message, ...]` over plain dicts; `loop` is the one line loop every
stage's main runs, so reading, numbering, refusing a bad line and a reader that goes away
are handled here once (as csvkit does for its filters). The hook composes the same steps
in-process. Errors name the input and line and go to stderr; stdout carries only protocol
records.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from typing import IO, Any, Callable, Iterable, Iterator

import ujson

from eggshell.errors import EggshellError
from eggshell.log import warn  # noqa: F401 - every stage's one way to stderr


class InputError(EggshellError, ValueError):
    """A malformed input line; str() names the line."""


class Refused(EggshellError, ValueError):
    """A message a step cannot answer: why (the loop adds the input and line), and whether it
    counts as a bad line (the stage's exit status) or was only ignored."""

    def __init__(self, why: str, bad: bool = True):
        super().__init__(why)
        self.bad = bad


Step = Callable[[Any], Iterable[Any]]


SHOWN_BAD_LINES = 20  # bad lines named on stderr, each; the rest are counted in one line


def loop(prog: str, step: Step, lines: IO[str], out: IO[str], name: str = "<stdin>",
         refusal: Callable[[str], Any] | None = None, note: str = "") -> int:
    """Feed each line's message to `step` and write what it answers; returns the bad lines.

    A line that is not JSON, or that `step` refuses, is named on stderr (with `note`: what
    became of it) and answered with `refusal(why)` when the stage answers every line (so a
    reader expecting one reply per request never falls out of step), else skipped.
    """
    bad = shown = hidden = 0
    for n, obj in read_ndjson(lines, name):
        if isinstance(obj, InputError):  # not JSON: it names its input and line already
            why, counts = str(obj), True
        else:
            try:
                replies = list(step(obj))  # all of it or none: a refusal never follows half an answer
            except Refused as e:
                why, counts = "%s:%d: %s" % (name, n, e), e.bad
            else:
                for r in replies:
                    write(r, out)
                continue
        if shown < SHOWN_BAD_LINES:  # a file of 10,000 bad lines should not bury the terminal
            warn(prog, why + (note if counts else ""))
            shown += 1
        else:
            hidden += 1
        if counts:
            bad += 1
            if refusal is not None:
                write(refusal(why), out)
    if hidden:
        warn(prog, "%d more bad lines not shown (%d in all)" % (hidden, shown + hidden))
    return bad


def read_ndjson(stream: IO[str], name: str = "<stdin>") -> Iterator[tuple[int, Any | InputError]]:
    """Yield (line number, decoded object or InputError) for each non-blank line."""
    for n, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            yield n, ujson.loads(line)
        except (ValueError, OverflowError) as e:
            yield n, InputError("%s:%d: not valid JSON (%s)" % (name, n, e))


def write(obj: Any, out: IO[str] | None = None) -> None:
    """One record, flushed. If the reader has gone (`| head`), the rest of the output goes
    nowhere, quietly, and the stage goes on with its work: egg-save still commits every line."""
    out = out or sys.stdout
    try:
        out.write(ujson.dumps(obj, ensure_ascii=False, escape_forward_slashes=False) + "\n")
        out.flush()
    except BrokenPipeError:
        reader_gone(out)


def reader_gone(out: IO[str]) -> None:
    """Point `out` at /dev/null: its reader has closed the pipe, so what is still buffered and
    everything written later is dropped without another error (nor Python's own at exit)."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, out.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # not a file descriptor (a test's StringIO): nothing to redirect
    finally:
        os.close(null)


def parser(prog: str, description: str, epilog: str | None = None) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog=prog, description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text) from None
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1, got %d" % n)
    return n


def fraction(text: str) -> float:
    """argparse type: a number from 0 to 1."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number" % text) from None
    if not 0.0 <= x <= 1.0:
        raise argparse.ArgumentTypeError("must be from 0 to 1, got %s" % text)
    return x


def missing_stores(prog: str, paths: list[str], done: str) -> bool:
    """Whether any store given by hand is missing (each named on stderr): Store.open reads a missing
    file as an empty store (a writer creates it), so a reader would quietly answer with nothing."""
    missing = [p for p in paths if not os.path.lexists(p)]
    for p in missing:
        warn(prog, "%s: no such store; %s (check the path: a store exists once a turn was saved to it)" % (p, done))
    return bool(missing)
