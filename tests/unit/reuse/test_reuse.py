"""reuse/plan.py: discover() turns intrinsic matches into one checked plan per inquiry.

Laws (hypothesis over corpora of compiled turns whose commands come from a small shell
vocabulary, and inquiries that are proposed calls or prompts):

1. every completed Selected passes the forward reusable-work gate;
2. root-turn (request/answer) matches and retrieval nominations are advisory and never
   block; retrieval never adds a union or changes what completes;
3. exactly one open residual, which is the inquiry or an open remainder;
4. soundness: each completed use is a stored owner edge or a projection citing one, whose
   Work equals the demand under the plan's own equality, and the selection is valid;
5. connection: each completed use has a witness match that is relevant, forward,
   reusable, fragment-identical and tool-level;
6. unions are run-local and footprint-preserving, never the persistent ones;
7. saturation is bounded and deterministic;
8. spelling (./x, case, width, operand order) does not change what completes;
9. PostToolUse evidence only trims the handover, never the plan.

Root-turn matches may still propose a union (a respelled request must reach the prior
turn's decomposition, see reuse/plan.py); they only never complete nor block.

Then the concrete cases, under this project's rules (the module docstrings), not the
reference's where they differ, and regressions for bugs these tests found.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eggshell.reuse.extraction import ADVISORY, COMPLETED, WorkGraph, outcome_of, valid_for, work_of
from eggshell.reuse.commands import GLOBAL_ARG_OPTIONS, SUBCOMMAND_PROGRAMS
from eggshell.reuse.intrinsic import Corpus, find, identifying, projected_edge
from eggshell.reuse.logical import logical
from eggshell.reuse.quotient import Union, build
from eggshell.reuse.plan import discover
from eggshell.graph.turns import REMAINDER_MARKER
from eggshell.core.values import Atom, E, Op, same_exact_footprint
from helpers.reuse import (
    LAW,
    PATHS,
    bash,
    commands,
    corpora,
    corpus_of,
    logical_units,
    prior,
    prompts,
    render,
    turn,
)

# -- factories (bash, turn, corpus_of, prior: helpers.reuse) --------------------------------


def plan_for(calls, inquiry: Atom, *, prompt: str = "look around", answer: str | None = "done", **kw):
    corpus, alls = prior(*calls, prompt=prompt, answer=answer)
    p = discover(corpus, alls, inquiry, **kw)
    assert p is not None
    return corpus, p


def completed(p):
    return [s for s in p.selected if s.status == COMPLETED]


def advisory(p):
    return [s for s in p.selected if s.status == ADVISORY]


def blocking(p):
    return [s for s in p.selected if s.blocks]


def owner(corpus: Corpus, edge):
    """The stored candidate edge this plan edge is, or cites as its one Exact observation."""
    owners = {c.edge for c in corpus.candidates}
    if edge in owners:
        return edge
    cited = [r.target for r in edge.args[2:] if r.auth is E]
    assert len(edge.args) == 3 and cited and cited[0] in owners, edge
    return cited[0]


def completed_owners(corpus: Corpus, p) -> frozenset:
    return frozenset(owner(corpus, e) for _, e in p.extraction.completed_uses)


def blocking_owners(corpus: Corpus, p) -> frozenset:
    return frozenset(owner(corpus, s.edge) for s in blocking(p))


def plan_eq(p):
    return build([p.inquiry, *(u.left for u in p.unions), *(u.right for u in p.unions)], p.unions)


# -- strategies (the shell vocabulary, commands, outputs, prompts, corpora: helpers.reuse) -
# Here stored outputs may also be a `set -x` trace of their command: corpora(echo=True).


@st.composite
def respelled(draw, cmd):
    """The same command written differently: ./paths, case, full width, operand order, spacing."""
    clauses, seps = cmd
    out = []
    for c in clauses:
        pipe = []
        for verb, opts, args in c:
            # operand order is free, except a subcommand's place (`git status x` is not `git x status`),
            # after the argument of a global option that takes one (`git -n X status`)
            fixed = 0
            if verb in SUBCOMMAND_PROGRAMS:
                fixed = 1 + bool(opts and logical(opts[-1]).units[-1].text in GLOBAL_ARG_OPTIONS)
            head, rest = args[:fixed], args[fixed:]
            args = [*head, *draw(st.permutations(rest))]
            args = ["./" + a if a in PATHS and draw(st.booleans()) else a for a in args]
            pipe.append((verb, opts, tuple(args)))
        out.append(tuple(pipe))
    text = render((tuple(out), seps))
    style = draw(st.sampled_from(["keep", "upper", "title", "width"]))
    # options are case-sensitive (`-r` is not `-R`): only the other words are respelled
    if style == "upper":
        text = " ".join(w if w.startswith("-") else w.upper() for w in text.split(" "))
    elif style == "title":
        text = " ".join(w if w.startswith("-") else w[:1].upper() + w[1:] for w in text.split(" "))
    elif style == "width":
        text = " ".join(w if w.startswith("-") else "".join(chr(ord(ch) + 0xFEE0) if ch.isascii() and ch.isalnum() else ch for ch in w)
                        for w in text.split(" "))
    if draw(st.booleans()):
        text = text.replace(" ", "  ")
    return text


@st.composite
def scenarios(draw, kinds=("stored", "respelled", "command", "prompt", "stored_prompt")):
    corpus, alls, stored, asked = draw(corpora(echo=True))
    kind = draw(st.sampled_from(kinds))
    if kind == "stored":
        inquiry = bash(render(draw(st.sampled_from(stored))))
    elif kind == "respelled":
        inquiry = bash(draw(respelled(draw(st.sampled_from(stored)))))
    elif kind == "command":
        inquiry = bash(render(draw(commands())))
    elif kind == "prompt":
        inquiry = Atom.text(draw(prompts()))
    else:
        inquiry = Atom.text(draw(st.sampled_from(asked)))
    return corpus, alls, inquiry


def run(s, **kw):
    corpus, alls, inquiry = s
    p = discover(corpus, alls, inquiry, **kw)
    assert p is not None  # only atoms are unified here: the equality always certifies
    return p


# -- law 1: the forward reusable-work gate ------------------------------------------------


@LAW
@given(scenarios())
def test_law_completed_selected_pass_the_forward_gate(s):
    corpus, _, _ = s
    p = run(s)
    for sel in completed(p):
        m = sel.match
        assert not m.retrieved and m.tool and m.pin and m.past_identity > 0 and not m.new_options
        assert m.past.whole or m.grounded is not None
        assert m.completed
        # the same, from the text: prior units inside the current ones, identity, no new option
        past, cur = logical_units(m.past.text), logical_units(m.cur.text)
        assert not (Counter(u.text for u in past) - Counter(u.text for u in cur))
        assert any(i >= m.past.framing and not u.option and identifying(u.text) for i, u in enumerate(past))
        assert not (Counter(u.text for u in cur if u.option) - Counter(u.text for u in past if u.option))
        assert corpus.candidates[m.cand].tool


# -- law 2: root-turn matches and retrieval ------------------------------------------------


@LAW
@given(scenarios())
def test_law_root_turn_matches_are_advisory_and_never_block(s):
    p = run(s)
    for sel in p.selected:
        if not sel.match.tool:
            assert sel.status == ADVISORY and not sel.blocks and not sel.match.completed
        if sel.blocks:
            assert sel.boundary and sel.match.demand == p.inquiry and sel.match.tool


@LAW
@given(scenarios(), st.data())
def test_law_retrieval_adds_no_union_and_no_completion(s, data):
    corpus, _, _ = s
    n = len(corpus.candidates)
    picked = data.draw(st.lists(st.integers(-1, n + 1), max_size=4))
    base, p = run(s), run(s, retrieved=picked)
    assert p.unions == base.unions
    assert completed_owners(corpus, p) == completed_owners(corpus, base)
    assert p.extraction.residual == base.extraction.residual
    for sel in p.selected:
        if sel.match.retrieved:
            assert not sel.blocks and 0 <= sel.match.cand < n
    # advisory-only profile: matches become retrieval
    adv = run(s, local_union=False)
    assert adv.unions == () and not adv.extraction.completed_uses
    assert all(sel.status == ADVISORY and not sel.blocks and sel.match.retrieved for sel in adv.selected)


@LAW
@given(scenarios(kinds=("stored", "respelled", "prompt")))
def test_law_retrieval_is_advisory_and_never_changes_what_blocks(s):
    corpus, _, _ = s
    base = run(s)
    p = run(s, retrieved=range(len(corpus.candidates)))
    for sel in p.selected:
        if sel.match.retrieved:
            assert sel.status == ADVISORY
    assert blocking_owners(corpus, p) == blocking_owners(corpus, base)


# -- law 3: one open residual --------------------------------------------------------------


@LAW
@given(scenarios())
def test_law_exactly_one_open_residual(s):
    p = run(s)
    assert len(p.extraction.residual) == 1
    (r,) = p.extraction.residual
    assert r == p.inquiry or (r.as_text() or "").startswith(REMAINDER_MARKER)
    if p.continuation is not None:
        assert p.continuation.args[0].target == p.inquiry
        assert p.continuation.args[-1].target.as_text() == REMAINDER_MARKER + p.inquiry.as_text()


# -- law 4: soundness ----------------------------------------------------------------------


@LAW
@given(scenarios())
def test_law_completed_uses_are_sound(s):
    corpus, alls, inquiry = s
    p = run(s)
    eq = plan_eq(p)
    assert eq is not None
    done = {e for _, e in p.extraction.completed_uses}
    adv = {e for _, e in p.extraction.advisory_uses}
    assert not done & adv  # one status per edge
    for demand, edge in p.extraction.completed_uses:
        assert edge.op is Op.OUTCOME
        own = owner(corpus, edge)  # a stored owner, or a projection citing one (Exact)
        assert eq.same(work_of(edge), demand)
        assert outcome_of(edge) in p.extraction.prior_outcomes
        got, full = outcome_of(edge).as_text(), outcome_of(own).as_text()
        assert got == full or set(got.split("\n")) <= set(full.split("\n"))  # whole, or its own lines
    # the whole selection is valid against the graph it could have used
    graph = WorkGraph(((p.continuation,) if p.continuation else ()) + tuple(alls), tuple(done | adv))
    policy = lambda d, e: COMPLETED if e in done else ADVISORY if e in adv else None
    assert valid_for(graph, eq, policy, inquiry, p.extraction.selection)


# -- law 5: connection -----------------------------------------------------------------------


@LAW
@given(scenarios())
def test_law_every_completed_use_has_a_connected_witness(s):
    corpus, alls, inquiry = s
    p = run(s)
    eq = plan_eq(p)
    # the hits: Selected keeps one item per (command, output), so re-find on every demanded Work
    pool = [sel.match for sel in p.selected]
    demanded = {inquiry, *(d for d, _ in p.extraction.completed_uses), *(d for d, _ in p.extraction.advisory_uses)}
    for a in [*alls, *([p.continuation] if p.continuation else [])]:
        if eq.same(a.args[0].target, inquiry) or a.args[0].target in demanded:
            demanded.update(r.target for r in a.args[1:])
    for demand in demanded:
        if isinstance(demand, Atom) and demand.as_text() is not None:
            pool += find(corpus, demand, demand.as_text())
    for demand, edge in p.extraction.completed_uses:
        witnesses = [
            m for m in pool
            if projected_edge(corpus, m) == edge and m.relevant and m.completed and not m.retrieved and m.tool and m.pin
            and eq.same(m.cur_frag, m.past_frag) and eq.same(m.projection_work, demand)
        ]
        assert witnesses, (demand, edge)
        assert all(corpus.candidates[m.cand].tool for m in witnesses)
    for sel in completed(p):
        assert sel.edge in {e for _, e in p.extraction.completed_uses}
        assert eq.same(sel.match.cur_frag, sel.match.past_frag)


# -- law 6: unions are run-local ------------------------------------------------------------


@LAW
@given(scenarios())
def test_law_unions_are_run_local_and_footprint_preserving(s):
    corpus, alls, inquiry = s
    persistent = (Union(Atom.text("alpha"), Atom.text("beta"), "workspace"),)
    p = discover(corpus, alls, inquiry, persistent=persistent)
    assert p is not None
    assert len(set(p.unions)) == len(p.unions)
    for u in p.unions:
        assert u.scope == "run" and u not in persistent
        assert u.left != u.right and same_exact_footprint(u.left, u.right)
    assert p.unions == run(s).unions  # an unrelated persistent union changes nothing


# -- law 7: saturation is bounded and deterministic -----------------------------------------


@LAW
@given(scenarios())
def test_law_saturation_is_bounded_and_deterministic(s):
    corpus, alls, inquiry = s
    p = run(s)
    assert 0 <= p.passes <= len(corpus.candidates) + len(alls) + 2
    assert run(s) == p
    # a rebuilt corpus of the same candidates gives the same plan
    again = discover(Corpus(list(corpus.candidates)), list(alls), inquiry)
    assert again == p


# -- PostToolUse evidence --------------------------------------------------------------------


@LAW
@given(scenarios(), st.data())
def test_law_evidence_only_trims_what_is_already_shown(s, data):
    corpus, _, _ = s
    base = run(s)
    shown = data.draw(st.lists(st.sampled_from(corpus.candidates), max_size=3))
    evidence = "$ tool output\n" + "".join((c.outcome.as_text() or "") + "\n" for c in shown)
    p = run(s, evidence=evidence)
    assert p.extraction == base.extraction and p.unions == base.unions  # the plan itself is unchanged
    kept = {(x.match.cand, x.edge) for x in p.selected}
    assert kept <= {(x.match.cand, x.edge) for x in base.selected} or len(base.selected) == 12
    everything = run(s, evidence="\n".join(c.outcome.as_text() or "" for c in corpus.candidates))
    assert everything.selected == ()


# -- law 8: spelling invariance ------------------------------------------------------------


@LAW
@given(corpora(echo=True), st.data())
def test_law_spelling_does_not_change_what_completes(c, data):
    corpus, alls, stored, _ = c
    cmd = data.draw(st.one_of(st.sampled_from(stored), commands()))
    a = discover(corpus, alls, bash(render(cmd)))
    b = discover(corpus, alls, bash(data.draw(respelled(cmd))))
    assert completed_owners(corpus, a) == completed_owners(corpus, b)
    assert blocking_owners(corpus, a) == blocking_owners(corpus, b)
    assert {owner(corpus, s.edge) for s in advisory(a)} == {owner(corpus, s.edge) for s in advisory(b)}


# -- concrete cases ----------------------------------------------------------------------

RG_OUT = "src/config.py:12:def parse_config(path):\n"


def test_identical_call_completes_and_blocks():
    corpus, p = plan_for([("rg -n parse_config src", RG_OUT)], bash("rg -n parse_config src"))
    (sel,) = completed(p)
    assert sel.blocks and sel.boundary and sel.edge == corpus.candidates[sel.match.cand].edge
    assert p.passes == 0 and p.unions == () and p.extraction.residual == (p.inquiry,)
    assert p.extraction.prior_outcomes == (Atom.text(RG_OUT),)


def test_relative_path_spelling_completes():
    _corpus, p = plan_for([("rg -n parse_config src", RG_OUT)], bash("rg -n parse_config ./src"))
    (sel,) = completed(p)
    assert sel.blocks and len(p.unions) == 1 and p.passes == 1
    assert p.unions[0] == Union(bash("rg -n parse_config ./src"), bash("rg -n parse_config src"), "run")
    assert p.extraction.prior_outcomes == (Atom.text(RG_OUT),)


def test_reordered_read_completes():
    _, p = plan_for([("cat a.py b.py", "x = 1\ny = 2\n")], bash("cat b.py a.py"))
    assert len(completed(p)) == 1 and len(blocking(p)) == 1 and len(p.unions) == 1


def test_forward_containment_completes_the_prior_part():
    _, p = plan_for([("rg foo src", "src/x.py:1:foo\n")], bash("rg foo src tests"))
    (sel,) = completed(p)
    assert sel.blocks and not sel.match.din
    assert p.continuation is not None and p.extraction.residual[0].as_text().startswith(REMAINDER_MARKER)


def test_reverse_containment_is_advisory():
    _, p = plan_for([("rg foo src tests", "src/x.py:1:foo\n")], bash("rg foo src"))
    assert not completed(p) and not blocking(p) and advisory(p)
    assert p.extraction.prior_outcomes == () and p.extraction.residual == (p.inquiry,)


@pytest.mark.parametrize("cur", ["ls -la src", "ls -la"])
def test_option_syntax_alone_is_not_completed(cur):
    _, p = plan_for([("ls -la", "total 0\n")], bash(cur))
    assert not completed(p) and not blocking(p) and p.extraction.prior_outcomes == ()


def test_different_sed_range_is_advisory():
    _, p = plan_for([("sed -n 1,50p src/config.py", "import os\n")], bash("sed -n 51,100p src/config.py"))
    assert not completed(p) and not blocking(p) and [s.match.tool for s in advisory(p)] == [True]
    assert p.extraction.prior_outcomes == () and len(p.extraction.residual) == 1


def test_shared_path_suffix_of_another_file_is_advisory():
    _, p = plan_for([("rg -n load_env lib/config.py", "12:def load_env():\n")], bash("rg -n load_env src/config.py"))
    assert not completed(p) and not blocking(p) and [s.match.tool for s in advisory(p)] == [True]
    _, p = plan_for([("cat lib/config.py", "A = 1\n")], bash("cat src/config.py"))
    assert not completed(p) and not blocking(p) and p.extraction.prior_outcomes == ()


def test_pipeline_overlap_is_advisory():
    _, p = plan_for([("rg foo | head -5", "a:foo\n")], bash("rg foo | wc -l"))
    assert not completed(p) and not blocking(p) and advisory(p)
    assert p.extraction.prior_outcomes == ()


def test_prose_overlap_in_a_prompt_never_completes():
    _, p = plan_for([("rg -n parse_config src", RG_OUT)], Atom.text("where does parse_config read the src files?"),
                    prompt="show me the config loader")
    assert not completed(p) and not blocking(p) and advisory(p)
    assert p.extraction.prior_outcomes == () and p.extraction.residual == (p.inquiry,)


def test_grounded_batched_clause_completes():
    out = "config.py:3:def load_env():\n"
    corpus, p = plan_for([("cd src && rg -n load_env", out)], bash("rg -n load_env"))
    (sel,) = completed(p)
    assert sel.blocks and not sel.match.past.whole and sel.match.grounded == Atom.text("config.py:3:def load_env():")
    assert owner(corpus, sel.edge) == corpus.candidates[sel.match.cand].edge != sel.edge
    assert p.extraction.prior_outcomes == (Atom.text("config.py:3:def load_env():"),)


def test_ungrounded_batched_clause_is_advisory():
    _, p = plan_for([("cat a.txt; cat b.txt", "hello\nworld\n")], bash("cat b.txt"))
    assert not completed(p) and not blocking(p) and advisory(p)
    assert p.extraction.prior_outcomes == ()


def test_a_new_option_is_advisory():
    _, p = plan_for([("rg -n parse_config src", RG_OUT)], bash("rg -n -v parse_config src"))
    assert not completed(p) and not blocking(p) and advisory(p)
    assert p.extraction.prior_outcomes == () and p.extraction.residual == (p.inquiry,)


PROMPT = "where is parse_config defined and do tests pass?"
TEST_SRC = "def test_parse():\n    assert parse_config('a.cfg')\n"
CALLS = [("rg -n parse_config src", RG_OUT), ("sed -n 1,40p tests/test_config.py", TEST_SRC)]


@pytest.mark.parametrize("asked", [PROMPT, "Where is parse_config defined, and do tests pass"])
def test_identical_prompt_exposes_the_turns_tool_outcomes(asked):
    _corpus, p = plan_for(CALLS, Atom.text(asked), prompt=PROMPT, answer="parse_config is in src/config.py:12")
    assert p.passes >= 1
    got = completed(p)
    assert {s.match.past.text for s in got} == {"Bash\nrg -n parse_config src", "Bash\nsed -n 1,40p tests/test_config.py"}
    assert not blocking(p) and all(not s.boundary for s in got)  # a demanded child, not the inquiry
    assert set(p.extraction.prior_outcomes) == {Atom.text(RG_OUT), Atom.text(TEST_SRC)}
    (r,) = p.extraction.residual
    assert r.as_text() == REMAINDER_MARKER + PROMPT  # the prior turn's remainder stays open
    assert all(not s.match.tool for s in advisory(p))  # the answer is advice only


def test_multi_clause_call_completes_each_repeated_clause():
    _, p = plan_for(CALLS, bash("rg -n parse_config src && sed -n 1,40p tests/test_config.py"), prompt=PROMPT)
    assert len(completed(p)) == 2 and len(blocking(p)) == 2
    assert p.continuation is not None and p.extraction.residual[0].as_text().startswith(REMAINDER_MARKER)


@pytest.mark.parametrize("inq", [bash("rg -n parse_config src"), bash("rg -n parse_config ./src"), Atom.text(PROMPT)])
def test_local_union_off_makes_everything_advisory(inq):
    _, p = plan_for(CALLS, inq, prompt=PROMPT)
    assert completed(p)
    _, q = plan_for(CALLS, inq, prompt=PROMPT, local_union=False)
    assert q.unions == () and not completed(q) and not blocking(q) and advisory(q)
    assert q.extraction.prior_outcomes == () and len(q.extraction.residual) == 1


def test_interrupted_prior_turn_still_offers_its_tool_outcomes():
    _, p = plan_for([("rg -n load_env src", "src/env.py:3:def load_env():\n")], bash("rg -n load_env src"),
                    prompt="find load_env", answer=None)
    (sel,) = completed(p)
    assert sel.blocks and p.extraction.prior_outcomes == (Atom.text("src/env.py:3:def load_env():\n"),)
    _, p = plan_for([("rg -n load_env src", "src/env.py:3:def load_env():\n")], Atom.text("find load_env"),
                    prompt="find load_env", answer=None)
    assert len(completed(p)) == 1 and not blocking(p)


@pytest.mark.parametrize("prior, cur", [
    ("pytest -q tests/test_config.py", "pytest -q tests/test_config.py"),  # a test run executes code: never stood in for
    ("rm -rf build", "rm -rf build"),
    ("sed -i s/foo/bar/ a.py", "sed -i s/foo/bar/ a.py"),
    ("echo hello > notes.txt", "echo hello > notes.txt"),
    ("rg -l foo src", "rg -l foo src | xargs rm"),  # an extra pipeline stage that writes
    ("git diff src", "git diff HEAD~3 src"),  # an extra operand that is not an input
    ("ls -r src", "ls -R src"),  # options keep their case
    ("git commit -m fix_parse_config", "git commit -m fix_parse_config"),
])
def test_writes_runs_and_changed_meanings_never_complete(prior, cur):
    _, p = plan_for([(prior, "output of %s\n" % prior)], bash(cur))
    assert not completed(p) and not blocking(p)


@pytest.mark.parametrize("prior, cur", [
    ("git diff src", "git diff src"), ("git log -n 5 src/a.py", "git log -n 5 ./src/a.py"),
    ("cat a.py b.py", "cat b.py a.py c.py"), ("sed -n 1,40p src/a.py", "sed -n 1,40p ./src/a.py"),
    ("rg -n foo src 2>&1", "rg -n foo src 2>&1"),
])
def test_reads_complete(prior, cur):
    _, p = plan_for([(prior, "output of the read\n")], bash(cur))
    assert completed(p) and blocking(p)


def test_echoed_command_in_an_output_does_not_complete():
    calls = [("cat notes.md", "next: rg -n load_env src\n")]
    for inq in [bash("rg -n load_env src"), Atom.text("next: rg -n load_env src")]:
        _, p = plan_for(calls, inq, prompt="read my notes", answer="next: rg -n load_env src")
        assert not completed(p) and not blocking(p) and p.extraction.prior_outcomes == ()
    # a prior command that only printed the current one is larger: reverse containment
    _, p = plan_for([("echo 'rg -n load_env src'", "rg -n load_env src\n")], bash("rg -n load_env src"))
    assert not completed(p) and not blocking(p)


def test_root_turn_answer_is_advice_only():
    _corpus, p = plan_for(CALLS, Atom.text(PROMPT), prompt=PROMPT, answer="parse_config is in src/config.py:12")
    roots = [s for s in p.selected if not s.match.tool]
    assert roots and all(s.status == ADVISORY and not s.blocks for s in roots)
    assert Atom.text("parse_config is in src/config.py:12") not in p.extraction.prior_outcomes


def test_evidence_showing_the_prior_outcome_suppresses_it():
    _, p = plan_for(CALLS, bash("rg -n parse_config src"), prompt=PROMPT)
    assert len(completed(p)) == 1
    _, q = plan_for(CALLS, bash("rg -n parse_config src"), prompt=PROMPT, evidence="$ rg\n" + RG_OUT + "more\n")
    assert not completed(q) and not blocking(q)
    assert q.extraction == p.extraction  # only the handover is trimmed, not the plan
    _, r = plan_for(CALLS, bash("rg -n parse_config src"), prompt=PROMPT, evidence="nothing like it\n")
    assert [s.match.past.text for s in completed(r)] == ["Bash\nrg -n parse_config src"]


def test_two_outcomes_of_one_work_share_one_union():
    a = turn("t1", "first", [("rg -n parse_config src", RG_OUT)])
    b = turn("t2", "second", [("rg -n parse_config src", "src/config.py:13:def parse_config(path):\n")], session="s2")
    corpus, alls = corpus_of(a, b)
    p = discover(corpus, alls, bash("rg -n parse_config ./src"))
    assert len(p.unions) == 1 and len(completed(p)) == 2 and len(p.extraction.prior_outcomes) == 2


# -- regressions and known bugs -------------------------------------------------------------


def test_retrieving_the_completed_candidate_keeps_the_block():
    """Regression: the retrieved hit was once listed first, as (completed, retrieved), dropping the block."""
    corpus, alls = corpus_of(turn("t1", "look", [("rg -n parse_config src", RG_OUT)]))
    inq = bash("rg -n parse_config src")
    ci = next(i for i, c in enumerate(corpus.candidates) if c.tool)
    p = discover(corpus, alls, inq, retrieved=[ci])
    assert all(s.status == ADVISORY for s in p.selected if s.match.retrieved)
    assert len(blocking(p)) == 1


@pytest.mark.parametrize("prior_cmd, cur", [("git status", "git status"), ("git log", "git log src"),
                                             ("git --no-pager status", "git --no-pager status")])
def test_bare_subcommand_never_completes(prior_cmd, cur):
    """A subcommand (`git status`) is framing like a verb: no identity of its own (a regression: it once completed)."""
    _, p = plan_for([(prior_cmd, "On branch main\nnothing to commit\n")], bash(cur))
    assert not completed(p) and not blocking(p)


@pytest.mark.parametrize("cmd", ["git -C src status", "git -c color.ui=false status"])
def test_subcommand_after_an_option_with_an_argument_is_framing(cmd):
    """Regression: `src` (the argument of -C) was once taken for the subcommand, making `status` identity."""
    _, p = plan_for([(cmd, "On branch main\nnothing to commit\n")], bash(cmd))
    assert not completed(p) and not blocking(p)


def test_subcommand_with_a_path_still_completes():
    _, p = plan_for([("git log src/config.py", "commit abc\n")], bash("git log ./src/config.py"))
    assert len(completed(p)) == 1 and len(blocking(p)) == 1


def test_declared_union_completes_a_tool_call_but_not_a_request():
    """A persistent (user) union stands in for textual containment, never for the rest of the gate."""
    corpus, alls = corpus_of(turn("t1", "run the tests", [("pytest -q", "5 passed\n")], "all green"))
    declared = (Union(bash("python -m pytest -q"), bash("pytest -q"), "workspace"),)
    p = discover(corpus, alls, bash("python -m pytest -q"), persistent=declared)
    (sel,) = completed(p)
    assert sel.blocks and sel.match.past.value == bash("pytest -q")
    assert all(u.scope == "run" for u in p.unions) and not set(p.unions) & set(declared)
    assert p.extraction.prior_outcomes == (Atom.text("5 passed\n"),)
    q = discover(corpus, alls, bash("python -m pytest -q"))  # without the declaration: advice at most
    assert not completed(q) and not blocking(q)
    asked = (Union(Atom.text("are the tests green?"), Atom.text("run the tests"), "workspace"),)
    r = discover(corpus, alls, Atom.text("are the tests green?"), persistent=asked)
    assert all(s.match.tool or s.status == ADVISORY for s in r.selected)
    assert not any(not s.match.tool for s in completed(r))


def test_another_clauses_line_naming_the_path_does_not_ground():
    """Regression: README's line mentioning setup.py once grounded `cat setup.py`, which then completed,
    blocked, and handed over that README line as the output of `cat setup.py`."""
    out = "# Demo\nInstall with pip; see setup.py\nfrom setuptools import setup\nsetup(name='demo')\n"
    _, p = plan_for([("cat README.md; cat setup.py", out)], bash("cat setup.py"))
    assert not completed(p) and not blocking(p)


def test_an_echoed_command_line_does_not_ground_its_clause():
    """Regression: a `set -x` trace line once grounded its clause, so a search that found nothing completed
    and blocked with the trace line as its 'output'."""
    _, p = plan_for([("set -x; rg -n load_env src", "+ rg -n load_env src\n")], bash("rg -n load_env src"))
    assert not completed(p) and not blocking(p)


def test_grounding_by_a_symbol_in_the_clauses_result_lines_still_completes():
    out = "== a.txt ==\nhello\nsrc/env.py:3:def load_env():\n"
    _, p = plan_for([("cat a.txt; rg -n load_env src", out)], bash("rg -n load_env src"))
    (sel,) = completed(p)
    assert sel.blocks and sel.match.grounded == Atom.text("src/env.py:3:def load_env():")
