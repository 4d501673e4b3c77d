"""The turn journal: what a turn has shown so far, durable before anything else.

Hooks are separate short processes, so the prompt (seen at UserPromptSubmit) and each
tool result (PostToolUse) are appended to a per-turn file under the data root and
fsynced at once; Stop reads the journal back, commits the turn and removes the file.
A crash anywhere loses at most the event being written, and a torn last line is
ignored when read.

A turn `egg forget` names while it is still journaled (an open chat whose prompt held the
text, a private-profile chat) is not deleted but replaced by one FORGOTTEN mark: the host's
later events of that turn (tool results, the Stop's answer) then find it and are not
journaled, and the save queue removes the file at its seal without saving any of it.
Deleting the file instead would let the next tool result or Stop start it again.
"""

from __future__ import annotations

import errno
import os
from collections import namedtuple

import ujson

from eggshell.core.hashing import hexdigest
from eggshell.log import append_whole
from eggshell.paths import private_dir


class Journal(namedtuple("Journal", "root")):
    """The journal under `root` (<data root>/journal); a namedtuple for paths.Paths's reason."""

    __slots__ = ()

    def _session_dir(self, session: str) -> str:
        return os.path.join(self.root, hexdigest("eggshell.journal.session", session)[:32])

    def turn_path(self, session: str, turn: str) -> str:
        return os.path.join(self._session_dir(session), hexdigest("eggshell.journal.turn", turn)[:32] + ".ndjson")

    def has(self, session: str, turn: str) -> bool:
        return os.path.exists(self.turn_path(session, turn))

    def append(self, session: str, turn: str, event: dict[str, object]) -> None:
        """Append one event and fsync, whole or not at all (see `append_whole`).

        Parallel tool hooks of one turn append to one file; a write cut short (a nearly full
        disk) raises, so the hook fails that event loudly instead of reporting it recorded.
        """
        line = _line(event)
        for attempt in (1, 2):  # the save queue may remove an emptied chat directory at this moment
            private_dir(self._session_dir(session))
            try:
                fd = os.open(self.turn_path(session, turn), os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
                break
            except FileNotFoundError:
                if attempt == 2:
                    raise
        try:
            append_whole(fd, line, self.turn_path(session, turn))
        finally:
            os.close(fd)

    def set_current(self, session: str, turn: str) -> None:
        """Remember the session's open turn, for hosts whose later events lack a turn id."""
        d = private_dir(self._session_dir(session))
        tmp = os.path.join(d, "current.tmp-%d" % os.getpid())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(turn)
        os.replace(tmp, os.path.join(d, "current"))

    def current(self, session: str) -> str | None:
        try:
            with open(os.path.join(self._session_dir(session), "current"), encoding="utf-8") as f:
                return f.read() or None
        except OSError:
            return None

    def read(self, session: str, turn: str) -> list[dict[str, object]]:
        """The events of a turn, oldest first; a torn or garbled line is skipped."""
        return self.read_file(self.turn_path(session, turn))

    def files(self) -> list[str]:
        """Every journaled turn's file, oldest first: the save queue."""
        out = []
        try:
            sessions = os.scandir(self.root)
        except FileNotFoundError:
            return []
        with sessions:
            for d in sessions:
                if d.is_dir(follow_symlinks=False):
                    try:
                        out.extend(e.path for e in os.scandir(d.path) if e.name.endswith(".ndjson") and e.is_file(follow_symlinks=False))
                    except FileNotFoundError:
                        continue
        return sorted(out, key=lambda p: (_mtime(p), p))

    def read_file(self, path: str) -> list[dict[str, object]]:
        """The events in one journal file (see `read`); holes (a sparse region) are skipped unread."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except (FileNotFoundError, OSError):
            return []
        try:
            data = b"\n".join(_data_regions(fd))
        finally:
            os.close(fd)
        out = []
        for line in data.split(b"\n")[:-1]:
            if not line or b"\0" in line:
                continue
            try:
                ev = ujson.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict):
                out.append(ev)
        return out

    def is_current(self, path: str) -> bool:
        """Whether this file is its session's open turn (a later prompt makes it not)."""
        d = os.path.dirname(path)
        try:
            with open(os.path.join(d, "current"), encoding="utf-8") as f:
                turn = f.read()
        except OSError:
            return False
        return bool(turn) and os.path.basename(path) == hexdigest("eggshell.journal.turn", turn)[:32] + ".ndjson"

    def mark_forgotten(self, path: str) -> None:
        """Replace a journaled turn's file by the FORGOTTEN mark alone (atomically; see the module docstring).

        A hook appending meanwhile writes either to the old file (gone with it) or after the mark.
        """
        d = os.path.dirname(path)
        tmp = os.path.join(d, "forgotten.tmp-%d" % os.getpid())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            append_whole(fd, _line({"event": FORGOTTEN}), tmp)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def discard(self, session: str, turn: str) -> None:
        try:
            os.unlink(self.turn_path(session, turn))
        except FileNotFoundError:
            pass


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def _line(event: dict[str, object]) -> bytes:
    """The event as one UTF-8 line; lone surrogates become U+FFFD, counted in `lone_surrogates`."""
    text = ujson.dumps(event, ensure_ascii=False, escape_forward_slashes=False)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        from eggshell.graph.events import well_formed

        fixed, n = well_formed(event)
        fixed["lone_surrogates"] = n
        return (ujson.dumps(fixed, ensure_ascii=False, escape_forward_slashes=False) + "\n").encode("utf-8")


def _pread_all(fd: int, n: int, at: int) -> bytes:
    parts = []
    while n > 0:
        b = os.pread(fd, min(n, 1 << 30), at)
        if not b:
            break
        parts.append(b)
        n, at = n - len(b), at + len(b)
    return b"".join(parts)


def _data_regions(fd: int) -> list[bytes]:
    """The file's bytes outside holes: a 2 GB sparse region costs two seeks, not a 2 GB read."""
    size = os.fstat(fd).st_size
    out, pos = [], 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
            end = os.lseek(fd, start, os.SEEK_HOLE)
        except OSError as e:  # ENXIO: only a hole is left; EINVAL: no sparse support, read it all
            if e.errno == errno.ENXIO:
                break
            start, end = pos, size
        out.append(_pread_all(fd, end - start, start))
        pos = end
    return out


FORGOTTEN = "forgotten"


def forgotten(events: list[dict[str, object]]) -> bool:
    """Whether `egg forget` named this journaled turn: nothing of it may be saved or journaled again."""
    return any(e.get("event") == FORGOTTEN for e in events)


def sealed(events: list[dict[str, object]]) -> dict[str, object] | None:
    """The turn's seal (its Stop, or the mark that it was interrupted), if it has one.

    The last one counts: a Stop that arrives after a new prompt marked the turn
    interrupted still brings its final message.
    """
    return next((e for e in reversed(events) if e.get("event") == "stop"), None)


def turn_record(events: list[dict[str, object]], answer: str | None = None) -> dict[str, object] | None:
    """Assemble a turn record (turns.py's input) from journal events, or None without a prompt.

    Without an `answer`, a sealed turn's own final message is used. A tool event that cannot
    be stored (see `bad_tools`) is left out, so it never costs the rest of the turn.
    """
    if answer is None:
        seal = sealed(events)
        if seal is not None and isinstance(seal.get("answer"), str):
            answer = seal["answer"]
    prompt = next((e for e in events if e.get("event") == "prompt"), None)
    if prompt is None:
        return None
    tools = []
    seen: set[str] = set()
    for e, _ in _tool_events(events, good=True):
        if e["id"] not in seen:
            seen.add(e["id"])
            tool = {"name": e.get("name"), "id": e["id"], "input": e.get("input"), "output": e.get("output")}
            if isinstance(e.get("observed"), dict):
                tool["observed"] = e["observed"]  # what its inputs were (fingerprint.py): checked before reuse
            tools.append(tool)
    return {
        "session": prompt.get("session"),
        "turn": prompt.get("turn"),
        "cwd": prompt.get("cwd", ""),
        "prompt": prompt.get("prompt"),
        "tools": tools,
        "answer": answer,
    }


def bad_tools(events: list[dict[str, object]]) -> list[tuple[dict[str, object], str]]:
    """(event, why) for each journaled tool event no turn can store (a journal from before
    hooks checked events at record time): the save queue quarantines them."""
    return list(_tool_events(events, good=False))


def _tool_events(events: list[dict[str, object]], good: bool):
    from eggshell.graph.events import tool_problem

    for i, e in enumerate(events):
        if e.get("event") != "tool":
            continue
        if not isinstance(e.get("id"), str) or not e["id"]:
            e = dict(e, id="journal-line-%d" % i)  # stable: the journal only grows
        why = tool_problem(e)
        if (why is None) == good:
            yield (e, why)
