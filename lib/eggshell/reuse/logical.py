"""Logical text: the unit sequence the intrinsic matcher compares Work with.

Two spellings of the same action ("RG -n Foo ./src", "rg -n foo src") must meet, so
units are NFKC-normalized and case-folded; but a match must point back at what was
actually written, so every unit keeps its span in the ORIGINAL string (normalizing the
whole string first would lose those offsets). Characters are classified one at a time
through their NFKC form, which makes full-width letters, ligatures and Unicode spaces
behave like their ordinary forms without shifting any offset.

Shell commands are also split into clauses, so one clause of a batched command can be
recognised on its own ("cd src && rg foo" repeats "rg foo").
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable
from eggshell.core.values import dataclass_reduce

# Ideographs and kana are written without spaces, so each is a unit of its own and
# the 1..3-gram index rebuilds words from them. Hangul is spaced, so it stays in words.
_CJK = re.compile("[\u3005-\u3007\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
                  "\uf900-\ufaff\U00020000-\U0003134f]")
_GAP, _WORD, _MARK, _HAN = range(4)

_SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "local_shell", "shell_command"})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
# A loop or conditional is one action: splitting "for ...; do ...; done" would invent
# clauses that never ran on their own.
_CONTROL = re.compile(r"^(?:for|while|until|if|case|select|function)(?:\s|$)|[;\n][ \t]*(?:do|then|done|fi|esac)\b")
_CLOSE = {"(": ")", "{": "}", "`": "`", '"': '"', "'": "'"}


@dataclass(frozen=True, slots=True)
class Unit:
    text: str
    start: int
    end: int
    option: bool

    __reduce__ = dataclass_reduce


@dataclass(frozen=True, slots=True)
class Logical:
    source: str
    units: tuple[Unit, ...]

    __reduce__ = dataclass_reduce

    def byte_span(self, u: Unit) -> tuple[int, int]:
        """Stored provenance is in bytes (what the .egg keeps); offsets here are characters."""
        a = len(self.source[: u.start].encode("utf-8", "surrogatepass"))
        return a, a + len(self.source[u.start : u.end].encode("utf-8", "surrogatepass"))


def _nf(c: str) -> str:
    return c if c < "\x80" else unicodedata.normalize("NFKC", c)


def _fold(s: str) -> str:
    # casefold can leave text that is not NFKC (e.g. after 'ẞ'), so normalize again.
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", s).casefold())


def _canon(t: str) -> str:
    """'./x' names the same file as 'x'; trailing dots are sentence punctuation."""
    return (t[2:] if t.startswith("./") else t).rstrip(".")


def _compound(x: str) -> bool:
    return x in "_./" or unicodedata.category(x)[0] in "LMN"


def _kind(c: str) -> int:
    """Classify by the NFKC form, so '／', 'Ａ' and 'ﬁ' act like '/', 'A' and 'fi'."""
    if c < "\x80":
        return _WORD if c.isalnum() or c in "_./" else _GAP
    n = unicodedata.normalize("NFKC", c)
    if not n:
        return _GAP
    if all(_CJK.match(x) and unicodedata.category(x)[0] in "LN" for x in n):
        return _HAN
    if all(_compound(x) for x in n):
        return _MARK if all(unicodedata.category(x)[0] == "M" for x in n) else _WORD
    return _GAP  # spaces of every kind, punctuation, and mixed forms such as '½' -> '1⁄2'


def _unit(text: str, s: int, e: int) -> Unit | None:
    # Trim the canonicalized-away characters from the span too, so provenance points
    # at exactly the characters that carry the unit's identity.
    if e - s >= 2 and _nf(text[s]) == "." and _nf(text[s + 1]) == "/":
        s += 2
    while e > s and set(_nf(text[e - 1])) == {"."}:
        e -= 1
    t = _canon(_fold(text[s:e])) if e > s else ""
    return Unit(t, s, e, s > 0 and _nf(text[s - 1]) == "-") if t else None


def logical(text: str) -> Logical:
    """Units of `text` in source order; see the module docstring for why spans stay original."""
    units: list[Unit] = []
    start, run = None, _GAP
    for i, c in enumerate(text):
        k = _kind(c)
        if start is not None and (k == _MARK or (k == _WORD and run == _WORD)):
            continue  # marks attach to whatever precedes them, even a single ideograph
        if start is not None and (u := _unit(text, start, i)):
            units.append(u)
        start, run = (None, _GAP) if k == _GAP else (i, _HAN if k == _HAN else _WORD)
    if start is not None and (u := _unit(text, start, len(text))):
        units.append(u)
    return Logical(text, tuple(units))


def grams(lg: Logical, widths: Iterable[int] = (1, 2, 3)) -> dict[str, list[tuple[int, int]]]:
    """Runs of consecutive units keyed by their texts: shared runs are the evidence of reuse."""
    texts = [u.text for u in lg.units]
    out: dict[str, list[tuple[int, int]]] = {}
    for w in widths:
        for i in range(len(texts) - w + 1):
            out.setdefault(" ".join(texts[i : i + w]), []).append((i, i + w))
    return out


def _scan(cmd: str) -> list[int] | None:
    """Clause bounds [s0, e0, s1, e1, ...] at top level; None when a heredoc makes it one action.

    A small context stack (quotes, $(), (), {}, backticks) is enough to never cut inside
    quoted or nested text; anything unbalanced just keeps the rest whole (the safe side).
    """
    stack: list[str] = []
    cuts, i, n = [0], 0, len(cmd)
    while i < n:
        c, top = cmd[i], (stack[-1] if stack else "")
        if top == "'":
            if c == "'":
                stack.pop()
        elif c == "\\":
            i += 1  # the escaped character (even a newline) is never a separator
        elif top in ('"', "`"):
            if c == top:
                stack.pop()
            elif top == '"' and cmd.startswith("$(", i):
                stack.append("(")
                i += 1
            elif top == '"' and c == "`":
                stack.append("`")
        elif c == "#" and (i == 0 or cmd[i - 1] in " \t\n;&|()"):
            while i + 1 < n and cmd[i + 1] != "\n":
                i += 1  # a comment: separators inside it are not code
        elif cmd.startswith("<<", i):
            if not cmd.startswith("<<<", i):
                return None  # heredoc bodies are data; the command is one action
            i += 2
        elif c in _CLOSE:
            stack.append(c)
        elif stack and c == _CLOSE[stack[-1]]:
            stack.pop()
        elif not stack and (c in ";\n" or cmd.startswith("&&", i)):
            cuts += [i, i + (2 if c == "&" else 1)]
            i = cuts[-1] - 1
        elif not stack and c == "&" and cmd[i - 1 : i] not in ("<", ">", "|") and cmd[i + 1 : i + 2] != ">":
            cuts += [i, i + 1]  # a lone '&' backgrounds a job; '>&', '&>' and '|&' are redirections
        i += 1
    return cuts + [n]


def shell_clauses(command: str) -> list[str]:
    """One entry per separately executed command; pipes and '||' fallbacks stay whole."""
    whole = command.strip()
    if not whole:
        return []
    if _CONTROL.search(whole) or (cuts := _scan(command)) is None:
        return [whole]
    parts = [command[a:b].strip() for a, b in zip(cuts[::2], cuts[1::2])]
    return [p for p in parts if p] or [whole]


def _shell_command(inp: object) -> str | None:
    if not isinstance(inp, dict):
        return None
    cmd = next((inp[k] for k in ("command", "cmd") if isinstance(inp.get(k), (str, list))), None)
    if isinstance(cmd, list) and len(cmd) >= 3 and all(isinstance(x, str) for x in cmd[:2]):
        # argv form (Codex `shell`): only a shell's -c script is a command line to split.
        if cmd[0].rsplit("/", 1)[-1] in _SHELLS and cmd[1] in ("-lc", "-c") and isinstance(cmd[-1], str):
            return cmd[-1]
        return None
    return cmd if isinstance(cmd, str) else None


def work_surfaces(work_text: str) -> list[str]:
    """Views of a tool Work to match on: a batched shell call is compared clause by clause."""
    name, sep, rest = work_text.partition("\n")
    if not sep or name.casefold() not in _SHELL_TOOLS:
        return [work_text]
    try:
        cmd = _shell_command(json.loads(rest))
    except ValueError:
        return [work_text]
    clauses = shell_clauses(cmd) if cmd is not None else []
    return [name + "\n" + c for c in clauses] or [work_text]


def fragment_text(lg: Logical, unit_indices: Iterable[int]) -> str:
    """Identity text of a matched fragment: what was written, minus the gaps between units."""
    merged: list[list[int]] = []
    for s, e in sorted({(lg.units[i].start, lg.units[i].end) for i in unit_indices}):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return " ".join(lg.source[s:e] for s, e in merged)


def result_lines(text: str, spans: Iterable[tuple[int, int]]) -> str | None:
    """The lines of a result that a match touched: a grounded excerpt that still reads as lines."""
    spans = list(spans)
    kept, pos = [], 0
    for line in text.split("\n"):
        end = pos + len(line)
        if any((s < end and e > pos) or (s == e and pos <= s <= end) for s, e in spans):
            kept.append(line)
        pos = end + 1
    out = "\n".join(kept)
    return out if out.strip() else None
