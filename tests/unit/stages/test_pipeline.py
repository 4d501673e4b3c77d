"""Every stage works as a standalone filter in a shell pipeline, with the same result in-process.

The brief: "every stage must also work as a standalone filter in a shell pipeline, and
tests must prove both give the same result". Here the real bin/ commands run as
subprocesses joined by `sh` pipes, and their bytes are compared with the in-process
functions (save.run, Searcher.search + query.run, extract.run) and with the Codex
hook's UserPromptSubmit additionalContext (config defaults: top_k 5, min_coverage 0.2,
handoff_chars 8000).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
from dataclasses import asdict

import pytest

from helpers.hooks import answer_here
from eggshell import config
from eggshell.stages import extract
from eggshell.stages import hook
from eggshell.search import matcher
from eggshell.stages import query
from eggshell.search.searcher import DEFAULT_MIN_COVERAGE, Searcher, semantic_depth
from eggshell.stages import save
from eggshell.graph.save import save_turn
from eggshell.paths import PROJECT_CONFIG, Paths
from eggshell.graph.records import turn_views
from eggshell.graph.store import Store
from helpers import bash, egg_records, real_venv, tool_call, turn_record

from helpers import REPO  # noqa: E402
BIN = os.path.join(REPO, "bin")


@pytest.fixture
def env(tmp_path):
    """An isolated environment for the bin/ commands (the real venv linked into a temp prefix)."""
    prefix = tmp_path / "prefix"
    (prefix / "share" / "eggshell").mkdir(parents=True)
    os.symlink(real_venv(), prefix / "share" / "eggshell" / "venv")
    e = {k: v for k, v in os.environ.items() if not k.startswith(("EGGSHELL_", "CODEX_"))}
    e.update(EGGSHELL_PREFIX=str(prefix), EGGSHELL_DATA_ROOT=str(tmp_path / "data"), CODEX_HOME=str(tmp_path / "codex"),
             LC_ALL="C.UTF-8", EGGSHELL_MANAGER_IDLE="20")  # a manager a hook starts here exits soon after the test
    return e


@pytest.fixture
def project(tmp_path):
    d = tmp_path / "proj"
    d.mkdir()
    (d / PROJECT_CONFIG).write_text(config.PROJECT_TEMPLATE)
    return d


def sh(script: str, env: dict, *args: str, cwd=None) -> subprocess.CompletedProcess:
    """Run a POSIX sh pipeline; $1.. are args, $B is the bin/ directory."""
    return subprocess.run(["sh", "-c", script, "sh", *args], capture_output=True, env=dict(env, B=BIN), cwd=cwd, timeout=60)


def records(project) -> list[dict]:
    src = str(project / "src")
    return [
        turn_record(session="sess-a", turn="t1", cwd=src, prompt="where is late_fee computed?",
                    tools=[bash("grep -rn late_fee src/", "src/billing.py:42: def late_fee(days):\n"),
                           bash("sed -n 40,44p src/billing.py", "def late_fee(days):\n    return round(days * 0.05, 2)\n")],
                    answer="late_fee is computed in src/billing.py, line 42: 5% a day, rounded to cents"),
        turn_record(session="sess-a", turn="t2", cwd=str(project), prompt="run the frontend unit tests",
                    tools=[bash("npm test", "12 passing\n")], answer="all 12 frontend tests pass"),
        turn_record(session="sess-b", turn="t3", cwd=str(project), prompt="why does the docker image build fail?",
                    tools=[tool_call("Bash", "c9", {"command": "docker build ."},
                                     {"stdout": "Step 1/5 : FROM python:3.99\n", "stderr": "manifest for python:3.99 not found"})],
                    answer=None),
        turn_record(session="sess-b", turn="t4", cwd="", prompt="\u8acb\u6c42\u66f8\u306e\u5ef6\u6ede\u6599\u306f\u3069\u3053\uff1f",
                    tools=[], answer="\u5ef6\u6ede\u6599\u306f src/billing.py \u306e late_fee \u3067\u3059"),
        # a malformed line and an invalid record: both stages must skip them the same way
        "not json at all",
        {"session": "sess-c", "turn": "t5", "cwd": "", "prompt": "", "tools": [], "answer": "x"},
    ]


def write_ndjson(path, items) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for x in items:
            f.write((x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)) + "\n")
    return str(path)


QUERIES = [
    "how is the late_fee calculated?",
    "docker build python:3.99",
    "kubernetes helm chart",  # unrelated: no hits, empty handoff
    "\u5ef6\u6ede\u6599",  # CJK
    "late_fee tests frontend",
    "configure the kubernetes tests cluster",  # shares only a generic word: below min_coverage, no hits
    # a pasted issue, past rank.LONG_QUERY terms: ranked with the tool inputs' BM25 and the records' openings,
    # which the egg-index child must report as the in-process provider does
    "Late fee charged twice for invoices paid one day after the due date\n\n"
    "Description: customers on the monthly billing plan report that an invoice settled a single day late shows "
    "two late fee lines. The billing service computes the late_fee from the number of overdue days and the daily "
    "rate, then the reminder job applies the same fee again when it sends the second notice. Expected one fee line "
    "per invoice; actual two, and the total is doubled. Steps to reproduce: create a customer, issue an invoice "
    "with a due date of yesterday, pay it today, run the reminder job, open the invoice page. Environment: python "
    "3.11, postgres 15, billing service 2.4.1 on linux. Traceback from the reminder worker log:\n"
    "  File \"src/billing.py\", line 42, in late_fee\n    return round(days * DAILY_RATE * amount, 2)\n"
    "  File \"src/reminders.py\", line 88, in send_second_notice\n    invoice.add_line(late_fee(days, invoice.amount))\n"
    "AssertionError: invoice 1042 already carries a late fee line\n"
    "Possibly related to the rounding change in the last release; finance noticed it in the monthly report.",
]


def queries_file(tmp_path, texts=QUERIES, malformed=True) -> str:
    items = [{"query": {"text": t}} for t in texts]
    if malformed:
        items.insert(2, "{not json")
        items.append({"q": "wrong shape"})
    return write_ndjson(tmp_path / "queries.ndjson", items)


# -- egg-save ----------------------------------------------------------------------------------------


def test_egg_save_pipeline_equals_save_run(tmp_path, env, project):
    turns = write_ndjson(tmp_path / "turns.ndjson", records(project))
    x, y = str(tmp_path / "x.egg"), str(tmp_path / "y.egg")
    r = sh('"$B/egg-save" --egg "$1" --root "$2" < "$3" | cat', env, x, str(project), turns)
    assert r.returncode == 0  # the status of `cat`; egg-save's own status is checked below
    out = io.StringIO()
    with open(turns, encoding="utf-8") as f:
        bad = save.run(Store.open(y), f, out, str(project))
    assert bad == 2
    assert r.stdout == out.getvalue().replace(json.dumps(y)[1:-1], json.dumps(x)[1:-1]).encode("utf-8")  # items name their store
    assert len(r.stdout.splitlines()) == 4
    # both stores hold the same nodes and the same turns (only header and commit times differ)
    assert sorted(x["node"] for x in egg_records(x) if "node" in x) == sorted(y_["node"] for y_ in egg_records(y) if "node" in y_)
    vx, vy = (turn_views(Store.open(p).graph) for p in (x, y))
    strip = lambda vs: sorted((v.id, v.session, v.turn, v.cwd, v.prompt, v.answer, v.tools) for v in vs)  # noqa: E731
    assert strip(vx) == strip(vy)
    assert {v.turn: v.cwd for v in vx} == {"t1": "src", "t2": ".", "t3": ".", "t4": ""}
    # stderr names the skipped lines
    assert b"<stdin>:5: not valid JSON" in r.stderr and b"<stdin>:6: turn: 'prompt' must not be empty" in r.stderr


def test_egg_save_exit_status_and_replay(tmp_path, env, project):
    turns = write_ndjson(tmp_path / "turns.ndjson", records(project))
    x = str(tmp_path / "x.egg")
    r = sh('"$B/egg-save" --egg "$1" --root "$2" < "$3" > /dev/null; echo "rc=$?"', env, x, str(project), turns)
    assert r.stdout == b"rc=1\n"  # some lines were malformed
    # a replay adds nothing and prints nothing, in both forms
    r = sh('"$B/egg-save" --egg "$1" --root "$2" "$3"', env, x, str(project), turns)
    assert r.returncode == 1 and r.stdout == b""
    out = io.StringIO()
    with open(turns, encoding="utf-8") as f:
        save.run(Store.open(x), f, out, str(project))
    assert out.getvalue() == ""


def test_egg_save_index_lines_are_save_turns_items(tmp_path, env, project):
    recs = [r for r in records(project) if isinstance(r, dict) and r["prompt"]]
    turns = write_ndjson(tmp_path / "turns.ndjson", recs)
    r = sh('"$B/egg-save" --egg "$1" --root "$2" < "$3"', env, str(tmp_path / "x.egg"), str(project), turns)
    assert r.returncode == 0
    s = Store.open(str(tmp_path / "y.egg"))
    expect = [{"index": [dict(i, store=str(tmp_path / "x.egg")) for i in save.save_turn(s, rec, str(project)).index]} for rec in recs]
    assert [json.loads(line) for line in r.stdout.splitlines()] == expect


# -- egg-query | egg-extract ---------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path, env, project):
    turns = write_ndjson(tmp_path / "turns.ndjson", records(project))
    x = str(tmp_path / "x.egg")
    sh('"$B/egg-save" --egg "$1" --root "$2" < "$3"', env, x, str(project), turns)
    assert len(turn_views(Store.open(x).graph)) == 4
    return x


def searcher(env, *paths: str, top_k: int = 5) -> Searcher:
    """What egg-query builds by default (hybrid), with the built-in provider in this process
    instead of an egg-index child: both must rank alike, sharing the same vector cache."""
    semantic = matcher.in_process(config.Config(), env["EGGSHELL_DATA_ROOT"], semantic_depth(top_k), print)
    return Searcher([Store.open(p) for p in paths], "hybrid", semantic)


def in_process_query(env, store, qfile) -> str:
    out = io.StringIO()
    with open(qfile, encoding="utf-8") as f:
        query.run(searcher(env, store), f, out, 5, DEFAULT_MIN_COVERAGE)
    return out.getvalue()


def test_egg_query_pipeline_equals_searcher_and_run(tmp_path, env, store):
    qfile = queries_file(tmp_path)
    r = sh('"$B/egg-query" --egg "$1" --top-k 5 < "$2" | cat', env, store, qfile)
    assert r.returncode == 0
    expect = in_process_query(env, store, qfile)
    assert r.stdout == expect.encode("utf-8")
    # and each answered line is exactly Searcher.search's hits, best first
    s = searcher(env, store)
    answered = [json.loads(line) for line in r.stdout.splitlines() if b'"error"' not in line]
    assert [a["query"]["text"] for a in answered] == QUERIES
    for a in answered:
        assert a["hits"] == [asdict(h) for h in s.search(a["query"]["text"], 5)]
    assert answered[0]["hits"][0]["turn"] == "t1" and answered[2]["hits"] == []
    # the egg-index child reports the model's cosines, as the in-process provider does: each hit the
    # model counted carries its cosine (the handoff's floor reads it), the others null
    first = answered[0]["hits"][0]["semantic"]
    assert isinstance(first, float) and 0.3 <= first <= 1.0, answered[0]["hits"]
    lexical = Searcher([Store.open(store)])
    assert all(h.semantic is None for h in lexical.search(QUERIES[0], 5))
    assert lexical.search(QUERIES[5], 5) == [] and lexical.search(QUERIES[5], 5, 0.0)  # the coverage floor holds it back


def test_egg_query_exit_status(tmp_path, env, store):
    r = sh('"$B/egg-query" --egg "$1" < "$2"', env, store, queries_file(tmp_path))
    assert r.returncode == 1 and len(r.stdout.splitlines()) == len(QUERIES) + 2
    r = sh('"$B/egg-query" --egg "$1" < "$2"', env, store, queries_file(tmp_path, malformed=False))
    assert r.returncode == 0 and len(r.stdout.splitlines()) == len(QUERIES)


def test_query_extract_pipeline_equals_in_process(tmp_path, env, store, monkeypatch):
    monkeypatch.setenv("EGGSHELL_DATA_ROOT", env["EGGSHELL_DATA_ROOT"])  # the same trust ledger as the pipeline's
    qfile = queries_file(tmp_path)
    r = sh('"$B/egg-query" --egg "$1" --top-k 5 < "$2" | "$B/egg-extract" --egg "$1"', env, store, qfile)
    hits = in_process_query(env, store, qfile)
    out = io.StringIO()
    bad = extract.run(Searcher([Store.open(store)]), io.StringIO(hits), out, 8000)
    assert r.stdout == out.getvalue().encode("utf-8")
    assert r.returncode == 1 and bad == 2  # the two malformed query lines, answered in step
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(lines) == len(QUERIES) + 2
    good = [ln["handoff"] for ln in lines if "error" not in ln]
    assert "late_fee is computed in src/billing.py, line 42" in good[0]["text"]
    assert "manifest for python:3.99 not found" in good[1]["text"]  # an interrupted turn's observed work
    assert good[2] == {"text": "", "keys": [], "omitted": [], "deny": False, "covered": []}
    assert "\u5ef6\u6ede\u6599\u306f src/billing.py" in good[3]["text"]


def test_query_extract_pipeline_over_two_stores(tmp_path, env, project, store, monkeypatch):
    monkeypatch.setenv("EGGSHELL_DATA_ROOT", env["EGGSHELL_DATA_ROOT"])  # the same trust ledger as the pipeline's
    other = write_ndjson(tmp_path / "other.ndjson", [turn_record(session="sess-z", turn="z1", prompt="late_fee for weekends?",
                                                                 tools=[], answer="weekends count as late_fee days")])
    y = str(tmp_path / "y.egg")
    sh('"$B/egg-save" --egg "$1" < "$2"', env, y, other)
    qfile = queries_file(tmp_path, ["late_fee weekends"], malformed=False)
    r = sh('"$B/egg-query" --egg "$1" --egg "$2" --top-k 5 < "$3" | "$B/egg-extract" --egg "$1" --egg "$2"', env, store, y, qfile)
    assert r.returncode == 0
    hits = io.StringIO()
    with open(qfile) as f:
        query.run(searcher(env, store, y), f, hits, 5, 0.2)
    out = io.StringIO()
    extract.run(Searcher([Store.open(store), Store.open(y)]), io.StringIO(hits.getvalue()), out, 8000)
    assert r.stdout == out.getvalue().encode("utf-8")
    text = json.loads(r.stdout)["handoff"]["text"]
    assert "weekends count as late_fee days" in text and "src/billing.py, line 42" in text


def test_extract_budget_in_the_pipeline(tmp_path, env, store):
    qfile = queries_file(tmp_path, ["late_fee"], malformed=False)
    r = sh('"$B/egg-query" --egg "$1" < "$2" | "$B/egg-extract" --egg "$1" --budget 2500', env, store, qfile)
    h = json.loads(r.stdout)["handoff"]
    assert r.returncode == 0 and 0 < len(h["text"]) <= 2500


# -- the hook gives the pipeline's handoff -----------------------------------------------------------------


_WARM: dict = {}


def warm_resources(paths: Paths):
    """What the warm manager answers from (stores, workspaces, the model), kept across calls like it."""
    from eggshell.runtime.warm import Resources

    if paths.data_root not in _WARM:
        _WARM[paths.data_root] = Resources(paths.data_root, paths.bin_dir, warm=True)
    return _WARM[paths.data_root]


def hook_context(paths: Paths, project, prompt: str, turn: str, session: str | None = None) -> str:
    """The hook's context for a prompt in a new chat (each chat is given a piece of evidence once)."""
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": session or "sess-" + turn, "turn_id": turn, "cwd": str(project),
               "prompt": prompt}
    reply = answer_here("codex", json.dumps(payload), paths, warm_resources(paths))
    return reply["hookSpecificOutput"]["additionalContext"] if reply else ""


def pipeline_handoff(env, egg_path: str, prompt: str, chat: str | None = None) -> str:
    """The filters run in the project, as a user would (egg-extract checks recorded inputs there);
    with `chat`, the message names the chat asking, as the prompt hook's own message does."""
    query = {"text": prompt, **({"chat": chat} if chat else {})}
    r = sh('printf "%s\\n" "$2" | "$B/egg-query" --egg "$1" --top-k 5 | "$B/egg-extract" --egg "$1"', env, egg_path,
           json.dumps({"query": query}), cwd=os.path.dirname(os.path.dirname(egg_path)))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["handoff"]["text"]


def test_hook_additional_context_equals_the_pipeline_handoff(tmp_path, env, project):
    # turns recorded by the hook itself, through the real egg-hook process
    def run_hook(payload):
        r = subprocess.run([os.path.join(BIN, "egg-hook"), "codex"], input=json.dumps(payload).encode(), capture_output=True,
                           env=env, timeout=30)
        assert r.returncode == 0 and r.stderr == b"", r.stderr
        return json.loads(r.stdout)

    base = {"session_id": "sess-a", "cwd": str(project)}
    for rec in records(project)[:4]:
        run_hook(dict(base, hook_event_name="UserPromptSubmit", turn_id=rec["turn"], prompt=rec["prompt"]))
        for t in rec["tools"]:
            run_hook(dict(base, hook_event_name="PostToolUse", turn_id=rec["turn"], tool_name=t["name"], tool_use_id=t["id"],
                          tool_input=t["input"], tool_response=t["output"]))
        stop = dict(base, hook_event_name="Stop", turn_id=rec["turn"])
        if rec["answer"]:
            stop["last_assistant_message"] = rec["answer"]
        run_hook(stop)
    egg_path = str(project / ".eggs" / "work.egg")
    # The last Stop handed its turn to the manager the hooks started, which saves it in the
    # background; what `egg find` does first (drain the save queue) makes it land before we read.
    from eggshell.runtime import client

    client.request(env["EGGSHELL_DATA_ROOT"], {"op": "settle", "budget": 20.0}, timeout=25.0)
    assert len(turn_views(Store.open(egg_path).graph)) == 4

    prefix = env["EGGSHELL_PREFIX"]
    paths = Paths(prefix, env["EGGSHELL_DATA_ROOT"], os.path.join(prefix, "config", "eggshell", "config.toml"),
                  env["CODEX_HOME"], BIN)
    cfg = config.load(paths, str(project))
    assert (cfg.top_k, cfg.min_coverage, cfg.handoff_chars) == (5, 0.2, 8000)
    given = []
    for i, prompt in enumerate(QUERIES):
        in_hook = hook_context(paths, project, prompt, "new-%d" % i)
        assert in_hook == pipeline_handoff(env, egg_path, prompt)
        given.append(bool(in_hook))
    # The unrelated queries get nothing. (The last one shares only "tests" lexically, under the coverage
    # floor; hybrid lets its meaning match the frontend-tests turn, cosine 0.43, under the handoff's
    # handoff.SEMANTIC_FLOOR, and one shared generic word is under handoff.PROMPT_FLOOR.)
    assert given == [True, True, False, True, True, False, True]
    # and the hook process says the same as the in-process hook
    r = run_hook({"hook_event_name": "UserPromptSubmit", "session_id": "sess-new", "turn_id": "new-x", "cwd": str(project),
                  "prompt": QUERIES[0]})
    assert r["hookSpecificOutput"]["additionalContext"] == pipeline_handoff(env, egg_path, QUERIES[0])
    # the same chat asking again is not given the same evidence twice; the pipe, told which chat
    # asks, says the same (it reads what the chat was given from the data root's chat state)
    assert pipeline_handoff(env, egg_path, QUERIES[0], chat="sess-new") == ""
    assert hook_context(paths, project, QUERIES[0], "new-y", session="sess-new") == ""
    # a related question in that chat: the pipe hands over exactly what the hook does, byte for byte
    follow = pipeline_handoff(env, egg_path, QUERIES[4], chat="sess-new")
    assert follow != pipeline_handoff(env, egg_path, QUERIES[4]), "nothing was held back for what the chat had"
    assert hook_context(paths, project, QUERIES[4], "new-z", session="sess-new") == follow
