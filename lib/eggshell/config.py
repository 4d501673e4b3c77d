"""Settings: built-in defaults, then the user's global config, then the project's.

Both files are TOML with a closed set of keys: an unknown key or a wrong type is an
error that names the file and the key, because a typo silently ignored is a setting
the user believes in but does not have. Some keys only make sense per project (which
stores to use); those are refused in the global file.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, replace
from typing import Any

from .paths import PROJECT_CONFIG, Paths, find_project


class ConfigError(ValueError):
    """A config file that cannot be used; the message names the file and what to fix."""


@dataclass(frozen=True, slots=True)
class Config:
    enabled: bool = True
    egg: str = ".eggs/work.egg"  # the project's write store, relative to the project root
    read: tuple[str, ...] = ()  # more stores to search, relative to the project root
    handoff_chars: int = 8000
    top_k: int = 5
    min_coverage: float = 0.2
    mode: str = "hybrid"  # lexical | semantic | hybrid
    semantic_matcher: bool | tuple[str, ...] = True  # True: the built-in provider; False: none; argv: a program
    model: str | None = None  # None: the offline default model
    threshold: float | None = None  # None: the provider's default
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    local_union: bool = True  # false: reuse is advisory retrieval only (no completed work, no denied calls)
    project_root: str | None = None
    sources: tuple[str, ...] = field(default=())  # the files that were read, in order

    @property
    def write_egg(self) -> str | None:
        if self.project_root is None:
            return None
        return os.path.normpath(os.path.join(self.project_root, self.egg))

    @property
    def read_eggs(self) -> list[str]:
        """Every store to search: the write store first, then `read`, without repeats."""
        if self.project_root is None:
            return []
        out = [self.write_egg] + [os.path.normpath(os.path.join(self.project_root, os.path.expanduser(p))) for p in self.read]
        return list(dict.fromkeys(out))


# key -> (type, description of the type, allowed in the global file)
_KEYS: dict[str, tuple[type | tuple[type, ...], str, bool]] = {
    "mode": (str, 'one of "lexical", "semantic", "hybrid"', True),
    "semantic_matcher": ((bool, list), 'false, or a program and its arguments like ["/path/prog", "arg"]', True),
    "model": (str, "a fastembed model name", True),
    "threshold": ((int, float), "a cosine from -1 to 1", True),
    "bm25_k1": ((int, float), "a number from 0 to 10", True),
    "bm25_b": ((int, float), "a number from 0 to 1", True),
    "enabled": (bool, "true or false", True),
    "local_union": (bool, "true or false", True),
    "egg": (str, "a path string", False),
    "read": (list, "a list of path strings", False),
    "handoff_chars": (int, "an integer from 200 to 48000", True),
    "top_k": (int, "an integer from 1 to 50", True),
    "min_coverage": ((int, float), "a number from 0 to 1", True),
}


def _check(path: str, key: str, value: Any, where: str) -> Any:
    if key not in _KEYS:
        raise ConfigError("%s: unknown key %r (known keys: %s; see docs/config.md)" % (path, key, ", ".join(_KEYS)))
    kind, desc, in_global = _KEYS[key]
    if where == "global" and not in_global:
        raise ConfigError("%s: %r can only be set in a project's %s" % (path, key, PROJECT_CONFIG))
    if key == "semantic_matcher":
        return _check_matcher(path, value, where, desc)
    if isinstance(value, bool) and kind is not bool:
        raise ConfigError("%s: %r must be %s, got %r" % (path, key, desc, value))
    if not isinstance(value, kind):
        raise ConfigError("%s: %r must be %s, got %r" % (path, key, desc, value))
    if key == "read":
        if not all(isinstance(p, str) and p for p in value):
            raise ConfigError("%s: 'read' must be %s" % (path, desc))
        return tuple(value)
    if key == "egg" and not value.strip():
        raise ConfigError("%s: 'egg' must not be empty" % path)
    if key == "handoff_chars" and not 200 <= value <= 48000:
        raise ConfigError("%s: 'handoff_chars' must be %s (Codex caps hook context at 48000), got %r" % (path, desc, value))
    if key == "top_k" and not 1 <= value <= 50:
        raise ConfigError("%s: 'top_k' must be %s, got %r" % (path, desc, value))
    if key == "mode" and value not in ("lexical", "semantic", "hybrid"):
        raise ConfigError("%s: 'mode' must be %s, got %r" % (path, desc, value))
    if key == "threshold":
        if not -1 <= value <= 1:
            raise ConfigError("%s: 'threshold' must be %s, got %r" % (path, desc, value))
        return float(value)
    if key in ("bm25_k1", "bm25_b"):
        hi = 10 if key == "bm25_k1" else 1
        if not 0 <= value <= hi:
            raise ConfigError("%s: %r must be %s, got %r" % (path, key, desc, value))
        return float(value)
    if key == "min_coverage":
        if not 0 <= value <= 1:
            raise ConfigError("%s: 'min_coverage' must be %s, got %r" % (path, desc, value))
        return float(value)
    return value


def _check_matcher(path: str, value: Any, where: str, desc: str) -> bool | tuple[str, ...]:
    if value is True:
        raise ConfigError("%s: 'semantic_matcher' must be %s; leave it out for the built-in provider" % (path, desc))
    if value is False:
        return False
    if not isinstance(value, list) or not value or not all(isinstance(a, str) and a for a in value):
        raise ConfigError("%s: 'semantic_matcher' must be %s, got %r" % (path, desc, value))
    if where != "global":
        raise ConfigError(
            "%s: a project file may not name a program to run ('semantic_matcher'): anyone who can change a "
            "repository could then run code on your machine. Set it in your own global config instead." % path
        )
    if not os.path.isabs(value[0]):
        raise ConfigError("%s: 'semantic_matcher' must start with an absolute path to the program, got %r" % (path, value[0]))
    return tuple(value)


def read_file(path: str, where: str) -> dict[str, Any]:
    """Parse and check one config file; a missing file is empty."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as e:
        raise ConfigError("%s: not valid TOML: %s" % (path, e)) from None
    except OSError as e:
        raise ConfigError("%s: cannot read: %s" % (path, e.strerror)) from None
    return {k: _check(path, k, v, where) for k, v in data.items()}


def load(paths: Paths, cwd: str) -> Config:
    """The settings in force for a directory: defaults < global file < project file."""
    cfg = Config()
    sources = []
    g = read_file(paths.global_config, "global")
    if g:
        sources.append(paths.global_config)
    cfg = replace(cfg, **g)
    root = find_project(cwd)
    if root is not None:
        p = os.path.join(root, PROJECT_CONFIG)
        cfg = replace(cfg, **read_file(p, "project"), project_root=root)
        sources.append(p)
    return replace(cfg, sources=tuple(sources))


PROJECT_TEMPLATE = """# Eggshell settings for this project (docs/config.md lists every key).
# Turns recorded by Codex in this project are written to this store:
egg = ".eggs/work.egg"
# More .egg stores to search, relative to this file:
read = []
# Most characters of prior work handed to the agent per request:
handoff_chars = 8000
# Most prior turns considered per request:
top_k = 5
"""
