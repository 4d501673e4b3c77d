"""What one recorded event may hold: checks and repairs done before it is journaled.

A hook payload is valid JSON but not always storable: Node's JSON.stringify writes a
string cut inside an emoji as a lone UTF-16 surrogate (valid JSON, not UTF-8), ujson reads
`Infinity` and `NaN`, and a tool's input or output may nest a thousand levels deep. Each
case once made the journal write or the turn's compilation fail. Here a lone surrogate
becomes U+FFFD (as JavaScript's String.prototype.toWellFormed does), an oversized output is
cut with a visible mark, and a tool event that still cannot be stored is named, so the
hook quarantines that one event (quarantine.py) and keeps the rest of the turn.

On every hook's path: no `re`, `json`, `dataclasses` or `typing`.
"""

from __future__ import annotations

MAX_DEPTH = 256  # containers inside a tool's input or output; canonical JSON recurses once per level
OUTPUT_CHARS = 1 << 20  # characters of one tool output kept in the record
TRUNCATED = "\n[output truncated by Eggshell at %d of %d characters]"


def _fix_text(s: str) -> tuple[str, int]:
    if s.isascii():
        return s, 0
    try:
        s.encode("utf-8")
        return s, 0
    except UnicodeEncodeError:
        # Through UTF-16: a pair that arrived as two code points joins up, a lone half becomes U+FFFD.
        fixed = s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return fixed, fixed.count("\ufffd") - s.count("\ufffd")


def well_formed(value: object) -> tuple[object, int]:
    """(value with every lone surrogate in its strings and keys replaced by U+FFFD, how many)."""
    if isinstance(value, str):
        return _fix_text(value)
    if isinstance(value, dict):
        out, n = {}, 0
        for k, v in value.items():
            k2, a = _fix_text(k) if isinstance(k, str) else (k, 0)
            v2, b = well_formed(v)
            out[k2] = v2
            n += a + b
        return out, n
    if isinstance(value, list):
        items = [well_formed(v) for v in value]
        return [v for v, _ in items], sum(n for _, n in items)
    return value, 0


def terminal_text(output: object) -> str | None:
    """The text a terminal showed for a tool output, or None when it is not terminal-shaped.

    Codex sends Bash output as a string, Claude Code as {stdout, stderr, interrupted, ...};
    anything else is stored as canonical JSON (turns.normalize_output).
    """
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    if isinstance(output, dict) and ("stdout" in output or "stderr" in output):
        out = output.get("stdout") or ""
        err = output.get("stderr") or ""
        if not isinstance(out, str) or not isinstance(err, str):
            return None
        text = out
        if err:
            text += ("" if not text or text.endswith("\n") else "\n") + err
        if output.get("interrupted") is True:
            text += ("" if not text or text.endswith("\n") else "\n") + "[interrupted]"
        return text
    return None


def measure(value: object) -> tuple[str | None, int]:
    """(why `value` has no canonical JSON text, or None; the characters of its strings).

    Iterative, so a deeply nested value is measured, not a RecursionError.
    """
    chars = 0
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            chars += len(v)
        elif isinstance(v, float):
            if v - v != 0.0:  # inf - inf and nan - nan are nan (math.isfinite, without importing math)
                return "holds a non-finite number (%r), which JSON cannot represent" % v, chars
        elif isinstance(v, (dict, list)):
            if depth >= MAX_DEPTH:
                return "is nested deeper than %d levels" % MAX_DEPTH, chars
            if isinstance(v, dict):
                for k, x in v.items():
                    if not isinstance(k, str):
                        return "has a key that is not a string (%r)" % (k,), chars
                    chars += len(k)
                    stack.append((x, depth + 1))
            else:
                stack.extend((x, depth + 1) for x in v)
        elif v is not None and not isinstance(v, (bool, int)):
            return "holds a %s, which is not JSON" % type(v).__name__, chars
    return None, chars


def tool_problem(ev: dict) -> str | None:
    """Why a journal `tool` event cannot become part of a stored turn, or None when it can."""
    name = ev.get("name")
    if not isinstance(name, str) or not name:
        return "the tool name is %s, not a non-empty string" % ("empty" if name == "" else type(name).__name__)
    if "\n" in name:
        return "the tool name %r spans more than one line" % name[:80]
    why, _ = measure(ev.get("input"))
    if why is not None:
        return "the tool input " + why
    if terminal_text(ev.get("output")) is None:
        why, _ = measure(ev.get("output"))
        if why is not None:
            return "the tool output " + why
    return None


def capped_output(output: object) -> object:
    """A tool output of at most OUTPUT_CHARS characters of text, with a line saying what was cut.

    Cut before anything is journaled, sent to the manager or matched, so a 50 MB log costs
    what 1 MB does. A terminal-shaped output keeps its text; anything else keeps its shape,
    cut where its strings pass the limit (containers after the cut are emptied), so redaction
    still reads each string as the tool gave it: cut as JSON text, a `"password": "..."`
    became `\\"password\\": \\"...\\"`, which no rule reads as a key and its value. A cut
    that would split a secret moves back to its start (_cut_at), so the head kept never
    holds the part of a token its rule no longer matches.
    """
    text = terminal_text(output)
    if text is None:
        why, chars = measure(output)
        if why is not None or chars <= OUTPUT_CHARS:
            return output  # small, or quarantined anyway
        return _Cut(OUTPUT_CHARS, chars).value(output)
    if len(text) <= OUTPUT_CHARS:
        return output
    cut = _cut_at(text, OUTPUT_CHARS)
    return text[:cut] + TRUNCATED % (cut, len(text))


def _cut_at(text: str, at: int) -> int:
    """Where to cut a text to keep at most `at` characters: before a secret the cut would split.

    The head of a cut token no longer matches its rule (`ghp_` and half of it), so redaction
    would keep it; the text around the cut is scanned first (redact.cut_point).
    """
    from eggshell.core.redact import cut_point

    return cut_point(text, at)


class _Cut:
    """Walks a structured output in order, keeping strings (and keys) until `left` runs out."""

    __slots__ = ("left", "total", "marked")

    def __init__(self, left: int, total: int):
        self.left, self.total, self.marked = left, total, False

    def value(self, v: object) -> object:
        if isinstance(v, str):
            return self._text(v)
        if isinstance(v, list):
            out = []
            for x in v:
                if self.marked:
                    break
                out.append(self.value(x))
            return out
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if self.marked:
                    break
                self.left -= min(self.left, len(k))
                out[k] = self.value(x)
            return out
        return v

    def _text(self, s: str) -> str:
        if len(s) <= self.left:
            self.left -= len(s)
            return s
        kept = _cut_at(s, self.left)
        short = self.left - kept  # characters given up so that no secret is split
        self.left, self.marked = 0, True
        return s[:kept] + TRUNCATED % (OUTPUT_CHARS - short, self.total)
