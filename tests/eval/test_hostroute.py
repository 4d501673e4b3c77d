"""tests/eval/hostroute.py: a run recorded through each host's hook payloads, by egg-hook's own code, holds its calls and answer.

Nothing here reads the public data sets or loads the embedding model.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dayone  # noqa: E402
import eggeval as ev  # noqa: E402
import hostroute as hr  # noqa: E402

GREP_OUT = "billing/fees.py:3: late_fee = 0\n"
TEST_OUT = "F.\n1 failed, 1 passed\n"
RUN = {"kind": "record", "id": "msa:fees-1", "prompt": "late_fee is wrong for overdue invoices",
       "answer": "diff --git a/billing/fees.py b/billing/fees.py\n+late_fee = 5",
       "tools": [{"name": "Bash", "input": {"command": "grep -rn late_fee billing/"},
                  "output": "<returncode>0</returncode>\n<output>\n%s</output>" % GREP_OUT},
                 {"name": "Bash", "input": {"command": "python -m pytest -q tests/test_fees.py"},
                  "output": "<returncode>1</returncode>\n<output>\n%s</output>" % TEST_OUT}], "meta": {}}

# What each host's payloads leave as each call's output (the adapters' own mapping, hosts/*.py).
STORED = {
    "codex": [GREP_OUT, TEST_OUT],  # its hooks give the output text alone
    "claude": [GREP_OUT, "Exit code 1\n" + TEST_OUT],  # a non-zero exit: PostToolUseFailure's error
    "opencode": [GREP_OUT, "Exit code 1\n" + TEST_OUT],  # metadata.exit != 0: a failed call
    "gemini": ["<untrusted_context>\nOutput: %s\nProcess Group PGID: 40000\n</untrusted_context>" % GREP_OUT,
               "<untrusted_context>\nOutput: %s\nExit Code: 1\nProcess Group PGID: 40001\n</untrusted_context>" % TEST_OUT],
}


def test_split_output_takes_the_exit_code_and_what_the_command_printed():
    assert hr.split_output("<returncode>0</returncode>\n<output>\na\nb\n</output>") == (0, "a\nb\n")
    assert hr.split_output("<returncode>2</returncode>\n<output>\n</output>") == (2, "")
    cut = "<returncode>0</returncode>\n<output>\nhead\n...[6654 chars truncated]"  # the data's 4,000-character cut
    assert hr.split_output(cut) == (0, "head\n...[6654 chars truncated]")
    warn = "<returncode>0</returncode>\n<warning>\ntoo long\n</warning><output_head>\nx\n</output_head>"
    assert hr.split_output(warn) == (0, "<warning>\ntoo long\n</warning><output_head>\nx\n</output_head>")
    assert hr.split_output("diff --git a/x b/x\n") == (None, "diff --git a/x b/x\n")


def test_each_hosts_chat_is_its_own_shape():
    names = {h: [e["hook_event_name"] for e in hr.chat_events(h, RUN, "/p", "c")] for h in hr.HOSTS}
    assert names["codex"] == ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PreToolUse", "PostToolUse", "Stop",
                              "SessionEnd"]
    assert names["claude"][5] == "PostToolUseFailure"
    assert names["opencode"] == ["session.created", "chat.message"] + ["tool.execute.before", "tool.execute.after"] * 2 + ["session.idle"]
    assert names["gemini"] == ["SessionStart", "BeforeAgent"] + ["BeforeTool", "AfterTool"] * 2 + ["AfterAgent", "SessionEnd"]
    tools = {h: {e.get("tool_name") or e.get("tool") for e in hr.chat_events(h, RUN, "/p", "c")} - {None} for h in hr.HOSTS}
    assert tools == {"codex": {"Bash"}, "claude": {"Bash"}, "opencode": {"bash"}, "gemini": {"run_shell_command"}}
    assert hr.chat_events("codex", RUN, "/p", "c") == hr.chat_events("codex", RUN, "/p", "c")  # the same chat, the same ids
    with pytest.raises(ValueError):
        hr.chat_events("windsurf", RUN, "/p", "c")


@pytest.mark.parametrize("host", hr.HOSTS)
def test_one_run_recorded_through_each_hosts_hooks_holds_its_calls_and_answer(tmp_path, host):
    got = hr.record_host(host, str(tmp_path), [("one", [RUN])])
    assert got.problems == [] and got.log_lines == []  # the check, egg fsck, the journal, hook.log
    assert (got.chats, got.calls) == (1, 2)
    (v,) = hr.stored_views(host, "one", got.stores["one"], [RUN["id"]])[RUN["id"]]
    assert v.prompt == RUN["prompt"] and v.answer == RUN["answer"]
    assert [json.loads(t.work.partition("\n")[2])["command"] for t in v.tools] == [t["input"]["command"] for t in RUN["tools"]]
    assert all(t.work.startswith("Bash\n") for t in v.tools)  # every host's shell tool is the lifecycle's Bash
    assert [t.outcome for t in v.tools] == STORED[host]
    assert hr.keys_of(v) and os.path.exists(os.path.join(tmp_path, host, "projects", "one", ".eggshell.toml"))


def test_a_route_that_stores_nothing_is_reported(tmp_path):
    rec = hr.HostRecorder("codex", str(tmp_path))
    rec.check("none", str(tmp_path / "missing.egg"), [RUN])
    assert rec.out.problems == ["none: run msa:fees-1 stored as 0 turns"]


def test_dayone_asks_a_host_routes_stores_beside_egg_save(tmp_path):
    from test_eggeval import FEES_Q, FILLERS, LOCOMO, RUNS

    lines = RUNS + FILLERS[:5] + [{"kind": "query", "id": "related:fees", "set": "related", "text": FEES_Q.text,
                                   "relevant": ["msa:a-1"], "gold_files": ["billing/fees.py"]}]
    swe, locomo, follow = tmp_path / "swe.jsonl", tmp_path / "locomo.json", tmp_path / "chat.jsonl"
    swe.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    locomo.write_text(json.dumps(LOCOMO), encoding="utf-8")
    follow.write_text(json.dumps({"id": "related:fees", "intent": "change", "text": "what if the late fee were higher?"}) + "\n")
    run = dayone.run_dayone(str(swe), str(locomo), str(tmp_path / "cache"), str(tmp_path / "root"), mode="lexical",
                            chat_path=str(follow), sizes=(1, 3), hosts=("gemini",))
    (h,) = run.hosts
    assert h.recorded.problems == [] and h.recorded.chats == 4 and len(h.recorded.stores) == 2
    assert [(a.id, a.size, a.form) for a in h.asked] == [(a.id, a.size, a.form) for a in run.asked]
    assert all(a.hit for a in h.asked if a.form == "full")  # the prior run's key in the gemini store's handoff
    out = "\n".join(dayone.report(run, (1, 3)))
    assert "## Day one through each host's hooks: Gemini CLI" in out and "| gemini | 1.000 | 1.000 |" in out


def test_hosts_are_a_dayone_option(tmp_path, capsys):
    with pytest.raises(SystemExit):
        ev.main([str(tmp_path), "--sets", "swe", "--hosts", "codex"])
    assert "--hosts measures the dayone set" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ev.main([str(tmp_path), "--sets", "dayone", "--hosts", "windsurf"])
