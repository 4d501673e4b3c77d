"""Shared scaffolding for the reuse-engine tests (test_intrinsic.py, test_reuse.py).

Corpora are built from real compiled turns (turns.compile_turn), never from hand-made
Values; commands come from a small shell vocabulary so that hypothesis finds overlaps.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st

from eggshell.reuse.intrinsic import Corpus, candidates_from
from eggshell.reuse.logical import logical
from eggshell.graph.turns import compile_turn, parse_turn, work_text
from eggshell.core.values import Atom

# -- factories --------------------------------------------------------------------------


def bash(cmd: str) -> Atom:
    """The Work of a Bash call running `cmd`."""
    return Atom.text(work_text("Bash", {"command": cmd}))


def turn(tid: str, prompt: str, calls, answer: str | None = "done", session: str = "s1", tool: str = "Bash"):
    """A compiled turn: `calls` are (command, output) pairs run with `tool`."""
    d = {
        "session": session,
        "turn": tid,
        "cwd": "",
        "prompt": prompt,
        "tools": [{"name": tool, "id": "%s-c%d" % (tid, i), "input": {"command": c}, "output": o} for i, (c, o) in enumerate(calls)],
        "answer": answer,
    }
    return compile_turn(parse_turn(d))


def corpus_of(*compiled):
    """(Corpus of the compiled turns' candidates, the turns' decompositions)."""
    roots = [v for c in compiled for v in c.roots]
    alls = [c.decomposition for c in compiled]
    return Corpus(candidates_from(roots, alls)), alls


def prior(*calls, prompt: str = "look around", answer: str | None = "done"):
    """corpus_of one turn with these (command, output) calls."""
    return corpus_of(turn("t1", prompt, list(calls), answer))


def logical_units(text: str):
    return logical(text).units


# Each law example compiles a few turns and builds a corpus: two thirds of the profile's
# examples keep both files well under 20 s by default (HYPOTHESIS_PROFILE=thorough still scales up).
LAW = settings(settings.default, max_examples=max(20, settings.default.max_examples * 2 // 3))

# -- strategies ---------------------------------------------------------------------------

VERBS = ["rg", "grep", "cat", "ls", "sed", "head", "git", "pytest", "find", "wc"]
OPTIONS = ["-n", "-l", "-v", "-la", "-i", "-C3", "--hidden"]
PATHS = ["src", "tests", "lib/config.py", "src/config.py", "a.py", "b.py", "docs/readme.md"]
SYMBOLS = ["parse_config", "load_env", "main", "TODO", "Config"]
WORDS = ["where", "is", "the", "config", "loaded", "fix", "failing", "please", "check", "why", "parse_config", "load_env", "src", "tests"]


@st.composite
def simple_cmds(draw):
    """(verb, options, operands)."""
    verb = draw(st.sampled_from(VERBS))
    opts = draw(st.lists(st.sampled_from(OPTIONS), max_size=2, unique=True))
    args = draw(st.lists(st.sampled_from(PATHS + SYMBOLS), min_size=1, max_size=3))
    return (verb, tuple(opts), tuple(args))


def render_simple(s) -> str:
    verb, opts, args = s
    return " ".join([verb, *opts, *args])


@st.composite
def commands(draw):
    """A command as clauses of pipelines: ((pipeline, ...), separators between clauses), where a
    pipeline is a tuple of simple_cmds."""
    clauses = draw(st.lists(st.lists(simple_cmds(), min_size=1, max_size=2).map(tuple), min_size=1, max_size=3).map(tuple))
    seps = tuple(draw(st.sampled_from([" && ", "; "])) for _ in clauses[1:])
    return clauses, seps


def render(cmd) -> str:
    clauses, seps = cmd
    parts = [" | ".join(render_simple(s) for s in c) for c in clauses]
    out = parts[0]
    for sep, p in zip(seps, parts[1:]):
        out += sep + p
    return out


@st.composite
def outputs(draw, cmd, echo: bool = False):
    """Output lines naming some of the command's paths and symbols, or unrelated text; with
    `echo`, also a `set -x` style trace line of the command itself."""
    names = [a for c in cmd[0] for s in c for a in s[2]] or ["x"]
    kind = draw(st.sampled_from(["grep", "opaque", "empty", "mixed"] + (["echo"] if echo else [])))
    if kind == "empty":
        return ""
    if kind == "opaque":
        return "%d passed\n" % draw(st.integers(1, 9))
    if kind == "echo":
        return "+ %s\n" % render(cmd)
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        a = draw(st.sampled_from(names + (WORDS if kind == "mixed" else [])))
        lines.append("%s:%d:%s" % (draw(st.sampled_from(PATHS)), draw(st.integers(1, 99)), a))
    return "\n".join(lines) + "\n"


def prompts():
    return st.lists(st.sampled_from(WORDS), min_size=2, max_size=7).map(" ".join)


@st.composite
def corpora(draw, echo: bool = False):
    """(corpus, alls, stored structured commands, stored prompts); `echo` as for outputs()."""
    compiled, stored, asked = [], [], []
    for t in range(draw(st.integers(1, 3))):
        calls = []
        for _ in range(draw(st.integers(1, 3))):
            c = draw(commands())
            stored.append(c)
            calls.append((render(c), draw(outputs(c, echo))))
        prompt = draw(prompts())
        asked.append(prompt)
        answer = draw(st.one_of(st.none(), st.sampled_from(["done", "parse_config is in src/config.py"])))
        compiled.append(turn("t%d" % t, prompt, calls, answer))
    corpus, alls = corpus_of(*compiled)
    return corpus, alls, stored, asked
