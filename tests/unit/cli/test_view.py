"""cli/view.py (`egg view`): the page's data, its escaping, its policy, where it is written, and who deletes it.

What a browser does with the page is tests/unit/cli/test_view_browser.py; here the page is read
as bytes and parsed as HTML, the way an attacker's recorded text would meet it.
"""

from __future__ import annotations

import base64
import hashlib
import html.parser
import json
import os
import re
import shlex
import stat

import pytest

from eggshell.cli import view
from eggshell.graph.records import turn_views
from eggshell.graph.save import save_turn
from eggshell.graph.store import Store
from eggshell.runtime.chat import Chat
from helpers import bash, turn_record
from helpers.cli_env import Egg
from helpers.hook_env import LATE_FEE_ANSWER, Env, record_late_fee

HOSTILE = [
    "</script><script>window.__pwned = 1</script>",
    "<img src=x onerror=\"window.__pwned = 2\">",
    "<!-- <script>window.__pwned = 3</script>",
    "</SCRIPT ><svg onload=alert(4)>",
    "&lt;b&gt; &amp; \u2028line\u2029para \\u003c/script>",
    "https://evil.example/beacon.png and http://10.99.0.2/x",
    "@@DATA@@ @@CSP@@ @@SIZE@@",
    "\x00\x07 nul and bell",
]


@pytest.fixture
def egg(tmp_path, monkeypatch, capsys):
    e = Egg(tmp_path, monkeypatch, capsys)
    e("init")
    return e


def store_of(egg) -> Store:
    return Store.open(str(egg.cwd / ".eggs" / "work.egg"))


def record(egg, *records) -> Store:
    s = store_of(egg)
    for r in records:
        save_turn(s, r, None)
    return s


def hostile_turn(i: int, text: str) -> dict:
    return turn_record(session="sess-%d %s" % (i, text), turn="turn-%d" % i, prompt="request %d: %s" % (i, text),
                       tools=[bash("echo %d %s" % (i, text), "output %d: %s\n" % (i, text))], answer="answer %d: %s" % (i, text))


def written(out: str) -> str:
    """The page `egg view` printed the path of."""
    path = out.strip().splitlines()[-1]
    with open(path, encoding="utf-8") as f:
        return f.read()


class Elements(html.parser.HTMLParser):
    """Every start tag (name, attributes) and the text of every <script> and <style>, as a browser would split them."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.raw: list[tuple[str, dict, str]] = []
        self._open: tuple[str, dict] | None = None
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._open = (tag, dict(attrs))
            self.raw.append((tag, dict(attrs), ""))

    def handle_data(self, data):
        if self._open is not None:
            tag, attrs, text = self.raw[-1]
            self.raw[-1] = (tag, attrs, text + data)

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._open = None


def data_of(page: str) -> dict:
    blocks = [t for tag, a, t in Elements(page).raw if tag == "script" and a.get("type") == "application/json"]
    assert len(blocks) == 1
    return json.loads(blocks[0])


def sha(text: str) -> str:
    return "'sha256-%s'" % base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


# -- the page's data -------------------------------------------------------------------------


def test_the_page_holds_every_turn_its_tools_answer_and_store_sizes(egg):
    s = record(egg, turn_record(turn="t1", prompt="why does the build fail?", tools=[bash("make", "error: stale lockfile\n")]),
               turn_record(turn="t2", prompt="and now?", tools=[bash("make test", "ok\n")], answer=None))
    rc, out, err = egg("view")
    assert rc == 0, err
    page = written(out)
    d = data_of(page)
    views = {v.key: v for v in turn_views(Store.open(s.path).graph)}
    assert {t["key"] for t in d["turns"]} == set(views) and len(views) == 2
    t1 = next(t for t in d["turns"] if t["turn"] == "t1")
    assert (t1["prompt"], t1["answer"], t1["session"]) == ("why does the build fail?", "because the lockfile is stale", "sess-1")
    assert [(c["name"], c["command"], c["output"]) for c in t1["tools"]] == [("Bash", "make", "error: stale lockfile\n")]
    assert t1["tools"][0]["key"] == views[t1["key"]].tools[0].id[:12]
    assert t1["time"] == views[t1["key"]].time
    assert next(t for t in d["turns"] if t["turn"] == "t2")["answer"] is None  # interrupted: no invented answer
    [st] = d["stores"]
    assert (st["path"], st["name"], st["write"]) == (s.path, "project", True)
    assert (st["bytes"], st["turns"], st["commits"]) == (os.path.getsize(s.path), 2, len(Store.open(s.path).graph.commits))
    assert st["trust"].startswith("trusted")
    assert d["turns"][0]["time"] >= d["turns"][1]["time"]  # newest first
    size = int(re.search(r'<meta name="egg-page-bytes" content="(\d+)">', page).group(1))
    assert size == len(page.encode("utf-8")) == os.path.getsize(out.strip())
    assert "the page is" in err and format(size, ",") in err  # the file size is said


def test_hostile_recorded_text_stays_data(egg):
    """No recorded byte ends the data block, starts a tag or an attribute; all of it comes back exactly."""
    record(egg, *[hostile_turn(i, text) for i, text in enumerate(HOSTILE)])
    rc, out, err = egg("view")
    assert rc == 0, err
    page = written(out)
    parsed = Elements(page)
    scripts = [(a, t) for tag, a, t in parsed.raw if tag == "script"]
    assert [a.get("type") for a, _ in scripts] == ["application/json", None]  # the data, the page's own script
    assert not [tag for tag, _ in parsed.tags if tag in ("img", "svg", "iframe", "object", "embed", "link", "base", "form")]
    assert not [(tag, k) for tag, a in parsed.tags for k in a if k.startswith("on") or k in ("src", "href", "srcdoc")]
    block = scripts[0][1]
    for ch in "<>&\u2028\u2029":
        assert ch not in block
    d = json.loads(block)
    got = {t["turn"]: t for t in d["turns"]}
    for i, text in enumerate(HOSTILE):
        t = got["turn-%d" % i]
        assert (t["prompt"], t["answer"]) == ("request %d: %s" % (i, text), "answer %d: %s" % (i, text))
        assert t["session"] == "sess-%d %s" % (i, text)
        assert t["tools"][0]["output"] == "output %d: %s\n" % (i, text)
    assert page.count("</script>") == 2 and page.lower().count("<script") == 2


def test_embed_json_escapes_and_survives_lone_surrogates():
    text = view.embed_json({"a": "</script>\u2028\u2029&<!--", "b": "\ud800 lone", "c": "a/b"})
    assert text == ('{"a":"\\u003c\\/script\\u003e\\u2028\\u2029\\u0026\\u003c!--","b":"\ufffd lone","c":"a\\/b"}')
    assert json.loads(text) == {"a": "</script>\u2028\u2029&<!--", "b": "\ufffd lone", "c": "a/b"}


def test_the_policy_allows_no_fetch_and_only_the_page_s_own_script_and_style(egg):
    record(egg, hostile_turn(0, HOSTILE[0]))
    page = written(egg("view")[1])
    parsed = Elements(page)
    metas = [(i, a) for i, (tag, a) in enumerate(parsed.tags) if tag == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert len(metas) == 1
    first_code = min(i for i, (tag, a) in enumerate(parsed.tags) if tag in ("script", "style"))
    assert metas[0][0] < first_code  # in force before anything runs
    policy = dict((d.split()[0], d.split()[1:]) for d in metas[0][1]["content"].split(";"))
    script = [t for tag, a, t in parsed.raw if tag == "script" and "type" not in a]
    style = [t for tag, a, t in parsed.raw if tag == "style"]
    assert policy["default-src"] == ["'none'"]
    assert policy["script-src"] == [sha(script[0])] and policy["style-src"] == [sha(style[0])]
    for d in ("img-src", "connect-src", "font-src", "base-uri", "form-action", "object-src", "frame-src"):
        assert policy[d] == ["'none'"], d
    assert "unsafe" not in metas[0][1]["content"]


def test_no_url_in_the_page_but_recorded_text_escaped(egg):
    """The template names no network resource; a recorded URL appears only escaped in the data."""
    record(egg, hostile_turn(0, HOSTILE[5]))
    page = written(egg("view")[1])
    block = [t for tag, a, t in Elements(page).raw if tag == "script" and a.get("type") == "application/json"][0]
    rest = page.replace(block, "")
    assert not re.search(r"(?i)\b(https?|ftp|wss?|data|blob|javascript|file):", rest.replace("http-equiv", ""))
    assert not re.search(r"(?i)url\(|@import|\bsrc=|\bhref=", rest)
    assert "://" not in page  # recorded URLs too: escaped, no longer URLs
    assert "https:\\/\\/evil.example\\/beacon.png" in block
    template = view.template_text()
    assert not re.search(r"(?i)\b(https?|ftp|wss?|data|blob):", template.replace("http-equiv", ""))


def test_long_texts_are_cut_with_how_much_was_left_out(egg):
    record(egg, turn_record(prompt="p" * (view.TEXT_CAP + 5), tools=[bash("cat big.log", "x" * (view.OUTPUT_CAP + 7))]))
    [t] = data_of(written(egg("view")[1]))["turns"]
    assert (len(t["prompt"]), t["prompt_cut"]) == (view.TEXT_CAP, 5)
    assert (len(t["tools"][0]["output"]), t["tools"][0]["cut"]) == (view.OUTPUT_CAP, 7)


def test_the_forget_command_the_page_gives_forgets_that_turn_and_deletes_the_pages(egg):
    record(egg, turn_record(turn="t1", prompt="keep me"), turn_record(turn="t2", prompt="forget me please"))
    rc, out, _ = egg("view")
    page_path = out.strip()
    d = data_of(written(out))
    t2 = next(t for t in d["turns"] if t["turn"] == "t2")
    argv = shlex.split("egg forget " + t2["key"] + d["stores"][t2["store"]]["forget_args"])  # what the page shows
    rc, out, err = egg(*argv[1:])
    assert rc == 0, err
    assert "deleted 1 `egg view` page" in out
    assert not os.path.exists(page_path)  # it held a copy of what was forgotten
    d = data_of(written(egg("view")[1]))
    assert [t["turn"] for t in d["turns"]] == ["t1"]


def test_forget_args_name_the_store_when_it_was_chosen_with_egg(egg, tmp_path):
    s = record(egg, turn_record(turn="t1"))
    rc, out, err = egg("view", "--egg", s.path)
    assert rc == 0, err
    d = data_of(written(out))
    assert d["stores"][0]["forget_args"] == " --egg %s" % shlex.quote(s.path)
    os.chdir(tmp_path)  # outside the project: the command works as given
    key = d["turns"][0]["key"]
    assert egg("forget", key, "--egg", s.path)[0] == 0
    assert turn_views(Store.open(s.path).graph) == []


# -- where the page goes ---------------------------------------------------------------------


def test_default_page_is_owner_only_under_the_data_root(egg):
    record(egg, turn_record())
    rc, out, _ = egg("view")
    path = out.strip()
    data_root = os.environ["EGGSHELL_DATA_ROOT"]
    assert os.path.dirname(path) == os.path.join(data_root, "view")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    os.chmod(os.path.dirname(path), 0o755)  # loosened by hand: refused, never chmodded back (issue 31.6)
    rc, _, err = egg("view")
    assert rc != 0 and "`chmod 700 %s`" % os.path.dirname(path) in err
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o755
    os.chmod(os.path.dirname(path), 0o700)  # the fix it names
    assert egg("view")[1].strip() == path  # one page per set of stores, replaced
    assert [n for n in os.listdir(os.path.dirname(path))] == [os.path.basename(path)]  # no temporary file left


def test_output_option_writes_there_owner_only_and_replaces_a_symlink(egg, tmp_path):
    record(egg, turn_record())
    target = tmp_path / "elsewhere.txt"
    target.write_text("not to be touched")
    link = tmp_path / "page.html"
    os.symlink(target, link)
    rc, out, err = egg("view", "-o", str(link))
    assert rc == 0, err
    assert out.strip() == str(link)
    assert not os.path.islink(link) and stat.S_IMODE(os.stat(link).st_mode) == 0o600
    assert target.read_text() == "not to be touched"
    assert "egg forget` deletes it" not in err  # only the data root's pages are deleted by forget
    rc, _, err = egg("view", "-o", str(tmp_path / "no-such-dir" / "p.html"))
    assert rc == 2 and "no such directory" in err


def test_outside_a_project_it_says_what_to_do(egg, tmp_path):
    os.chdir(tmp_path)
    rc, _, err = egg("view")
    assert rc == 2 and "not in an Eggshell project" in err and "--egg PATH" in err
    rc, _, err = egg("view", "--egg", str(tmp_path / "missing.egg"))
    assert rc == 2 and "missing.egg: no such file" in err


def test_a_damaged_store_is_named_and_the_rest_still_shown(egg, tmp_path):
    good = record(egg, turn_record(prompt="the good one"))
    bad = tmp_path / "bad.egg"
    bad.write_bytes(b'{"egg":"not a header"}\n')
    rc, out, err = egg("view", "--egg", good.path, "--egg", str(bad))
    assert rc == 1
    d = data_of(written(out))
    assert [t["prompt"] for t in d["turns"]] == ["the good one"]
    assert d["stores"][1]["error"] and str(bad) in err and "problem" in err


def test_every_store_any_profile_reads_is_shown(egg):
    (egg.cwd / ".eggshell.toml").write_text('[eggs]\nteam = ".eggs/team.egg"\n\n[profiles.shared]\nread = ["team"]\nwrite = "project"\n')
    team = Store.open(str(egg.cwd / ".eggs" / "team.egg"))
    save_turn(team, turn_record(session="colleague", prompt="from the team store"), None)
    record(egg, turn_record(prompt="mine"))
    d = data_of(written(egg("view")[1]))
    assert [(s["name"], s["turns"]) for s in d["stores"]] == [("project", 1), ("team", 1)]
    assert sorted(t["prompt"] for t in d["turns"]) == ["from the team store", "mine"]


def test_help_says_what_it_writes(egg, capsys):
    with pytest.raises(SystemExit) as e:
        egg("view", "--help")
    assert e.value.code == 0
    text = capsys.readouterr().out
    for word in ("--open", "-o FILE", "--egg PATH", "0600", "Content-Security-Policy", "egg forget"):
        assert word in text


# -- chats -----------------------------------------------------------------------------------


def test_each_chat_s_handoff_and_why_with_scores(tmp_path, monkeypatch, capsys):
    """A real handoff (the hook's own path): the page shows it, the ranked turns with scores, the delivery keys."""
    env = Env(tmp_path)
    record_late_fee(env)
    reply = env.respond(env.prompt("where is late_fee computed?", "turn-9", session_id="chat-b"))
    given = reply["hookSpecificOutput"]["additionalContext"]
    assert LATE_FEE_ANSWER in given
    egg = Egg(tmp_path, monkeypatch, capsys)
    Chat(env.paths.state_dir, "elsewhere").delivered("a handoff of another project", "retrieved 0123456789ab  rank 1  score 0.5  (x.egg)")
    monkeypatch.chdir(env.project)
    rc, out, err = egg("view")
    assert rc == 0, err
    d = data_of(written(out))
    by_turn = {c["last_turn"]: c for c in d["chats"]}
    assert sorted(by_turn) == ["turn-1", "turn-9"]
    assert (by_turn["turn-1"]["session"], by_turn["turn-1"]["handoff"]) == ("sess-0", "")
    c = by_turn["turn-9"]  # chat-b saved no turn yet: it is here for what it was given, by its state file's name
    assert c["session"] is None and c["file"] == os.path.basename(Chat(env.paths.state_dir, "chat-b").path).split(".")[0]
    assert c["handoff"] == given
    [turn] = [t for t in d["turns"] if t["session"] == "sess-0"]
    [r] = c["retrieved"]
    assert r["key"] == turn["key"] and r["rank"] == 1 and float(r["score"]) > 0 and r["store"] == "work.egg"
    assert c["delivered"] > 0 and c["enabled"] is True
    assert any(line.startswith("evidence") for line in c["reasons"])
    assert d["other_chats"] == 1  # the chat of another project is counted, not shown
    assert "a handoff of another project" not in json.dumps(d)


def test_viewing_changes_no_chat_state(tmp_path, monkeypatch, capsys):
    env = Env(tmp_path)
    record_late_fee(env)
    chats = os.path.join(env.paths.state_dir, "chats")
    os.makedirs(chats, exist_ok=True)
    broken = Chat(env.paths.state_dir, "sess-0").path
    with open(broken, "w") as f:
        f.write("{not json")
    egg = Egg(tmp_path, monkeypatch, capsys)
    monkeypatch.chdir(env.project)
    before = {n: open(os.path.join(chats, n), "rb").read() for n in os.listdir(chats)}
    rc, out, err = egg("view")
    assert rc == 1 and "unreadable chat state" in err  # named, and left for the chat's own hook to set aside
    assert {n: open(os.path.join(chats, n), "rb").read() for n in os.listdir(chats)} == before
    assert data_of(written(out))["chats"][0]["unreadable"] is True


# -- --open ----------------------------------------------------------------------------------


def fake_opener(tmp_path, monkeypatch, rc: int = 0):
    """The desktop's opener is outside our control: a script in its place records what it was asked."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "opened"
    name = "open" if view.sys.platform == "darwin" else "xdg-open"
    (bindir / name).write_text('#!/bin/sh\nprintf "%%s\\n" "$@" >"%s"\nexit %d\n' % (log, rc))
    (bindir / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    return log


def test_open_hands_the_page_to_the_desktop_opener(egg, tmp_path, monkeypatch):
    record(egg, turn_record())
    log = fake_opener(tmp_path, monkeypatch)
    rc, out, err = egg("view", "--open")
    assert rc == 0, err
    assert log.read_text() == out.strip() + "\n" and "opened" in err


def test_open_without_an_opener_says_where_the_page_is(egg, tmp_path, monkeypatch):
    record(egg, turn_record())
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    rc, out, err = egg("view", "--open")
    assert rc == 0
    assert "no desktop opener" in err and out.strip() in err


def test_an_opener_that_fails_is_exit_1(egg, tmp_path, monkeypatch):
    record(egg, turn_record())
    fake_opener(tmp_path, monkeypatch, rc=3)
    rc, out, err = egg("view", "--open")
    assert rc == 1 and "exit 3" in err and os.path.exists(out.strip())


def test_the_template_is_installed_with_the_package():
    import tomllib

    from helpers import REPO

    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        data = tomllib.load(f)["tool"]["setuptools"]["package-data"]
    assert view.TEMPLATE in data["eggshell.cli"]  # pip install . copies only .py files without it
    assert os.path.isfile(os.path.join(REPO, "lib", "eggshell", "cli", view.TEMPLATE))
