"""What a proposed command is: its tool, which words frame it, and whether it only reads.

The intrinsic matcher compares units; this module says which units carry identity and
which calls a prior run may stand in for. Kept apart because it is knowledge about
tools and shell programs (lists a user may want to read or extend), not matching logic.
"""

from __future__ import annotations

import re
import shlex
import unicodedata

from eggshell.reuse import effects
from eggshell.reuse.logical import Logical

# Tools whose proposed calls may be denied when covered: shell commands and reads. Edits
# and writes change the world, so a prior run never makes them redundant.
SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "local_shell", "shell_command"})
READ_TOOLS = frozenset({"read", "grep", "glob", "ls", "view"})
# Programs whose first word names a subcommand: `git status` is framing, like `rg` alone,
# so it never carries identity on its own (and its output changes with every edit).
SUBCOMMAND_PROGRAMS = frozenset({"git", "docker", "npm", "pnpm", "yarn", "cargo", "go", "pip", "pip3", "uv", "poetry", "kubectl",
                                 "gh", "brew", "apt", "apt-get", "conda", "dotnet", "bundle", "gradle", "mvn", "terraform", "helm"})
# Programs that only read, whose output a repeat would reproduce: the only ones whose prior
# run may stand in for a new one. Writes (`rm`, `sed -i`, `> file`), builds and test runs
# execute or change things, so a prior run never makes them redundant.
# Not here: programs whose answer depends on the environment, not on project files (`which`,
# `pwd`, `df`, `env`, `date`, `whoami`, ...): no fingerprint can verify them.
# `sed`, `awk` and `find` only read unless their own words say otherwise (effects.py).
READ_ONLY_PROGRAMS = frozenset({"rg", "grep", "egrep", "fgrep", "ag", "ack", "cat", "head", "tail", "less", "more", "sed", "awk",
                                "find", "ls", "tree", "wc", "stat", "file", "du", "nl", "sort", "uniq", "cut", "tr", "jq",
                                "diff", "cmp", "readlink", "realpath", "basename", "dirname", "git"})
# Programs whose extra operands only add inputs (more files, more directories): the output
# of fewer operands is a part of the output of more. For every other read-only program a
# prior run stands in only for the same command, in any order (`git diff HEAD~3 src` is not
# `git diff src`).
ADDITIVE_PROGRAMS = frozenset({"rg", "grep", "egrep", "fgrep", "ag", "ack", "cat", "ls", "tree", "wc", "stat", "file", "du"})
GIT_READS = frozenset({"log", "show", "diff", "status", "blame", "grep", "ls-files", "ls-tree", "rev-parse", "describe", "shortlog"})
WRITE_OPTIONS = {"sed": {"i", "in-place"}, "find": {"delete", "exec", "execdir", "ok", "okdir", "fprint", "fprint0", "fprintf", "fls"},
                 "sort": {"o", "output", "compress-program"}, "tree": {"o"}, "git": {"output", "O", "open-files-in-pager"}}

# Options of those programs that take the next word as their argument (`git -C dir status`).
GLOBAL_ARG_OPTIONS = frozenset({"c", "git-dir", "work-tree", "namespace", "n", "context", "host", "h", "config", "kubeconfig",
                                "f", "file", "project-directory", "manifest-path", "chdir", "directory", "prefix", "cwd"})
re_redirect = re.compile(r"(?<![<>&|0-9])>{1,2}(?!&)|\btee\b")  # output into a file (not `2>&1`)


def tool_name(work_text: str) -> str:
    """The tool of a canonical tool Work ("name\n{json}"); "" for a request in prose."""
    from eggshell.graph.turns import split_work

    parsed = split_work(work_text)
    return parsed[0] if parsed else ""


def deniable(work_text: str) -> bool:
    """Whether a proposed call of this tool may be stopped as redundant."""
    return tool_name(work_text).casefold() in SHELL_TOOLS | READ_TOOLS


def framing(lg: Logical, name: str) -> int:
    """Leading units that frame: the tool name, a shell verb, and a subcommand after one."""
    if not name:
        return 0
    if name.casefold() not in SHELL_TOOLS:
        return 1
    units = lg.units
    n = 2
    if len(units) > 1 and units[1].text in SUBCOMMAND_PROGRAMS:
        while n < len(units) and units[n].option:
            # `git -C dir status`, `git -c color.ui=false status`: global options and their arguments
            takes = units[n].text in GLOBAL_ARG_OPTIONS
            n += 1
            if takes and n < len(units) and not units[n].option:
                n += 1
                while n < len(units) and not units[n].option and lg.source[units[n - 1].end:units[n].start] in ("=", ".", ":"):
                    n += 1  # `color.ui=false` is one argument in several units
        n += 1
    return min(n, len(units))


def reads_only(text: str, framing: int) -> tuple[bool, bool]:
    """(only reads, extra operands only add inputs) of one pattern text ("tool\n<clause>").

    Every stage of a pipeline must read only (`| xargs rm` writes), and a redirection into
    a file (`>`) writes.
    """
    tool = text.partition("\n")[0].casefold() if "\n" in text else ""
    if tool in READ_TOOLS:
        return True, False  # a read tool (Read, Grep, Glob, LS): the same input reads the same thing
    if framing < 2 or tool not in SHELL_TOOLS:
        return False, False
    clause = text.partition("\n")[2]
    if re_redirect.search(clause):
        return False, False
    stages = clause.split("|")
    additive = len(stages) == 1
    for stage in stages:
        words = stage.split()
        if not words:
            continue
        prog = unicodedata.normalize("NFKC", words[0].rsplit("/", 1)[-1]).casefold()
        if prog not in READ_ONLY_PROGRAMS:
            return False, False
        opts = {w.lstrip("-").split("=")[0] for w in words[1:] if w.startswith("-")}
        if opts & WRITE_OPTIONS.get(prog, set()):
            return False, False
        if prog in effects.CHECKS:
            try:
                args = shlex.split(stage)[1:]
            except ValueError:
                return False, False  # a quote split by `|` inside a program: not read here
            if effects.has_effects(prog, args):
                return False, False  # `sed 'w out'`, `awk 'BEGIN{system(...)}'`: writes or runs
        if prog == "git":
            sub = unicodedata.normalize("NFKC", next((w for w in words[1:] if not w.startswith("-")), "")).casefold()
            if sub not in GIT_READS:
                return False, False
        additive = additive and prog in ADDITIVE_PROGRAMS
    return True, additive
