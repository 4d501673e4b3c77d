"""How a prior outcome stands now: the one fact a handoff and a denial both depend on.

Recorded work is evidence, not truth. Before a prior outcome may stand in for a call (a
PreToolUse denial), two things must hold *now*, not when it was recorded:

- **inputs**: what the call read is unchanged since it ran (freshness: the recorded
  fingerprints of the files and directories it named, checked again just now);
- **origin**: it was recorded by this user on this machine (a store whose authority was
  created here, or one the user trusts), not carried in by a cloned repository.

Everything else about a prior outcome is advice, and the handoff says which it is. The
reuse engine decides what is *relevant*; a Standing decides what may be *relied on*. Each
concern fills its own fields (freshness: `recorded`, `commit`, `inputs`, `changed`;
trust: `origin`) and `join` combines them, so neither knows of the other and the renderer
(reuse/render.py) reads only this record.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

VERIFIED = "verified"  # every recorded input was checked just now and is unchanged
CHANGED = "changed"  # at least one recorded input differs now (`changed` names them)
UNKNOWN = "unknown"  # no fingerprint (an older or imported record, an input outside the project, over the budget)


@dataclass(frozen=True, slots=True)
class Standing:
    recorded: str | None = None  # when the call ran (ISO 8601 UTC), if known
    commit: str | None = None  # the repository HEAD it ran at (full hex), if known
    inputs: str = UNKNOWN  # VERIFIED | CHANGED | UNKNOWN
    changed: tuple[str, ...] = ()  # project-relative paths found changed (CHANGED only)
    origin: str | None = None  # None: this user's own store; else a label naming the store it came from

    @property
    def may_complete(self) -> bool:
        """It may stand in for running the call: verified unchanged, and the user's own."""
        return self.inputs == VERIFIED and self.origin is None


Judge = Callable[[object, object], Standing]  # (owner edge, outcome) -> its Standing now

NOT_CHECKED = Standing()


def join(*parts: Standing) -> Standing:
    """One Standing from the concerns' partial ones: each field from the first part that set it."""
    out = NOT_CHECKED
    for p in parts:
        out = replace(out, **{f: getattr(p, f) for f in ("recorded", "commit", "changed", "origin") if getattr(out, f) in (None, ())
                              and getattr(p, f) not in (None, ())},
                      **({"inputs": p.inputs} if out.inputs == UNKNOWN else {}))
    return out


def judges(*fns: Judge) -> Judge:
    """A Judge asking each concern in turn (freshness, trust) and joining their answers."""
    return lambda owner, outcome: join(*(f(owner, outcome) for f in fns))
