"""Settings: built-in defaults, then the user's global config, then the project's.

Both files are TOML with a closed set of keys: an unknown key or a wrong type is an
error that names the file and the key, because a typo silently ignored is a setting
the user believes in but does not have. Some keys only make sense per project (which
stores to use); those are refused in the global file.

Profiles name which eggs a chat reads and writes. A project file comes with the
repository, so whoever can change the repository writes it: it may not run programs,
name stores outside the project, or redefine what the user's own global file defines.
No file may redefine the built-in `off` and `private` profiles: they are how a user keeps
a turn out of the store.
`EGGSHELL_CONFIG` names a file the user chose explicitly; it is read alone and trusted
like the global file.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from eggshell.errors import EggshellError
from eggshell.paths import PROJECT_CONFIG, Paths, find_project, project_store_problem, refusal, untrusted


class ConfigError(EggshellError, ValueError):
    """A config file that cannot be used; the message names the file and what to fix."""


BUILTIN = "(built-in)"
MAX_ENTRIES = 64  # stores in a `read` list, names under [eggs], profiles: each one is opened or checked per prompt
MAX_FILE_BYTES = 256 << 10  # a config is a few lines; parsing megabytes of TOML costs a hook seconds
PROJECT_EGG = "project"  # the built-in egg: the `egg` key, inside each project
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")  # typed in `egg use NAME`: no spaces or quoting
# The one default for how many prior turns a search returns: the hooks, `egg find`, egg-query and
# egg-index all start from it (search/rank.py takes it from here), so a ranking tried by hand is
# the one a chat gets. The handoff benchmarks ran at 5 (docs/benchmarks.md).
DEFAULT_TOP_K = 5
# The least idf-weighted share of a query a lexical hit must hold, for the same reason: one
# default that the hooks, `egg find` and egg-query all read when the config does not set it.
DEFAULT_MIN_COVERAGE = 0.2


@dataclass(frozen=True, slots=True)
class Profile:
    """A named choice of eggs to read and the one to write; None inherits the top-level value."""

    read: tuple[str, ...] = ()  # egg names
    write: str | None = None  # an egg name; None: read-only
    handoff_chars: int | None = None
    local_union: bool | None = None
    source: str = BUILTIN  # the file that defined it
    legacy_read: bool = False  # built-in work/private: the top-level `read` paths are read too


BUILTIN_PROFILES: tuple[tuple[str, Profile], ...] = (
    ("work", Profile(read=(PROJECT_EGG,), write=PROJECT_EGG, legacy_read=True)),
    ("private", Profile(read=(PROJECT_EGG,), legacy_read=True)),
    ("off", Profile()),
)
# Profiles that keep turns out of the store: no file may redefine them (see _check_fixed).
FIXED_PROFILES = {"private": "reads the project, records nothing", "off": "reads nothing, records nothing"}


@dataclass(frozen=True, slots=True)
class Selection:
    """What one turn of one chat uses: its eggs (absolute paths) and budget.

    It travels between hook processes as JSON (the turn's snapshot), so a profile change
    mid-turn cannot redirect a turn that already started.
    """

    profile: str
    enabled: bool
    read: tuple[str, ...]  # absolute egg paths, the write target first, no repeats
    write: str | None
    handoff_chars: int
    local_union: bool

    def to_json(self) -> dict:
        return {"profile": self.profile, "enabled": self.enabled, "read": list(self.read), "write": self.write,
                "handoff_chars": self.handoff_chars, "local_union": self.local_union}

    @staticmethod
    def from_json(d: dict) -> "Selection":
        """The Selection a to_json dict describes; ValueError if it is not one."""
        if not isinstance(d, dict):
            raise ValueError("selection must be a JSON object, got %s" % type(d).__name__)
        keys = {"profile", "enabled", "read", "write", "handoff_chars", "local_union"}
        if set(d) != keys:
            raise ValueError("selection keys must be %s, got %s" % (sorted(keys), sorted(d)))
        profile, enabled, read, write, chars, union = (d[k] for k in ("profile", "enabled", "read", "write", "handoff_chars", "local_union"))
        if not isinstance(profile, str) or not profile:
            raise ValueError("selection 'profile' must be a non-empty string")
        if not isinstance(enabled, bool) or not isinstance(union, bool):
            raise ValueError("selection 'enabled' and 'local_union' must be booleans")
        if not isinstance(read, list) or not all(isinstance(p, str) and os.path.isabs(p) for p in read):
            raise ValueError("selection 'read' must be a list of absolute paths")
        if len(set(read)) != len(read):
            raise ValueError("selection 'read' repeats a path")
        if write is not None and (not isinstance(write, str) or not read or read[0] != write):
            raise ValueError("selection 'write' must be null or the first 'read' path")
        if isinstance(chars, bool) or not isinstance(chars, int) or not 200 <= chars <= 48000:
            raise ValueError("selection 'handoff_chars' must be an integer from 200 to 48000")
        if not enabled and (read or write is not None):
            raise ValueError("a disabled selection reads and writes nothing")
        return Selection(profile, enabled, tuple(read), write, chars, union)


@dataclass(frozen=True, slots=True)
class Config:
    enabled: bool = True
    egg: str = ".eggs/work.egg"  # the built-in egg "project", relative to the project root
    read: tuple[str, ...] = ()  # more stores the built-in work/private profiles read, relative to the project root
    handoff_chars: int = 8000
    top_k: int = DEFAULT_TOP_K
    min_coverage: float = DEFAULT_MIN_COVERAGE
    mode: str = "hybrid"  # lexical | semantic | hybrid
    semantic_matcher: bool | tuple[str, ...] = True  # True: the built-in provider; False: none; argv: a program
    model: str | None = None  # None: the offline default model
    threshold: float | None = None  # None: the provider's default
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    local_union: bool = True  # false: reuse is advisory retrieval only (no completed work, no denied calls)
    default: str = "work"  # the profile a chat uses when it picks none
    eggs: tuple[tuple[str, str], ...] = ()  # [eggs] from the files: name -> absolute path
    profile_defs: tuple[tuple[str, Profile], ...] = ()  # [profiles.NAME] from the files, in order
    redact: tuple[str, ...] = ()  # extra secret patterns (regexes), every file's added up (redact.py)
    never_record: tuple[str, ...] = ()  # globs of commands and paths whose output is withheld, added up
    project_root: str | None = None
    sources: tuple[str, ...] = field(default=())  # the files that were read, in order

    @property
    def egg_paths(self) -> dict[str, str]:
        """Every egg by name: the built-in `project` (inside a project) and [eggs]."""
        out = {}
        if self.project_root is not None:
            out[PROJECT_EGG] = os.path.normpath(os.path.join(self.project_root, os.path.expanduser(self.egg)))
        out.update(self.eggs)
        return out

    @property
    def profiles(self) -> tuple[str, ...]:
        """The profile names a chat may pick: the built-ins first, then the files' in order."""
        return tuple(dict.fromkeys([n for n, _ in BUILTIN_PROFILES] + [n for n, _ in self.profile_defs]))

    def profile(self, name: str) -> Profile:
        defs = dict(BUILTIN_PROFILES)
        defs.update(self.profile_defs)
        if name not in defs:
            raise ConfigError("unknown profile %r (known: %s; defined in %s)" % (
                name, ", ".join(self.profiles), ", ".join(self.sources) or "the built-in defaults"))
        return defs[name]

    def paths_of(self, name: str) -> tuple[tuple[str, ...], str | None]:
        """(read paths, write path) of a profile, whatever `enabled` says."""
        prof = self.profile(name)
        eggs = self.egg_paths
        write = eggs.get(prof.write) if prof.write is not None else None
        read = [write] if write else []
        read += [eggs[n] for n in prof.read if n in eggs]  # `project` outside a project: absent
        if prof.legacy_read and self.project_root is not None:
            read += [os.path.normpath(os.path.join(self.project_root, os.path.expanduser(p))) for p in self.read]
        return tuple(dict.fromkeys(read)), write

    def selection(self, profile: str | None = None) -> Selection:
        """What a turn under `profile` (None: the default) reads, writes and may hand off."""
        name = self.default if profile is None else profile
        prof = self.profile(name)
        read, write = self.paths_of(name)
        chars = self.handoff_chars if prof.handoff_chars is None else prof.handoff_chars
        union = self.local_union if prof.local_union is None else prof.local_union
        if not self.enabled or not (read or write):
            return Selection(name, False, (), None, chars, union)
        return Selection(name, True, read, write, chars, union)

    @property
    def write_egg(self) -> str | None:
        """The default profile's write store (None: read-only, or not in a project)."""
        return self.paths_of(self.default)[1]

    @property
    def read_eggs(self) -> list[str]:
        """The default profile's stores to search: the write store first, without repeats."""
        return list(self.paths_of(self.default)[0])


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
    "default": (str, "a profile name", True),
    "eggs": (dict, "a table [eggs] of name = \"path\"", True),
    "profiles": (dict, "tables [profiles.NAME]", True),
    "redact": (list, "a list of regular expressions (RE2 syntax)", True),
    "never_record": (list, 'a list of globs of commands or paths, like ["cat .env*", "~/.ssh/*"]', True),
}
_PROFILE_KEYS = ("read", "write", "handoff_chars", "local_union")


def _check(path: str, key: str, value: Any, where: str) -> Any:
    if key not in _KEYS:
        raise ConfigError("%s: unknown key %r (known keys: %s; see docs/config.md)" % (path, key, ", ".join(_KEYS)))
    kind, desc, in_global = _KEYS[key]
    if where == "global" and not in_global:
        raise ConfigError("%s: %r can only be set in a project's %s" % (path, key, PROJECT_CONFIG))
    if key == "semantic_matcher":
        return _check_matcher(path, value, where, desc)
    if isinstance(value, bool) and kind is not bool:
        raise ConfigError("%s: %r must be %s, got %.200r" % (path, key, desc, value))
    if not isinstance(value, kind):
        raise ConfigError("%s: %r must be %s, got %.200r" % (path, key, desc, value))
    if isinstance(value, (list, dict)) and len(value) > MAX_ENTRIES:
        raise ConfigError("%s: %r has %d entries; at most %d are allowed (each is checked at every prompt)" % (
            path, key, len(value), MAX_ENTRIES))
    if key == "read":
        if not all(isinstance(p, str) and p for p in value):
            raise ConfigError("%s: 'read' must be %s" % (path, desc))
        if where == "project":
            for p in value:
                _inside_project(path, "'read' entry", p)
        return tuple(value)
    if key in ("redact", "never_record"):
        return _check_rules(path, key, value, desc)
    if key == "egg" and not value.strip():
        raise ConfigError("%s: 'egg' must not be empty" % path)
    if key == "egg" and where == "project":
        _under_eggs(path, "'egg'", value)
    if key == "default" and not _NAME.match(value):
        raise ConfigError("%s: 'default' must be %s (letters, digits, _ . -), got %r" % (path, desc, value))
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
            raise ConfigError("%s: %r must be %s, got %.200r" % (path, key, desc, value))
        return float(value)
    if key == "min_coverage":
        if not 0 <= value <= 1:
            raise ConfigError("%s: 'min_coverage' must be %s, got %r" % (path, desc, value))
        return float(value)
    return value


def _check_rules(path: str, key: str, value: list, desc: str) -> tuple[str, ...]:
    """`redact` patterns that compile (and match something), or `never_record` globs."""
    if not all(isinstance(v, str) and v for v in value):
        raise ConfigError("%s: %r must be %s, got %r" % (path, key, desc, value))
    if key == "redact":
        from eggshell.core.redact import compile_extra

        for p in value:
            try:
                compile_extra((p,))
            except ValueError as e:
                line = _line_of(path, p)
                at = "%s:%d" % (path, line) if line else path
                raise ConfigError("%s: 'redact' entry %s; fix or remove it (docs/config.md)" % (at, e)) from None
    return tuple(value)


def _line_of(path: str, pattern: str) -> int | None:
    """The line of `path` that holds `pattern` (as a TOML literal or basic string), if one does.

    tomllib gives no positions; a refused pattern is still worth pointing at in a long file.
    """
    forms = ("'%s'" % pattern, '"%s"' % pattern.replace("\\", "\\\\").replace('"', '\\"'))
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                if any(form in line for form in forms):
                    return n
    except OSError:
        pass
    return None


def _check_matcher(path: str, value: Any, where: str, desc: str) -> bool | tuple[str, ...]:
    if value is True:
        raise ConfigError("%s: 'semantic_matcher' must be %s; leave it out for the built-in provider" % (path, desc))
    if value is False:
        return False
    if not isinstance(value, list) or not value or not all(isinstance(a, str) and a for a in value):
        raise ConfigError("%s: 'semantic_matcher' must be %s, got %r" % (path, desc, value))
    if where == "project":
        raise ConfigError(
            "%s: a project file may not name a program to run ('semantic_matcher'): anyone who can change a "
            "repository could then run code on your machine. Set it in your own global config instead." % path
        )
    if not os.path.isabs(value[0]):
        raise ConfigError("%s: 'semantic_matcher' must start with an absolute path to the program, got %r" % (path, value[0]))
    return tuple(value)


def _within(root: str, p: str) -> bool:
    return p != root and os.path.commonpath([root, p]) == root


def _inside_project(path: str, what: str, value: str) -> str:
    """The absolute store path a project file names, refused unless it stays inside the project.

    A repository could otherwise point its writes (or reads) at any file of the user's.
    """
    root = os.path.dirname(os.path.abspath(path))
    p = os.path.normpath(os.path.join(root, os.path.expanduser(value)))
    if not _within(root, p):
        raise ConfigError("%s: %s = %r resolves to %s, outside the project %s; a project file may only name stores "
                          "inside its project (name shared stores in your global config)" % (path, what, value, p, root))
    real_root = os.path.realpath(root)
    if not _within(real_root, os.path.realpath(os.path.dirname(p))) and os.path.realpath(os.path.dirname(p)) != real_root:
        raise ConfigError("%s: %s = %r goes through a symbolic link that leaves the project %s; use a real directory "
                          "inside the project" % (path, what, value, root))
    d = root
    for part in os.path.relpath(os.path.dirname(p), root).split(os.sep):
        d = os.path.join(d, part)
        if part not in (".", "") and os.path.islink(d):  # saves never follow one (store._open_parent): say so now
            raise ConfigError("%s: %s = %r goes through the symbolic link %s; stores are written only through real "
                              "directories below the project root: name %s instead" % (
                                  path, what, value, d, os.path.relpath(os.path.realpath(d), real_root)))
    return p


def _under_eggs(path: str, what: str, value: str) -> str:
    """The absolute path of a store a project file names, refused unless it is under the project's .eggs/.

    Any store a project file names may be written (`egg keep NAME`, its profiles' `write`),
    and the file comes with the repository: paths.project_store_problem is the rule.
    """
    root = os.path.dirname(os.path.abspath(path))
    why = project_store_problem(root, value)
    if why is not None:
        raise ConfigError("%s: %s = %r %s; a project file names stores only under the project's .eggs/ (a repository "
                          "must not point Eggshell's writes at .git/hooks/ or anywhere else): name one like "
                          "\".eggs/work.egg\", or name a store elsewhere in your own global config" % (path, what, value, why))
    return os.path.normpath(os.path.join(root, value))


def _check_eggs(path: str, table: dict, where: str) -> tuple[tuple[str, str], ...]:
    base = os.path.dirname(os.path.abspath(path))
    out = []
    for name, value in table.items():
        what = "[eggs] %s" % name
        if not _NAME.match(name):
            raise ConfigError("%s: %s: an egg name may hold only letters, digits, _ . - (it is typed in `egg keep NAME`)" % (path, what))
        if not isinstance(value, str) or not value.strip():
            raise ConfigError("%s: %s must be a path string, got %r" % (path, what, value))
        if where == "global" and name == PROJECT_EGG:
            raise ConfigError("%s: %s: 'project' is the built-in egg of each project (its 'egg' key); give a global "
                              "egg another name" % (path, what))
        if where == "project":
            out.append((name, _under_eggs(path, what, value)))
        else:
            out.append((name, os.path.normpath(os.path.join(base, os.path.expanduser(value)))))
    return tuple(out)


def _check_profiles(path: str, table: dict, egg_names: set[str], where: str) -> tuple[tuple[str, Profile], ...]:
    known = sorted(egg_names | {PROJECT_EGG})
    rule = ("a project file's profiles may only name eggs from its own [eggs] or 'project'" if where == "project"
            else "define it under [eggs] in %s" % path)
    out = []
    for name, body in table.items():
        where_ = "[profiles.%s]" % name
        if not _NAME.match(name):
            raise ConfigError("%s: %s: a profile name may hold only letters, digits, _ . - (it is typed in `egg use NAME`)" % (path, where_))
        if not isinstance(body, dict):
            raise ConfigError("%s: 'profiles.%s' must be a table [profiles.%s], got %r" % (path, name, name, body))
        for k in body:
            if k not in _PROFILE_KEYS:
                raise ConfigError("%s: %s: unknown key %r (known: %s; see docs/config.md)" % (path, where_, k, ", ".join(_PROFILE_KEYS)))
        read = body.get("read", [])
        if not isinstance(read, list) or not all(isinstance(n, str) and n for n in read):
            raise ConfigError("%s: %s: 'read' must be a list of egg names like [\"project\"], got %.200r" % (path, where_, read))
        if len(read) > MAX_ENTRIES:
            raise ConfigError("%s: %s: 'read' has %d entries; at most %d are allowed" % (path, where_, len(read), MAX_ENTRIES))
        write = body.get("write", False)
        if write is False:
            write = None
        elif not isinstance(write, str) or not write:
            raise ConfigError("%s: %s: 'write' must be an egg name, or false for read-only, got %r" % (path, where_, write))
        for key, n in [("read", n) for n in read] + ([("write", write)] if write else []):
            if n != PROJECT_EGG and n not in egg_names:
                raise ConfigError("%s: %s: %r names unknown egg %r (known here: %s); %s" % (path, where_, key, n, ", ".join(known), rule))
        chars = body.get("handoff_chars")
        if chars is not None and (isinstance(chars, bool) or not isinstance(chars, int) or not 200 <= chars <= 48000):
            raise ConfigError("%s: %s: 'handoff_chars' must be an integer from 200 to 48000 (Codex caps hook context at "
                              "48000), got %r" % (path, where_, chars))
        union = body.get("local_union")
        if union is not None and not isinstance(union, bool):
            raise ConfigError("%s: %s: 'local_union' must be true or false, got %r" % (path, where_, union))
        prof = Profile(tuple(dict.fromkeys(read)), write, chars, union, path)
        if name in FIXED_PROFILES:
            _check_fixed(path, name, body, prof)
            continue  # the built-in one stays in force
        out.append((name, prof))
    return tuple(out)


def _check_fixed(path: str, name: str, body: dict, prof: Profile) -> None:
    """Accept a definition of `off` or `private` only if it says exactly what the built-in says.

    `egg next off` and `egg use private` are the user's way to keep a turn out of the store;
    a file that could redefine them (a repository's, above all) could record what the user
    asked it not to. `egg init` used to write both out, so the identical text stays valid.
    """
    builtin = dict(BUILTIN_PROFILES)[name]
    differs = [k for k, mine, theirs in (("write", prof.write, builtin.write), ("read", prof.read, builtin.read),
                                         ("handoff_chars", prof.handoff_chars, None), ("local_union", prof.local_union, None))
               if mine != theirs]
    if differs:
        k = differs[0]
        raise ConfigError("%s: [profiles.%s]: %r = %r: %r is built in (%s) and cannot be redefined, so that `egg next %s` "
                          "and `egg use %s` always mean it; delete this section, or give your profile another name"
                          % (path, name, k, body.get(k, False if k == "write" else None), name, FIXED_PROFILES[name], name, name))


def _check_trusted(path: str, st: os.stat_result) -> None:
    """Refuse a config file that another local user wrote or could change: it decides what is recorded.

    Someone who can write a `.eggshell.toml` above your work (a world-writable /tmp) could
    otherwise record your session into a store they can read.
    """
    why = untrusted(st)
    if why is not None:
        raise ConfigError(refusal(path, why, "config files", "go-w"))
    d = os.path.dirname(os.path.abspath(path))
    why = untrusted(os.stat(d))
    if why is not None:
        raise ConfigError(refusal(path, "its directory %s: %s" % (d, why), "config files and their directories", "go-w", d))


def read_file(path: str, where: str) -> dict[str, Any]:
    """Parse and check one config file ("global", "project" or "explicit"); a missing file is empty."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            _check_trusted(path, st)
            size = st.st_size
            if size > MAX_FILE_BYTES:
                raise ConfigError("%s: is %d bytes; a config file may be at most %d (it is read at every prompt)" % (
                    path, size, MAX_FILE_BYTES))
            data = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as e:
        raise ConfigError("%s: not valid TOML: %s" % (path, e)) from None
    except OSError as e:
        raise ConfigError("%s: cannot read: %s" % (path, e.strerror)) from None
    out = {k: _check(path, k, v, where) for k, v in data.items()}
    if "eggs" in out:
        out["eggs"] = _check_eggs(path, out["eggs"], where)
        if "egg" in out and PROJECT_EGG in dict(out["eggs"]):
            raise ConfigError("%s: both 'egg' and [eggs] project name the project's store; keep one" % path)
    if "profiles" in out:
        out["profiles"] = _check_profiles(path, out["profiles"], {n for n, _ in out.get("eggs", ())}, where)
    return out


def _apply(cfg: Config, path: str, data: dict[str, Any], overlay_of: Config | None) -> Config:
    """`cfg` with one file's settings over it; `overlay_of` is the global layer a project may not shadow."""
    data = dict(data)
    eggs = data.pop("eggs", ())
    profs = data.pop("profiles", ())
    for key in ("redact", "never_record"):  # rules add up across files: a project never removes one
        data[key] = tuple(dict.fromkeys(getattr(cfg, key) + data.get(key, ())))
    if overlay_of is not None:
        theirs = {"[eggs] %s" % n for n, _ in overlay_of.eggs} | {"[profiles.%s]" % n for n, _ in overlay_of.profile_defs}
        for label in ["[eggs] %s" % n for n, _ in eggs] + ["[profiles.%s]" % n for n, _ in profs]:
            if label in theirs:
                raise ConfigError("%s: %s is already defined in %s; a project file may not redefine (shadow) the "
                                  "global file's eggs and profiles: rename it here" % (path, label, overlay_of.sources[-1]))
    if PROJECT_EGG in dict(eggs):  # the built-in egg, kept relative to the project root like the `egg` key
        data["egg"] = os.path.relpath(dict(eggs)[PROJECT_EGG], os.path.dirname(os.path.abspath(path)))
        eggs = tuple((n, p) for n, p in eggs if n != PROJECT_EGG)
    cfg = replace(cfg, **data, eggs=cfg.eggs + tuple(eggs), profile_defs=cfg.profile_defs + tuple(profs),
                  sources=cfg.sources + (path,))
    if "default" in data and data["default"] not in cfg.profiles:
        raise ConfigError("%s: 'default' names profile %r, which is not defined (known: %s); define [profiles.%s] "
                          "or pick a known one" % (path, data["default"], ", ".join(cfg.profiles), data["default"]))
    return cfg


def load(paths: Paths, cwd: str, env: Mapping[str, str] | None = None) -> Config:
    """The settings in force for a directory: defaults < global file < project file.

    With EGGSHELL_CONFIG set, that file alone (its directory is the project root).
    """
    env = os.environ if env is None else env
    explicit = env.get("EGGSHELL_CONFIG")
    if explicit:
        p = os.path.abspath(os.path.expanduser(explicit))
        if not os.path.isfile(p):
            raise ConfigError("%s: no such file (named by EGGSHELL_CONFIG); create it or unset EGGSHELL_CONFIG" % p)
        return replace(_apply(Config(), p, read_file(p, "explicit"), None), project_root=os.path.dirname(p))
    cfg = Config()
    g = read_file(paths.global_config, "global")
    if g:
        cfg = _apply(cfg, paths.global_config, g, None)
    root = find_project(cwd, env.get("HOME"))
    if root is not None:
        p = os.path.join(root, PROJECT_CONFIG)
        cfg = replace(_apply(cfg, p, read_file(p, "project"), cfg if cfg.sources else None), project_root=root)
    return cfg


PROJECT_TEMPLATE = """# Eggshell settings for this project (docs/config.md lists every key).
# The profile a chat uses unless it picks another with `!egg use NAME` or `!egg next NAME`:
default = "work"
# Most characters of prior work handed to the agent per request:
handoff_chars = 8000
# Most prior turns considered per request:
top_k = %d

# The stores (.egg files) of this project, by name; paths are relative to this file
# and must stay inside the project:
[eggs]
project = ".eggs/work.egg"

# work: use this project's memory and record each turn into it.
[profiles.work]
read = ["project"]
write = "project"

# Built in, and no file can redefine them:
#   private: use the memory, record nothing (read-only);
#   off: no memory at all: nothing read, nothing recorded.
""" % DEFAULT_TOP_K
