"""What the user asked of one chat: memory on or off, its profile, and what it was last given.

One chat is one host session id. Its control state lives next to delivery.py's state,
as `<state dir>/chats/<sha256(session)[:32]>.control.json`, rewritten whole (tmp file,
rename) under a lock, because `!egg` commands and hooks of the same chat run in
separate processes.

A control file that cannot be read is set aside (`.corrupt-<ns>`) and replaced by a
state with memory *off*: the lost file may have said `egg off`, and recording a chat
against the user's wish is worse than missing a turn. `egg on` turns it back on.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, replace
from typing import Callable

from eggshell.errors import EggshellError
from eggshell.config import Config, ConfigError, Selection

MAX_DROPPED = 64
REASON_LINES = 200  # lines `egg why` keeps: a prompt's retrieval, then what each tool call was given
LOCK_TIMEOUT_S = 2  # a hook never waits longer than this for another process of its chat


class ChatStateError(EggshellError, ValueError):
    """A control file whose content is not a chat state."""


class ChatBusy(EggshellError, RuntimeError):
    """Another process held the chat's lock for longer than LOCK_TIMEOUT_S."""


@dataclass(frozen=True)
class ChatControl:
    enabled: bool = True
    profile: str | None = None  # None: the config's default
    next_profile: str | None = None  # for the next turn only
    last_handoff: str = ""  # the context text last written to the host for this chat
    last_reason: str = ""  # why it was selected: lines with keys and scores
    last_turn: str | None = None
    dropped: tuple[str, ...] = ()  # turn ids the user dropped, oldest first (at most MAX_DROPPED)
    corrupt: bool = False  # the file could not be read and was set aside
    last_recorded: bool = False  # whether last_turn was recorded (had a store to write): a late tool event of it is kept aside

    def to_json(self) -> dict:
        return {"version": 1, "enabled": self.enabled, "profile": self.profile, "next_profile": self.next_profile,
                "last_handoff": self.last_handoff, "last_reason": self.last_reason, "last_turn": self.last_turn,
                "last_recorded": self.last_recorded, "dropped": list(self.dropped), "corrupt": self.corrupt}

    @staticmethod
    def from_json(d: object) -> "ChatControl":
        """The state a control file holds; ChatStateError for anything else."""
        if not isinstance(d, dict) or d.get("version") != 1:
            raise ChatStateError("not a version 1 chat state")
        out = {}
        for key, kinds in (("enabled", bool), ("profile", (str, type(None))), ("next_profile", (str, type(None))),
                           ("last_handoff", str), ("last_reason", str), ("last_turn", (str, type(None))), ("last_recorded", bool),
                           ("corrupt", bool)):
            v = d.get(key, getattr(ChatControl, key))
            if not isinstance(v, kinds):
                raise ChatStateError("%r has the wrong type (%s)" % (key, type(v).__name__))
            out[key] = v
        dropped = d.get("dropped", [])
        if not isinstance(dropped, list) or not all(isinstance(t, str) for t in dropped):
            raise ChatStateError("'dropped' is not a list of strings")
        return ChatControl(dropped=tuple(dropped[-MAX_DROPPED:]), **out)


def control_path(state_dir: str, session: str) -> str:
    name = hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return os.path.join(state_dir, "chats", name + ".control.json")


def turn_profile(ctl: ChatControl, cfg: Config) -> str:
    """The profile the chat's next turn runs under (pure: nothing is consumed)."""
    return ctl.next_profile or ctl.profile or cfg.default


class Chat:
    """One chat's control state under `<data root>/state/chats/`."""

    def __init__(self, state_dir: str, session: str, log: Callable[[str], None] | None = None, *, path: str | None = None):
        self.session = session
        self.path = path or control_path(state_dir, session)
        self.dir = os.path.dirname(self.path)
        self.log = log or (lambda m: None)

    # -- reading --------------------------------------------------------------------

    def _read(self) -> ChatControl | None:
        """The saved state, None when there is none; ChatStateError when it is unreadable."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise ChatStateError("cannot read: %s" % (e.strerror or e)) from None
        try:
            return ChatControl.from_json(json.loads(data))
        except (ValueError, UnicodeDecodeError) as e:
            raise ChatStateError(str(e)) from None

    def peek(self) -> ChatControl | None:
        """The saved state without changing anything (None: missing or unreadable)."""
        try:
            return self._read()
        except ChatStateError:
            return None

    def load(self) -> ChatControl:
        """The chat's state; an unreadable file is set aside and memory turned off."""
        try:
            ctl = self._read()
        except ChatStateError:
            try:
                return self.update(lambda c: c)  # quarantines under the lock, saves the off state
            except Exception as e:  # the lock or the disk: stay off for this call
                self.log("%s: unreadable chat state, and it could not be set aside (%s); memory is off" % (self.path, e))
                return ChatControl(enabled=False, corrupt=True)
        return ChatControl() if ctl is None else ctl

    # -- writing --------------------------------------------------------------------

    def _quarantine(self, why: str) -> ChatControl:
        dest = "%s.corrupt-%d" % (self.path, time.time_ns())
        try:
            os.replace(self.path, dest)
        except FileNotFoundError:
            pass
        self.log("%s: unreadable chat state (%s); moved to %s and memory turned off for this chat until `egg on`"
                 % (self.path, why, dest))
        return ChatControl(enabled=False, corrupt=True,
                           last_reason="memory disabled after an unreadable chat state (%s); `egg on` turns it back on" % why)

    def _write(self, ctl: ChatControl) -> None:
        tmp = "%s.%d.tmp" % (self.path, os.getpid())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(ctl.to_json(), f, ensure_ascii=False)
        os.replace(tmp, self.path)

    def update(self, fn: Callable[[ChatControl], ChatControl]) -> ChatControl:
        """Apply `fn` to the saved state and save the result, under the chat's lock."""
        import portalocker

        from eggshell.paths import private_dir

        private_dir(self.dir)
        # Non-blocking attempts, retried for up to 2 s (as delivery.py): a hook never waits longer.
        lock = portalocker.Lock(self.path + ".lock", "a", timeout=LOCK_TIMEOUT_S, check_interval=0.01,
                                flags=portalocker.LOCK_EX | portalocker.LOCK_NB)
        try:
            lock.acquire()
        except portalocker.exceptions.LockException:
            raise ChatBusy("%s.lock: another process held this chat's lock for %d s; try again" % (self.path, LOCK_TIMEOUT_S)) from None
        try:
            try:
                old = self._read()
                old = ChatControl() if old is None else old
            except ChatStateError as e:
                old = self._quarantine(str(e))
            new = fn(old)
            if len(new.dropped) > MAX_DROPPED:
                new = replace(new, dropped=new.dropped[-MAX_DROPPED:])
            self._write(new)
        finally:
            lock.release()
        return new

    # -- what hooks and controls do ---------------------------------------------------

    def _pick(self, c: ChatControl, cfg: Config) -> Selection:
        name = turn_profile(c, cfg)
        try:
            sel = cfg.selection(name)
        except ConfigError as e:
            self.log("%s: the chat's profile %r is not in the config (%s); using the default %r" % (self.path, name, e, cfg.default))
            sel = cfg.selection(None)
        if not c.enabled:
            sel = replace(sel, enabled=False, read=(), write=None)
        return sel

    def begin_turn(self, cfg: Config, turn: str) -> Selection:
        """The selection a new turn runs under; a one-turn `next` profile is used up here."""
        picked: list[Selection] = []

        def change(c: ChatControl) -> ChatControl:
            picked.append(self._pick(c, cfg))
            return replace(c, next_profile=None, last_turn=turn, last_recorded=picked[-1].enabled and picked[-1].write is not None)

        self.update(change)
        return picked[0]

    def begin_turn_unlocked(self, cfg: Config) -> Selection:
        """The selection `begin_turn` would give, read without the lock another process holds.

        On/off and the profile are respected. A one-turn `next` profile applies to this turn but
        cannot be used up without the lock, so it stays set for the next turn too: that records
        less than asked, never more. A state that cannot be read means off, as `load` decides.
        """
        try:
            c = self._read()
        except ChatStateError:
            c = ChatControl(enabled=False, corrupt=True)
        return self._pick(ChatControl() if c is None else c, cfg)

    def delivered(self, text: str, reason: str) -> ChatControl:
        """Remember the handoff the host received; call only once the reply was written."""
        return self.update(lambda c: replace(c, last_handoff=text, last_reason=reason))

    def noted(self, line: str) -> ChatControl:
        """Add what a tool call was given to the reason, keeping the prompt's handoff (the last REASON_LINES lines)."""
        def add(c: ChatControl) -> ChatControl:
            lines = [x for x in c.last_reason.split("\n") if x] + [line]
            return replace(c, last_reason="\n".join(lines[-REASON_LINES:]))

        return self.update(add)

    def drop(self, turn: str) -> ChatControl:
        return self.update(lambda c: replace(c, dropped=tuple(t for t in c.dropped if t != turn) + (turn,)))

    def is_dropped(self, turn: str) -> bool:
        return turn in self.load().dropped

    def turn_on(self) -> ChatControl:
        """`egg on`; after a corrupt state the profile goes back to the config's default too."""
        return self.update(lambda c: replace(c, enabled=True, corrupt=False, profile=None, last_reason="") if c.corrupt
                           else replace(c, enabled=True))

    def turn_off(self) -> ChatControl:
        """`egg off`: needs neither a readable state nor a readable config."""
        return self.update(lambda c: replace(c, enabled=False, corrupt=False, next_profile=None))


def scrub(state_dir: str, mentions: Callable[[str], bool], log: Callable[[str], None] | None = None) -> int:
    """Clear the last handoff (and its reason) of every chat whose copy `mentions` forgotten content.

    `egg forget` and `egg compact --purge` call this: the copy `egg graph` prints is the
    one place a handoff's text outlives the store. A set-aside or half-written control
    file that mentions it is removed. Returns how many files changed; raises ChatBusy
    (after doing all the others) if a chat's lock stayed held, so the caller can say to
    run it again.
    """
    d = os.path.join(state_dir, "chats")
    try:
        names = sorted(os.listdir(d))
    except FileNotFoundError:
        return 0
    changed = 0
    busy: list[str] = []
    for name in names:
        p = os.path.join(d, name)
        if name.endswith(".control.json"):
            chat = Chat(state_dir, "", log, path=p)
            ctl = chat.peek()
            if ctl is None or not (mentions(ctl.last_handoff) or mentions(ctl.last_reason)):
                continue
            try:
                chat.update(lambda c: replace(c, last_handoff="", last_reason="") if mentions(c.last_handoff) or mentions(c.last_reason) else c)
            except ChatBusy as e:
                busy.append(str(e))
                continue
            changed += 1
        elif ".control.json." in name and not name.endswith(".lock"):  # .corrupt-<ns>, <pid>.tmp
            try:
                with open(p, "rb") as f:
                    text = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            try:  # a whole JSON file holds its texts escaped: look at them as they were
                d = json.loads(text)
                text += "\n".join(v for v in d.values() if isinstance(v, str)) if isinstance(d, dict) else ""
            except ValueError:
                pass
            if mentions(text):
                os.unlink(p)
                changed += 1
    if busy:
        raise ChatBusy("; ".join(busy))
    return changed
