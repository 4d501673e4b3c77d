"""What a host's transcript parser hands `egg import`: turns rebuilt as plain turn records.

A host keeps its own record of every chat (Codex: rollout files, Claude Code: session
files). Reading one is host knowledge, like a hook payload, so each parser lives beside its
host (transcripts_codex.py, transcripts_claude.py) and knows nothing of memory: it turns the
lines of one file into turn records of graph/turns.py's shape, with each tool call named,
given and answered exactly as that host's PostToolUse hook would have sent it, and the
session and turn ids its hooks use. Everything after (caps, redaction, the store) is the
importer's (cli/importer.py), which runs them through the same steps as live capture.

Parsers are pure: they read the lines they are given and open nothing, so a test can feed
them any bytes. A line that is not a JSON object is counted (`bad_lines`), never fatal.
"""

from __future__ import annotations

import ujson

from dataclasses import dataclass

BAD_SHOWN = 5


@dataclass(frozen=True, slots=True)
class Found:
    """One turn rebuilt from a transcript.

    `record` is a turn record ({"session","turn","cwd","prompt","tools","answer"}; outputs
    as the host's hook sent them, not yet capped or redacted); `time` is when its prompt was
    sent (ISO 8601, UTC, as the host wrote it); `open` says the transcript ends inside it (a
    chat still running, or a file cut short), so its answer is not known yet."""

    record: dict
    time: str
    open: bool = False


@dataclass(frozen=True, slots=True)
class Transcript:
    """What one file held: its chat, its turns, and what was left out and why.

    `problem` is set (and no turn is) when the file is not this host's transcript at all. `no_result` counts calls the file shows no result for (interrupted, still running,
    or answered by nothing the hook would have reported); `orphans` results whose call is not
    in the file; `sidechain` the lines of a subagent's side conversation that were skipped."""

    path: str
    session: str | None = None
    cwd: str | None = None
    turns: tuple[Found, ...] = ()
    bad_lines: int = 0
    no_result: int = 0
    orphans: int = 0
    sidechain: int = 0
    problem: str | None = None
    promptless: int = 0  # turns with no user request (started by the agent itself): left out
    bad_at: tuple[int, ...] = ()  # the first BAD_SHOWN bad lines' numbers (from 1), to name them


def text_of(content: object) -> str:
    """The text parts of a message's content (a string, or a list of blocks), joined by newlines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, dict) and isinstance(block.get("text"), str) and block.get("type") in ("text", "input_text", "output_text", "Text"):
            parts.append(block["text"])
    return "\n".join(parts)


class Records:
    """The JSON objects of a transcript's lines, in order; a line that is not one (torn, not JSON)
    is skipped and counted, never a crash, and the first BAD_SHOWN are named by number."""

    def __init__(self, lines):
        self.lines = lines
        self.bad = 0
        self.bad_at: list[int] = []

    def __iter__(self):
        for n, raw in enumerate(self.lines, 1):
            if not raw.strip():
                continue
            try:
                d = ujson.loads(raw.decode("utf-8", "replace"))
            except (ValueError, OverflowError):
                d = None
            if not isinstance(d, dict):
                self.bad += 1
                if len(self.bad_at) < BAD_SHOWN:
                    self.bad_at.append(n)
                continue
            yield d
