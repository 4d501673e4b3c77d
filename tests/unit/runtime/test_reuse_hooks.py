"""The reuse engine through the hooks: denial, delivery keys, compaction, the current turn.

Requirements (issue "Reuse engine" §3-§4): PreToolUse denies a proposed call that completed
prior work covers, with a reason naming the covered fragments and carrying the prior
outcome; at most one denial per covered projection per chat; delivery keys stop the same
evidence being sent twice to a chat until compaction and do not depend on the wording;
the current turn's journaled calls count as prior work already visible; `local_union =
false` makes reuse advisory; edits are never denied; persistent unions count as identity;
a corrupt chat state never blocks a hook.
"""

from __future__ import annotations

import os
from dataclasses import replace

from helpers.hooks import answer_here
from eggshell.reuse.delivery import Deliveries
from eggshell.reuse.engine import Inquiry
from eggshell.graph.store import Store
from eggshell.graph.turns import work_text
from helpers.reuse import bash
from helpers.hook_env import Env  # noqa: F401 - the same isolated environment as the hook tests
import pytest
from helpers.hook_env import denied, pre

RG = "rg -n parse_config src"
RG_OUT = "src/config.py:1:def parse_config(path):\nsrc/app.py:7:    cfg = parse_config(p)\n"


def write_sources(root: str) -> None:
    """The files RG_OUT was read from: a recorded call's inputs are checked before it is reused."""
    os.makedirs(os.path.join(root, "src"), exist_ok=True)
    for name, text in (("config.py", "def parse_config(path):\n    return {}\n"),
                       ("app.py", "import sys\n\n\n\ndef main(p):\n    # read the settings\n    cfg = parse_config(p)\n"),
                       ("env.py", "import os\n\ndef load_env():\n    return dict(os.environ)\n")):
        with open(os.path.join(root, "src", name), "w", encoding="utf-8") as f:
            f.write(text)


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    write_sources(e.project)
    e.record_turn("where is parse_config defined?", [(RG, RG_OUT), ("pytest -q tests/test_config.py", "3 passed\n")],
                  "parse_config is in src/config.py:1; the tests pass", session="chat-1", turn="t1")
    return e


def test_a_covered_call_is_denied_with_the_prior_outcome(env):
    reason = denied(pre(env, "rg -n parse_config ./src"))
    assert reason is not None
    assert reason.startswith("EGGSHELL: this call was not run, because earlier work already did it:\n$ rg -n parse_config src\n")
    assert reason.endswith("run only what it does not cover; to run this call anyway, propose it again")  # Codex adds ". Command: ..."
    assert "".join("| " + line + "\n" for line in RG_OUT.splitlines()) in reason
    assert env.log_text() == ""


def test_an_uncovered_call_runs_with_advice_at_most(env):
    reply = pre(env, "rg -n parse_config tests")
    assert denied(reply) is None
    ctx = reply.get("hookSpecificOutput", {}).get("additionalContext", "")
    assert "was not run" not in ctx  # advice only


def test_one_denial_per_covered_projection_per_chat(env):
    assert denied(pre(env, "rg -n parse_config ./src"))
    again = pre(env, "rg -n parse_config ./src", turn="u2")  # the agent insists: the call runs
    assert denied(again) is None
    assert denied(pre(env, "rg -n parse_config ./src", session="chat-3"))  # another chat is stopped once too


def test_keys_do_not_depend_on_the_wording_and_compaction_resets_them(env):
    assert denied(pre(env, "rg -n parse_config ./src"))
    assert denied(pre(env, "rg -n parse_config src", turn="u2")) is None  # same projection, other spelling
    env.respond(env.ev("PostCompact", session="chat-2", turn_id="u2"))
    assert denied(pre(env, "rg -n parse_config src", turn="u3"))  # after compaction the outcome is gone from context
    state = Deliveries(env.paths.state_dir, "chat-2").load()
    assert state.epoch == 1 and state.after_compaction


def test_a_repeat_inside_the_same_turn_is_denied_without_resending(env):
    session, turn = "chat-2", "u1"
    env.respond(env.prompt("look again", turn=turn, session_id=session))
    env.respond(env.tool("rg -n load_env src", "src/env.py:3:def load_env():\n", turn=turn, use="c1", session_id=session))
    reply = env.respond(env.ev("PreToolUse", session=session, turn_id=turn, tool_name="Bash",
                               tool_input={"command": "rg -n load_env ./src"}, tool_use_id="c2"))
    reason = denied(reply)
    assert reason is not None and "already in this chat's context" in reason and "src/env.py:3" not in reason


def test_local_union_false_makes_reuse_advisory(env):
    env.write_config('local_union = false\n')
    reply = pre(env, "rg -n parse_config ./src")
    assert denied(reply) is None
    assert RG_OUT.splitlines()[0] in reply["hookSpecificOutput"]["additionalContext"]  # still offered as advice


def test_local_union_is_per_profile_and_snapshotted_per_turn(env):
    from eggshell.runtime.chat import Chat

    env.write_config('default = "work"\n[eggs]\nproject = ".eggs/work.egg"\n'
                     '[profiles.work]\nread = ["project"]\nwrite = "project"\n'
                     '[profiles.advice]\nread = ["project"]\nwrite = "project"\nlocal_union = false\n')
    chat = Chat(env.paths.state_dir, "chat-3")
    chat.update(lambda c: replace(c, next_profile="advice"))  # what `egg next advice` does
    assert chat.load().next_profile == "advice"
    advised = pre(env, "rg -n parse_config ./src", session="chat-3", turn="a1")  # this turn: profile advice
    assert denied(advised) is None and RG_OUT.splitlines()[0] in advised["hookSpecificOutput"]["additionalContext"]
    assert denied(pre(env, "rg -n parse_config ./src", session="chat-3", turn="a2")) is not None  # next turn: work again


def test_edits_are_never_denied(env):
    reply = pre(env, "", tool="Edit", tool_input={"file_path": "src/config.py", "old_string": "a", "new_string": "b"})
    assert denied(reply) is None


def test_a_persistent_union_counts_as_identity(env):
    # The prior side is a read whose input is checked (a test run's inputs cannot be: it never completes a call).
    read = "sed -n 1,2p src/config.py"
    env.record_turn("show the config reader", [(read, "def parse_config(path):\n    return {}\n")], "shown", session="chat-1", turn="t3")
    store = Store.open(env.egg)
    store.data_root = env.data  # as `egg union` does in this environment: the union is the user's own (trust.py)
    alias = bash("make show-config")
    store.commit([], unions=[(alias, bash(read))])
    reason = denied(pre(env, "make show-config"))
    assert reason is not None and "return {}" in reason


def test_a_corrupt_chat_state_is_started_afresh(env):
    chat = Deliveries(env.paths.state_dir, "chat-2")
    os.makedirs(os.path.dirname(chat.path), exist_ok=True)
    with open(chat.path, "w") as f:
        f.write("{not json")
    assert denied(pre(env, "rg -n parse_config ./src"))
    assert "unreadable chat state" in env.log_text()
    assert chat.load().delivered  # rewritten with the new keys


def post(env: Env, command: str, output: str, session: str = "chat-2", turn: str = "u1") -> dict:
    env.respond(env.prompt("add type hints to the reader", turn=turn, session_id=session))
    return env.respond(env.tool(command, output, turn=turn, use="p-" + command, session_id=session))


def test_post_tool_use_leaves_out_what_the_new_result_already_shows(env):
    assert post(env, "rg -n parse_config src", RG_OUT) == {}  # the same lines again: nothing to add
    reply = post(env, "rg -n parse_config src", "src/config.py:9:def parse_config(path, strict):\n", session="chat-3")
    ctx = reply["hookSpecificOutput"]["additionalContext"]  # the result changed: the prior one is worth seeing
    assert reply["hookSpecificOutput"]["hookEventName"] == "PostToolUse" and RG_OUT.splitlines()[0] in ctx


def test_evidence_over_budget_is_listed_by_a_key_egg_show_reads(env):
    from eggshell.reuse import engine

    big = "".join("src/mod%d.py:1:def parse_config_%d(): pass\n" % (i, i) for i in range(400))
    env.record_turn("find every parse_config variant", [("rg -n parse_config lib", big)], "there are 400", session="chat-1", turn="t2")
    ws = engine.workspace([Store.open(env.egg).graph])
    work = work_text("Bash", {"command": "rg -n parse_config ./lib"})
    h = engine.handoff(ws, Inquiry(work, "rg -n parse_config ./lib", budget=2000, enforce=True))
    assert not h.deny and h.omitted  # the evidence does not fit, so it cannot stop the call
    assert "Not shown, over the size budget" in h.text and "egg show KEY" in h.text and len(h.text) <= 2000
    key = h.omitted[0]
    assert key in h.text and h.delivered == ()  # named, not delivered
    assert Store.open(env.egg).graph.lookup(key)  # the key `egg show` reads (tests/e2e runs egg show itself)


def test_a_repeated_read_tool_call_is_denied(env):
    # Claude Code's Read tool: the same input reads the same file
    read = {"file_path": "src/config.py"}
    env.respond(env.prompt("read the config", turn="r1", session_id="chat-0"))
    with open(os.path.join(env.project, "src", "config.py"), encoding="utf-8") as f:
        text = f.read()  # what the Read tool returned
    env.respond(env.ev("PostToolUse", session="chat-0", turn_id="r1", tool_name="Read", tool_input=read,
                       tool_response=text, tool_use_id="r-1"))
    env.respond(env.stop("read it", turn="r1", session_id="chat-0"))
    reason = denied(pre(env, "", tool="Read", tool_input=read))
    assert reason is not None and "def parse_config(path):" in reason
    assert denied(pre(env, "", tool="Read", tool_input={"file_path": "src/other.py"}, session="chat-4")) is None


def test_a_denial_keeps_the_prompts_handoff_for_egg_graph_and_why(env):
    from eggshell.runtime.chat import Chat

    reply = env.respond(env.prompt("where is parse_config defined and who calls it?", turn="u1", session_id="chat-2"))
    given = reply["hookSpecificOutput"]["additionalContext"]
    before = Chat(env.paths.state_dir, "chat-2").load()
    assert before.last_handoff == given and before.last_reason.startswith("retrieved ")
    reason = denied(env.respond(env.ev("PreToolUse", session="chat-2", turn_id="u1", tool_name="Bash",
                                       tool_input={"command": "rg -n parse_config ./src"}, tool_use_id="c1")))
    assert reason is not None
    after = Chat(env.paths.state_dir, "chat-2").load()
    assert after.last_handoff == given  # `egg graph` still shows what the prompt was given
    assert after.last_reason.startswith(before.last_reason + "\n")  # `egg why` still explains it, then the denial
    assert after.last_reason.splitlines()[-1].startswith("PreToolUse rg -n parse_config ./src: denied, completed prior work covers Bash: rg -n parse_config src")


def test_the_codex_deny_reason_ends_so_that_codex_completes_the_sentence(env):
    # Codex shows "Command blocked by PreToolUse hook: REASON. Command: CMD"
    reason = denied(pre(env, "rg -n parse_config ./src"))
    assert reason.endswith("propose it again") and not reason.endswith(".")
    from eggshell.stages import hook

    env.respond(env.prompt("add type hints to the reader", turn="k1", session_id="claude-1"))
    out = answer_here("claude", __import__("json").dumps(env.ev("PreToolUse", session="claude-1", turn_id="k1", tool_name="Bash",
                       tool_input={"command": "rg -n parse_config ./src"}, tool_use_id="k-1")), env.paths)
    assert denied(out).endswith("propose it again.")
