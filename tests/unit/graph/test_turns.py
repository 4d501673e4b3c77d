"""The turn compiler: turn records become Work->Outcome relations, an All and a Receipt."""

from __future__ import annotations

import pytest
from hypothesis import given

from helpers import bash, tool_call, turn_record
from helpers.strategies import turn_records
from eggshell.graph import records
from eggshell.core.identity import content_hex
from eggshell.graph.store import Store
from eggshell.graph.turns import (INTERRUPTED, RECEIPT_MARK, REMAINDER_MARKER, TurnError, compile_turn, normalize_output, parse_turn, relative_cwd, split_work, work_text)
from eggshell.core.values import Apply, Atom, E, Op, S, apply


def T(s: str) -> Atom:
    return Atom.text(s)


def args(v: Apply) -> list[tuple]:
    return [(r.auth, r.target) for r in v.args]


def compiled(**kw):
    return compile_turn(parse_turn(turn_record(**kw)))


# -- Work text ----------------------------------------------------------------------------


def test_work_is_name_newline_canonical_json_with_sorted_keys():
    assert work_text("Bash", {"timeout": 5, "command": "ls -la", "z": {"b": 1, "a": "\u00e9"}}) == (
        'Bash\n{"command":"ls -la","timeout":5,"z":{"a":"\u00e9","b":1}}'
    )
    assert work_text("Read", "plain") == 'Read\n"plain"'
    assert work_text("Bash", {"command": "x", "a": 1}) == work_text("Bash", {"a": 1, "command": "x"})


def test_split_work_inverts_work_text():
    w = work_text("Edit", {"file_path": "a.py", "old": "x"})
    assert split_work(w) == ("Edit", {"file_path": "a.py", "old": "x"})
    assert split_work("just a prompt") is None
    assert split_work("two words\n{}") is None
    assert split_work("Name\nnot json") is None


# -- one tool call --------------------------------------------------------------------------


def test_each_tool_call_becomes_work_outcome_with_a_native_occurrence():
    call = tool_call("Bash", "toolu_01", {"command": "pytest -q", "timeout": 60}, {"stdout": "1 passed\n", "stderr": ""})
    c = compiled(session="S1", turn="T1", tools=[call])
    assert len(c.tool_outcomes) == 1
    out = c.tool_outcomes[0]
    work = T('Bash\n{"command":"pytest -q","timeout":60}')
    result = T("1 passed\n")
    occ = apply(Op.OCCURRENCE, (S, result), (S, work), (E, T("S1")), (E, T("T1")), (E, T("toolu_01")))
    assert out == apply(Op.OUTCOME, (S, work), (S, result), (E, occ))
    assert out in c.roots


def test_tool_outcomes_keep_call_order_and_one_per_call():
    calls = [bash("ls", "a\n", id="u1"), bash("cat a", "hello\n", id="u2"), bash("ls", "a\nb\n", id="u3")]
    c = compiled(tools=calls)
    assert [o.args[0].target for o in c.tool_outcomes] == [T(work_text("Bash", {"command": x})) for x in ("ls", "cat a", "ls")]
    assert [o.args[1].target for o in c.tool_outcomes] == [T("a\n"), T("hello\n"), T("a\nb\n")]
    assert len({content_hex(o) for o in c.tool_outcomes}) == 3


def test_same_command_same_output_different_use_ids_are_separate_observations():
    c = compiled(tools=[bash("ls", "a\n", id="u1"), bash("ls", "a\n", id="u2")])
    o1, o2 = c.tool_outcomes
    assert o1 != o2 and o1.args[:2] == o2.args[:2]


# -- the turn ---------------------------------------------------------------------------------


def test_answered_turn_structure():
    calls = [bash("ls", "a\n", id="u1"), bash("cat a", "hi\n", id="u2"), bash("ls", "a\n", id="u3")]
    c = compiled(session="S", turn="7", cwd="pkg", prompt="what is in a?", answer="hi", tools=calls)
    req, ans = T("what is in a?"), T("hi")
    w_ls, w_cat = T(work_text("Bash", {"command": "ls"})), T(work_text("Bash", {"command": "cat a"}))
    assert c.request == req
    # All: the request, each distinct Work once in first-use order, then the open remainder last
    assert c.decomposition == apply(Op.ALL, (S, req), (S, w_ls), (S, w_cat), (S, T(REMAINDER_MARKER + "what is in a?")))
    # the turn's own Outcome, with the turn Occurrence [S prompt, S answer, E session, E turn, E cwd]
    tocc = apply(Op.OCCURRENCE, (S, req), (S, ans), (E, T("S")), (E, T("7")), (E, T("pkg")))
    assert c.answer_outcome == apply(Op.OUTCOME, (S, req), (S, ans), (E, tocc))
    assert c.receipt.op is Op.RECEIPT and all(r.auth is E for r in c.receipt.args)
    assert [r.target for r in c.receipt.args] == [T("S"), T("7"), req, ans, c.answer_outcome, c.decomposition, T(RECEIPT_MARK)]
    assert list(c.roots) == [*c.tool_outcomes, c.decomposition, c.answer_outcome, c.receipt]


def test_turn_without_tools_is_prompt_answer_and_remainder():
    c = compiled(tools=[], prompt="hello", answer="hi there")
    assert c.tool_outcomes == ()
    assert args(c.decomposition) == [(S, T("hello")), (S, T(REMAINDER_MARKER + "hello"))]
    assert list(c.roots) == [c.decomposition, c.answer_outcome, c.receipt]


def test_the_remainder_is_always_last_and_never_a_tool_work():
    c = compiled(tools=[bash("x", "y")])
    last = c.decomposition.args[-1].target
    assert last.data.decode().startswith(REMAINDER_MARKER)
    assert last not in [o.args[0].target for o in c.tool_outcomes]


def test_a_tool_work_equal_to_the_prompt_is_not_a_child_of_the_all():
    prompt = work_text("Bash", {"command": "ls"})
    c = compiled(prompt=prompt, tools=[bash("ls", "a\n")])
    assert [r.target for r in c.decomposition.args] == [T(prompt), T(REMAINDER_MARKER + prompt)]
    assert len(c.tool_outcomes) == 1


def test_interrupted_turn_keeps_tools_all_and_an_interrupted_receipt_and_no_answer():
    calls = [bash("make", "building...\n", id="u1")]
    c = compiled(session="S", turn="9", cwd="src", prompt="build it", answer=None, tools=calls)
    assert c.answer_outcome is None
    assert [r.target for r in c.receipt.args] == [T("S"), T("9"), T("build it"), T("src"), c.decomposition, T(RECEIPT_MARK), T(INTERRUPTED)]
    assert all(r.auth is E for r in c.receipt.args)
    assert list(c.roots) == [c.tool_outcomes[0], c.decomposition, c.receipt]
    # no Outcome whose work is the request
    assert not any(isinstance(v, Apply) and v.op is Op.OUTCOME and v.args[0].target == T("build it") for v in c.roots)


def test_empty_answer_counts_as_interrupted():
    assert compiled(answer="", tools=[bash("ls")]).answer_outcome is None
    with pytest.raises(TurnError):
        compiled(answer="", tools=[])


def test_a_turn_with_neither_answer_nor_tools_is_an_error():
    with pytest.raises(TurnError, match="neither an answer nor any tool"):
        compiled(answer=None, tools=[])
    with pytest.raises(TurnError):
        compile_turn(parse_turn({k: v for k, v in turn_record(answer=None).items() if k != "tools"}))


def test_compiling_is_deterministic_and_separates_sessions_and_turns():
    rec = dict(tools=[bash("ls", "a")], answer="done")
    assert compiled(**rec).roots == compiled(**rec).roots
    a, b, c = compiled(turn="1", **rec), compiled(turn="2", **rec), compiled(session="other", turn="1", **rec)
    # every root carries its session and turn as Exact provenance, except the All,
    # which is pure semantics (the same request decomposed into the same Work)
    assert set(a.roots) & set(b.roots) == {a.decomposition} == set(a.roots) & set(c.roots)
    assert a.decomposition == b.decomposition == c.decomposition
    # but the Work and its result are shared Values
    assert a.tool_outcomes[0].args[0].target == b.tool_outcomes[0].args[0].target


@given(turn_records())
def test_every_compiled_turn_is_valid_and_stores(rec):
    c = compile_turn(parse_turn(rec))
    assert len(c.tool_outcomes) == len(rec["tools"])
    assert c.decomposition.args[-1].target.data.startswith(REMAINDER_MARKER.encode())
    assert (c.answer_outcome is None) == (rec["answer"] is None)
    assert c.receipt in c.roots and c.decomposition in c.roots
    assert len(set(c.roots)) == len(c.roots)


# -- output normalisation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "codex,claude",
    [
        ("hello\n", {"stdout": "hello\n", "stderr": ""}),
        ("hello\nwarning: x\n", {"stdout": "hello\n", "stderr": "warning: x\n"}),
        ("hello\nwarning: x", {"stdout": "hello", "stderr": "warning: x"}),
        ("oops\n", {"stdout": "", "stderr": "oops\n"}),
        ("", {"stdout": "", "stderr": ""}),
        ("done\n[interrupted]", {"stdout": "done\n", "stderr": "", "interrupted": True, "isImage": False}),
        ("a\n", {"stdout": "a\n", "stderr": "", "interrupted": False, "isImage": False}),
    ],
)
def test_codex_string_and_claude_object_give_the_same_outcome(codex, claude):
    assert normalize_output(codex) == normalize_output(claude) == codex
    a = compiled(tools=[bash("ls", codex, id="u")])
    b = compiled(tools=[bash("ls", claude, id="u")])
    assert a.roots == b.roots


def test_other_outputs_are_kept_as_canonical_json():
    assert normalize_output(None) == ""
    assert normalize_output({"b": 1, "a": [True, None]}) == '{"a":[true,null],"b":1}'
    assert normalize_output([1, "x"]) == '[1,"x"]'
    assert normalize_output(3) == "3"
    assert normalize_output({"stdout": 5, "stderr": ""}) == '{"stderr":"","stdout":5}'  # not text: nothing lost
    assert normalize_output({"stdout": None, "stderr": "e"}) == "e"


# -- parsing records --------------------------------------------------------------------------------


def test_parse_turn_reads_every_field():
    t = parse_turn(turn_record(session="s", turn="t", cwd="/x", prompt="p", answer="a",
                               tools=[tool_call("Read", "u1", {"file_path": "f"}, "body")]))
    assert (t.session, t.turn, t.cwd, t.prompt, t.answer) == ("s", "t", "/x", "p", "a")
    assert len(t.tools) == 1 and t.tools[0].name == "Read" and t.tools[0].id == "u1"
    assert t.tools[0].input == {"file_path": "f"} and t.tools[0].output == "body"


def test_missing_tools_means_no_tools_and_missing_output_is_empty():
    rec = turn_record()
    del rec["tools"]
    assert parse_turn(rec).tools == ()
    call = tool_call()
    del call["output"]
    assert parse_turn(turn_record(tools=[call])).tools[0].output == ""


def _without(key):
    r = turn_record()
    del r[key]
    return r


def _tool_without(key):
    c = tool_call()
    del c[key]
    return turn_record(tools=[c])


BAD_RECORDS = {
    "not an object": ([1, 2], "JSON object"),
    "a string": ("turn", "JSON object"),
    "missing session": (_without("session"), "missing 'session'"),
    "missing turn": (_without("turn"), "missing 'turn'"),
    "missing cwd": (_without("cwd"), "missing 'cwd'"),
    "missing prompt": (_without("prompt"), "missing 'prompt'"),
    "session not a string": (turn_record(session=5), "'session' must be a str"),
    "session a bool": (turn_record(session=True), "'session' must be a str"),
    "empty session": (turn_record(session=""), "'session' must not be empty"),
    "empty turn": (turn_record(turn=""), "'turn' must not be empty"),
    "empty prompt": (turn_record(prompt=""), "'prompt' must not be empty"),
    "prompt a list": (turn_record(prompt=["p"]), "'prompt' must be a str"),
    "cwd null": (turn_record(cwd=None), "'cwd' must be a str"),
    "answer a number": (turn_record(answer=42), "'answer' must be a string or null"),
    "answer an object": (turn_record(answer={"text": "a"}), "'answer' must be a string or null"),
    "tools not a list": (turn_record(tools={"name": "Bash"}), "'tools' must be a list"),
    "tools a string": (turn_record(tools="Bash"), "'tools' must be a list"),
    "tool not an object": (turn_record(tools=["Bash"]), r"tools\[0\]: must be an object"),
    "tool missing name": (_tool_without("name"), r"tools\[0\]: missing 'name'"),
    "tool missing id": (_tool_without("id"), r"tools\[0\]: missing 'id'"),
    "tool missing input": (_tool_without("input"), r"tools\[0\]: missing 'input'"),
    "tool name not a string": (turn_record(tools=[tool_call(name=1)]), r"tools\[0\]: 'name' must be a str"),
    "tool name multi-line": (turn_record(tools=[tool_call(name="Ba\nsh")]), r"'name' must be one line"),
    "tool empty id": (turn_record(tools=[tool_call(id="")]), r"'id' must not be empty"),
    "second tool bad": (turn_record(tools=[tool_call(), tool_call(id=7)]), r"tools\[1\]: 'id' must be a str"),
    "tool input NaN": (turn_record(tools=[tool_call(input={"x": float("nan")})]), r"'input' is not representable"),
    "tool output infinite": (turn_record(tools=[tool_call(output={"t": float("inf")})]), r"'output' is not representable"),
}


@pytest.mark.parametrize("rec,msg", BAD_RECORDS.values(), ids=BAD_RECORDS.keys())
def test_malformed_turn_records_raise_turn_error_naming_the_field(rec, msg):
    with pytest.raises(TurnError, match=msg):
        parse_turn(rec)


LONE_SURROGATES = {
    "session": (turn_record(session="s\ud800"), lambda t: t.session, "s\ufffd"),
    "cwd": (turn_record(cwd="/tmp/\udfff"), lambda t: t.cwd, "/tmp/\ufffd"),
    "prompt": (turn_record(prompt="cut \ud83d"), lambda t: t.prompt, "cut \ufffd"),
    "answer": (turn_record(answer="\udc00 tail"), lambda t: t.answer, "\ufffd tail"),
    "tool name": (turn_record(tools=[tool_call(name="B\ud800")]), lambda t: t.tools[0].name, "B\ufffd"),
    "tool id": (turn_record(tools=[tool_call(id="\udc00")]), lambda t: t.tools[0].id, "\ufffd"),
    "stdout object": (turn_record(tools=[tool_call(output={"stdout": "\ud83d", "stderr": ""})]), lambda t: t.tools[0].output, "\ufffd"),
    "input key": (turn_record(tools=[tool_call(input={"\ud83d": 1})]), lambda t: t.tools[0].input, {"\ufffd": 1}),
    "a pair split in two": (turn_record(prompt="ok \ud83d\ude00"), lambda t: t.prompt, "ok \U0001f600"),
}


@pytest.mark.parametrize("rec,get,want", LONE_SURROGATES.values(), ids=LONE_SURROGATES.keys())
def test_lone_surrogates_become_the_replacement_character(rec, get, want):
    # Node's JSON.stringify writes a string cut inside an emoji as a lone surrogate: valid JSON,
    # not UTF-8. The turn is kept, that half character becomes U+FFFD, and it compiles.
    t = parse_turn(rec)
    assert get(t) == want
    compile_turn(t)


def test_one_bad_tool_call_is_handed_over_and_the_rest_is_kept():
    bad = []
    rec = turn_record(tools=[tool_call(id="a"), tool_call(id="b", input={"x": float("nan")}), tool_call(id="c", name="Ba\nsh")])
    t = parse_turn(rec, on_bad=lambda i, call, e: bad.append((i, call["id"], str(e))))
    assert [c.id for c in t.tools] == ["a"] and t.answer == rec["answer"]
    assert [(i, cid) for i, cid, _ in bad] == [(1, "b"), (2, "c")]
    assert "'input' is not representable" in bad[0][2] and "one line" in bad[1][2]
    deep = {"x": []}
    for _ in range(5000):
        deep = {"x": [deep]}
    rec = turn_record(tools=[tool_call(id="d"), tool_call(id="e")])
    rec["tools"][0]["input"] = deep  # 10,000 levels: past any recursion limit
    t = parse_turn(rec, on_bad=lambda *a: bad.append(a))
    assert [c.id for c in t.tools] == ["e"] and len(bad) == 3


def test_turn_error_is_a_value_error():
    assert issubclass(TurnError, ValueError)


# -- cwd ------------------------------------------------------------------------------------------


def test_cwd_is_stored_relative_to_the_project_root(tmp_path):
    root = str(tmp_path / "proj")
    assert relative_cwd(root + "/pkg/sub", root) == "pkg/sub"
    assert relative_cwd(root, root) == "."
    assert relative_cwd(root + "/", root) == "."
    assert relative_cwd(root + "x/other", root) == root + "x/other"  # a sibling with a common prefix is outside
    assert relative_cwd("/elsewhere", root) == "/elsewhere"
    assert relative_cwd("", root) == ""
    assert relative_cwd("/a/b", None) == "/a/b"


# -- reading turns back -----------------------------------------------------------------------------


def test_stored_turns_read_back_as_turn_views(egg):
    s = Store.open(egg)
    done = turn_record(session="S", turn="1", prompt="list", answer="a and b", cwd="pkg",
                       tools=[bash("ls", "a\nb\n", id="u1"), bash("cat a", "x\n", id="u2")])
    cut = turn_record(session="S", turn="2", prompt="build", answer=None, cwd="pkg", tools=[bash("make", "err\n", id="u3")])
    for r in (done, cut):
        c = compile_turn(parse_turn(r))
        s.commit(c.roots, session=r["session"], turn=r["turn"])
    views = {v.turn: v for v in records.turn_views(Store.open(egg).graph)}
    assert set(views) == {"1", "2"}
    v1, v2 = views["1"], views["2"]
    assert (v1.prompt, v1.answer, v1.cwd) == ("list", "a and b", "pkg")
    assert [(t.work, t.outcome, t.use_id) for t in v1.tools] == [
        (work_text("Bash", {"command": "ls"}), "a\nb\n", "u1"), (work_text("Bash", {"command": "cat a"}), "x\n", "u2")]
    assert v1.id == content_hex(compile_turn(parse_turn(done)).answer_outcome)
    assert (v2.prompt, v2.answer, v2.cwd) == ("build", None, "pkg")
    assert v2.id == content_hex(compile_turn(parse_turn(cut)).decomposition)
    assert [t.outcome for t in v2.tools] == ["err\n"]
    text = records.searchable_text(v2)
    assert "build" in text and "make" in text and "err" in text


def test_command_of_keeps_an_editor_command_s_verb_and_its_path():
    """An editor tool (OpenHands' str_replace_editor) puts a verb in `command` and the file in
    `path`: the verb alone names nothing to search by or to show, so both are kept; a shell
    command that already names the path stays as it is."""
    edit = work_text("str_replace_editor", {"command": "view", "path": "src/billing.py"})
    assert records.command_of(edit) == "view src/billing.py"
    assert records.command_of(work_text("Bash", {"command": "cat src/billing.py", "path": "src/billing.py"})) == "cat src/billing.py"
    assert records.command_of(work_text("Bash", {"command": "ls -la"})) == "ls -la"
    assert records.command_of(work_text("Read", {"file_path": "a.py"})) == "a.py"
