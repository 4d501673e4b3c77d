"""Freshness (issue 11 §1): a prior output stands in for a call only while its inputs still hold.

Requirements: a recorded read or shell call carries what its operands named (fingerprint.py),
through the journal and the turn record into the store; PreToolUse re-checks it, and a
changed input (a tracked file edited and committed, an untracked file, a new file in a read
directory, a deleted file) or an unknown one (a record without a fingerprint, an input
outside the project) never denies; an unchanged one denies as before, also after HEAD moved
for other reasons. A retargeted link on the way to an input (the file, a parent component, a
chain; issue 31 item 4) is a change too, even to the same bytes; the same links untouched are
still verified and denied. Every call here really runs (cat, grep, ls) in a real git repository, and
its real output is what the hook records.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from eggshell.reuse import fingerprint
from eggshell.reuse import freshness
from eggshell.graph.save import save_turn
from eggshell.runtime.journal import Journal
from eggshell.core.standing import CHANGED, UNKNOWN, VERIFIED
from eggshell.graph.store import Store
from helpers.fresh import git, write
from helpers.hook_env import Env

INVOICE = "src/billing/invoice.py"
INVOICE_TEXT = "def total(lines):\n    return sum(l.amount for l in lines)\n"


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    git(e, "init", "-q")
    write(e, ".gitignore", ".eggs/\n")
    write(e, INVOICE, INVOICE_TEXT)
    write(e, "src/billing/tax.py", "RATE = 0.2\n")
    git(e, "add", "-A")
    git(e, "commit", "-qm", "billing")
    write(e, "notes.txt", "late fees: see invoice\n")  # untracked
    return e


def run(env: Env, command: str) -> str:
    """The real output of a command in the project, as the agent's shell showed it."""
    p = subprocess.run(command, shell=True, cwd=env.project, capture_output=True, text=True)
    return p.stdout + p.stderr


def chat1(env: Env, command: str, session: str = "chat-1") -> str:
    """A first chat runs `command` for real; its hook records the call and the turn is saved."""
    out = run(env, command)
    env.record_turn("look at the billing code", [(command, out)], "I read it", session=session, turn="t-" + session)
    return out


def pre(env: Env, command: str, session: str = "chat-2") -> dict:
    turn = "u-" + os.urandom(6).hex()
    env.respond(env.prompt("bake some bread", turn=turn, session_id=session))  # nothing related is handed over first
    return env.respond(env.ev("PreToolUse", session=session, turn_id=turn, tool_name="Bash", tool_input={"command": command},
                              tool_use_id="p-" + turn))


def denied(reply: dict) -> str | None:
    out = reply.get("hookSpecificOutput", {})
    return out.get("permissionDecisionReason") if out.get("permissionDecision") == "deny" else None


def judged(env: Env, command: str):
    """The freshness Standing of the stored call of `command`, checked now."""
    (v,) = [v for v in env.views() if any(json.loads(t.work.partition("\n")[2]).get("command") == command for t in v.tools)]
    g = Store.open(env.egg).graph
    edge = next(g.nodes[t.id] for t in v.tools if json.loads(t.work.partition("\n")[2]).get("command") == command)
    return freshness.judge(env.project, env.project, freshness.Cache(), fingerprint.key_of(env.paths.state_dir))(edge, None)


def quoted(text: str) -> str:
    """Recorded output as a handoff quotes it: every line behind `| ` (reuse/render.py)."""
    return "".join("| " + line + "\n" for line in text.splitlines())


# -- unchanged: denied as before, and verified -------------------------------------------------


def test_an_unchanged_file_is_denied_and_its_standing_is_verified(env):
    head = git(env, "rev-parse", "HEAD").strip()
    out = chat1(env, "cat " + INVOICE)
    assert out == INVOICE_TEXT
    reason = denied(pre(env, "cat ./" + INVOICE))
    assert reason is not None and quoted(INVOICE_TEXT) in reason
    s = judged(env, "cat " + INVOICE)
    assert (s.inputs, s.commit, s.changed) == (VERIFIED, head, ()) and s.recorded.endswith("Z")


def test_head_moved_but_the_file_unchanged_is_still_verified(env):
    chat1(env, "cat " + INVOICE)
    old = git(env, "rev-parse", "HEAD").strip()
    write(env, "src/billing/tax.py", "RATE = 0.25\n")
    git(env, "commit", "-qam", "new rate")
    assert git(env, "rev-parse", "HEAD").strip() != old
    assert denied(pre(env, "cat ./" + INVOICE)) is not None
    s = judged(env, "cat " + INVOICE)
    assert s.inputs == VERIFIED and s.commit == old  # the commit it was recorded at


def test_a_touched_file_with_the_same_bytes_is_still_verified(env):
    chat1(env, "cat " + INVOICE)
    path = os.path.join(env.project, INVOICE)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert denied(pre(env, "cat ./" + INVOICE)) is not None
    assert judged(env, "cat " + INVOICE).inputs == VERIFIED


# -- changed: never denied, and named ----------------------------------------------------------


def test_a_changed_tracked_file_is_not_denied(env):
    chat1(env, "cat " + INVOICE)
    write(env, INVOICE, INVOICE_TEXT.replace("sum", "fsum"))  # the same size: only the bytes tell
    git(env, "commit", "-qam", "precise totals")
    reply = pre(env, "cat ./" + INVOICE)
    assert denied(reply) is None
    s = judged(env, "cat " + INVOICE)
    assert s.inputs == CHANGED and s.changed == (INVOICE,) and not s.may_complete


def test_an_uncommitted_edit_of_a_tracked_file_is_not_denied(env):
    chat1(env, "cat " + INVOICE)
    write(env, INVOICE, INVOICE_TEXT + "# TODO: rounding\n")
    assert denied(pre(env, "cat ./" + INVOICE)) is None
    assert judged(env, "cat " + INVOICE).changed == (INVOICE,)


def test_a_changed_untracked_file_is_not_denied(env):
    chat1(env, "cat notes.txt")
    write(env, "notes.txt", "late fees: see tax\n")  # same size
    assert denied(pre(env, "cat ./notes.txt")) is None
    assert judged(env, "cat notes.txt").changed == ("notes.txt",)


def test_a_new_file_in_a_read_directory_is_not_denied(env):
    cmd = "grep -rn total src/billing"
    assert "invoice.py" in chat1(env, cmd)
    assert denied(pre(env, cmd, session="chat-3")) is not None  # nothing changed yet: the repeat is stopped
    write(env, "src/billing/refund.py", "def refund_total():\n    pass\n")  # untracked, in the directory read
    assert denied(pre(env, "grep -rn total ./src/billing")) is None
    assert judged(env, cmd).changed == ("src/billing",)


def test_a_deleted_file_is_not_denied(env):
    chat1(env, "cat " + INVOICE)
    os.unlink(os.path.join(env.project, INVOICE))
    assert denied(pre(env, "cat ./" + INVOICE)) is None
    assert judged(env, "cat " + INVOICE).inputs == CHANGED


def test_a_file_created_where_the_call_found_none_is_not_denied(env):
    out = chat1(env, "cat src/billing/refund.py")
    assert "No such file" in out
    write(env, "src/billing/refund.py", "def refund():\n    pass\n")
    assert denied(pre(env, "cat ./src/billing/refund.py")) is None


# -- unknown: advice only ----------------------------------------------------------------------


def test_a_record_without_a_fingerprint_never_denies(env):
    """An older store (or an imported record) carries no fingerprint: its outcome is unknown."""
    record = {"session": "old", "turn": "t0", "cwd": env.project, "prompt": "read the invoice",
              "tools": [{"name": "Bash", "id": "c0", "input": {"command": "cat " + INVOICE}, "output": INVOICE_TEXT}],
              "answer": "read it"}
    save_turn(Store.open(env.egg), record, env.project)
    reply = pre(env, "cat ./" + INVOICE)
    assert denied(reply) is None
    assert INVOICE_TEXT.splitlines()[0] in reply["hookSpecificOutput"]["additionalContext"]  # still advice
    assert judged(env, "cat " + INVOICE).inputs == UNKNOWN


def test_an_input_outside_the_project_never_denies(env, tmp_path):
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("secret plans\n")
    os.symlink(outside, os.path.join(env.project, "plans.txt"))  # the project's name for a file outside it
    assert chat1(env, "cat plans.txt") == "secret plans\n"
    assert denied(pre(env, "cat ./plans.txt")) is None
    assert judged(env, "cat plans.txt").inputs == UNKNOWN


def test_a_call_recorded_in_another_directory_never_denies(env):
    chat1(env, "cat " + INVOICE)
    sub = os.path.join(env.project, "src")
    turn = "u-sub"
    env.respond(env.prompt("check the invoice total", turn=turn, session_id="chat-2", cwd=sub))
    reply = env.respond(env.ev("PreToolUse", session="chat-2", turn_id=turn, tool_name="Bash", cwd=sub,
                               tool_input={"command": "cat " + INVOICE}, tool_use_id="p-sub"))
    assert denied(reply) is None  # `src/src/billing/...` is not what chat 1 read


# -- the record ----------------------------------------------------------------------------------


def test_the_fingerprint_travels_through_the_journal_into_the_store(env):
    env.respond(env.prompt("read it", turn="j1", session_id="chat-j"))
    env.respond(env.tool("cat " + INVOICE, INVOICE_TEXT, turn="j1", use="c1", session_id="chat-j"))
    (ev,) = [e for e in Journal(env.paths.journal_dir).read("chat-j", "j1") if e.get("event") == "tool"]
    fp = ev["observed"]
    blob = git(env, "ls-files", "-s", INVOICE).split()[1]
    (entry,) = [e for e in fp["in"] if e[0] == "f"]
    assert entry[1] == INVOICE and entry[8] == blob and fp["head"] == git(env, "rev-parse", "HEAD").strip()
    env.respond(env.stop("done", turn="j1", session_id="chat-j"))
    g = Store.open(env.egg).graph
    (t,) = [t for v in env.views() if v.session == "chat-j" for t in v.tools]
    assert freshness.observed_of(g.nodes[t.id]) == fp
    key = os.path.join(env.paths.state_dir, fingerprint.KEY_FILE)
    assert os.stat(key).st_mode & 0o777 == 0o600


def test_a_test_run_declared_equal_to_a_call_never_denies_it(env):
    """A persistent union may declare `make check` the same as a prior `pytest` run, but a test run
    reads everything: no fingerprint can verify it, so it stays advice."""
    from helpers.reuse import bash

    out = "1 passed\n"
    env.record_turn("run the tests", [("pytest -q src/billing", out)], "they pass", session="chat-1", turn="t-tests")
    Store.open(env.egg).commit([], unions=[(bash("make check"), bash("pytest -q src/billing"))])
    assert denied(pre(env, "make check")) is None
    assert judged(env, "pytest -q src/billing").inputs == UNKNOWN


def test_after_a_change_the_new_read_is_reused_and_the_old_one_never(env):
    """Issue 11 §6 at the hook level: chat 1 reads the file; it is changed and committed; chat 2's
    read runs and sees the new content; chat 3, nothing changed since, is denied with it."""
    chat1(env, "cat " + INVOICE)
    new = INVOICE_TEXT.replace("sum(", "round(sum(").replace("lines)\n", "lines), 2)\n")
    write(env, INVOICE, new)
    git(env, "commit", "-qam", "round totals")
    assert denied(pre(env, "cat ./" + INVOICE)) is None  # chat 2: it runs ...
    assert chat1(env, "cat ./" + INVOICE, session="chat-2b") == new  # ... and its hook records what it saw
    reason = denied(pre(env, "cat ./" + INVOICE, session="chat-3"))
    assert reason is not None and quoted(new) in reason
    assert quoted(INVOICE_TEXT) not in reason  # chat 1's stale output never stands in, nor is it shown as current
    assert judged(env, "cat " + INVOICE).changed == (INVOICE,) and judged(env, "cat ./" + INVOICE).inputs == VERIFIED


def test_egg_extract_checks_the_inputs_too(env, monkeypatch):
    from eggshell.reuse import engine as reuse_engine
    from eggshell.search.searcher import Searcher
    chat1(env, "cat " + INVOICE)
    monkeypatch.chdir(env.project)
    monkeypatch.setenv("EGGSHELL_DATA_ROOT", env.data)  # the key the hooks hashed with

    def deny() -> bool:
        return reuse_engine.extract(Searcher([Store.open(env.egg)]), {"query": {"tool": {"name": "Bash", "input": {"command": "cat ./" + INVOICE}}}}).deny

    assert deny()
    write(env, INVOICE, INVOICE_TEXT.replace("sum", "max"))
    assert not deny()


def test_only_reads_and_shell_calls_are_fingerprinted(env):
    env.respond(env.prompt("edit it", turn="e1", session_id="chat-e"))
    env.respond(env.ev("PostToolUse", session="chat-e", turn_id="e1", tool_name="Edit", tool_use_id="e-1",
                       tool_input={"file_path": os.path.join(env.project, INVOICE), "old_string": "sum", "new_string": "max"},
                       tool_response="ok"))
    env.respond(env.tool("cat " + INVOICE, INVOICE_TEXT, turn="e1", use="c-1", session_id="chat-e"))
    events = [e for e in Journal(env.paths.journal_dir).read("chat-e", "e1") if e.get("event") == "tool"]
    assert ["observed" in e for e in events] == [False, True]


# -- links: the way to a file is an input too (issue 31 item 4) --------------------------------

SAME_TIME = 1_700_000_000_000_000_000  # two files the same size with the same mtime: only the bytes tell them apart
ALPHA, BRAVO = "rate = alpha\n", "rate = bravo\n"


def same_stat(env: Env, *rels: str) -> None:
    for rel in rels:
        os.utime(os.path.join(env.project, rel), ns=(SAME_TIME, SAME_TIME))


def link(env: Env, rel: str, target: str) -> None:
    """`ln -sfn target rel`: a new link put in place of the old one in one rename, as ln does."""
    path = os.path.join(env.project, rel)
    tmp = path + ".new"
    os.symlink(target, tmp)
    os.replace(tmp, path)


@pytest.fixture
def linked(env):
    """Files and directories that differ only in their bytes, and committed links to them."""
    write(env, "a.txt", ALPHA)
    write(env, "b.txt", BRAVO)
    write(env, "c.txt", ALPHA)  # the same bytes as a.txt, elsewhere
    write(env, "v1/notes.txt", ALPHA)
    write(env, "v2/notes.txt", BRAVO)
    same_stat(env, "a.txt", "b.txt", "c.txt", "v1/notes.txt", "v2/notes.txt")
    return env


def test_a_retargeted_link_is_not_denied_with_the_old_content(linked):
    """The red team's case: two files of the same size and mtime, a committed link to one, `cat`
    of the link recorded, the link retargeted to the other: the next chat's `cat` runs."""
    env = linked
    link(env, "current.txt", "a.txt")
    git(env, "add", "-A")
    git(env, "commit", "-qm", "link")
    assert chat1(env, "cat current.txt") == ALPHA
    link(env, "current.txt", "b.txt")
    git(env, "commit", "-qam", "retarget")
    assert run(env, "cat current.txt") == BRAVO
    reply = pre(env, "cat ./current.txt")
    assert denied(reply) is None  # the old output is not handed over as verified
    s = judged(env, "cat current.txt")
    assert s.inputs == CHANGED and s.changed == ("current.txt",) and not s.may_complete


# (name, links made before chat 1, the command, what changes after it)
LINKED = {
    "file link": ([("current.txt", "a.txt")], "cat current.txt", lambda env: link(env, "current.txt", "b.txt")),
    "directory link": ([("docs", "v1")], "grep -rn rate docs", lambda env: link(env, "docs", "v2")),
    "directory link, ls": ([("docs", "v1")], "ls -la docs/", lambda env: (link(env, "docs", "v2"), write(env, "v2/more.txt", "x\n"))),
    "link in a parent component": ([("notes", "v1")], "cat notes/notes.txt", lambda env: link(env, "notes", "v2")),
    "a chain of two links, the second retargeted": ([("stable.txt", "a.txt"), ("latest.txt", "stable.txt")], "cat latest.txt", lambda env: link(env, "stable.txt", "b.txt")),
    "a chain of two links, the first retargeted": ([("stable.txt", "a.txt"), ("latest.txt", "stable.txt")], "cat latest.txt", lambda env: link(env, "latest.txt", "b.txt")),
    "relative target through ..": ([("sub/rates.txt", "../a.txt")], "cat sub/rates.txt", lambda env: link(env, "sub/rates.txt", "../b.txt")),
    "absolute target": ([("current.txt", "{project}/a.txt")], "cat current.txt", lambda env: link(env, "current.txt", env.project + "/b.txt")),
    "a link to a link's directory": ([("notes", "v1"), ("rates.txt", "notes/notes.txt")], "cat rates.txt", lambda env: link(env, "notes", "v2")),
    "the same bytes at another path": ([("current.txt", "a.txt")], "cat current.txt", lambda env: link(env, "current.txt", "c.txt")),
    "a dangling link now leads somewhere": ([("current.txt", "gone.txt")], "cat current.txt", lambda env: link(env, "current.txt", "b.txt")),
    "a link replaced by the file it pointed at": ([("current.txt", "a.txt")], "cat current.txt", lambda env: (
        os.unlink(os.path.join(env.project, "current.txt")), shutil.copy2(os.path.join(env.project, "a.txt"), os.path.join(env.project, "current.txt")))),
    "a link replaced by a file, then edited": ([("current.txt", "a.txt")], "cat current.txt", lambda env: (
        os.unlink(os.path.join(env.project, "current.txt")), write(env, "current.txt", BRAVO), same_stat(env, "current.txt"))),
}


def make_links(env: Env, links) -> None:
    for rel, target in links:
        os.makedirs(os.path.dirname(os.path.join(env.project, rel)), exist_ok=True)
        os.symlink(target.format(project=env.project), os.path.join(env.project, rel))
    git(env, "add", "-A")
    git(env, "commit", "-qm", "links")


@pytest.mark.parametrize("case", sorted(LINKED))
def test_a_changed_way_to_the_input_is_a_change(linked, case):
    """Whatever changes where the named path leads (the link itself, a parent component, either link
    of a chain, a relative or absolute target) is a change, even when the bytes it now leads to are
    the same: the read reads another file now (a retarget is a change, as issue 31 says)."""
    env = linked
    links, command, change = LINKED[case]
    make_links(env, links)
    before = chat1(env, command)
    change(env)
    assert run(env, command) != before or case in ("the same bytes at another path", "a link replaced by the file it pointed at")
    assert denied(pre(env, command)) is None
    s = judged(env, command)
    assert s.inputs == CHANGED and not s.may_complete


@pytest.mark.parametrize("case", sorted(LINKED))
def test_an_unchanged_way_to_the_input_is_still_verified(linked, case):
    """The same links, untouched (or put back with the same target): verified and denied as a plain
    file is, so reuse through links is not simply turned off."""
    env = linked
    links, command, _ = LINKED[case]
    make_links(env, links)
    before = chat1(env, command)
    for rel, target in links:
        link(env, rel, target.format(project=env.project))  # `ln -sfn` with the same target: not a retarget
    reason = denied(pre(env, command))
    assert reason is not None and quoted(before) in reason
    assert judged(env, command).inputs == VERIFIED


def test_a_walk_that_follows_links_is_never_verified_by_the_directory_alone(linked):
    """`grep -R` reads what a link inside the directory leads to, outside the digest of that directory:
    an edit there is unseen, so such a walk that meets a link is unknown; `grep -r` skips the link, and
    is verified and denied as before."""
    env = linked
    make_links(env, [("rates/current.txt", "../a.txt")])
    write(env, "rates/base.txt", "rate = base\n")
    assert "alpha" in chat1(env, "grep -Rn rate rates")
    assert "alpha" not in chat1(env, "grep -rn rate rates", session="chat-1b")
    write(env, "a.txt", BRAVO)
    same_stat(env, "a.txt")
    assert denied(pre(env, "grep -Rn rate rates")) is None
    assert judged(env, "grep -Rn rate rates").inputs == UNKNOWN
    assert denied(pre(env, "grep -rn rate rates", session="chat-3")) is not None
    assert judged(env, "grep -rn rate rates").inputs == VERIFIED
