"""What one chat has already been given, so the same evidence is not sent twice.

Keys name an owner and a projection of its outcome, never the current wording, so a
reworded request does not resend what the chat already holds:

    g:<owner>:<projection>   this evidence was transported into the chat's context
    d:<owner>:<projection>   this covered projection already stopped one tool call

A chat's own tool calls are in its native history already (`visible` in render.py
decides that from the owner's session), so they need no key. Compaction drops the
context, so it clears the keys. The file keeps at most MAX_KEYS (oldest dropped): the
reference's list grew without bound and was scanned linearly on every check.

A state file that cannot be read is treated as empty and rewritten: losing delivery
keys only means evidence may be sent again, never that work is lost or a hook blocks.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

from eggshell.core.identity import content_hex
from eggshell.core.values import Apply, Value

MAX_KEYS = 4096


def g_key(owner: Apply, projection: Value) -> str:
    return "g:%s:%s" % (content_hex(owner), content_hex(projection))


def d_key(owner: Apply, projection: Value) -> str:
    return "d:%s:%s" % (content_hex(owner), content_hex(projection))


def c_key(g: str) -> str:
    """The chat was told this evidence (a g-key) is out of date: its inputs changed. Told once, so
    later prompts are not filled with the same notice; its output was never delivered."""
    return "c" + g[1:]


@dataclass(frozen=True, slots=True)
class ChatState:
    delivered: frozenset[str] = frozenset()
    epoch: int = 0  # bumped at each compaction
    after_compaction: bool = False  # the chat's own earlier output is no longer in context


class Deliveries:
    """One chat's delivery state under `<data root>/state/chats/`, updated under a lock."""

    def __init__(self, state_dir: str, session: str, log=None):
        self.dir = os.path.join(state_dir, "chats")
        name = hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        self.path = os.path.join(self.dir, name + ".json")
        self.log = log or (lambda m: None)

    def load(self) -> ChatState:
        try:
            with open(self.path, encoding="utf-8") as f:
                d = json.load(f)
            keys = d.get("delivered", [])
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise ValueError("'delivered' is not a list of strings")
            return ChatState(frozenset(keys), int(d.get("epoch", 0)), bool(d.get("after_compaction", False)))
        except FileNotFoundError:
            return ChatState()
        except (OSError, ValueError, TypeError) as e:
            self.log("%s: unreadable chat state (%s); starting it afresh" % (self.path, e))
            return ChatState()

    def _update(self, change) -> ChatState:
        import portalocker

        from eggshell.paths import private_dir

        private_dir(self.dir)
        # Non-blocking attempts, retried for up to 2 s: a hook never waits longer than that.
        with portalocker.Lock(self.path + ".lock", "a", timeout=2, check_interval=0.01, flags=portalocker.LOCK_EX | portalocker.LOCK_NB):
            old = self._ordered()
            state = change(old)
            tmp = "%s.%d.tmp" % (self.path, os.getpid())
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(state, f)
            os.replace(tmp, self.path)
        return ChatState(frozenset(state["delivered"]), state["epoch"], state["after_compaction"])

    def _ordered(self) -> dict:
        s = self.load()
        try:
            with open(self.path, encoding="utf-8") as f:
                keys = [k for k in json.load(f).get("delivered", []) if isinstance(k, str)]
        except (OSError, ValueError, AttributeError):
            keys = sorted(s.delivered)
        return {"delivered": keys, "epoch": s.epoch, "after_compaction": s.after_compaction}

    def add(self, keys) -> ChatState:
        """Record keys once the hook's output carrying them was written."""
        new = list(dict.fromkeys(keys))

        def change(d: dict) -> dict:
            have = dict.fromkeys(d["delivered"])
            for k in new:
                have.pop(k, None)
                have[k] = None
            d["delivered"] = list(have)[-MAX_KEYS:]
            return d

        return self._update(change) if new else self.load()

    def compacted(self) -> ChatState:
        """The host compacted the chat: nothing delivered is in context any more."""

        def change(d: dict) -> dict:
            return {"delivered": [], "epoch": d["epoch"] + 1, "after_compaction": True}

        return self._update(change)
