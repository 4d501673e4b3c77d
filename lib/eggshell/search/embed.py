"""The embedding model: loading it offline, cutting text into token windows, embedding.

Windows are counted in the model's own tokens (not characters) so each one uses the
model's capacity: `WINDOW` tokens with `OVERLAP` tokens shared between neighbours, and
a short tail is merged into the window before it rather than embedded alone (a tiny
window scores close to any short query). Blank text has no window at all, so it can
never be a semantic match. Nothing here is imported or loaded in lexical mode.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from eggshell.errors import EggshellError
# Where the models live is known without numpy (a hook's SessionStart checks it): installed.py.
from eggshell.search.installed import DEFAULT_MODEL, OFFLINE_MODELS as _OFFLINE, default_model_dir, downloaded_models_dir, is_offline_default, missing_file  # noqa: F401 - re-exported

WINDOW = 254  # tokens per window: all-MiniLM was trained on 256 positions, less [CLS] and [SEP]
OVERLAP = 32
MIN_TAIL = 64  # a last window shorter than this joins the one before it
# Windows per onnxruntime call. Activations grow with batch x 256 tokens: 32 full windows
# peaked at 2.4 GB resident, 8 at 0.85 GB, at the same throughput (docs/benchmarks.md).
BATCH = 8


class ModelError(EggshellError, RuntimeError):
    """The model cannot be loaded or used; the message says what to do."""


@dataclass(frozen=True, slots=True)
class Window:
    start: int  # character offsets into the text
    end: int
    text: str


def cut_windows(offsets: list[tuple[int, int]], text: str, window: int = WINDOW, overlap: int = OVERLAP, min_tail: int = MIN_TAIL) -> list[Window]:
    """Windows from a text's token offsets: pure, so the rules are testable without a model."""
    n = len(offsets)
    if n == 0 or not text.strip():
        return []
    step = window - overlap
    spans: list[tuple[int, int]] = []
    i = 0
    while True:
        j = min(n, i + window)
        spans.append((i, j))
        if j >= n:
            break
        i += step
    if len(spans) > 1 and spans[-1][1] - spans[-1][0] < min_tail + overlap:
        # The last window adds fewer than min_tail new tokens: fold it into the previous one.
        spans.pop()
        spans[-1] = (spans[-1][0], n)
    out = []
    for a, b in spans:
        s, e = offsets[a][0], offsets[b - 1][1]
        out.append(Window(s, e, text[s:e]))
    return out


# onnxruntime's official builds carry Microsoft's 1DS telemetry: about 10 s after a model
# loads it resolves mobile.events.data.microsoft.com and writes a device id and an event
# database under ~/.cache/Microsoft/. `disable_telemetry_events()` leaves that in place;
# only this variable, set before the runtime initializes, stops the uploader, the events
# and the device id (onnxruntime's Privacy.md). huggingface_hub's is switched off too.
QUIET_RUNTIME = {"ORT_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1"}


def quiet_runtime(env) -> None:
    """Turn off the model runtime's telemetry in `env` (os.environ before fastembed is imported)."""
    for k, v in QUIET_RUNTIME.items():
        env[k] = v


MMAP_THRESHOLD = 64 * 1024  # bytes: larger blocks are mapped apart and returned whole when freed
ARENA_MAX = 2


def bound_malloc() -> bool:
    """Keep glibc's heap from holding what the model runtime freed.

    onnxruntime (its arena off) allocates and frees a window batch's tensors on every run, from
    several threads. glibc raises its mmap threshold after each large free, so later tensors come
    from per-thread heaps that fragment and are never given back: `egg-index` grew to 1.4 GB over
    300 long records, 823 MB over 40. A fixed threshold and two arenas keep it at 390 MB over the
    same 40 (402 MB over the 300), at the same speed. Returns whether the C library took the settings (glibc only).
    """
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols: no library search, no subprocess
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to set
        return False
    M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8  # malloc.h
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_ARENA_MAX, ARENA_MAX))


class Encoder:
    """A fastembed text model, loaded on first use; vectors come back L2-normalized float32."""

    def __init__(self, model: str = DEFAULT_MODEL, *, model_dir: str | None = None, cache_dir: str | None = None,
                 threads: int | None = None, allow_download: bool = False):
        self.model = model
        self.model_dir = model_dir
        self.cache_dir = cache_dir or (None if model in _OFFLINE else downloaded_models_dir())
        self.threads = threads
        self.allow_download = allow_download  # only `egg model install` may reach a model hub
        self._emb: Any = None
        self._tok: Any = None
        self.dim: int | None = None

    @property
    def model_id(self) -> str:
        """What the vector cache is keyed by: the model and, for the offline one, its variant."""
        if self.model in _OFFLINE:
            name, variant = _OFFLINE[self.model]
            return "%s (%s)" % (name, variant)
        return self.model

    def load(self) -> None:
        if self._emb is not None:
            return
        quiet_runtime(os.environ)
        bound_malloc()
        try:
            from fastembed import TextEmbedding
        except ImportError as e:  # pragma: no cover - install.sh installs it
            raise ModelError("fastembed is not installed in this environment (%s); run ./install.sh" % e) from None
        # Without this, onnxruntime's arena keeps ~1 GB after one batch of long windows.
        kwargs: dict[str, Any] = {"enable_cpu_mem_arena": False}
        if self.threads:
            kwargs["threads"] = self.threads
        if self.model in _OFFLINE:
            d = self.model_dir or default_model_dir()
            gone = missing_file(d)
            if gone is not None:
                raise ModelError("the model %s is not installed at %s (no %s); run ./install.sh" % (self.model, d, gone))
            name = _OFFLINE[self.model][0]
            try:
                self._emb = TextEmbedding(name, specific_model_path=d, cache_dir=self.cache_dir or d, **kwargs)
            except Exception as e:
                raise ModelError("cannot load %s from %s: %s" % (self.model, d, e)) from None
            tok_file = os.path.join(d, "tokenizer.json")
        else:
            if not self.allow_download:
                # Searching must never wait on a network: use what `egg model install` fetched.
                os.environ["HF_HUB_OFFLINE"] = "1"
            try:
                self._emb = TextEmbedding(self.model, cache_dir=self.cache_dir, **kwargs)
            except Exception as e:
                raise ModelError("cannot load %s: %s (install it with `egg model install %s` where it can be downloaded)" % (self.model, e, self.model)) from None
            tok_file = None
        self._tok = self._load_tokenizer(tok_file)
        self.dim = int(self.embed(["dimension probe"]).shape[1])

    def _load_tokenizer(self, path: str | None):
        from tokenizers import Tokenizer

        if path and os.path.isfile(path):
            tok = Tokenizer.from_file(path)
        else:  # a downloaded model: fastembed keeps the tokenizer it loaded
            tok = getattr(getattr(self._emb, "model", None), "tokenizer", None)
            if tok is None:
                raise ModelError("cannot find the tokenizer of %s" % self.model)
        tok.no_truncation()
        tok.no_padding()
        return tok

    def windows(self, text: str) -> list[Window]:
        self.load()
        enc = self._tok.encode(text, add_special_tokens=False)
        return cut_windows(list(enc.offsets), text)

    def embed(self, texts: Iterable[str]) -> np.ndarray:
        texts = list(texts)
        if self._emb is None:
            self.load()
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        try:
            vecs = np.asarray(list(self._emb.embed(texts, batch_size=BATCH)), dtype=np.float32)
        except Exception as e:
            raise ModelError("embedding failed: %s" % e) from None
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return vecs / norms
