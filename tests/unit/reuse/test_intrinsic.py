"""intrinsic.py: patterns, corpus weights, one match, and the forward reusable-work gate.

Corpora are built from real compiled turns (turns.compile_turn), never from hand-made
Values. The gate is checked against an oracle written from the module docstring, on the
logical units themselves, not by re-reading the Match's own fields:

- completed only on a tool-level owner (a child of a turn's All), never on retrieval;
- forward: the prior fragment's units are a sub-multiset of the current ones;
- the prior fragment has an identifying unit past the framing that is not an option;
- the current call adds no option the prior one lacked;
- the prior fragment is the whole prior Work, or its own result lines ground it.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eggshell.reuse.commands import GLOBAL_ARG_OPTIONS, SUBCOMMAND_PROGRAMS, deniable, tool_name
from eggshell.reuse.intrinsic import (Corpus, candidates_from, find, identifying, identity_match, match_pair, patterns_of, projected_edge, projection_outcome)
from eggshell.reuse.logical import logical
from eggshell.graph.turns import work_text
from eggshell.core.values import Atom, E, Op, S, apply
from helpers.reuse import LAW, PATHS, bash, commands, corpora, corpus_of, logical_units, prior, render, turn

# -- factories (bash, turn, corpus_of, prior: helpers.reuse) --------------------------------


def matches(corpus: Corpus, demand: Atom) -> list:
    """Every match_pair result of `demand` against the admitted corpus patterns (relevant or not)."""
    out = []
    for cur in patterns_of(demand):
        for ci, pi in corpus.admitted(cur):
            m = match_pair(corpus, demand, cur, ci, pi)
            if m is not None:
                out.append(m)
    return out


def tool_match(corpus: Corpus, demand: Atom, past_text: str | None = None):
    ms = [m for m in matches(corpus, demand) if m.tool and (past_text is None or m.past.text == "Bash\n" + past_text)]
    assert len(ms) == 1, [(m.past.text, m.cur.text) for m in ms]
    return ms[0]


def owner_edges(corpus: Corpus) -> set:
    return {c.edge for c in corpus.candidates}


# -- the oracle (docstring rules on the logical units) -------------------------------------


def oracle_forward(m) -> bool:
    past = Counter(u.text for u in logical_units(m.past.text))
    cur = Counter(u.text for u in logical_units(m.cur.text))
    return not (past - cur)


def oracle_framing(text: str) -> int:
    """Leading framing units, from the docstring: the tool name, the shell verb, and for a program
    with subcommands the subcommand after its global options (and their arguments)."""
    lg = logical(text)
    units = lg.units
    if not text.startswith("Bash\n"):
        return 0 if "\n" not in text else 1
    n = 2
    if len(units) > 1 and units[1].text in SUBCOMMAND_PROGRAMS:
        while n < len(units) and units[n].option:
            takes = units[n].text in GLOBAL_ARG_OPTIONS
            n += 1
            if takes and n < len(units) and not units[n].option:
                n += 1  # the option's argument, possibly `a.b=c` in several units
                while n < len(units) and not units[n].option and lg.source[units[n - 1].end : units[n].start] in ("=", ".", ":"):
                    n += 1
        n += 1
    return min(n, len(units))


def oracle_identity(m) -> bool:
    f = oracle_framing(m.past.text)
    return any(i >= f and not u.option and identifying(u.text) for i, u in enumerate(logical_units(m.past.text)))


def oracle_new_options(m) -> bool:
    """Options compare as written: `-r` is not `-R`."""
    from eggshell.reuse.logical import logical

    def opts(text: str) -> Counter:
        lg = logical(text)
        return Counter(text[u.start:u.end] for u in lg.units if u.option)

    return bool(opts(m.cur.text) - opts(m.past.text))


def oracle_whole(corpus: Corpus, m) -> bool:
    cand = corpus.candidates[m.cand]
    return len(cand.patterns) == 1 and m.past.value == cand.work


def oracle_grounded(corpus: Corpus, m) -> Atom | None:
    """The docstring's grounding, independently: the prior output's lines holding a unit the clause
    looks for (identifying, not framing, not an option, not a path) that are not an echo of a clause."""
    cand = corpus.candidates[m.cand]
    f = oracle_framing(m.cur.text)
    want = {u.text for i, u in enumerate(logical_units(m.cur.text))
            if i >= f and not u.option and identifying(u.text) and "/" not in u.text and "." not in u.text}
    want &= {u.text for u in logical_units(m.past.text)}
    clauses = [p.text.partition("\n")[2].strip() for p in cand.patterns]
    kept = []
    for line in (cand.outcome.as_text() or "").split("\n"):
        bare = line.strip().lstrip("+$> ").strip()
        if want & {u.text for u in logical_units(line)} and bare and bare not in clauses:
            kept.append(line)
    return Atom.text("\n".join(kept)) if kept else None


def oracle_reads(text: str) -> tuple[bool, bool]:
    """(only reads, operands only add inputs) of a "Bash\n<clause>" pattern, from the docstring's rule."""
    import shlex
    import unicodedata

    from eggshell.reuse import effects
    from eggshell.reuse.commands import ADDITIVE_PROGRAMS, GIT_READS, READ_ONLY_PROGRAMS

    tool, _, clause = text.partition("\n")
    if tool.casefold() != "bash" or ">" in clause.replace("2>&1", "") or " tee " in " %s " % clause:
        return False, False
    stages = [st.split() for st in clause.split("|")]
    for words in stages:
        if not words:
            continue
        prog = unicodedata.normalize("NFKC", words[0].rsplit("/", 1)[-1]).casefold()
        opts = {w.lstrip("-").split("=")[0] for w in words[1:] if w.startswith("-")}
        if prog not in READ_ONLY_PROGRAMS or (prog == "sed" and opts & {"i", "in-place"}):
            return False, False
        if prog == "find" and opts & {"delete", "exec", "execdir", "ok", "okdir", "fprint", "fprint0", "fprintf", "fls"}:
            return False, False
        if prog in ("sed", "awk", "find"):
            try:
                if effects.has_effects(prog, shlex.split(" ".join(words))[1:]):
                    return False, False
            except ValueError:
                return False, False
        if prog == "git" and next((w for w in words[1:] if not w.startswith("-")), "").casefold() not in GIT_READS:
            return False, False
    first = stages[0][0].rsplit("/", 1)[-1].casefold() if stages and stages[0] else ""
    return True, len(stages) == 1 and unicodedata.normalize("NFKC", first).casefold() in ADDITIVE_PROGRAMS


def check_gate(corpus: Corpus, m) -> None:
    """m.completed holds exactly when the docstring's gate holds (for an intrinsic match)."""
    (pr, pa), (cr, ca) = oracle_reads(m.past.text), oracle_reads(m.cur.text)
    want = (
        m.tool
        and not m.retrieved
        and oracle_forward(m)
        and oracle_identity(m)
        and not oracle_new_options(m)
        and pr and cr and (m.din or (pa and ca))
        and (oracle_whole(corpus, m) or oracle_grounded(corpus, m) is not None)
    )
    assert m.completed == want, (m.past.text, m.cur.text, m.completed)
    if m.completed:
        assert m.pin and m.past_identity > 0 and not m.new_options
        assert m.past.whole or m.grounded is not None
    if m.tool and m.pin and not m.past.whole:
        assert m.grounded == oracle_grounded(corpus, m)


# -- strategies (the shell vocabulary, commands, corpora: helpers.reuse) -------------------


@st.composite
def match_scenarios(draw):
    corpus, _alls, stored, _asked = draw(corpora())
    cmd = draw(st.one_of(st.sampled_from(stored), commands()))
    return corpus, bash(render(cmd))


# -- patterns and helpers -----------------------------------------------------------------


def test_single_clause_pattern_is_the_whole_work():
    w = bash("rg -n parse_config src")
    (p,) = patterns_of(w)
    assert p.whole and p.value == w and p.framing == 2
    assert p.text == "Bash\nrg -n parse_config src"
    assert [u.text for u in p.lg.units] == ["bash", "rg", "n", "parse_config", "src"]


def test_batched_command_is_compared_clause_by_clause():
    ps = patterns_of(bash("cd src && rg -n load_env; cat a.txt | head -5"))
    assert [p.text for p in ps] == ["Bash\ncd src", "Bash\nrg -n load_env", "Bash\ncat a.txt | head -5"]
    assert all(not p.whole and p.value == Atom.text(p.text) and p.framing == 2 for p in ps)


def test_non_shell_tool_and_prose_framing():
    (read,) = patterns_of(Atom.text(work_text("Read", {"file_path": "src/config.py"})))
    assert read.whole and read.framing == 1
    (prose,) = patterns_of(Atom.text("where is parse_config defined?"))
    assert prose.whole and prose.framing == 0


@pytest.mark.parametrize(
    "unit, want",
    [("rg", False), ("n", False), ("45", False), ("1,50p", False), ("src", True), ("parse_config", True),
     ("_x1", True), ("x86", True), ("時計", True), ("", False), ("a.py", True), ("ab", False), ("lib/config.py", True)],
)
def test_identifying_units(unit, want):
    assert identifying(unit) is want


def test_tool_name_and_deniable():
    assert tool_name(work_text("Bash", {"command": "ls"})) == "Bash"
    assert tool_name("where is it?") == ""
    assert deniable(work_text("Bash", {"command": "ls"})) and deniable(work_text("Read", {"file_path": "a"}))
    assert not deniable(work_text("Edit", {"file_path": "a"})) and not deniable("where is it?")


# -- candidates and corpus ----------------------------------------------------------------


def test_candidates_are_tool_calls_and_the_turn_request():
    c = turn("t1", "where is parse_config?", [("rg -n parse_config src", "src/config.py:12:def parse_config():\n")], "in src/config.py")
    corpus, _ = corpus_of(c)
    tools = [k for k in corpus.candidates if k.tool]
    roots = [k for k in corpus.candidates if not k.tool]
    assert [k.edge for k in tools] == list(c.tool_outcomes)
    assert [k.edge for k in roots] == [c.answer_outcome]
    assert roots[0].work == c.request


def test_without_the_all_nothing_is_tool_level():
    c = turn("t1", "where?", [("rg -n parse_config src", "x\n")])
    cands = candidates_from(c.roots, [])
    assert cands and not any(k.tool for k in cands)


def test_non_utf8_outcomes_are_not_candidates():
    w, o = bash("cat blob.bin"), Atom(b"\xff\xfe")
    occ = apply(Op.OCCURRENCE, (S, o), (S, w), (E, Atom.text("s")), (E, Atom.text("t")), (E, Atom.text("c")))
    edge = apply(Op.OUTCOME, (S, w), (S, o), (E, occ))
    assert candidates_from([edge], []) == []


def test_interrupted_turn_still_offers_tool_candidates():
    c = turn("t1", "run the tests", [("pytest -q tests", "5 passed\n")], answer=None)
    corpus, _ = corpus_of(c)
    assert [k.tool for k in corpus.candidates] == [True]


def test_weights_frame_options_and_rarity():
    corpus, _ = prior(("rg -n parse_config src", "a\n"), ("rg -n load_env src", "b\n"), ("cat src/config.py", "c\n"))
    (p,) = patterns_of(bash("rg -n parse_config src"))
    w = corpus.weights(p)
    n = len(corpus.candidates)  # 3 tool calls + the turn's request
    # bash, rg: framing; n: option; parse_config: in one Work; src: in two Works
    assert w == [0.0, 0.0, 0.0, float(n + 1 - 1), float(n + 1 - 2)]
    assert corpus.rare("parse_config") and corpus.rare("src") and not corpus.rare("rg")


def test_admission_is_containment_or_a_shared_rare_unit():
    corpus, _ = prior(("rg -n parse_config src", "a\n"), ("ls", "a\n"), ("cat a.py", "x\n"), ("cat b.py", "y\n"))
    (cur,) = patterns_of(Atom.text("what about it, ok?"))
    assert corpus.admitted(cur) == []
    (cur,) = patterns_of(Atom.text("is parse_config ok"))  # a rare unit: advice may follow
    assert [corpus.candidates[ci].work for ci, _ in corpus.admitted(cur)] == [bash("rg -n parse_config src")]
    (cur,) = patterns_of(bash("ls -la"))  # `bash ls` is wholly inside: it may complete
    assert bash("ls") in [corpus.candidates[ci].work for ci, _ in corpus.admitted(cur)]


@LAW
@given(match_scenarios())
def test_law_admission_is_exactly_containment_or_a_rare_unit(s):
    corpus, demand = s
    for cur in patterns_of(demand):
        cur_units = Counter(u.text for u in cur.lg.units)
        want = set()
        for ci, c in enumerate(corpus.candidates):
            for pi, p in enumerate(c.patterns):
                units = {u.text for u in p.lg.units}
                if units <= set(cur_units) or any(corpus.rare(t) for t in units & set(cur_units)):
                    want.add((ci, pi))
        assert set(corpus.admitted(cur)) == want
        # the same for a corpus grown in steps, and one layered over it (the current turn's calls)
        for k in range(len(corpus.candidates) + 1):
            grown = Corpus(corpus.candidates[:k])
            grown.extend(corpus.candidates[k:])
            layered = Corpus(corpus.candidates[:k]).plus(corpus.candidates[k:])
            assert corpus.admitted(cur) == grown.admitted(cur) == layered.admitted(cur), k
        # what the index leaves out could never have completed nor been advice
        for ci, c in enumerate(corpus.candidates):
            for pi in range(len(c.patterns)):
                if (ci, pi) not in want:
                    m = match_pair(corpus, demand, cur, ci, pi)
                    assert m is None or not (m.completed or m.relevant)


@pytest.mark.parametrize(
    "cmd, framing",
    [("rg -n foo src", 2), ("git status", 3), ("git --no-pager log src", 5), ("docker compose ps", 3), ("git", 2), ("ls", 2)],
)
def test_subcommands_are_framing(cmd, framing):
    (p,) = patterns_of(bash(cmd))
    assert p.framing == framing


def test_declared_identity_match_keeps_the_rest_of_the_gate():
    c = turn("t1", "run the tests", [("pytest -q", "5 passed\n")], "all green")
    corpus, _ = corpus_of(c)
    ti = next(i for i, k in enumerate(corpus.candidates) if k.tool)
    ri = next(i for i, k in enumerate(corpus.candidates) if not k.tool)
    m = identity_match(corpus, bash("python -m pytest -q"), ti)
    assert m.completed and m.past.whole and m.cur_frag == bash("python -m pytest -q") and m.past_frag == bash("pytest -q")
    assert projected_edge(corpus, m).args[2].target == corpus.candidates[ti].edge
    r = identity_match(corpus, Atom.text("are the tests green?"), ri)
    assert not r.completed and r.relevant


# -- one match: concrete cases --------------------------------------------------------------


def test_identical_call_is_completed_whole():
    corpus, _ = prior(("rg -n parse_config src", "src/config.py:12:def parse_config():\n"))
    m = tool_match(corpus, bash("rg -n parse_config src"))
    assert m.completed and m.pin and m.din and m.past.whole and m.grounded is None
    assert m.cur_frag == m.past_frag == bash("rg -n parse_config src")
    assert projected_edge(corpus, m) == corpus.candidates[m.cand].edge


def test_relative_spelling_and_case_complete():
    corpus, _ = prior(("rg -n parse_config src", "src/config.py:12:def parse_config():\n"))
    for cmd in ["rg -n parse_config ./src", "RG -n Parse_Config SRC", "ｒｇ -n parse_config src"]:
        m = tool_match(corpus, bash(cmd))
        assert m.completed and m.pin and m.din, cmd
        check_gate(corpus, m)


def test_reordered_read_completes():
    corpus, _ = prior(("cat a.py b.py", "x = 1\n"))
    m = tool_match(corpus, bash("cat b.py a.py"))
    assert m.completed and m.pin and m.din


def test_forward_containment_completes_reverse_does_not():
    corpus, _ = prior(("rg foo src", "src/x.py:1:foo\n"))
    m = tool_match(corpus, bash("rg foo src tests"))
    assert m.completed and m.pin and not m.din and m.cur_frag != bash("rg foo src tests")
    corpus, _ = prior(("rg foo src tests", "src/x.py:1:foo\n"))
    m = tool_match(corpus, bash("rg foo src"))
    assert not m.completed and not m.pin and m.din and m.relevant


def test_option_syntax_alone_has_no_identity():
    corpus, _ = prior(("ls -la", "total 0\n"))
    for cmd in ["ls -la", "ls -la src"]:
        assert not any(m.completed for m in matches(corpus, bash(cmd)))
        assert not find(corpus, bash(cmd), bash(cmd).as_text())


def test_new_option_is_not_completed():
    corpus, _ = prior(("rg -n parse_config src", "src/config.py:12:def parse_config():\n"))
    m = tool_match(corpus, bash("rg -n -v parse_config src"))
    assert m.pin and m.new_options and not m.completed and m.relevant


def test_different_sed_range_is_not_completed():
    corpus, _ = prior(("sed -n 1,50p src/config.py", "import os\n"))
    m = tool_match(corpus, bash("sed -n 51,100p src/config.py"))
    assert not m.pin and not m.din and not m.completed


def test_shared_path_suffix_is_a_different_file():
    corpus, _ = prior(("rg -n load_env lib/config.py", "12:def load_env():\n"))
    m = tool_match(corpus, bash("rg -n load_env src/config.py"))
    assert not m.pin and not m.completed
    assert "lib/config.py" not in {u.text for u in logical(m.cur_frag.as_text()).units}
    corpus, _ = prior(("cat lib/config.py", "A = 1\n"))
    assert not any(m.completed for m in matches(corpus, bash("cat src/config.py")))


def test_pipeline_with_another_stage_is_not_completed():
    corpus, _ = prior(("rg foo | head -5", "a:foo\n"))
    m = tool_match(corpus, bash("rg foo | wc -l"))
    assert not m.pin and not m.completed


def test_grounded_batched_clause_completes_with_its_lines():
    out = "config.py:3:def load_env():\nconfig.py:9:    load_env()\nsettings.py:1:import os\n"
    corpus, _ = prior(("cd src && rg -n load_env", out))
    m = tool_match(corpus, bash("rg -n load_env"), "rg -n load_env")
    assert m.completed and not m.past.whole
    assert m.grounded == Atom.text("config.py:3:def load_env():\nconfig.py:9:    load_env()")
    assert projection_outcome(corpus, m) == m.grounded
    e = projected_edge(corpus, m)
    assert e != corpus.candidates[m.cand].edge and e.args[2].target == corpus.candidates[m.cand].edge
    assert e.args[2].auth is E and e.args[0].target == m.cur_frag


def test_ungrounded_batched_clause_is_advisory():
    corpus, _ = prior(("cat a.txt; cat b.txt", "hello\nworld\n"))
    m = tool_match(corpus, bash("cat b.txt"), "cat b.txt")
    assert m.pin and m.din and m.grounded is None and not m.completed and m.relevant


def test_request_owner_never_completes():
    c = turn("t1", "where is parse_config defined?", [("rg -n parse_config src", "x\n")], "src/config.py")
    corpus, _ = corpus_of(c)
    ms = [m for m in matches(corpus, Atom.text("where is parse_config defined?")) if not m.tool]
    assert ms and all(m.pin and m.din and not m.completed for m in ms)
    assert all(m.projection_work == m.demand for m in ms)


def test_prose_overlap_never_completes_a_tool_call():
    corpus, _ = prior(("rg -n parse_config src", "src/config.py:12:def parse_config():\n"))
    ms = matches(corpus, Atom.text("where does parse_config read the src files?"))
    assert ms and not any(m.completed for m in ms)


def test_echoed_command_in_an_output_is_not_matched():
    corpus, _ = prior(("cat notes.md", "next: rg -n load_env src\n"))
    assert not any(m.completed for m in matches(corpus, bash("rg -n load_env src")))
    assert not any(m.completed for m in matches(corpus, Atom.text("next: rg -n load_env src")))


# -- laws -----------------------------------------------------------------------------------


@LAW
@given(match_scenarios())
def test_law_completed_is_exactly_the_forward_gate(s):
    corpus, demand = s
    for m in matches(corpus, demand):
        check_gate(corpus, m)


@LAW
@given(match_scenarios())
def test_law_find_returns_relevant_matches_completed_first(s):
    corpus, demand = s
    got = find(corpus, demand, demand.as_text())
    assert all(m.relevant and m.demand == demand for m in got)
    flags = [m.completed for m in got]
    assert flags == sorted(flags, reverse=True)
    # relevance: completed, or a rare unit shared and one side contained or a third shared
    for m in got:
        assert m.completed or (m.anchored and (m.pin or m.din or max(m.pin_weight, m.din_weight) >= 1 / 3))


@LAW
@given(match_scenarios())
def test_law_projection_is_the_owner_or_cites_it(s):
    corpus, demand = s
    owners = owner_edges(corpus)
    for m in matches(corpus, demand):
        cand = corpus.candidates[m.cand]
        out = projection_outcome(corpus, m)
        assert out == cand.outcome or out == m.grounded
        if out != cand.outcome:
            lines = set((cand.outcome.as_text() or "").split("\n"))
            assert set(out.as_text().split("\n")) <= lines
        e = projected_edge(corpus, m)
        assert e.op is Op.OUTCOME and e.args[1].target == out and e.args[0].target == m.projection_work
        if e != cand.edge:
            assert e not in owners and all(r.auth is E for r in e.args[2:])
            assert [r.target for r in e.args[2:]] == [cand.edge]
        assert m.projection_work == (m.cur_frag if m.tool else m.demand)


@LAW
@given(st.data())
def test_law_pin_and_din_swap_with_the_roles(data):
    """Matching a against b and b against a: one side's pin is the other side's din."""
    a, b = data.draw(commands()), data.draw(commands())
    ta, tb = render(a), render(b)
    corpus, _ = corpus_of(turn("t1", "one", [(ta, "x\n")]), turn("t2", "two", [(tb, "y\n")]))
    ia = next(i for i, c in enumerate(corpus.candidates) if c.tool and c.work == bash(ta))
    ib = next(i for i, c in enumerate(corpus.candidates) if c.tool and c.work == bash(tb) and i != ia)
    for pa_i, pa in enumerate(corpus.candidates[ia].patterns):
        for pb_i, pb in enumerate(corpus.candidates[ib].patterns):
            ab = match_pair(corpus, bash(tb), pb, ia, pa_i)  # past = a, current = b
            ba = match_pair(corpus, bash(ta), pa, ib, pb_i)  # past = b, current = a
            assert (ab is None) == (ba is None)
            if ab is not None:
                assert (ab.pin, ab.din) == (ba.din, ba.pin)
                assert (ab.past_frag, ab.cur_frag) == (ba.cur_frag, ba.past_frag)


@LAW
@given(match_scenarios(), st.data())
def test_law_spelling_does_not_change_a_match(s, data):
    corpus, demand = s
    cmd = demand.as_text()
    text = json.loads(cmd.split("\n", 1)[1])["command"]
    variant = data.draw(st.sampled_from(["upper", "dotslash", "width"]))
    # Options are case-sensitive (`-r` is not `-R`), so only the other words are respelled.
    words = text.split(" ")
    if variant == "upper":
        alt = " ".join(w if w.startswith("-") else w.upper() for w in words)
    elif variant == "dotslash":
        alt = " ".join("./" + w if w in PATHS else w for w in words)
    else:
        alt = " ".join(w if w.startswith("-") else "".join(chr(ord(c) + 0xFEE0) if c.isalnum() and c.isascii() else c for c in w)
                       for w in words)
    key = lambda m: (m.cand, m.past.text, m.pin, m.din, m.completed, m.relevant, m.new_options, m.grounded)
    assert Counter(map(key, matches(corpus, demand))) == Counter(map(key, matches(corpus, bash(alt))))
