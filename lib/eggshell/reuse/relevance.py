"""Whether a prior turn bears on a new prompt: the relevance decision, from 1 stored turn to 100,000.

Ranking orders turns; it cannot say whether the best of them is worth handing over, since
fused scores are normalized per query and BM25's idf means nothing in a store of one turn.
So each candidate (a ranked hit, the model's nearest that fusion left out, the latest turn:
searcher.Hit.via) is judged on evidence that does not depend on the store's size:

- anchors: an identifier, path, version or number-bearing name both texts hold (rank.is_anchor);
- words: the share of the prompt's terms the turn holds, and how many of them are specific,
  i.e. not generic in agent chat (search/background.generic_terms);
- the model: its cosine, and that cosine judged against what the same model gives this
  prompt for unrelated turns (background.Calibration.z): a short chat question scores low
  against everything, its own topic included, but far lower against the rest;
- the latest turn: a new chat often goes on from the last one, so when the prompt reads as a
  follow-up ("that number", "instead", "and what..."), the latest turn needs only a cosine above
  the prompt's chance mean.

A turn bears on the prompt when one check passes (`CHECKS`, in order); `Verdict` names the
check that passed, or the values each one lacked (`egg why` prints them). The thresholds
were chosen on one half of the day-one evaluation's prompts and reported on the other
(docs/benchmarks.md, "The relevance decision").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterable

from eggshell.graph.records import TurnView, searchable_text
from eggshell.search.terms import terms

RELEVANCE_CHARS = 20000  # characters of a prior turn read for its words
# The old floors, kept as checks: a turn holding this share of the prompt's distinct terms
# (PROMPT_FLOOR), or with this cosine (SEMANTIC_FLOOR), bears on it at any store size.
PROMPT_FLOOR = 0.6
SEMANTIC_FLOOR = 0.5
# The calibrated checks, chosen on the `choose` half of the day-one prompts (docs/benchmarks.md,
# "The relevance decision"): the least thresholds at which no more than one in twenty of that
# half's unrelated prompts is handed anything at any store size, and where the half gave no
# ground to choose, the value the check means (Z_FOLLOW: above the prompt's chance mean).
Z_ALONE = 5.0  # the cosine this many spreads above the prompt's chance mean: enough alone
Z_WORDS = 3.5  # ... this many, with SPECIFIC_WORDS specific words shared
SPECIFIC_WORDS = 1
Z_MANY_WORDS = 2.5  # ... this many, with MANY_WORDS specific words shared
MANY_WORDS = 3
Z_FOLLOW = 0.0  # ... above chance, for the latest turn when the prompt reads as a follow-up (`follows_on`)
# Those thresholds were chosen on stores of 1 to N_CHOSEN turns. In a larger store more unrelated
# turns stand a chance: the best z of n unrelated turns grows like sqrt(2 ln n), so past N_CHOSEN
# the calibrated checks ask that much more (`lift`), and the words check, whose share a short
# prompt meets in some turn of hundreds by chance, asks for MANY_WORDS specific words too.
# Measured on 500 runs: unrelated questions handed something 0.175 -> 0.025, related unchanged
# (docs/benchmarks.md, "At 500 runs: the `handoff` set, and the store-size lift").
N_CHOSEN = 50


def lift(turns: int) -> float:
    """How much more z the calibrated checks ask in a store of this many turns."""
    if turns <= N_CHOSEN:
        return 0.0
    return math.sqrt(2 * math.log(turns)) - math.sqrt(2 * math.log(N_CHOSEN))

# Words by which a prompt points back at something it does not name: a new chat that asks "if
# finance wants 2% instead, what do I touch?" or "does anything else depend on that number?"
# goes on from the last one. English only, by the grammar of reference, not fitted to prompts.
_REFERRING = frozenset("""this that these those it them they their there else instead again also too same
your earlier above previous previously""".split())
_OPENERS = frozenset("and so ok okay also then but now".split())
_PRONOUNS = frozenset("i you he she it we they there this that the a an my our his her its".split())
_WORD = re.compile(r"[A-Za-z']+")
_NAMED = re.compile(r"\s+[A-Z][a-z]")  # a capitalized word next: a name, so "that" opens a clause


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one candidate turn shares with the prompt."""

    anchors: tuple[str, ...]  # shared anchor terms
    specific: tuple[str, ...]  # shared terms that are neither anchors nor generic
    share: float  # the share of the prompt's distinct terms the turn holds
    cosine: float | None  # the model's cosine (None: not reported)
    z: float | None  # the cosine against the prompt's calibration (None: no calibration)
    latest: bool  # the last turn the stores recorded
    follows: tuple[str, ...] = ()  # the prompt's words that read as a follow-up (`follows_on`)
    turns: int = 1  # how many turns the search weighed: the store's size (`lift`)


@dataclass(frozen=True, slots=True)
class Verdict:
    bears: bool
    check: str  # the check that passed ("" when none did)
    evidence: Evidence

    def missing(self) -> list[str]:
        """Each check in words with what this candidate had: why it was held back."""
        e = self.evidence
        z = "no calibration" if e.z is None else "%.2f" % e.z
        cos = "none" if e.cosine is None else "%.3f" % e.cosine
        up = lift(e.turns)
        words = "words: %.2f of the prompt's terms held, needs %.2f" % (e.share, PROMPT_FLOOR)
        if e.turns > N_CHOSEN:
            words += " and %d specific words in a store of %d turns (has %d)" % (MANY_WORDS, e.turns, len(e.specific))
        out = ["anchor: no identifier, path or version shared",
               words,
               "cosine: %s, needs %.2f" % (cos, SEMANTIC_FLOOR),
               "calibrated: z %s, needs %.1f" % (z, Z_ALONE + up),
               "calibrated with words: z %s and %d specific word%s shared, needs z %.1f and %d, or z %.1f and %d"
               % (z, len(e.specific), "" if len(e.specific) == 1 else "s", Z_WORDS + up, SPECIFIC_WORDS, Z_MANY_WORDS + up, MANY_WORDS)]
        if e.latest:
            out.append("latest turn, a follow-up: %s, z %s (needs %.1f)" % (
                "reads as one (%s)" % ", ".join(e.follows) if e.follows else "does not read as one", z, Z_FOLLOW))
        return out


def follows_on(prompt: str) -> tuple[str, ...]:
    """The words by which a prompt reads as a follow-up: it opens with "and", "so", "ok"...,
    or refers back ("that number", "instead", "else", "test it."). Not a referring word:
    "that" or "this" before a verb ("a hook that logs") or a pronoun ("the one that she
    shares"), and "it" before more of its clause ("so it replicates", "loading it into")."""
    ws = [w.casefold() for w in _WORD.findall(prompt[:2000])]
    out = ["^" + ws[0]] if ws and ws[0] in _OPENERS else []
    ends = {m.end() for m in re.finditer(r"[A-Za-z']+(?=\s*(?:[.?!,;:)]|$))", prompt[:2000])}
    pos = [m.end() for m in _WORD.finditer(prompt[:2000])]
    for i, w in enumerate(ws):
        if w not in _REFERRING:
            continue
        nxt = ws[i + 1] if i + 1 < len(ws) else ""
        if w in ("that", "this") and (nxt in _PRONOUNS or (len(nxt) > 3 and nxt.endswith(("s", "ed")) and not nxt.endswith("ss"))
                                      or _NAMED.match(prompt[pos[i]:])):
            continue  # "a hook that logs", "the one that she shares", "likely that Nate has": no pointing back
        if w in ("it", "them", "they", "their", "there") and pos[i] not in ends:
            continue
        out.append(w)
    return tuple(dict.fromkeys(out))


def prompt_terms(prompt: str) -> list[str]:
    """The prompt's distinct terms, in order."""
    return list(dict.fromkeys(terms(prompt)))


def evidence(q: list[str], text: str, cosine: float | None, calibration, latest: bool, generic: frozenset[str],
             follows: tuple[str, ...] = (), turns: int = 1) -> Evidence:
    """The evidence for one candidate: `q` the prompt's distinct terms, `text` the turn's
    searchable text, `calibration` the prompt's (background.Calibration or None), `turns` how
    many turns the search weighed."""
    from eggshell.search.rank import is_anchor

    has = set(terms(text[:RELEVANCE_CHARS])) if q else set()
    held = [t for t in q if t in has]
    anchors = tuple(t for t in held if is_anchor(t))
    specific = tuple(t for t in held if not is_anchor(t) and t not in generic and not t.isdigit())
    z = calibration.z(cosine) if calibration is not None and cosine is not None else None
    return Evidence(anchors, specific, len(held) / len(q) if q else 0.0, cosine, z, latest, follows, max(1, turns))


def decide(e: Evidence) -> Verdict:
    """Whether a candidate with this evidence bears on the prompt, and by which check."""
    for name, passed in _checks(e):
        if passed:
            return Verdict(True, name, e)
    return Verdict(False, "", e)


def _checks(e: Evidence):
    z = e.z
    up = lift(e.turns)
    yield "anchor", bool(e.anchors)
    yield "words", e.share >= PROMPT_FLOOR and (e.turns <= N_CHOSEN or len(e.specific) >= MANY_WORDS)
    yield "cosine", e.cosine is not None and e.cosine >= SEMANTIC_FLOOR
    yield "calibrated", z is not None and z >= Z_ALONE + up
    yield "calibrated with words", z is not None and ((z >= Z_WORDS + up and len(e.specific) >= SPECIFIC_WORDS)
                                                      or (z >= Z_MANY_WORDS + up and len(e.specific) >= MANY_WORDS))
    yield "latest turn, a follow-up", e.latest and bool(e.follows) and z is not None and z >= Z_FOLLOW


CHECKS = ("anchor", "words", "cosine", "calibrated", "calibrated with words", "latest turn, a follow-up")


@dataclass(frozen=True, slots=True)
class Judged:
    view: TurnView
    hit: dict
    verdict: Verdict


def judge(prompt: str, hits: Iterable[tuple[TurnView, dict]], calibration, turns: int = 1) -> list[Judged]:
    """Every candidate judged, in the hits' order: (view, its hit as egg-query prints it);
    `turns` is how many turns the search weighed."""
    from eggshell.search.background import generic_terms

    q = prompt_terms(prompt)
    generic = generic_terms()
    follows = follows_on(prompt)
    out = []
    for view, hit in hits:
        e = evidence(q, searchable_text(view), hit.get("semantic"), calibration, hit.get("latest") is True, generic, follows, turns)
        out.append(Judged(view, hit, decide(e)))
    return out
