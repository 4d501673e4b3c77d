"""The freshness judge: does a prior outcome's recorded input still hold, checked just now?

A tool call's Occurrence carries what its inputs were when it ran (turns.OBSERVED_MARK, a
fingerprint.py fingerprint). Before a prior output may stand in for a new call, `judge`
checks those fingerprints against the project as it is now and says how the outcome
stands (standing.Standing: `recorded`, `commit`, `inputs`, `changed`). A changed input
is named; no fingerprint (an older or imported record, a call that named no file, an
input outside the project or past the budget) is unknown, and so is one from before the way to
each input (the links followed to it) was recorded: a link on it may have been retargeted since. Neither may complete a call:
only VERIFIED may (and only with the trust judge's consent: standing.judges).

A `Cache` (one per process: warm.Resources holds it) keeps content ids by (path, stat)
and the parsed git index by its stat, so a warm PreToolUse re-checks a file by one stat.
"""

from __future__ import annotations

import os
from typing import Callable

import ujson

from eggshell.reuse import fingerprint
from eggshell.core.standing import CHANGED, UNKNOWN, VERIFIED, Judge, Standing, judges
from eggshell.graph.turns import observed_text
from eggshell.core.values import Atom

assert (VERIFIED, CHANGED, UNKNOWN) == (fingerprint.VERIFIED, fingerprint.CHANGED, fingerprint.UNKNOWN)


class Cache(dict):
    """Per-process memo of the checks' file reads (see fingerprint.Probe); bounded there."""


def observed_of(edge: object) -> dict | None:
    """The fingerprint an Outcome edge's native Occurrence carries, or None (an older record)."""
    text = observed_text(edge)
    if text is None:
        return None
    try:
        fp = ujson.loads(text)
    except ValueError:
        return None
    return fp if isinstance(fp, dict) else None
    return None


def reads_only(work: object) -> bool:
    """Every clause of the Work only reads (commands.reads_only): the only calls whose inputs a
    fingerprint can name. A test run or a build reads everything (a persistent union may still
    declare one equal to another call): its outcome is never verified."""
    from eggshell.reuse.commands import reads_only as clause_reads
    from eggshell.reuse.intrinsic import patterns_of

    return isinstance(work, Atom) and all(clause_reads(p.text, p.framing)[0] for p in patterns_of(work))


def standing_of(fp: dict | None, probe: fingerprint.Probe, cwd: str | None = None, work: object = None) -> Standing:
    """How an outcome with this fingerprint (of a call of `work`, when given) stands now."""
    if fp is None:
        return Standing()
    at, head = fp.get("at"), fp.get("head")
    known = Standing(recorded=at if isinstance(at, str) else None, commit=head if isinstance(head, str) else None)
    if work is not None:
        reads = probe.cache.get(("reads", work))
        if reads is None:
            reads = probe.cache[("reads", work)] = reads_only(work)  # parsing the command costs more than the check
        if not reads:
            return known
    inputs, changed = fingerprint.check(fp, probe, cwd)
    return Standing(known.recorded, known.commit, inputs, tuple(changed))


def judge(root: str | None, cwd: str | None = None, cache: Cache | None = None, key: bytes | None = None,
          log: Callable[[str], None] = lambda m: None) -> Judge:
    """A standing.Judge for prior outcomes reused in the project at `root`, checked now.

    `cwd` is where the proposed call runs (None at prompt time: no call yet); a call
    recorded in another directory read other paths, so it is unknown. Each distinct
    outcome is checked once per judge (one handoff), against one budget of reads.
    """
    if root is None:
        return lambda owner, outcome: Standing()
    probe = fingerprint.Probe(root, key, cache)
    rel = None if cwd is None else (fingerprint.inside(probe.root, os.path.realpath(cwd)) or "/outside the project")
    memo: dict = {}

    def j(owner, outcome) -> Standing:
        got = memo.get(owner)
        if got is None:
            try:
                got = standing_of(observed_of(owner), probe, rel, owner.args[0].target)
            except Exception as e:  # a check that fails is unknown: advice, never a denial
                log("freshness check: %s: %s" % (type(e).__name__, e))
                got = Standing()
            memo[owner] = got
        return got

    return j


def reuse_judge(root: str | None, cwd: str | None, cache: Cache | None, state_dir: str,
                log: Callable[[str], None] = lambda m: None) -> Judge:
    """The judge every reuse path passes to engine.handoff (hooks, egg-extract): freshness, then trust."""
    fresh = judge(root, cwd, cache, fingerprint.key_of(state_dir), log)
    return judges(fresh)  # issue 11 §2: the store-trust judge joins here, beside freshness
