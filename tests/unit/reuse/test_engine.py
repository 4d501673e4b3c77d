"""The warm workspace (engine.LiveWorkspace) equals the cold one (engine.workspace).

A warm manager extends its workspace commit by commit and overlays the current turn's
staged calls; a cold hook builds it from scratch. Both must hand the engine the same
candidates in the same order, or a warm and a cold hook would answer differently.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eggshell.reuse.engine import LiveWorkspace, handoff, workspace
from eggshell.reuse.engine import Inquiry
from eggshell.core.identity import content_hex
from eggshell.graph.store import Store

from helpers.reuse import LAW, commands, outputs, prompts, render, turn


def shape(ws):
    c = ws.corpus
    return ([(content_hex(x.edge), x.tool, x.staged) for x in c.candidates], [content_hex(a) for a in ws.alls],
            ws.index, sorted((content_hex(u.left), content_hex(u.right)) for u in ws.unions),
            dict(c.df), {k: list(v) for k, v in c.postings.items()},
            sorted(k for v in c.keyed.values() for k in v))  # each pattern keyed once (under which unit depends on when)


@st.composite
def histories(draw):
    """Turns to commit one by one, with some prompts run again as tool calls later."""
    out = []
    for t in range(draw(st.integers(1, 5))):
        calls = []
        for _ in range(draw(st.integers(1, 3))):
            c = draw(commands())
            calls.append((render(c), draw(outputs(c))))
        prompt = draw(prompts())
        if out and draw(st.booleans()):  # a later turn runs an earlier request as a command
            calls.append((out[draw(st.integers(0, len(out) - 1))][1], "ran it"))
        out.append(("t%d" % t, prompt, calls, draw(st.sampled_from([None, "done"]))))
    return out


@LAW
@given(histories(), st.data())
def test_a_workspace_grown_commit_by_commit_equals_one_built_at_once(tmp_path_factory, history, data):
    path = str(tmp_path_factory.mktemp("live") / "w.egg")
    store = Store.open(path)
    live = LiveWorkspace([Store.open(path)])
    for tid, prompt, calls, answer in history:
        store.commit(turn(tid, prompt, calls, answer).roots, session="s1", turn=tid)
        if data.draw(st.booleans()):
            live.current()  # grow now, or let several commits accumulate
    c = data.draw(commands())
    staged = turn("now", data.draw(prompts()), [(render(c), data.draw(outputs(c)))], None, session="s2").roots
    cold = Store.open(path)
    assert shape(live.current()) == shape(workspace([cold.graph]))
    assert shape(live.current(staged)) == shape(workspace([cold.graph], staged))
    assert shape(live.current()) == shape(workspace([cold.graph]))  # the overlay left the base alone
    inquiry = "Bash\n" + '{"command":"%s"}' % render(c)
    assert handoff(live.current(staged), Inquiry(inquiry, enforce=True)) == handoff(workspace([cold.graph], staged), Inquiry(inquiry, enforce=True))


def test_a_replaced_store_is_read_again(tmp_path):
    from eggshell.graph.store import compact

    path = str(tmp_path / "w.egg")
    store = Store.open(path)
    store.commit(turn("t1", "find config", [("rg -n parse_config src", "src/a.py:1:parse_config")]).roots, session="s", turn="t1")
    live = LiveWorkspace([Store.open(path)])
    assert len(live.current().corpus.candidates) == 2  # the tool call and the answered request
    compact(path)
    Store.open(path).commit(turn("t2", "list", [("ls src", "a.py")]).roots, session="s", turn="t2")
    assert shape(live.current()) == shape(workspace([Store.open(path).graph]))
