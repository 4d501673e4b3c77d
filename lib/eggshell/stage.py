"""What every NDJSON stage shares: reading numbered lines, writing records, errors.

Stages are filters: one JSON object per input line, one per output line, flushed as
soon as it is complete so a stage can sit in a long-lived pipeline. Errors name the
input and line and go to stderr; stdout carries only protocol records.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from typing import IO, Any, Iterator

import ujson

from .errors import EggshellError


class InputError(EggshellError, ValueError):
    """A malformed input line; str() names the line."""


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


def warn(prog: str, msg: str) -> None:
    print("%s: %s" % (prog, msg), file=sys.stderr, flush=True)


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
