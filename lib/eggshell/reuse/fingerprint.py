"""What a read-only tool call observed, cheaply: fingerprints of the files and directories it named.

A recorded output is only true of the files it was read from as they were then. When a
tool call is recorded (PostToolUse), this module notes what its operands named inside
the project, so that a later chat can ask, before it lets that output stand in for a new
call, whether those inputs are still what they were (`check`; freshness.py turns the
answer into a standing.Standing):

- a file: its size, mtime, ctime and inode, and an id of its content: the blob id from
  the git index when the file is clean in it, else a keyed hash of its bytes (files up to
  FILE_CAP). The key is this data root's own (`key_of`), so a store shared through git
  carries no plain hash of an untracked file (a guessable `.env` stays unguessable);
- a directory: one digest over its entries (recursive, or one level for `ls`): a clean
  tracked file by its blob id, any other file by its stat;
- a named path that does not exist (`cat src/new.py` failed): that it is absent;
- the way to any of these when it is not plain (a symbolic link on it, anywhere: the named
  file, a parent component, a chain; or a `..`): the path as named and a keyed digest of the
  links followed and their targets (paths.walk). A retargeted link is a changed input, even to
  a file with the same bytes: the read now reads another file;
- the repository HEAD, and for `git` commands HEAD as an input of its own; the other refs a
  git read names (`git log main`, `a..b`, `other:path`), and for `git status` the branch's
  upstream and the config that names it;
- for a call that prints metadata (`ls -l`, `stat`, `du`, `find -printf`): the whole stat of
  each file and entry (mode "m"): touched or chmod-ed is changed there, though not for `cat`;
- for a search that honours ignore files (`rg`, `ag`): those files, on its walk and above it.

Whatever cannot be fingerprinted is recorded as unknown, never guessed: a path outside the
project, a shell expansion (`$X`, `$(...)`, a loop), a directory past the budget, a program
whose answer depends on the environment (`which`, `date`), a revision only git could resolve
(`main@{1}`). A call reads at most BYTES bytes and stats at most ENTRIES entries here, within
the caller's time budget (Budget.deadline), whatever it named. Every file is opened without
blocking and read only when regular (gitfiles.read_regular): a planted FIFO never hangs a hook.

The operands of a shell command are found without a shell: every word that is not an
option is a possible input (a pattern that names no file is simply recorded absent, which
only makes the check stricter), `cd` moves the base, unquoted globs stand for their
directory, and `rg`/`ls`/`find`/... with no existing operand read the working directory,
unless they name their inputs past the pattern (`grep -rn foo src/` with no src/ reads nothing).

On every PostToolUse hook's path: only `os`, `stat`, `hashlib` (and gitfiles.py); no `re`, `json`,
`dataclasses` or `typing`.
"""

from __future__ import annotations

import hashlib
import os
import stat as _stat

from eggshell.paths import walk as walk_links
from eggshell.reuse.gitfiles import (PACKED_CAP, Index, find_git, is_abbrev, read_head, read_regular, read_text, resolve,
                                     rev_names, upstream)

# 2: the way to each input ("l" entries); 3: metadata reads by their whole stat ("m"), the refs a git read names
# ("r" entries), the ignore files of a search that honours them, the call's own workdir as its cwd. An older
# fingerprint never saw these, so is never verified (it may still name a change).
VERSION = 3
FILE_CAP = 1 << 20  # bytes of one file hashed; a larger one is fingerprinted by its stat alone
BYTES = 4 << 20  # bytes read per call (file contents and the git index)
ENTRIES = 4000  # directory entries looked at per call
INDEX_CAP = 16 << 20  # a larger git index is not read: its files count as untracked
WORDS = 64  # operand words per call
COMMAND_CHARS = 8192  # a longer command is not parsed: unknown
RACY_NS = 2_000_000_000  # a file changed this close to its observation may change again unseen (same stat)
KEY_FILE = "fingerprint.key"  # in the data root's state directory, 0600

SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "local_shell", "shell_command"})  # commands.SHELL_TOOLS
READ_TOOLS = frozenset({"read", "grep", "glob", "ls", "view"})  # commands.READ_TOOLS
# Programs that read the working directory when no operand names an existing path.
READS_CWD = frozenset({"rg", "ag", "ack", "ls", "tree", "find", "du"})
GREPS = frozenset({"grep", "egrep", "fgrep"})  # they read the working directory only with -r
SKIPS_HIDDEN = frozenset({"rg", "ag", "ls", "tree"})  # dot entries are not read unless asked for
SHALLOW = frozenset({"ls"})
# Programs that leave out what ignore files name, and those files: inputs of their walks though dot files.
HONOURS_IGNORES = frozenset({"rg", "ag"})
IGNORE_FILES = (".gitignore", ".ignore", ".rgignore", ".agignore")
NO_IGNORE = frozenset({"--no-ignore", "-uu", "-uuu", "--unrestricted", "--skip-vcs-ignores", "-U"})  # one level, unless -R
# Programs that follow the links they meet inside a directory they walk, and the option that makes them:
# (short letter, long option). What such a link leads to is read but is no entry of the walk: unknown.
FOLLOWS = {"grep": ("R", "--dereference-recursive"), "egrep": ("R", "--dereference-recursive"), "fgrep": ("R", "--dereference-recursive"),
           "rg": ("L", "--follow"), "ag": ("f", "--follow"), "find": ("L", "-follow"), "ls": ("L", "--dereference"),
           "tree": ("l", None), "du": ("L", "--dereference")}
SKIPS_BINARY = frozenset({"rg", "ag"})  # binary files met while walking are not searched, unless asked for
# Names that are always binary (their first bytes hold a NUL, which is how rg tells): not inputs of a walk that skips binaries.
BINARY_SUFFIXES = (".pyc", ".pyo", ".o", ".so", ".class", ".png", ".jpg", ".jpeg", ".zip", ".jar", ".whl")
GIT_TREE = frozenset({"status", "diff"})  # with no path, the whole work tree
GIT_CWD = frozenset({"grep", "ls-files"})  # with no path, the working directory
# git reads whose operands may name revisions: `git log main`, `git diff a..b`, `git show other:path`.
GIT_REVS = frozenset({"log", "show", "diff", "blame", "shortlog", "describe", "rev-parse", "ls-tree", "grep", "rev-list",
                      "cat-file", "whatchanged", "merge-base", "cherry", "range-diff", "name-rev"})
GIT_REFS = frozenset({"--all", "--branches", "--tags", "--remotes", "--glob", "--exclude"})  # other refs than HEAD
# Programs whose answer depends on the environment (PATH, the clock, the user, the host), not on
# project files: a call of one is never verified, whatever files it names.
ENVIRONMENT = frozenset({"which", "command", "type", "whereis", "hash", "env", "printenv", "date", "hostname", "whoami", "id",
                         "uname", "pwd", "df", "ps", "uptime", "locale", "tty", "groups", "who", "w", "last", "free"})
METADATA = frozenset({"stat", "du"})  # programs that always print a stat (sizes in blocks, times, modes)
LS_METADATA = frozenset({"--full-time", "--time-style", "--size", "--inode", "--sort", "--time", "--author", "--numeric-uid-gid",
                         "--format", "--block-size", "--human-readable", "--si", "--classify", "--file-type", "--indicator-style"})
FIND_METADATA = ("-newer", "-anewer", "-cnewer", "-mtime", "-mmin", "-ctime", "-cmin", "-atime", "-amin", "-perm", "-printf",
                 "-fprintf", "-ls", "-fls", "-size", "-user", "-group", "-uid", "-gid", "-nouser", "-nogroup", "-used",
                 "-readable", "-writable", "-executable", "-inum", "-links", "-empty")
KEYWORDS = frozenset({"for", "while", "until", "if", "case", "select", "function", "do", "then", "{", "}", "[[", "!"})


class Budget:
    """What one call may still cost: bytes read, entries looked at, and (when given) time: a
    `deadline` on time.monotonic() past which a walk gives up as if past its entries."""

    __slots__ = ("bytes", "entries", "deadline")

    def __init__(self, nbytes: int = BYTES, entries: int = ENTRIES, deadline: float | None = None):
        self.bytes, self.entries, self.deadline = nbytes, entries, deadline

    def spend(self, n: int = 1) -> bool:
        """Count `n` entries looked at; False once over the entries or past the deadline."""
        self.entries -= n
        if self.deadline is not None and self.entries % 64 == 0 and _monotonic() > self.deadline:
            self.entries = -1
        return self.entries >= 0


def _monotonic() -> float:
    import time

    return time.monotonic()


# -- operands: pure --------------------------------------------------------------------

EXPANDS, GLOB = 1, 2  # word flags: holds an unquoted/double-quoted expansion; an unquoted glob


def tokens(cmd: str) -> list | None:
    """Words (text, flags) and operators (None, op) of a command line; None: not a plain one.

    Quotes and backslashes are resolved as a shell would; `$`, backticks and a leading `~`
    outside single quotes mark the word EXPANDS, unquoted `*?[` mark it GLOB. Subshells and
    heredocs make the command something only a shell knows: None.
    """
    out: list = []
    buf: list[str] = []
    flags, started, i, n = 0, False, 0, len(cmd)

    def end():
        nonlocal buf, flags, started
        if started:
            out.append(("".join(buf), flags))
        buf, flags, started = [], 0, False

    while i < n:
        c = cmd[i]
        if c == "'":
            j = cmd.find("'", i + 1)
            if j < 0:
                return None
            buf.append(cmd[i + 1:j])
            started, i = True, j + 1
            continue
        if c == '"':
            i += 1
            while i < n and cmd[i] != '"':
                if cmd[i] == "\\" and i + 1 < n and cmd[i + 1] in '"\\$`':
                    i += 1
                elif cmd[i] in "$`":
                    flags |= EXPANDS
                buf.append(cmd[i])
                i += 1
            if i >= n:
                return None
            started, i = True, i + 1
            continue
        if c == "\\":
            if i + 1 < n and cmd[i + 1] != "\n":
                buf.append(cmd[i + 1])
                started = True
            i += 2
            continue
        if c in " \t":
            end()
            i += 1
            continue
        if c == "#" and not started:
            j = cmd.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in "()`" or cmd.startswith("<<", i) or cmd.startswith("$(", i):
            return None
        op = next((o for o in ("&&", "||", ">>", "&>", "2>", ";", "|", "&", "\n", "<", ">") if cmd.startswith(o, i)), None)
        if op == "2>" and started:
            op = ">"  # `a2>b`: the word a2, then a redirection
        if op is not None:
            end()
            i += len(op)
            if op in (">", "2>") and cmd.startswith("&", i):  # `2>&1`, `>&2`: one stream into another
                i += 1
                while i < n and cmd[i].isdigit():
                    i += 1
                op = "dup"
            out.append((None, op))
            continue
        if c == "$":
            flags |= EXPANDS
        elif c in "*?[{":
            flags |= GLOB
        elif c == "~" and not started:
            flags |= EXPANDS
        buf.append(c)
        started = True
        i += 1
    end()
    return out


class Need:
    """What a call reads, as found in its input: (path, how) pairs relative to its cwd, and why not."""

    __slots__ = ("paths", "unknown", "git", "defaults", "groups", "revs", "upstream")

    def __init__(self):
        self.paths: list = []  # (path joined to its clause's cwd, mode): mode "r" a tree, "1" one level; "h": dot entries too,
        # "b": binary files (by name) are not read
        self.groups: list = []  # for each path, the simple command that named it
        self.unknown: list = []  # reasons the call's inputs cannot all be named
        self.git = False  # a git command: HEAD (and the index) are inputs too
        self.defaults: list = []  # (command, cwd, mode): what it reads when none of its operands exists ("" cwd: the work tree's top)
        self.revs: list = []  # (word, cwd): an operand of a git read that names a revision unless it is an existing path
        self.upstream = False  # `git status` tells how the branch stands against its upstream: that ref is an input

    def add(self, path: str, mode: str, group: int = 0) -> None:
        self.paths.append((path, mode))
        self.groups.append(group)


def needs(tool: str, tool_input: object, cwd: str) -> Need:
    """What this tool call reads (see the module docstring); no file system access."""
    need = Need()
    name = tool.casefold()
    inp = tool_input if isinstance(tool_input, dict) else {}
    if name in READ_TOOLS:
        path = next((inp[k] for k in ("file_path", "path", "notebook_path") if isinstance(inp.get(k), str) and inp[k]), None)
        if name == "glob" and isinstance(inp.get("pattern"), str):
            base = _literal_dir(inp["pattern"])
            need.add(os.path.join(cwd, path or "", base), "r")
        elif path is not None:
            need.add(os.path.join(cwd, path), "r" if name != "ls" else "1")
        elif name in ("grep", "glob", "ls"):
            need.add(cwd, "r" if name != "ls" else "1")
        else:
            need.unknown.append("a %s call names no path" % tool)
        return need
    if name not in SHELL_TOOLS:
        need.unknown.append("%s is not a read" % tool)
        return need
    cmd = inp.get("command", inp.get("cmd"))
    cwd = call_cwd(tool, inp, cwd)
    if isinstance(cmd, list) and len(cmd) >= 3 and isinstance(cmd[-1], str) and str(cmd[0]).rsplit("/", 1)[-1] in ("bash", "sh", "zsh"):
        cmd = cmd[-1]
    if not isinstance(cmd, str) or len(cmd) > COMMAND_CHARS:
        need.unknown.append("the command is not a plain command line")
        return need
    toks = tokens(cmd)
    if toks is None:
        need.unknown.append("the command uses a subshell, heredoc or unbalanced quote")
        return need
    _shell_needs(toks, cwd, need)
    return need


def call_cwd(tool: str, tool_input: object, cwd: str) -> str:
    """Where a call runs: the hook's cwd, joined with the call's own `workdir` (Codex's
    exec_command and shell may run elsewhere than the session's cwd). A call's fingerprint
    is taken, and checked, from here: `cat a.txt` in sub/ read another file than at the top."""
    inp = tool_input if isinstance(tool_input, dict) else {}
    workdir = inp.get("workdir", inp.get("cwd"))
    if tool.casefold() in SHELL_TOOLS and isinstance(workdir, str) and workdir:
        return os.path.normpath(os.path.join(cwd, workdir))
    return cwd


def _shell_needs(toks: list, cwd: str, need: Need) -> None:
    stage: list = []
    first = True  # the first stage of a pipeline reads files; later ones read their stdin
    group = 0
    for text, f in toks + [(None, ";")]:
        if text is not None:
            stage.append((text, f))
            continue
        if f in ("<", ">", ">>", "&>", "2>", "dup"):
            if f != "dup":
                stage.append((None, f))
            continue
        cwd = _stage(stage, cwd, need, first, group)
        stage = []
        first = f != "|"
        group += 1


def _pattern_words(prog: str, opts: set) -> float:
    """How many leading operands are a pattern, not a path: a search's first, none for `ls`,
    `find` and the rest. Past them, an operand names what is read, so the working directory
    is not (`grep -rn foo src/` reads src/, or nothing if it is gone). With -e or -f the
    patterns are option arguments this reader does not pair up: infinity, so only an existing
    operand keeps the directory out (the stricter rule)."""
    if any(o in ("-e", "-f", "--regexp", "--file") or o.startswith(("--regexp=", "--file=")) for o in opts):
        return float("inf")
    return 1 if prog in GREPS or prog in ("rg", "ag", "ack") else 0


def _stage(words: list, cwd: str, need: Need, first: bool, group: int) -> str:
    """Note one simple command's inputs; the cwd after it (`cd`)."""
    while words and words[0][0] is not None and "=" in words[0][0] and not words[0][0].startswith(("=", "-")):
        words = words[1:]  # NAME=value before the program
    if not words:
        return cwd
    prog, pf = words[0]
    if prog is None or pf & EXPANDS or prog in KEYWORDS:
        need.unknown.append("the command runs %s" % (prog or "a redirection"))
        return cwd
    prog = prog.rsplit("/", 1)[-1]
    rest = words[1:]
    if prog in ENVIRONMENT:
        need.unknown.append("%s answers from the environment, not from files" % prog)
        return cwd
    if prog == "cd":
        to = next((w for w in rest if w[0] is not None and not w[0].startswith("-")), None)
        if to is None or to[1] or to[0].startswith("~"):
            need.unknown.append("cd to a place only the shell knows")
            return cwd
        return os.path.normpath(os.path.join(cwd, to[0]))
    opts = {w[0] for w in rest if w[0] is not None and w[0].startswith("-")}
    sub = None
    if prog == "git":
        need.git = True
        if {o.partition("=")[0] for o in opts} & ({"-C", "--git-dir", "--work-tree"} | GIT_REFS):
            need.unknown.append("git reads other refs or another tree")
        i = 0
        while i < len(rest) and rest[i][0] is not None and rest[i][0].startswith("-"):
            i += 2 if rest[i][0] == "-c" else 1  # `git -c key=value log`
        sub = rest[i][0] if i < len(rest) else None
        rest = rest[i + 1:]
    mode = ("1" if prog in SHALLOW and not any("R" in o for o in opts if not o.startswith("--")) else "r") + ("h" if _hidden(prog, opts) else "")
    if prog in SKIPS_BINARY and not opts & {"-a", "--text", "--binary", "-uuu", "--search-zip", "-z"}:
        mode += "b"
    if _follows(prog, opts):
        mode += "L"
    if _metadata(prog, opts):
        mode += "m"
    if prog in HONOURS_IGNORES and not opts & NO_IGNORE and "h" not in mode:
        mode += "i"
    redirect = None
    operands = 0
    past = False  # after `--`, every word is an operand
    pattern = sub == "grep" and not opts & {"-e", "-f"}  # `git grep PATTERN [REV...]`
    if sub == "status" and (opts & {"-b", "--branch"} or not opts & {"-s", "--short", "--porcelain"} and
                            not any(o.startswith("--porcelain") for o in opts)):
        need.upstream = True
    for text, f in rest:
        if text is None:
            redirect = f
            continue
        was, redirect = redirect, None
        if not past and text == "--":
            past = True
            continue
        if prog == "git" and sub in GIT_REVS and not past and was is None and not text.startswith("-") and not f & EXPANDS:
            if pattern:
                pattern = False
            elif not text.isdigit():  # (`git log -n 5`)
                need.revs.append((text, cwd))
        if not past and text.startswith("-") and text != "-":
            eq = text.partition("=")[2]
            if not eq:
                continue
            text = eq
        if len(need.paths) >= WORDS:
            need.unknown.append("more than %d operands" % WORDS)
            return cwd
        if f & EXPANDS:
            need.unknown.append("an operand only the shell can expand: %s" % text[:80])
            continue
        if was not in (None, "<"):
            continue  # `> out`, `2>/dev/null`: an output, not an input
        need.add(os.path.join(cwd, _literal_dir(text) if f & GLOB else text), mode, group)
        operands += 1
    if first and operands > _pattern_words(prog, opts):
        pass  # it names what it reads: an operand that does not exist is read as absent, never the directory
    elif first:
        if prog in READS_CWD or (prog in GREPS and any(o in ("-r", "-R", "--recursive") or (o[:2] != "--" and ("r" in o or "R" in o))
                                                       for o in opts)) or (prog == "git" and sub in GIT_CWD):
            need.defaults.append((group, cwd, mode))
        elif prog == "git" and sub in GIT_TREE:
            need.defaults.append((group, "", mode))
    return cwd


def _follows(prog: str, opts: set) -> bool:
    """Whether the program follows links inside the directories it walks (FOLLOWS)."""
    short, long = FOLLOWS.get(prog, (None, None))
    if short is None:
        return False
    if prog == "find":
        return bool(opts & {"-L", "-follow"})  # no clusters: `-name` is one option
    return any(o == long or (not o.startswith("--") and short in o[1:]) for o in opts)


def _metadata(prog: str, opts: set) -> bool:
    """Whether the program prints what a stat says (mode, owner, size, times, inode), not only
    names and content: such a call is judged by the whole stat of what it read (mode "m"),
    since a touched or chmod-ed file with the same bytes prints otherwise."""
    if prog in METADATA:
        return True
    if prog == "find":
        return any(o.startswith(FIND_METADATA) for o in opts)
    if prog == "ls":
        return any(o.partition("=")[0] in LS_METADATA if o.startswith("--") else any(c in "lnogtcusiSF" for c in o[1:]) for o in opts)
    if prog == "tree":
        return any(o in ("--du", "--inodes", "--device", "--timefmt") or (not o.startswith("--") and any(c in "pugshD" for c in o[1:]))
                   for o in opts)
    return False


def _hidden(prog: str, opts: set) -> bool:
    """Whether the program reads dot entries of a directory it walks."""
    if prog == "ls":
        return any(o in ("--all", "--almost-all") or (not o.startswith("--") and ("a" in o or "A" in o)) for o in opts)
    if prog in SKIPS_HIDDEN:
        return bool(opts & {"-a", "--all", "--hidden", "-u", "-uu", "-uuu", "-."})
    return True


def _literal_dir(pattern: str) -> str:
    """The directory a glob pattern stays inside: its path before the first wildcard."""
    cut = min((pattern.find(c) for c in "*?[{" if c in pattern), default=len(pattern))
    head = pattern[:cut]
    return head if cut == len(pattern) else head.rpartition("/")[0]


# -- the state of a project now: I/O ---------------------------------------------------


class Probe:
    """One project's git state, read at most once: where its repository is, its index, its HEAD.

    `cache` (a dict, per process) keeps a parsed index by the index file's stat and content
    ids by (path, stat), so a warm process checking the same files again only stats them.
    """

    def __init__(self, root: str, key: bytes | None = None, cache: dict | None = None, budget: Budget | None = None):
        self.root = os.path.realpath(root)
        self.key = key
        self.cache = {} if cache is None else cache
        self.budget = budget or Budget()
        self._git = None
        self._index = None
        self._head = False
        self._packed = None

    def git(self) -> tuple[str, str, str] | None:
        """(work tree top, git dir, common dir), or None outside a repository."""
        if self._git is None:
            self._git = find_git(self.root) or ()
        return self._git or None

    def head(self) -> str | None:
        if self._head is False:
            g = self.git()
            self._head = read_head(g[1], g[2]) if g else None
        return self._head

    def ref_values(self, name: str) -> list | None:
        """What each ref git would try for `name` holds now (git's order: NAME, refs/NAME, tags, heads,
        remotes, a remote's HEAD), symbolic refs followed; None outside a repository."""
        g = self.git()
        if g is None:
            return None
        if self._packed is None:
            self._packed = read_regular(os.path.join(g[2], "packed-refs"), PACKED_CAP) or b""
        return [resolve(g[1], g[2], ref, self._packed) for ref in
                (name, "refs/" + name, "refs/tags/" + name, "refs/heads/" + name, "refs/remotes/" + name, "refs/remotes/%s/HEAD" % name)]

    def index(self) -> "Index":
        if self._index is None:
            self._index = _load_index(self)
        return self._index

    def repo_path(self, rel: str) -> str | None:
        """A project-relative path as the git index spells it (relative to the work tree top)."""
        g = self.git()
        if g is None:
            return None
        full = os.path.join(self.root, rel) if rel not in ("", ".") else self.root
        r = os.path.relpath(full, g[0])
        return "" if r == "." else r.replace(os.sep, "/")

    def content_id(self, path: str, st: os.stat_result, kind: str) -> str | None:
        """`kind` "g": the git blob id of the file's bytes; "k": their keyed hash. None: over a budget."""
        ck = ("id", kind, path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        got = self.cache.get(ck)
        if got is not None:
            return got
        if st.st_size > FILE_CAP or st.st_size > self.budget.bytes or (kind == "k" and self.key is None):
            return None
        data = read_regular(path, min(st.st_size, FILE_CAP) + 1)
        if data is None:
            return None
        self.budget.bytes -= len(data)
        if len(data) > FILE_CAP:
            return None
        if kind == "g":
            got = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        else:
            got = hashlib.blake2b(data, digest_size=20, key=self.key).hexdigest()
        if _now_ns() - max(st.st_mtime_ns, st.st_ctime_ns) >= RACY_NS:  # a later change shows in the stat
            if len(self.cache) > 50_000:
                self.cache.clear()
            self.cache[ck] = got
        return got


def _load_index(probe: Probe) -> Index:
    g = probe.git()
    if g is None:
        return Index()
    path = os.path.join(g[1], "index")
    try:
        st = os.stat(path)
    except OSError:
        return Index()
    ck = ("index", path, st.st_size, st.st_mtime_ns, st.st_ino)
    got = probe.cache.get(ck)
    if got is not None:
        return got
    if st.st_size > INDEX_CAP or st.st_size > probe.budget.bytes:
        return Index()
    data = read_regular(path, st.st_size)  # (not INDEX_CAP: a read allocates what it is asked for)
    if data is None:
        return Index()
    probe.budget.bytes -= len(data)
    if data[:4] != b"DIRC" or data[4:8] not in (b"\0\0\0\2", b"\0\0\0\3"):
        return Index()  # v4 compresses paths: its files count as untracked
    got = Index(data, st.st_mtime_ns)
    for k in list(probe.cache):  # (a list first: the manager's two workers may share the cache)
        if k[0] == "index" and k[1] == path:
            probe.cache.pop(k, None)  # the latest index of each repository is enough
    probe.cache[ck] = got
    return got


def _clean(entry, st: os.stat_result, index: Index) -> bool:
    """The file is what the index says (git's stat check, racily clean entries excluded)."""
    if entry is None:
        return False
    m = 0xFFFFFFFF
    return (entry[1] == (st.st_ctime_ns // 10**9 & m, st.st_ctime_ns % 10**9, st.st_mtime_ns // 10**9 & m, st.st_mtime_ns % 10**9,
                         st.st_ino & m, st.st_size & m)
            and st.st_mtime_ns < index.mtime_ns)


# -- observing: the record side ---------------------------------------------------------


def unknown(when: str, why: str) -> dict:
    """A fingerprint that names no input and says why: never verified (a fingerprint given up on)."""
    return {"v": VERSION, "at": when, "head": None, "cwd": None, "key": None, "in": [], "unknown": [why]}


def observe(tool: str, tool_input: object, cwd: str, root: str, key: bytes | None, when: str, probe: Probe | None = None,
            budget: Budget | None = None) -> dict:
    """The fingerprint of one call's inputs now (see the module docstring); never raises on I/O."""
    probe = probe or Probe(root, key, budget=budget)
    need = needs(tool, tool_input, cwd)
    entries: list = []
    unknown = list(need.unknown)
    existing: set = set()  # the commands one of whose operands exists
    now = _now_ns()
    cwd = call_cwd(tool, tool_input, cwd)
    rel_cwd = inside(probe.root, os.path.realpath(cwd))
    where = (cwd, rel_cwd)
    for (path, mode), group in zip(need.paths, need.groups):
        got = _observe_path(probe, path, mode, now, where)
        if got and got[-1][0] not in "al":  # (an "l" alone: a link out of the project to nothing)
            existing.add(group)
        entries.extend(got)  # []: absent and outside the project, not an input
    for group, at, mode in need.defaults:
        if group in existing:
            continue
        if not at:
            g = probe.git()
            at = g[0] if g else root
        entries.extend(_observe_path(probe, at, mode, now, where))
    ignores = {e[1] for e in entries if e[0] == "d" and "i" in e[2]}
    if ignores:
        entries.extend(_ignore_entries(probe, ignores, now, where))
    if need.git:
        entries.append(["h", probe.head()])
    if need.upstream:
        entries.extend(_upstream_entries(probe, now, where))
    for word, at in need.revs:
        entries.extend(_rev_entries(probe, word, at))
    if not entries and not unknown:
        unknown.append("the call names no input")
    fp = {"v": VERSION, "at": when, "head": probe.head(), "cwd": rel_cwd, "key": key_id(key), "in": entries}
    if need.git:
        fp["git"] = True  # what git shows depends on the index too: a staged change is a change
    if unknown:
        fp["unknown"] = unknown[:8]
    return fp


def _now_ns() -> int:
    import time

    return time.time_ns()


def _ignore_entries(probe: "Probe", walked: set, now: int, where: tuple) -> list:
    """The ignore files a search that honours them reads besides those of the directories it
    walks: each walked directory's parents' up to the project root, and the repository's
    `.git/info/exclude` (when inside the project). A global excludes file is not seen."""
    seen: set = set()
    out: list = []
    for rel in walked:
        parts = [] if rel == "." else rel.split("/")
        for k in range(len(parts)):
            d = "/".join(parts[:k]) or "."
            for name in IGNORE_FILES:
                p = name if d == "." else d + "/" + name
                if p not in seen:
                    seen.add(p)
                    out.extend(_observe_path(probe, os.path.join(probe.root, p), "", now, where))
    g = probe.git()
    if g is not None and inside(probe.root, os.path.realpath(g[2])) is not None:
        out.extend(_observe_path(probe, os.path.join(g[2], "info", "exclude"), "", now, where))
    return out


def _upstream_entries(probe: "Probe", now: int, where: tuple) -> list:
    """What `git status` compares the branch with: the repository's config (which names the
    upstream) and the upstream's ref (`ahead 1`, `behind 3` after a fetch)."""
    g = probe.git()
    if g is None:
        return []
    if inside(probe.root, os.path.realpath(g[2])) is None:
        return [["u", "", "a repository outside the project"]]
    out = _observe_path(probe, os.path.join(g[2], "config"), "", now, where)
    head = read_text(os.path.join(g[1], "HEAD")) or ""
    branch = head[4:].strip()[len("refs/heads/"):] if head.startswith("ref:") and "refs/heads/" in head else None
    up = upstream(read_regular(os.path.join(g[2], "config"), 1 << 16) or b"", branch) if branch else None
    if up is not None:
        out.append(["r", up, probe.ref_values(up)])
    return out


def _rev_entries(probe: "Probe", word: str, cwd: str) -> list:
    """The refs a git read's operand names, as entries ["r", name, values]; [] when it is an
    existing path (git reads it as one) or names HEAD (an "h" entry already); ["u", ...] when it
    cannot be read cheaply (`main@{1}`, a name no ref holds that is no object id)."""
    try:
        os.lstat(os.path.join(cwd, word))
        return []
    except OSError:
        pass
    names = rev_names(word)
    if names is None:
        return [["u", word[:80], "a revision this reader cannot resolve"]]
    out = []
    for name in names:
        values = probe.ref_values(name)
        if values is None or (not any(values) and not is_abbrev(name)):
            out.append(["u", name[:80], "a revision this reader cannot resolve"])
        else:
            out.append(["r", name, values])
    return out


def inside(root: str, real: str) -> str | None:
    """A real path relative to the (real) project root, "/"-separated; None outside it."""
    if real == root:
        return "."
    if real.startswith(root.rstrip(os.sep) + os.sep):
        return os.path.relpath(real, root).replace(os.sep, "/")
    return None


def _observe_path(probe: Probe, path: str, mode: str, now: int, where: tuple) -> list:
    """One input's entries: its way when it is not plain (["l", ...]), then ["f", ...], ["d", ...],
    ["a", rel] or ["u", what, why]; []: not an input (absent outside the project)."""
    named = _named(probe.root, path, where)
    got = walk_links(probe.root, named) if named is not None else walk_links("/", path)
    if got is None:
        return [["u", named or "", "a loop of links"]]
    real, met = got
    rel = inside(probe.root, real)
    way: list = []
    if named is None:
        if (met or ".." in path.split("/")) and rel is not None:
            return [["u", rel, "named through a path outside the project"]]  # its way cannot be stored: no absolute path is
    elif met or _plain(named) != rel:
        way = [["l", named, rel, _way_id(probe, met)]]
    try:
        st = os.stat(real)
    except OSError:
        return way if rel is None else way + [["a", rel]]
    if rel is None:
        return [["u", "", "outside the project"]]  # no absolute path is stored (egg-format.md)
    if _stat.S_ISREG(st.st_mode):
        return way + [_file_entry(probe, real, rel, st, now, mode)]
    if _stat.S_ISDIR(st.st_mode):
        return way + [_dir_entry(probe, real, rel, mode, now)]
    return [["u", rel, "not a file or directory"]]


def _named(root: str, path: str, where: tuple) -> str | None:
    """`path` relative to the project root as the call named it (links and `..` kept: they are
    followed, not read), or None when the call named it from outside the project.

    A path under the call's cwd (as the host gave it, perhaps through a link of its own) is
    named from the cwd's real place: the cwd itself is compared on its own (`check`).
    """
    cwd, rel_cwd = where
    base = cwd.rstrip("/")
    if rel_cwd is not None and (path == cwd or path.startswith(base + "/")):
        tail = path[len(base):].strip("/")
        if rel_cwd == ".":
            return tail or "."
        return rel_cwd + "/" + tail if tail else rel_cwd
    if path == root or path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")):].strip("/") or "."
    return None


def _plain(named: str) -> str:
    """A named path without its `.` components and repeated slashes (they lead nowhere else)."""
    return "/".join(c for c in named.split("/") if c not in ("", ".")) or "."


def _way_id(probe: Probe, met: list) -> str | None:
    """A keyed digest of the links followed, in order, and their targets: a link's target may be
    an absolute path, which a store shared through git must not carry (egg-format.md). None: no key."""
    if probe.key is None:
        return None
    h = hashlib.blake2b(digest_size=20, key=probe.key, person=b"eggshell.links")
    for path, target in met:
        h.update(b"%s\0%s\0" % ((inside(probe.root, path) or path).encode("utf-8", "surrogateescape"),
                               target.encode("utf-8", "surrogateescape")))
    return "k:" + h.hexdigest()


def _file_entry(probe: Probe, real: str, rel: str, st: os.stat_result, now: int, mode: str = "") -> list:
    probe.budget.entries -= 1
    racy = int(now - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_NS)
    ix = probe.index().lookup(probe.repo_path(rel) or "") if probe.git() else None
    if ix is not None and not racy and _clean(ix, st, probe.index()):
        cid = "g:" + ix[0]
    else:
        k = probe.content_id(real, st, "k")
        cid = None if k is None else "k:" + k
    entry = ["f", rel, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, cid, racy, ix[0] if ix else None]
    return entry + ["m"] if "m" in mode else entry  # a metadata read: judged by its whole stat


def _dir_entry(probe: Probe, real: str, rel: str, mode: str, now: int) -> list:
    racy: list = []
    d = _digest(probe, real, rel, mode, now, racy, None)
    if d is False:
        return ["u", rel, "a walk that follows the links it meets"]
    if d is None:
        return ["u", rel, "a directory past the budget of %d entries or %d bytes" % (ENTRIES, BYTES)]
    return ["d", rel, mode, d[0], d[1], racy]


def _digest(probe: Probe, real: str, rel: str, mode: str, now: int | None, racy: list, hashed: set | None):
    """(hex digest, entry count) of a directory's entries; None past the budget; False: a link met
    by a walk that follows links (mode "L": what it leads to is read, and is not digested here).

    Observing (`now` given) notes in `racy` the files changed too recently for their stat
    to be trusted, whose content is digested instead; checking (`hashed`) digests the
    content of exactly those again.
    """
    index = probe.index() if probe.git() else Index()
    base = probe.repo_path(rel)
    tracked = index.under(base, probe.budget) if base is not None else {}
    if tracked is None:
        return None
    h = hashlib.sha256()
    n = 0
    if "m" in mode:  # `ls -ld`, `stat dir`, `ls -la`'s `.`: the directory's own stat is shown too
        try:
            h.update(_stat_line(b".", os.lstat(real)))
        except OSError:
            h.update(b"!.\0")
    stack = [(real, "")]
    while stack:
        d, sub = stack.pop()
        try:
            with os.scandir(d) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError:
            h.update(b"!%s\0" % sub.encode("utf-8", "surrogateescape"))
            continue
        dirs = []
        for e in items:
            if e.name == ".git" or (e.name.startswith(".") and "h" not in mode and not ("i" in mode and e.name in IGNORE_FILES)) or (
                    "b" in mode and (e.name == "__pycache__" or e.name.endswith(BINARY_SUFFIXES))):
                continue
            n += 1
            if not probe.budget.spend():
                return None
            name = sub + e.name
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if "L" in mode and _stat.S_ISLNK(st.st_mode):
                return False
            if "m" in mode:
                line = _stat_line(name.encode("utf-8", "surrogateescape"), st)
            else:
                line = _dir_line(probe, e.path, name, st, tracked, base, index, now, racy, hashed)
            if line is None:
                return None
            h.update(line)
            if _stat.S_ISDIR(st.st_mode) and mode.startswith("r"):
                dirs.append((e.path, name + "/"))
        stack.extend(reversed(dirs))
    return h.hexdigest(), n


def _stat_line(nm: bytes, st: os.stat_result) -> bytes:
    """An entry as a metadata read prints it: its whole stat, content not looked at."""
    return b"m %s %o %d %d %d %d %d %d %d\0" % (nm, st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                                              st.st_ino, st.st_nlink)


def _dir_line(probe, path, name, st, tracked, base, index, now, racy, hashed) -> bytes | None:
    nm = name.encode("utf-8", "surrogateescape")
    if _stat.S_ISDIR(st.st_mode):
        return b"d %s\0" % nm
    if not _stat.S_ISREG(st.st_mode):
        return b"o %s %o %d %d\0" % (nm, st.st_mode, st.st_mtime_ns, st.st_ctime_ns)
    ix = tracked.get((base + "/" + name) if base else name)
    fresh = now is not None and now - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_NS
    if fresh:
        if len(racy) >= 64:
            return None
        racy.append(name)
    if (hashed is not None and name in hashed) or (now is not None and fresh):
        k = probe.content_id(path, st, "k")
        if k is None:
            return None
        return b"k %s %s\0" % (nm, k.encode())
    if ix is not None and _clean(ix, st, index):
        return b"g %s %s\0" % (nm, ix[0].encode())
    return b"s %s %d %d %d %d %s\0" % (nm, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, (ix[0] if ix else "-").encode())


# -- checking: the reuse side -----------------------------------------------------------

VERIFIED, CHANGED, UNKNOWN = "verified", "changed", "unknown"  # standing.VERIFIED, ... (no dataclasses here)


def check(fp: object, probe: Probe, cwd: str | None = None) -> tuple[str, list]:
    """(VERIFIED | CHANGED | UNKNOWN, changed paths) of a recorded fingerprint, against now.

    `cwd` (project-relative) is where the new call runs: a call recorded elsewhere read
    other paths (`rg foo src` in another directory), so it is not verified.
    """
    if not isinstance(fp, dict) or fp.get("v") not in (1, 2, VERSION) or not isinstance(fp.get("in"), list):
        return UNKNOWN, []
    changed: list = []
    # Version 1 did not record the way to its inputs (a link on it may have been retargeted since), version 2
    # not the stat a metadata read printed, the other refs a git read named, the ignore files of a search or
    # the call's workdir: neither is ever verified (an input it names that changed is still named).
    unknown = bool(fp.get("unknown")) or (cwd is not None and fp.get("cwd") != cwd) or fp.get("v") != VERSION
    key_ok = fp.get("key") is not None and fp.get("key") == key_id(probe.key)
    for e in fp["in"]:
        try:
            got = _check_entry(probe, e, key_ok, fp.get("git") is True)
        except (TypeError, ValueError, IndexError, KeyError):
            got = UNKNOWN
        if got == CHANGED:
            changed.append(e[1] if e[0] != "h" else "HEAD")
        elif got == UNKNOWN:
            unknown = True
    if changed:
        return CHANGED, list(dict.fromkeys(str(c) for c in changed))
    return (UNKNOWN if unknown else VERIFIED), []


def _check_entry(probe: Probe, e: list, key_ok: bool, git: bool) -> str:
    kind = e[0]
    if kind == "u":
        return UNKNOWN
    if kind == "h":
        return VERIFIED if e[1] is not None and probe.head() == e[1] else (UNKNOWN if e[1] is None else CHANGED)
    if kind == "l":
        return _check_way(probe, e, key_ok)
    if kind == "r":  # a ref a git read named: the same ids under the same names
        if not isinstance(e[1], str) or not isinstance(e[2], list):
            return UNKNOWN
        now = probe.ref_values(e[1])
        return UNKNOWN if now is None else (VERIFIED if now == e[2] else CHANGED)
    rel = e[1]
    if not isinstance(rel, str) or rel.startswith("/") or ".." in rel.split("/"):
        return UNKNOWN
    path = os.path.join(probe.root, rel) if rel != "." else probe.root
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    if kind == "a":
        return VERIFIED if st is None else CHANGED
    if st is None:
        return CHANGED
    if os.path.realpath(path) != path.rstrip(os.sep):
        return UNKNOWN  # a symlink now: what it reads is not what was recorded
    if kind == "f":
        return _check_file(probe, path, rel, st, e, key_ok, git)
    if kind == "d":
        if not _stat.S_ISDIR(st.st_mode):
            return CHANGED
        d = _digest(probe, path, rel, e[2], None, [], set(e[5]))
        return UNKNOWN if not d else (VERIFIED if d[0] == e[3] else CHANGED)
    return UNKNOWN


def _check_way(probe: Probe, e: list, key_ok: bool) -> str:
    """The named path still leads where it led, by the same links with the same targets."""
    _, named, rel, way = e[:4]
    if not isinstance(named, str) or named.startswith("/") or way is None or not key_ok:
        return UNKNOWN
    got = walk_links(probe.root, named)
    if got is None:
        return CHANGED  # a loop now: it led somewhere when it was recorded
    if inside(probe.root, got[0]) != rel or _way_id(probe, got[1]) != way:
        return CHANGED
    return VERIFIED


def _check_file(probe: Probe, path: str, rel: str, st: os.stat_result, e: list, key_ok: bool, git: bool) -> str:
    _, _, size, mtime, ctime, ino, cid, racy, ix = e[:9]
    if not _stat.S_ISREG(st.st_mode):
        return CHANGED
    if git:
        now_ix = probe.index().lookup(probe.repo_path(rel) or "") if probe.git() else None
        if (now_ix[0] if now_ix else None) != ix:
            return CHANGED  # staged or committed anew: `git diff` and `git status` would say otherwise
    probe.budget.entries -= 1
    if len(e) > 9 and e[9] == "m":  # a metadata read (`ls -l`, `stat`): what it printed is the stat itself
        return VERIFIED if (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) == (size, mtime, ctime, ino) else CHANGED
    if (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) == (size, mtime, ctime, ino) and not racy:
        return VERIFIED
    if cid is None:
        return CHANGED if st.st_size != size else UNKNOWN
    kind, _, want = cid.partition(":")
    if kind == "k" and not key_ok:
        return UNKNOWN
    if st.st_size != size:
        return CHANGED
    got = probe.content_id(path, st, kind)
    if got is None:
        return UNKNOWN
    return VERIFIED if got == want else CHANGED


# -- the key -------------------------------------------------------------------------


def key_id(key: bytes | None) -> str | None:
    return None if key is None else hashlib.sha256(b"eggshell.fingerprint.key\0" + key).hexdigest()[:16]


def key_of(state_dir: str, create: bool = False) -> bytes | None:
    """This data root's fingerprint key (32 random bytes, 0600), made on first use when `create`."""
    path = os.path.join(state_dir, KEY_FILE)
    try:
        with open(path, "rb") as f:
            key = f.read(64)
        return key if len(key) == 32 else None
    except FileNotFoundError:
        if not create:
            return None
    except OSError:
        return None
    try:
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return key_of(state_dir)  # another hook made it first
    except OSError:
        return None
    key = os.urandom(32)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    return key
