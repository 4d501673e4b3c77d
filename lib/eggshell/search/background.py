"""Unrelated text: what the model scores a prompt by chance, and which words say nothing.

A fixed cosine cannot say whether a prior turn bears on a prompt: a short chat question
scores 0.3 against its own topic and a long issue text 0.3 against anything. So a prompt's
cosine is judged against what the same model gives it for turns about other things
(`Calibration`): a set of invented agent turns over many topics, stacks and lengths that
ships with the package (background.jsonl, none of it about the evaluation's projects).

Their window vectors for the default model ship beside them (background.npz, made by
`make background`; a test re-embeds them), so a first prompt on a fresh machine is
calibrated without embedding anything. Another model's are embedded into the vector cache
by `egg index`, install's model check and the warm manager between requests, never by a
prompt: until then its prompts are judged without a calibration.

The same texts say which words are generic in agent chat ("change", "test", "file"):
a word held by many of them names no topic (`generic_terms`). Neither depends on the
store, so both hold from its first turn to its hundred-thousandth.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import Iterable

FILE = "background.jsonl"
VECTORS = "background.npz"
GENERIC_SHARE = 0.04  # a term in at least this share of the background texts is generic
MIN_SCORED = 0.8  # the share of background texts that must be scored for a calibration


@functools.lru_cache(maxsize=1)
def texts() -> tuple[str, ...]:
    """The background turns' texts, in file order (read once: package data never changes)."""
    raw = resources.files("eggshell.search").joinpath(FILE).read_text(encoding="utf-8")
    return tuple(json.loads(line)["text"] for line in raw.splitlines() if line.strip())


def digest() -> str:
    """sha256 of background.jsonl: the shipped vectors are of exactly these texts."""
    import hashlib

    return hashlib.sha256(resources.files("eggshell.search").joinpath(FILE).read_bytes()).hexdigest()


@functools.lru_cache(maxsize=4)
def shipped(model_id: str):
    """(window vectors float32 [n, dim], the text of each window) shipped for this model, or
    None: another model, or vectors not of today's texts."""
    import io

    import numpy as np

    try:
        raw = resources.files("eggshell.search").joinpath(VECTORS).read_bytes()
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            if str(z["model_id"]) != model_id or str(z["digest"]) != digest():
                return None
            return z["vectors"].astype(np.float32), z["text_of"].astype(np.int64)
    except (OSError, KeyError, ValueError):
        return None


def shipped_scores(model_id: str, query_vectors):
    """Each background text's best window cosine with the best query window, from the shipped
    vectors (None when none ship for this model)."""
    import numpy as np

    got = shipped(model_id)
    if got is None or query_vectors is None or not len(query_vectors):
        return None
    vectors, text_of = got
    sims = (vectors @ np.asarray(query_vectors, dtype=np.float32).T).max(axis=1)
    out = np.full(len(texts()), -np.inf, dtype=np.float32)
    np.maximum.at(out, text_of, sims)
    return out


def build(encoder, windows) -> dict:
    """The arrays of background.npz for this encoder: `windows(text)` gives a text's windows as
    search embeds them (semantic.SemanticIndex._windows)."""
    import numpy as np

    wins, text_of = [], []
    for n, t in enumerate(texts()):
        for w in windows(t):
            wins.append(w)
            text_of.append(n)
    vectors = encoder.embed(wins)
    return {"vectors": np.asarray(vectors, dtype=np.float16), "text_of": np.asarray(text_of, dtype=np.int32),
            "model_id": np.asarray(encoder.model_id), "digest": np.asarray(digest())}


@functools.lru_cache(maxsize=1)
def generic_terms() -> frozenset[str]:
    """Terms (search.terms) that at least GENERIC_SHARE of the background texts hold."""
    from collections import Counter

    from eggshell.search.terms import terms

    all_ = texts()
    df = Counter(t for x in all_ for t in set(terms(x)))
    least = max(2, math.ceil(GENERIC_SHARE * len(all_)))
    return frozenset(t for t, n in df.items() if n >= least)


@dataclass(frozen=True, slots=True)
class Calibration:
    """What the model gives one prompt against unrelated turns: the mean and spread of its
    cosines with the background texts. `z` says how far above chance a cosine is."""

    mean: float
    sd: float

    def z(self, cosine: float) -> float:
        return (cosine - self.mean) / self.sd

    def as_list(self) -> list[float]:
        return [round(self.mean, 6), round(self.sd, 6)]

    @staticmethod
    def of(value: object) -> "Calibration | None":
        """A calibration from a message's `[mean, sd]` (None unless two finite numbers, sd > 0)."""
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            return None
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in value):
            return None
        mean, sd = float(value[0]), float(value[1])
        return Calibration(mean, sd) if sd > 0 else None


def calibrate(cosines: Iterable[float]) -> Calibration | None:
    """The calibration from a prompt's cosines with the background texts (-inf: a text not
    scored yet); None while fewer than MIN_SCORED of them are scored."""
    xs = list(cosines)
    got = [x for x in xs if math.isfinite(x)]
    if not xs or len(got) < MIN_SCORED * len(xs) or len(got) < 2:
        return None
    mean = sum(got) / len(got)
    sd = math.sqrt(sum((x - mean) ** 2 for x in got) / len(got))
    return Calibration(mean, sd) if sd > 0 else None
