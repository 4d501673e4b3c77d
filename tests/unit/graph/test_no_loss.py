"""Issue 10 section 6: no event, byte or disk state loses work.

Requirements, each with real hook processes, files and filesystems where it matters:
1. lone UTF-16 surrogates (Node's JSON.stringify of a string cut inside an emoji) in a
   prompt, a tool output and an answer: the turn lands in the .egg, each lone half as U+FFFD;
2. one malformed event (a tool name over two lines, a non-string tool name, Infinity or NaN,
   input nested 300 or 10,000 levels, a 5,000-digit integer) is quarantined alone (logged,
   kept in <data root>/quarantine/events.ndjson, owner-only) and the rest of the turn is
   stored; an empty tool_use_id is given a fresh id like a missing one; a journal written
   before these checks still saves everything else at Stop;
3. a write cut short (a nearly full disk: os.write returning less, RLIMIT_FSIZE, a real
   64 KB tmpfs) fails the event loudly (log line or stderr, {} reply) and leaves no torn
   line: the next event is journaled whole and the turn is saved;
4. a store whose last record lost only its newline keeps it; `egg fsck` exits 1 on a store
   cut mid-line, cut before its last commit line, cut to nothing, or followed by a 2 GB
   sparse tail (checked in 600 MB of address space), refuses a FIFO without blocking and
   names a symlink with its target; data after zeros is refused, unchanged;
5. budgets: a 50 MB tool output is stored as its first 1 MiB characters and a truncation
   line, a 10 MB prompt is stored whole and matched by its head and tail within the budget,
   a store or journal with a 2 GB sparse tail still answers and records in 600 MB, and an
   absurd config (65 stores in a list, a 300 KB file) is refused naming the key
   (tests/bench/bench_budgets.py measures the wall times);
6. a chat lock held by another process never drops the turn: the selection is read
   without the lock, `off`, a profile and a one-turn profile (which stays set) respected.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import shutil
import signal
import stat
import subprocess

import pytest

from helpers.hooks import answer_here
from eggshell.stages import hook
from eggshell.runtime.journal import Journal
from eggshell.paths import private_dir
from helpers import read_bytes, real_venv
from helpers.hook_env import EGG_HOOK, Env, one_json_object


@pytest.fixture
def env(tmp_path):
    return Env(tmp_path)


def claude(env: Env, event: str, **kw) -> dict:
    return {"hook_event_name": event, "session_id": "claude-s", "cwd": env.project, "transcript_path": "/dev/null", **kw}


def run_claude(env: Env, payload: dict) -> dict:
    r = env.run_bin(json.dumps(payload), "claude")  # json.dumps writes a lone surrogate as \udXXX, as Node does
    assert r.returncode == 0, r.stderr
    return one_json_object(r.stdout)


def quarantine_file(env: Env) -> str:
    return os.path.join(env.data, "quarantine", "events.ndjson")  # as docs/privacy.md says


def quarantined(env: Env) -> list[dict]:
    p = quarantine_file(env)
    if not os.path.exists(p):
        return []
    with open(p, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# -- 1. lone surrogates --------------------------------------------------------------------------


def test_lone_surrogates_in_prompt_output_and_answer_reach_the_egg(env):
    run_claude(env, claude(env, "UserPromptSubmit", prompt_id="p-1", prompt="why is the log cut here \ud83d?"))
    run_claude(env, claude(env, "PostToolUse", prompt_id="p-1", tool_name="Bash", tool_input={"command": "tail -c 9 app.log"},
                           tool_response={"stdout": "done \ud83d", "stderr": "", "interrupted": False}, tool_use_id="toolu_1"))
    run_claude(env, claude(env, "PostToolUse", prompt_id="p-1", tool_name="Read", tool_input={"file_path": "notes\udc00.md"},
                           tool_response={"file": {"content": "\udc00 tail"}}, tool_use_id="toolu_2"))
    run_claude(env, claude(env, "Stop", prompt_id="p-1", last_assistant_message="the emoji was cut: \ud83d"))
    (v,) = env.views()
    assert v.prompt == "why is the log cut here \ufffd?"
    assert [t.outcome for t in v.tools] == ["done \ufffd", '{"file":{"content":"\ufffd tail"}}']
    assert v.tools[1].work == 'Read\n{"file_path":"notes\ufffd.md"}'
    assert v.answer == "the emoji was cut: \ufffd"
    assert env.log_text() == ""


def test_the_journal_says_how_many_surrogates_it_replaced(env):
    env.respond(env.prompt("a \ud83d and a \udc00"))
    (ev,) = Journal(env.data + "/journal").read("sess-1", "turn-1")
    assert ev["prompt"] == "a \ufffd and a \ufffd" and ev["lone_surrogates"] == 2


def test_payload_bytes_that_are_not_utf8_do_not_cost_the_event(env):
    env.respond(env.prompt("where is it"))
    raw = json.dumps(env.tool("cat blob", "start END", use="c-bytes")).encode().replace(b"END", b"\xff\xfe end")
    r = subprocess.run([EGG_HOOK, "codex"], input=raw,
                       capture_output=True, env=env.proc_env(), cwd=env.project, timeout=30)
    assert r.returncode == 0 and r.stderr == b""
    env.respond(env.stop("done"))
    (v,) = env.views()
    assert [t.outcome for t in v.tools] == ["start \ufffd\ufffd end"]


# -- 2. one malformed event is quarantined, the turn is kept ------------------------------------------


def _deep(levels: int) -> object:
    v: object = []
    for _ in range(levels - 1):
        v = [v]
    return v


def _raw_deep(levels: int) -> str:
    return "[" * levels + "]" * levels


MALFORMED = {
    # name: (PostToolUse fields or raw JSON text for tool_input, what the quarantine line says)
    "tool name over two lines": ({"tool_name": "Ba\nsh", "tool_input": {"command": "ls"}}, "spans more than one line"),
    "tool name a number": ({"tool_name": 7, "tool_input": {"command": "ls"}}, "tool name is int"),
    "Infinity in the input": ({"tool_name": "Bash", "tool_input": {"timeout": "INF"}}, "non-finite number"),
    "NaN in the output": ({"tool_name": "Bash", "tool_input": {"command": "stat"}, "tool_response": {"mtime": "NAN"}}, "non-finite number"),
    "input nested 300 levels": ({"tool_name": "Bash", "tool_input": "DEEP300"}, "nested deeper than 256"),
    "input nested 10,000 levels": ({"tool_name": "Bash", "tool_input": "DEEP10000"}, "not valid JSON"),
    "a 5,000-digit integer": ({"tool_name": "Bash", "tool_input": "BIGINT"}, "not valid JSON"),
}


def _malformed_raw(env: Env, fields: dict) -> str:
    p = env.ev("PostToolUse", **{"turn_id": "turn-1", "tool_use_id": "c-bad", "tool_response": "out\n", **fields})
    text = json.dumps(p)
    return (text.replace('"INF"', "Infinity").replace('"NAN"', "NaN").replace('"DEEP300"', _raw_deep(300))
            .replace('"DEEP10000"', _raw_deep(10_000)).replace('"BIGINT"', "1" * 5000))


@pytest.mark.parametrize("fields,why", MALFORMED.values(), ids=MALFORMED.keys())
def test_one_malformed_event_is_quarantined_and_the_rest_of_the_turn_is_stored(env, fields, why):
    env.run_bin(json.dumps(env.prompt("why does the build fail?")))
    env.run_bin(json.dumps(env.tool("make", "error: missing ;\n", use="c-good-1")))
    r = env.run_bin(_malformed_raw(env, fields))
    assert r.returncode == 0 and one_json_object(r.stdout) == {}
    env.run_bin(json.dumps(env.tool("git status", "clean\n", use="c-good-2")))
    env.run_bin(json.dumps(env.stop("a missing semicolon")))
    (v,) = env.views()
    assert [t.use_id for t in v.tools] == ["c-good-1", "c-good-2"] and v.answer == "a missing semicolon"
    (q,) = quarantined(env)
    assert (q["session"], q["turn"], q["event"]) == ("sess-1", "turn-1", "PostToolUse") and why in q["why"]
    assert "c-bad" in q["payload"]
    assert "quarantine" in env.log_text() or "kept in %s" % quarantine_file(env) in env.log_text()
    st = os.stat(quarantine_file(env))
    assert stat.S_IMODE(st.st_mode) == 0o600 and stat.S_IMODE(os.stat(os.path.dirname(quarantine_file(env))).st_mode) == 0o700


def test_an_empty_tool_use_id_gets_a_fresh_id_like_a_missing_one(env):
    env.respond(env.prompt("why does the build fail?"))
    env.respond(env.tool("make", "error\n", use=""))
    env.respond(env.tool("make test", "1 failed\n", use=""))
    env.respond(env.stop("it fails"))
    (v,) = env.views()
    assert [t.outcome for t in v.tools] == ["error\n", "1 failed\n"] and all(t.use_id for t in v.tools)
    assert quarantined(env) == []


def test_an_unparseable_payload_is_kept_only_for_a_recorded_turn(env):
    bad = _malformed_raw(env, {"tool_name": "Bash", "tool_input": "BIGINT"})
    assert one_json_object(env.run_bin(bad).stdout) == {}  # no prompt journaled: memory is off for this turn
    env.respond(env.prompt("p", session="other"))
    assert one_json_object(env.run_bin(bad).stdout) == {}  # another chat's turn is recorded, not this one
    assert quarantined(env) == []
    env.respond(env.prompt("p"))
    assert one_json_object(env.run_bin(bad).stdout) == {}
    assert [(q["session"], q["turn"]) for q in quarantined(env)] == [("sess-1", "turn-1")]


def test_a_journal_from_before_the_checks_saves_the_rest_and_quarantines_the_bad_event(env):
    env.respond(env.prompt("why does the build fail?"))
    j = Journal(env.paths.journal_dir)
    good = {"event": "tool", "name": "Bash", "input": {"command": "make"}, "output": "error\n", "time": "2026-01-01T00:00:00Z"}
    j.append("sess-1", "turn-1", dict(good, id="c1"))
    j.append("sess-1", "turn-1", dict(good, id="c2", input={"x": float("nan")}))  # ujson writes NaN, as old hooks did
    j.append("sess-1", "turn-1", dict(good, id="", output="empty id\n"))
    deep = _deep(1000)  # ujson reads and writes it; canonical JSON cannot
    j.append("sess-1", "turn-1", dict(good, id="c4", input=deep))
    env.respond(env.stop("a missing semicolon"))
    (v,) = env.views()
    assert [t.outcome for t in v.tools] == ["error\n", "empty id\n"] and v.answer == "a missing semicolon"
    assert [q["why"].split(" ")[2] for q in quarantined(env)] == ["input", "input"]
    assert not os.path.exists(j.turn_path("sess-1", "turn-1"))
    assert "kept in %s" % quarantine_file(env) in env.log_text()


# -- 3. a write cut short -------------------------------------------------------------------------------


def test_a_short_os_write_is_finished_not_ignored(env, monkeypatch):
    env.respond(env.prompt("why does the build fail?"))
    real = os.write
    calls = []

    def short(fd, data):  # a nearly full disk: the kernel takes a few bytes at a time
        calls.append(len(data))
        return real(fd, bytes(data[:7]))

    monkeypatch.setattr(os, "write", short)
    env.respond(env.tool("make", "error: missing ;\n" * 20, use="c1"))
    monkeypatch.setattr(os, "write", real)
    assert len(calls) > 10
    env.respond(env.stop("a missing semicolon"))
    (v,) = env.views()
    assert [t.outcome for t in v.tools] == ["error: missing ;\n" * 20]


def test_a_write_that_stops_fails_the_event_loudly_and_leaves_no_torn_line(env, monkeypatch, capsys):
    env.respond(env.prompt("why does the build fail?"))
    path = Journal(env.paths.journal_dir).turn_path("sess-1", "turn-1")
    before = read_bytes(path)
    real = os.write

    def full(fd, data):  # part of the line, then nothing: the disk filled up
        if os.fstat(fd).st_ino == os.stat(path).st_ino:
            if os.fstat(fd).st_size == len(before):
                return real(fd, bytes(data[:10]))
            return 0
        return real(fd, data)

    monkeypatch.setattr(os, "write", full)
    assert answer_here("codex", json.dumps(env.tool("make", "error\n", use="c1")), env.paths) == {}
    monkeypatch.setattr(os, "write", real)
    assert read_bytes(path) == before  # the partial line was taken back
    assert "not written" in env.log_text() and "No space left" in env.log_text()
    assert "egg-hook: failed open (OSError" in capsys.readouterr().err
    env.respond(env.tool("make test", "1 failed\n", use="c2"))
    env.respond(env.stop("it fails"))
    (v,) = env.views()
    assert [t.use_id for t in v.tools] == ["c2"]


def test_a_real_short_write_under_a_file_size_limit(env):
    """RLIMIT_FSIZE makes the kernel write only up to the limit, then refuse (EFBIG)."""
    env.run_bin(json.dumps(env.prompt("why does the build fail?")))
    path = Journal(env.paths.journal_dir).turn_path("sess-1", "turn-1")
    before = read_bytes(path)
    limit = len(before) + 100  # the tool line is longer: the kernel writes 100 bytes of it

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    p = json.dumps(env.tool("make", "error: missing ;\n" * 50, use="c1"))
    r = subprocess.run([EGG_HOOK, "codex"], input=p, text=True,
                       capture_output=True, env=env.proc_env(), cwd=env.project, timeout=30, preexec_fn=limited)
    assert r.returncode == 0 and one_json_object(r.stdout) == {}
    assert "failed open (OSError" in r.stderr and "File too large" in r.stderr
    assert read_bytes(path) == before
    env.run_bin(json.dumps(env.tool("git status", "clean\n", use="c2")))
    env.run_bin(json.dumps(env.stop("done")))
    (v,) = env.views()
    assert [t.use_id for t in v.tools] == ["c2"] and v.answer == "done"


@pytest.fixture
def tiny_fs(tmp_path):
    """A real 64 KB tmpfs (root only); unmounted afterwards."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    d = tmp_path / "tiny"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(d)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: %s" % r.stderr.strip())
    try:
        yield str(d)
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


def test_a_full_disk_fails_the_event_loudly_and_the_next_event_is_whole(env, tiny_fs):
    data = os.path.join(tiny_fs, "data")
    proc_env = dict(env.proc_env(), EGGSHELL_DATA_ROOT=data)
    run = lambda p: subprocess.run([EGG_HOOK, "codex"],  # noqa: E731
                                   input=json.dumps(p), text=True, capture_output=True, env=proc_env, cwd=env.project, timeout=30)
    assert one_json_object(run(env.prompt("why does the build fail?")).stdout) is not None
    j = Journal(os.path.join(data, "journal"))
    path = j.turn_path("sess-1", "turn-1")
    before = read_bytes(path)
    filler = os.path.join(tiny_fs, "filler")
    with open(filler, "wb") as f:  # leave about 2 KB free
        try:
            f.write(b"x" * (64 << 10))
        except OSError as e:
            assert e.errno == errno.ENOSPC
    os.truncate(filler, os.path.getsize(filler) - 2048)
    r = run(env.tool("make", "error: missing ;\n" * 1000, use="c-big"))  # 17 KB: does not fit
    assert r.returncode == 0 and one_json_object(r.stdout) == {}
    assert "failed open (OSError" in r.stderr and "No space left" in r.stderr
    assert read_bytes(path) == before  # no torn line
    os.unlink(filler)
    run(env.tool("git status", "clean\n", use="c2"))
    events = j.read_file(path)
    assert [e.get("id") for e in events if e["event"] == "tool"] == ["c2"]
    assert read_bytes(path).count(b"\n") == len(events)  # every line whole


# -- 4. a store's tail, and egg fsck ----------------------------------------------------------------------

EGG = os.path.join(os.path.dirname(EGG_HOOK), "egg")
SMALL_MEMORY = 600 << 20  # address space for a process that must not read a 2 GB tail into memory


def three_turns(path: str) -> bytes:
    from eggshell.graph.save import save_turn
    from eggshell.graph.store import Store
    from helpers import turn_record

    s = Store.open(path)
    for i in range(3):
        save_turn(s, turn_record(turn="t%d" % i, prompt="step %d" % i), root="/")
    return read_bytes(path)


def fsck(*files: str, memory: int | None = None) -> subprocess.CompletedProcess:
    def limit():
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run([EGG, "fsck", *files], capture_output=True, text=True, timeout=60, preexec_fn=limit)


def test_a_complete_last_record_without_its_newline_is_kept(egg):
    from eggshell.graph.records import turn_views
    from eggshell.graph.save import save_turn
    from eggshell.graph.store import Store
    from helpers import turn_record

    data = three_turns(egg)
    with open(egg, "wb") as f:
        f.write(data[:-1])  # only the final newline lost
    r = fsck(egg)
    assert r.returncode == 1 and "SHORTENED: the last line" in r.stdout and "is kept" in r.stdout
    save_turn(Store.open(egg), turn_record(turn="t3", prompt="step 3"), root="/")
    assert read_bytes(egg).startswith(data)  # the record is still there, with its newline back
    assert sorted(v.turn for v in turn_views(Store.open(egg).graph)) == ["t0", "t1", "t2", "t3"]
    assert fsck(egg).returncode == 0


def _cut_mid_line(data: bytes) -> bytes:
    return data[:-20]


def _cut_before_commit(data: bytes) -> bytes:
    return data[: data[:-1].rfind(b"\n") + 1]  # the last commit line is gone, its nodes are not


@pytest.mark.parametrize("shorten,says", [
    (_cut_mid_line, "DAMAGED: it ends in the middle of a line ("),
    (_cut_before_commit, "DAMAGED: its last line is a node, not a commit"),
    (lambda data: b"", "DAMAGED: it is empty (0 bytes)"),
], ids=["cut in the middle of a line", "cut at the line before the last commit", "cut to nothing"])
def test_fsck_reports_a_shortened_store_as_damaged(egg, shorten, says):
    cut = shorten(three_turns(egg))
    with open(egg, "wb") as f:
        f.write(cut)
    r = fsck(egg)
    assert r.returncode == 1 and says in r.stdout and " ok" not in r.stdout, r.stdout
    assert read_bytes(egg) == cut


def test_a_2gb_sparse_tail_is_neither_read_nor_kept(egg):
    from eggshell.graph.records import turn_views
    from eggshell.graph.save import save_turn
    from eggshell.graph.store import Store
    from helpers import turn_record

    data = three_turns(egg)
    with open(egg, "r+b") as f:
        f.truncate(len(data) + 2**31)
    r = fsck(egg, memory=SMALL_MEMORY)
    assert r.returncode == 1 and "DAMAGED: 2147483648 bytes of NUL from byte %d to the end" % len(data) in r.stdout, r.stdout + r.stderr
    code = ("import sys; sys.path[:0] = %r\n"
            "from eggshell.graph.store import Store\nfrom eggshell.graph.records import turn_views\n"
            "print(sorted(v.turn for v in turn_views(Store.open(%r).graph)))" % ([os.path.dirname(os.path.dirname(EGG)) + "/lib"], egg))
    r = subprocess.run([real_venv() + "/bin/python", "-c", code],
                       capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (SMALL_MEMORY, SMALL_MEMORY)))
    assert r.returncode == 0 and r.stdout.strip() == "['t0', 't1', 't2']", r.stderr[-500:]
    save_turn(Store.open(egg), turn_record(turn="t3", prompt="step 3"), root="/")  # a writer drops the zeros
    assert os.path.getsize(egg) < len(data) + 10_000 and read_bytes(egg).startswith(data)
    assert sorted(v.turn for v in turn_views(Store.open(egg).graph)) == ["t0", "t1", "t2", "t3"]


def test_data_after_a_zero_filled_region_is_refused_unchanged(egg):
    from eggshell.graph.save import save_turn
    from eggshell.graph.store import EggError, Store
    from helpers import turn_record

    data = three_turns(egg)
    damaged = data + b"\0" * 5000 + data.split(b"\n", 1)[1]
    with open(egg, "wb") as f:
        f.write(damaged)
    with pytest.raises(EggError, match="NUL bytes from byte %d, then data" % len(data)):
        save_turn(Store.open(egg), turn_record(turn="t3"), root="/")
    assert read_bytes(egg) == damaged
    r = fsck(egg)
    assert r.returncode == 1 and "and then other data" in r.stdout


def test_fsck_refuses_a_fifo_without_blocking(egg):
    os.mkfifo(egg)
    r = fsck(egg)  # opening a FIFO for reading would wait for a writer forever
    assert r.returncode == 1 and r.stdout == "%s: is a FIFO (named pipe), not an .egg file; nothing was read\n" % egg


def test_fsck_names_a_symlink_and_where_it_points(egg, tmp_path):
    real = str(tmp_path / "real.egg")
    three_turns(real)
    os.symlink(real, egg)
    r = fsck(egg)
    assert r.returncode == 1
    assert r.stdout.startswith("%s: is a symbolic link to %s; Eggshell refuses symlinked stores" % (egg, real)), r.stdout
    assert "DAMAGED" not in r.stdout


# -- 5. budgets: hostile sizes are capped before the work starts -------------------------------------------


def run_limited(env: Env, payload: dict, memory: int | None = SMALL_MEMORY, **extra) -> tuple[dict, str, float]:
    """One real egg-hook process, optionally with little address space: (reply, stderr, seconds)."""
    import time

    def limit():
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    t = time.monotonic()
    r = subprocess.run([EGG_HOOK, "codex"], input=json.dumps(payload), capture_output=True, text=True,
                       env=dict(env.proc_env(), **extra), cwd=env.project, timeout=120, preexec_fn=limit)
    assert r.returncode == 0
    return one_json_object(r.stdout), r.stderr, time.monotonic() - t


def test_a_50mb_tool_output_is_stored_cut_with_a_mark_and_answered_in_budget(env):
    OUTPUT_CHARS = 1 << 20  # as docs/hooks.md says
    env.run_bin(json.dumps(env.prompt("show me the build log")))
    big = "cc -c module.c  # step of the build\n" * ((50 << 20) // 36)
    reply, err, took = run_limited(env, env.tool("cat build.log", big, use="c-big"), memory=None)
    assert err == "" and took < 10
    env.run_bin(json.dumps(env.stop("the log is long")))
    (v,) = env.views()
    out = v.tools[0].outcome
    assert out == big[:OUTPUT_CHARS] + "\n[output truncated by Eggshell at %d of %d characters]" % (OUTPUT_CHARS, len(big))


def test_a_10mb_prompt_is_stored_as_its_scanned_head_and_tail_and_matched_by_them(env):
    from eggshell.core.redact import SCAN_CAP

    from helpers.hook_env import LATE_FEE_ANSWER, record_late_fee

    record_late_fee(env)
    prompt = "here is the whole log:\n" + "noise line of an unrelated log\n" * 330_000 + "where is late_fee computed?"
    reply, err, took = run_limited(env, env.prompt(prompt, turn="t-big"), memory=None)
    assert took < 10 and LATE_FEE_ANSWER in reply["hookSpecificOutput"]["additionalContext"], (took, err)
    env.run_bin(json.dumps(env.stop("it is in billing.py", turn="t-big")))
    stored = next(v for v in env.views() if v.turn == "t-big").prompt
    # Nothing is stored unscanned for secrets (redact.SCAN_CAP): the middle is withheld, with its size.
    assert stored.startswith("here is the whole log:\nnoise line") and stored.endswith("\nwhere is late_fee computed?")
    assert " characters past the redaction limit]" in stored and len(stored) < SCAN_CAP + 200 < len(prompt)


def test_a_store_with_a_2gb_sparse_tail_still_answers_in_little_memory(env):
    from helpers.hook_env import LATE_FEE_ANSWER, record_late_fee

    record_late_fee(env)
    with open(env.egg, "r+b") as f:
        f.truncate(os.path.getsize(env.egg) + 2**31)
    reply, err, _ = run_limited(env, env.prompt("how is late_fee computed?", turn="t2"))
    assert LATE_FEE_ANSWER in reply["hookSpecificOutput"]["additionalContext"], err


def test_a_journal_with_a_2gb_sparse_tail_still_records_the_turn_in_little_memory(env):
    env.run_bin(json.dumps(env.prompt("why does the build fail?")))
    path = Journal(env.paths.journal_dir).turn_path("sess-1", "turn-1")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) + 2**31)
    for p in (env.tool("make", "error: missing ;\n", use="c1"), env.stop("a missing semicolon")):
        _, err, _ = run_limited(env, p)
        assert err == ""
    (v,) = env.views()
    assert [t.use_id for t in v.tools] == ["c1"] and v.answer == "a missing semicolon"
    assert not os.path.exists(path)


@pytest.mark.parametrize("extra,says", [
    ("read = [%s]\n" % ", ".join('".eggs/r%d.egg"' % i for i in range(65)), "'read' has 65 entries; at most 64"),
    ("".join('e%d = ".eggs/e%d.egg"\n' % (i, i) for i in range(64)), "'eggs' has 65 entries; at most 64"),
    ("[profiles.wide]\nread = [%s]\n" % ", ".join('"project"' for _ in range(65)), "[profiles.wide]: 'read' has 65 entries"),
    ("# %s\n" % ("x" * (300 << 10)), "bytes; a config file may be at most 262144"),
], ids=["a read list", "an [eggs] table", "a profile's read list", "a 300 KB file"])
def test_an_absurd_config_is_refused_by_name_before_any_work(env, extra, says):
    text = open(os.path.join(env.project, ".eggshell.toml")).read()
    if extra.startswith("e0 = "):  # more stores under the template's [eggs]
        text, extra = text.replace('project = ".eggs/work.egg"\n', 'project = ".eggs/work.egg"\n' + extra), ""
    env.write_config(extra + text if not extra.startswith("[") else text + "\n" + extra)
    r = env.run_bin(json.dumps(env.prompt("where is late_fee computed?")))
    assert one_json_object(r.stdout) == {} and "ConfigError" in r.stderr and says in env.log_text(), env.log_text()


# -- 6. a held chat lock ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def chat_lock_held(env: Env):
    """Another process holding sess-1's control lock (as a slow `!egg` command would)."""
    from eggshell.runtime.chat import control_path

    lock = control_path(env.paths.state_dir, "sess-1") + ".lock"
    private_dir(os.path.dirname(lock))  # 0700, as Eggshell makes it (a data root open to others is refused)
    code = ("import portalocker, sys, time\nf = open(%r, 'a')\nportalocker.lock(f, portalocker.LOCK_EX)\n"
            "print('locked', flush=True)\ntime.sleep(120)\n" % lock)
    p = subprocess.Popen([real_venv() + "/bin/python", "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "locked\n"
        yield p
    finally:
        p.kill()
        p.wait()


def test_a_held_chat_lock_never_drops_the_turn(env):
    with chat_lock_held(env):
        r = env.run_bin(json.dumps(env.prompt("why does the build fail?")))
    assert r.returncode == 0 and r.stderr == ""
    assert "another process held this chat's lock" in env.log_text() and "read without the lock" in env.log_text()
    env.run_bin(json.dumps(env.tool("make", "error: missing ;\n", use="c1")))
    env.run_bin(json.dumps(env.stop("a missing semicolon")))
    (v,) = env.views()
    assert [t.use_id for t in v.tools] == ["c1"] and v.answer == "a missing semicolon"


def test_without_the_lock_off_and_a_one_turn_profile_are_still_respected(env):
    from dataclasses import replace

    from eggshell.runtime.chat import Chat

    chat = Chat(env.paths.state_dir, "sess-1")
    chat.update(lambda c: replace(c, next_profile="off"))
    with chat_lock_held(env):
        env.run_bin(json.dumps(env.prompt("do not record this", turn="t-off")))
    assert not Journal(env.paths.journal_dir).has("sess-1", "t-off")
    assert chat.peek().next_profile == "off"  # not used up without the lock: it also covers the next turn
    chat.update(lambda c: replace(c, next_profile=None, profile="private"))
    with chat_lock_held(env):
        env.run_bin(json.dumps(env.prompt("read, do not record", turn="t-private")))
    (prompt,) = Journal(env.paths.journal_dir).read("sess-1", "t-private")
    assert prompt["selection"]["profile"] == "private" and prompt["write"] is None
    chat.turn_off()
    with chat_lock_held(env):
        env.run_bin(json.dumps(env.prompt("memory is off", turn="t-disabled")))
    assert not Journal(env.paths.journal_dir).has("sess-1", "t-disabled")


def test_a_read_only_turn_quarantines_nothing(env):
    """A `private` turn's journal goes within the hour; its bad events must not outlive it."""
    from dataclasses import replace

    from eggshell.runtime.chat import Chat

    Chat(env.paths.state_dir, "sess-1").update(lambda c: replace(c, profile="private"))
    env.run_bin(json.dumps(env.prompt("read, do not record")))
    env.run_bin(_malformed_raw(env, {"tool_name": "Ba\nsh", "tool_input": {"command": "ls"}}))
    env.run_bin(_malformed_raw(env, {"tool_name": "Bash", "tool_input": "BIGINT"}))
    j = Journal(env.paths.journal_dir)
    j.append("sess-1", "turn-1", {"event": "tool", "name": "Bash", "id": "c9", "input": {"x": float("nan")}, "output": "", "time": "t"})
    env.run_bin(json.dumps(env.stop("done")))
    env.run_bin(json.dumps(env.prompt("next", turn="turn-2")))
    from eggshell.runtime.commits import settle
    from eggshell.graph.store import Store

    assert settle(j, j.turn_path("sess-1", "turn-1"), Store.open).removed  # the manager's pass: the read-only turn leaves
    assert quarantined(env) == [] and "not kept, since the turn is not recorded" in env.log_text()
