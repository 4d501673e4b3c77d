"""What the user deletes is gone, with the real warm manager, real egg-hook processes and the real model.

  1. a store deleted under a running manager is not served by its next answer, a store
     replaced with other content is read again (only the new content is served), and the
     snapshot the manager leaves holds neither (a cold hook starting from it agrees);
  2. `egg forget` takes effect in a running manager at its next answer: no context, no denial;
  3. a canary recorded through the hooks (prompt, command, output, answer), embedded by the
     real model in the manager, handed to other chats and snapshotted, then `egg forget
     --match` and `egg compact --purge` with the manager still running: the canary is in no
     file under the data root or the project, before and after the manager exits, and
     the rest of the memory is still served; an open chat whose prompt held the canary ends
     after the purge (its Stop repeats it) and the manager saves nothing of it.

The environment (ManagedEnv: a private data root, a copy of the checkout) is test_manager's.
"""

from __future__ import annotations

import os

from eggshell.runtime import client
from eggshell.runtime.chat import Chat
from eggshell.runtime.journal import Journal
from eggshell.graph.save import save_turn
from eggshell.graph.store import Store
from helpers import bash, regular_files, turn_record, wait_for
from helpers.managed import RG, RG_ANSWER, RG_OUT, WAIT, ManagedEnv, checkout, denial, env, pre_tool  # noqa: F401 - fixtures

CANARY = "CANARY-f0rget-9d3c71e5"


def context(reply: dict) -> str:
    return reply.get("hookSpecificOutput", {}).get("additionalContext", "")


def warm_prompt(env: ManagedEnv, text: str, session: str, want: str | None = None) -> tuple[str, dict]:
    """A prompt the running manager answers (its request count grows); retried while `want` is not in the context yet."""
    for i in range(5):
        before = env.ping()
        reply, _ = env.hook(env.prompt(text, "u-%s-%d" % (session, i), session_id=session))
        after = env.ping()
        assert before is not None and after is not None and after["pid"] == before["pid"], env.manager_log()
        assert after["requests"] - before["requests"] == 2, "the hook did not ask the manager"
        if want is None or want in context(reply):
            return context(reply), after
    raise AssertionError("no warm context with %r; log:\n%s" % (want, env.manager_log()))


def files_holding(needle: str, *roots: str) -> list[str]:
    """Every regular file under these directories (symlinks not followed) whose bytes hold `needle`."""
    return sorted(os.path.relpath(p, root) for root in roots for p, data in regular_files(root) if needle.encode() in data)


def stop_manager(env: ManagedEnv) -> None:
    pid = env.pidfile()
    assert client.request(env.data, {"op": "stop"}, 5.0) is not None
    assert wait_for(lambda: not env.managers(), WAIT), env.manager_log()
    assert pid is not None


# -- 1. a deleted or replaced store ---------------------------------------------------------------


def test_a_deleted_store_is_not_served_and_a_replaced_one_is_read_again(env):
    env.record_chat1()
    env.wait_manager()
    ctx, status = warm_prompt(env, "where is parse_config defined?", "s2", want=RG_OUT.strip())
    pid = status["pid"]

    os.unlink(env.egg)  # what docs/privacy.md says deletes a project's memory
    ctx, status = warm_prompt(env, "where is parse_config defined?", "s3")
    assert ctx == "" and status["pid"] == pid
    assert denial(env.hook(pre_tool(env, "rg -n parse_config ./src", "s3", "u-s3-0"))[0]) is None

    new_out = "lib/settings.py:7:def parse_config(text):\n"
    other = Store.open(os.path.join(str(env.tmp), "other.egg"))
    save_turn(other, turn_record(session="s9", turn="t9", prompt="where is parse_config defined now?",
                                 tools=[bash("rg -n parse_config lib", new_out)], answer="in lib/settings.py"))
    os.replace(other.path, env.egg)  # another store under the same name (a restore, another machine's copy)
    ctx, status = warm_prompt(env, "where is parse_config defined?", "s4", want=new_out.strip())
    assert RG_OUT.strip() not in ctx and status["pid"] == pid

    stop_manager(env)  # it leaves a snapshot of what it holds now
    snaps = os.path.join(env.data, "run", "snapshots")
    assert os.listdir(snaps) and files_holding(RG_OUT.strip(), snaps) == []
    cold, _ = env.hook(env.prompt("where is parse_config defined?", "u5", session_id="s5"), EGGSHELL_MANAGER="off")
    assert new_out.strip() in context(cold) and RG_OUT.strip() not in context(cold)


# -- 2. egg forget reaches a running manager ---------------------------------------------------------


def test_a_forgotten_turn_is_not_served_by_the_running_manager(env):
    env.record_chat1()
    env.wait_manager()
    _, status = warm_prompt(env, "where is parse_config defined?", "s2", want=RG_OUT.strip())
    assert wait_for(lambda: RG_OUT.strip() in Chat(env.paths.state_dir, "s2").load().last_handoff, WAIT)
    key = env.view("s1", "t1").key
    r = env.python("egg", "forget", key, "--egg", env.egg)
    assert r.returncode == 0 and r.stdout.startswith("forgot turn %s" % key), r.stderr
    assert Chat(env.paths.state_dir, "s2").load().last_handoff == ""  # `egg graph` no longer shows it
    ctx, again = warm_prompt(env, "where is parse_config defined?", "s3")
    assert ctx == "" and again["pid"] == status["pid"]
    assert denial(env.hook(pre_tool(env, "rg -n parse_config ./src", "s3", "u-s3-0"))[0]) is None
    r = env.python("egg", "find", "parse_config", "--egg", env.egg)
    assert r.returncode == 1 and r.stdout == "no matching turns\n"


# -- 3. forget + purge: no copy anywhere ----------------------------------------------------------------


def test_forget_and_purge_leave_no_copy_of_a_canary_anywhere(env):
    s = dict(session_id="s1")
    env.hook(env.prompt("list the sources", "t0", **s))
    env.hook(env.tool("ls src", "config.py\nrun.py\n", "t0", "c-ls", **s))
    env.hook(env.stop("two files: config.py and run.py", "t0", **s))
    env.hook(env.prompt("where is parse_config defined? the token is %s" % CANARY, "t1", **s))
    env.hook(env.tool("%s # %s" % (RG, CANARY), "%s# key %s\n" % (RG_OUT, CANARY), "t1", "c-rg", **s))
    env.hook(env.stop("%s (the token %s is in .env)" % (RG_ANSWER, CANARY), "t1", **s))
    assert wait_for(lambda: env.view("s1", "t1") is not None and env.view("s1", "t1").answer is not None, WAIT), env.manager_log()
    env.wait_manager()

    # The manager ranks with the real model: its first warm prompt embeds the stored turns.
    warm_prompt(env, "where is parse_config defined?", "s2", want=CANARY)
    vec = os.path.join(env.data, "semantic", "vectors")
    assert wait_for(lambda: files_holding(CANARY, vec), WAIT), "the model did not embed the turn; log:\n" + env.manager_log()
    stop_manager(env)  # a snapshot with the turn in it
    env.hook(env.prompt("hello again", "u-s3", session_id="s3"))  # answered cold; starts a new manager
    env.wait_manager()
    _, status = warm_prompt(env, "where is parse_config defined?", "s4", want=CANARY)
    held = files_holding(CANARY, env.data, env.project)
    for where in (".eggs/work.egg", "run/snapshots/", "semantic/vectors/", "state/chats/"):
        assert any(h.startswith(where) for h in held), (where, held)

    o = dict(session_id="s8")
    env.hook(env.prompt("is %s still valid?" % CANARY, "t8", **o))  # an open chat: its Stop comes after the purge
    assert files_holding(CANARY, os.path.join(env.data, "journal"))

    r = env.python("egg", "forget", "--match", CANARY, "--egg", env.egg)
    assert r.returncode == 0 and r.stdout.count("forgot turn ") == 2, r.stdout + r.stderr  # s1's, and s8's open one
    assert "forgot turn (session s8, turn t8; still open" in r.stdout and "marked 1 journaled turn forgotten" in r.stdout
    ctx, _ = warm_prompt(env, "where is parse_config defined? the token is", "s5")
    assert CANARY not in ctx
    r = env.python("egg", "compact", "--purge", env.egg)
    assert r.returncode == 0, r.stderr
    assert " forgotten records, " in r.stdout and " 0 cached windows" not in r.stdout and "1 snapshot removed" in r.stdout, r.stdout

    assert files_holding(CANARY, env.data, env.project) == []
    env.hook(env.stop("yes, %s is still valid" % CANARY, "t8", **o))  # the manager settles it: nothing is saved
    assert wait_for(lambda: not Journal(os.path.join(env.data, "journal")).has("s8", "t8"), WAIT), env.manager_log()
    assert env.view("s8", "t8") is None and files_holding(CANARY, env.data, env.project) == []
    ctx, after = warm_prompt(env, "where is parse_config defined? the token is", "s6")
    assert CANARY not in ctx and after["pid"] == status["pid"]  # the same manager, reloaded
    ctx, _ = warm_prompt(env, "list the sources", "s7", want="run.py")  # the rest is still served
    assert files_holding(CANARY, env.data, env.project) == []
    stop_manager(env)  # it settles, refreshes and writes its snapshots from what it holds now
    assert os.listdir(os.path.join(env.data, "run", "snapshots"))
    assert files_holding(CANARY, env.data, env.project) == []
    r = env.python("egg", "fsck", env.egg)
    assert r.returncode == 0, r.stdout
