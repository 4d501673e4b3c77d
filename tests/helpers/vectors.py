"""Deterministic test vectors for the shared vector cache, computable in any process."""

from __future__ import annotations

import numpy as np

from eggshell.core.identity import digest


DIM = 8


MODEL = "test-model (int8)"


def vec_for(text: str, salt: str = "") -> np.ndarray:
    """A deterministic unit float32 vector per text, so any process can check any row."""
    seed = int.from_bytes(digest("test.vec", salt, text.encode("utf-8", "surrogatepass"))[:8], "big")
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def vecs_for(texts, salt: str = "") -> np.ndarray:
    return np.stack([vec_for(t, salt) for t in texts]) if texts else np.zeros((0, DIM), np.float32)
