"""Whether a call of a "read-only" program does more than read, judged from its own words.

(Or answers from more than its files: `jq env` prints the environment.)

`sed`, `awk` and `find` usually only read, so commands.READ_ONLY_PROGRAMS lists them; but
their programs can write files (`sed 'w out'`, `awk '{print > "f"}'`, `find -fprint f`)
and run commands (`sed 's/x/y/e'`, `awk 'BEGIN{system("make")}'`, `find -exec`). A prior
run never stands in for such a call: the denied repeat would skip its side effect. Kept
apart from commands.py because it reads a program's own language, conservatively: a
script this module cannot read whole counts as writing (a lost reuse costs a rerun; a
skipped write is a wrong result).
"""

from __future__ import annotations

# sed commands, lower-cased (a command is read without regard to case: the matcher's spelling
# rule, and `W`, `R` are effects like `w`, `r`), that take no argument or a number: pure reads.
_SED_PLAIN = frozenset("pdngxhzlqf={}#!")
# sed commands whose argument runs to the end of the line: text, labels.
_SED_TO_EOL = frozenset("aic:bt")
# sed commands that write, read another file or run one: `w`, `W`, `r`, `R`, `e`.
_SED_EFFECTS = frozenset("wre")
# Words of an awk program that write, run a command, read another input, or depend on the environment.
_AWK_EFFECTS = ("system", "getline", "close", "fflush", ">", "|", "ENVIRON", "PROCINFO", "@load", "@include")


def sed_has_effects(args: list[str]) -> bool:
    """Whether `sed ARGS` may write, run or read anything beyond its operands and stdin."""
    scripts: list[str] = []
    operands: list[str] = []
    i = 0
    past = False
    while i < len(args):
        a = args[i]
        if past or not a.startswith("-") or a == "-":
            operands.append(a)
        elif a == "--":
            past = True
        elif a.startswith("--"):
            name, eq, val = a[2:].partition("=")
            if name.startswith(("in-pl", "fil")) or "in-place".startswith(name) or "file".startswith(name):
                return True  # writes its operands, or a script this module cannot see
            if "expression".startswith(name) and len(name) >= 2:
                if not eq:
                    i += 1
                    val = args[i] if i < len(args) else ""
                scripts.append(val)
        else:
            cluster = a[1:]
            for j, c in enumerate(cluster):
                if c in "if":
                    return True  # -i (in place, any suffix), -f (a script file)
                if c in "el":  # -e SCRIPT, -l N: the rest of the word, or the next one
                    rest = cluster[j + 1:]
                    if not rest:
                        i += 1
                        rest = args[i] if i < len(args) else ""
                    if c == "e":
                        scripts.append(rest)
                    break
        i += 1
    if not scripts:
        if not operands:
            return True  # no script: not a call this module can read
        scripts.append(operands[0])
    return any(sed_script_has_effects(s) for s in scripts)


def sed_script_has_effects(script: str) -> bool:
    """Whether a sed script holds a command (or an `s` flag) that writes, reads a file or runs one."""
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c in " \t\n;":
            i += 1
            continue
        i = _skip_address(script, i)
        if i is None:
            return True
        while i < n and script[i] in " \t!":
            i += 1
        if i >= n:
            return False
        c = script[i].lower()
        if c in _SED_EFFECTS:
            return True
        if c in ("s", "y"):
            i = _skip_delimited(script, i + 1, 2)
            if i is None:
                return True
            if c == "s":
                j = i
                while j < n and script[j] not in ";\n}":
                    if script[j] in "weWE":  # `s/a/b/w FILE`, `s/a/b/e`
                        return True
                    j += 1
                i = j
            continue
        if c == "#":
            j = script.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in _SED_TO_EOL:
            j = script.find("\n", i)
            if c in ":bt":  # a label ends at `;` too (GNU)
                k = script.find(";", i)
                j = k if 0 <= k and (j < 0 or k < j) else j
            i = n if j < 0 else j
            continue
        if c in _SED_PLAIN:
            i += 1
            while i < n and script[i].isdigit():  # `q5`, `l 40`
                i += 1
            continue
        return True  # a command this reader does not know
    return False


def _skip_address(s: str, i: int) -> int | None:
    """Past an address or range (`3`, `$`, `/re/I`, `\\%re%`, `1,5`, `0~2`, `addr,+3`); None if malformed."""
    for _ in range(2):
        n = len(s)
        if i < n and (s[i].isdigit() or s[i] in "$+~"):
            while i < n and (s[i].isdigit() or s[i] in "$+~"):
                i += 1
        elif i < n and (s[i] == "/" or s[i] == "\\"):
            if s[i] == "\\":
                i += 1
            i = _skip_delimited(s, i, 1)
            if i is None:
                return None
            while i < n and s[i] in "IMim":
                i += 1
        if i < n and s[i] == ",":
            i += 1
            continue
        return i
    return i


def _skip_delimited(s: str, i: int, parts: int) -> int | None:
    """Past `parts` fields delimited by the character at `i` (backslash escapes kept); None if unterminated."""
    if i >= len(s) or s[i] in "\n\\":
        return None
    d = s[i]
    i += 1
    for _ in range(parts):
        while i < len(s) and s[i] != d:
            i += 2 if s[i] == "\\" else 1
        if i >= len(s):
            return None
        i += 1
    return i


def awk_has_effects(args: list[str]) -> bool:
    """Whether `awk ARGS` may write, run a command or read beyond its operands (conservatively:
    any `>` or `|` in the program, even a comparison, counts)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        if a in ("-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec") or a.startswith(("-f", "--file=", "-i", "-l", "-E")):
            return True  # a program file, an extension or in-place editing: not seen here
        if a in ("-v", "-F", "--assign", "--field-separator"):
            i += 1
        i += 1
    if i >= len(args):
        return True  # no program: not a call this module can read
    program = args[i].casefold()
    return any(w.casefold() in program for w in _AWK_EFFECTS)


def find_has_effects(args: list[str]) -> bool:
    """Whether `find ARGS` writes (`-delete`, `-fprint*`, `-fls`) or runs (`-exec*`, `-ok*`)."""
    return any(a in ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls") for a in args)


def jq_has_effects(args: list[str]) -> bool:
    """Whether `jq ARGS` answers from the environment (`env`, `$ENV`): not a read of its files."""
    return any("env" in a.casefold() for a in args if not a.startswith("-"))


CHECKS = {"sed": sed_has_effects, "awk": awk_has_effects, "gawk": awk_has_effects, "mawk": awk_has_effects,
          "nawk": awk_has_effects, "find": find_has_effects,
          "jq": jq_has_effects}


def has_effects(prog: str, args: list[str]) -> bool:
    """Whether this call of `prog` (a READ_ONLY_PROGRAMS name) does more than read; False for programs not judged here.

    The matcher reads commands without regard to case, width or a leading `./` (logical.py), so
    this answer must not depend on them either: the words are NFKC-normalized and stripped of
    `./`, and the checks read commands without regard to case (a spelling sed itself would
    reject only costs a reuse)."""
    import unicodedata

    check = CHECKS.get(prog)
    if check is None:
        return False
    norm = []
    for a in args:
        a = unicodedata.normalize("NFKC", a)
        while a.startswith("./"):
            a = a[2:]
        norm.append(a)
    return check(norm)
