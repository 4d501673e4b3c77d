"""`egg view`'s page in a real headless Chromium: what it shows, its filter, its paging, and that it reaches nothing.

Chromium is driven over the DevTools protocol on a pipe (tests/helpers/browser.py; no port).
As root it runs in a network namespace of its own whose default routes lead to a veth, and the
namespace's counters prove it sent nothing. A machine without Chromium fails these tests with
the package to install (apt-get install chromium), never skips them.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from eggshell.cli import view
from eggshell.graph.records import ToolView, TurnView
from eggshell.graph.save import save_turn
from eggshell.graph.store import Store
from helpers import bash, turn_record
from helpers.browser import FLAGS, SINK, Chromium, NoChromium, can_isolate, find_chromium
from helpers.cli_env import Egg
from helpers.hook_env import Env, record_late_fee

HOSTILE = "</script><script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"


@pytest.fixture(scope="module")
def chromium() -> str:
    try:
        return find_chromium()
    except NoChromium as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
def egg(tmp_path, monkeypatch, capsys):
    e = Egg(tmp_path, monkeypatch, capsys)
    e("init")
    return e


def page_of(egg, *records) -> str:
    s = Store.open(str(egg.cwd / ".eggs" / "work.egg"))
    for r in records:
        save_turn(s, r, None)
    rc, out, err = egg("view")
    assert rc == 0, err
    return out.strip()


def url(path: str) -> str:
    return "file://" + os.path.abspath(path)


RECORDS = [
    turn_record(turn="t1", prompt="why does the build fail on the lockfile?", tools=[bash("make", "error: stale lockfile\n")]),
    turn_record(turn="t2", prompt="rename parse_config to load_config", tools=[bash("rg -n parse_config", "src/a.py:3\n")],
                answer="renamed in 2 files"),
    turn_record(turn="t3", prompt="hostile " + HOSTILE, tools=[bash("cat evil.html", HOSTILE + "\n")], answer=HOSTILE),
]


def test_the_page_shows_the_recorded_turns_and_filters_them(chromium, egg, tmp_path):
    path = page_of(egg, *RECORDS)
    with Chromium(str(tmp_path / "chromium")) as b:
        p = b.page(url(path))
        p.wait_for("document.documentElement.dataset.ready === '1'")
        assert p.js("document.documentElement.dataset.jsError || null") is None
        assert p.js("document.querySelectorAll('article.turn').length") == 3
        text = p.js("document.getElementById('turns').innerText")
        for r in RECORDS[:2]:
            assert r["prompt"] in text and r["answer"] in text  # put there by the page's script, from its data
        assert "error: stale lockfile" in text  # a short output is shown open
        # Recorded markup is text: shown as typed, never run, never an element.
        assert p.js("typeof window.__pwned") == "undefined"
        shown = p.js("Array.from(document.querySelectorAll('article.turn pre')).map(e => e.textContent)")
        assert "hostile " + HOSTILE in shown and HOSTILE in shown and HOSTILE + "\n" in shown  # request, answer, output
        assert p.js("document.querySelectorAll('#turns img, #turns script, #turns svg').length") == 0
        # The filter box, typed into as a user does.
        p.type("#q", "lockfile")
        p.wait_for("document.documentElement.dataset.matches === '1'")
        assert p.js("document.querySelectorAll('article.turn').length") == 1
        assert "why does the build fail on the lockfile?" in p.js("document.getElementById('turns').innerText")
        assert "1 of 3 turns match" in p.js("document.getElementById('count').textContent")
        p.type("#q", " nothing-like-this")
        p.wait_for("document.documentElement.dataset.matches === '0'")
        p.js("var q = document.getElementById('q'); q.value = ''; q.dispatchEvent(new Event('input'))")
        p.wait_for("document.documentElement.dataset.matches === '3'")
        # A key from the page (what egg forget takes) finds its turn.
        key = p.js("document.querySelectorAll('article.turn')[1].dataset.key")
        p.type("#q", key)
        p.wait_for("document.documentElement.dataset.matches === '1'")
        assert p.js("document.documentElement.dataset.jsError || null") is None
        assert p.errors() == []  # no exception, and no CSP report: the page's own script and style are allowed
        assert p.requests() == [url(path)]  # the page asked for nothing but itself


def test_a_chat_s_handoff_and_its_ranked_turns_link_to_the_timeline(chromium, tmp_path, monkeypatch, capsys):
    env = Env(tmp_path)
    record_late_fee(env)
    env.record_turn("rename parse_config", [("rg -n parse_config", "src/a.py:3\n")], "renamed", session="sess </b> 2")
    given = env.respond(env.prompt("where is late_fee computed?", "turn-9", session_id="chat-b"))["hookSpecificOutput"]["additionalContext"]
    egg = Egg(tmp_path, monkeypatch, capsys)
    monkeypatch.chdir(env.project)
    rc, out, err = egg("view")
    assert rc == 0, err
    with Chromium(str(tmp_path / "chromium")) as b:
        p = b.page(url(out.strip()))
        p.wait_for("document.documentElement.dataset.ready === '1'")
        chats = p.js("document.getElementById('chats').textContent")
        assert "EGGSHELL PRIOR WORK" not in chats and "where is late_fee computed?" not in chats  # in the DOM once opened
        p.js("document.querySelector('#chats details.handoff summary').click()")
        assert p.js("document.querySelector('#chats details.handoff pre').textContent") == given
        [key, rank, score] = p.js("Array.from(document.querySelectorAll('#chats tbody tr')[0].cells).slice(0, 3).map(c => c.textContent)")
        assert rank == "1" and float(score) > 0
        p.js("document.querySelector('#chats tbody button').click()")  # the ranked turn, in the timeline
        p.wait_for("document.documentElement.dataset.matches === '1'")
        assert p.js("document.querySelector('article.turn').dataset.key") == key
        assert "late_fee is computed in src/billing.py" in p.js("document.getElementById('turns').innerText")
        # A turn's chat: its session may hold anything, spaces and markup included.
        p.js("var q = document.getElementById('q'); q.value = ''; q.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter'}))")
        p.wait_for("document.documentElement.dataset.matches === '2'")
        p.js("Array.from(document.querySelectorAll('article.turn')).find(a => a.textContent.indexOf('sess </b> 2') >= 0)"
             ".querySelector('.meta button').click()")
        p.wait_for("document.documentElement.dataset.matches === '1'")
        assert "rename parse_config" in p.js("document.getElementById('turns').innerText")
        assert p.js("Array.from(document.querySelectorAll('section.chat')).filter(s => !s.hidden).length") == 1
        assert p.errors() == []


def test_long_outputs_are_collapsed_until_opened(chromium, egg, tmp_path):
    long_output = "".join("line %d of a long build log\n" % i for i in range(200))
    path = page_of(egg, turn_record(prompt="show the log", tools=[bash("cat build.log", long_output)]))
    with Chromium(str(tmp_path / "chromium")) as b:
        p = b.page(url(path))
        p.wait_for("document.documentElement.dataset.ready === '1'")
        tool = "document.querySelector('details.tool')"
        assert p.js(tool + ".open") is False
        assert "line 199 of a long build log" not in p.js("document.getElementById('turns').textContent")
        p.js(tool + ".querySelector('summary').click()")
        p.wait_for(tool + ".querySelector('pre') !== null")
        assert p.js(tool + ".querySelector('pre').textContent") == long_output
        assert p.errors() == []


def test_dump_dom_after_the_script_ran(chromium, egg, tmp_path):
    """The plain `chromium --headless --dump-dom` a user could run: the rendered turns and no error mark."""
    path = page_of(egg, *RECORDS)
    args = [chromium, *FLAGS, "--user-data-dir=%s" % (tmp_path / "profile"), "--dump-dom", url(path)]
    if os.geteuid() == 0:
        args.insert(1, "--no-sandbox")
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    dom = p.stdout
    html_tag = dom[dom.index("<html"):dom.index(">", dom.index("<html"))]
    assert 'data-ready="1"' in html_tag and "data-js-error" not in html_tag
    assert dom.count('<article class="turn"') == 3
    assert "&lt;/script&gt;&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in dom  # shown as text
    assert "<pre class=\"text\">rename parse_config to load_config</pre>" in dom


def test_the_browser_sends_nothing_and_the_policy_blocks_every_fetch(chromium, egg, tmp_path):
    """In a namespace whose default routes lead somewhere, a fetch the page's policy did not block would leave."""
    if not can_isolate():
        pytest.skip("needs root, unshare and ip for a network namespace of its own (CI runs as root)")
    path = page_of(egg, *RECORDS)
    with Chromium(str(tmp_path / "chromium")) as b:
        assert b.isolated
        p = b.page(url(path))
        p.wait_for("document.documentElement.dataset.ready === '1'")
        # What an injected script would try: each is refused by the Content-Security-Policy.
        assert p.js("fetch('http://%s/').then(() => 'fetched', () => 'refused')" % SINK) == "refused"
        assert p.js("new Promise(r => { var i = new Image(); i.onload = () => r('loaded'); i.onerror = () => r('refused');"
                    " i.src = 'http://%s/x.png'; document.body.appendChild(i); })" % SINK) == "refused"
        assert p.js("new Promise(r => { var s = document.createElement('script'); s.onload = () => r('ran');"
                    " s.onerror = () => r('refused'); s.src = 'http://%s/x.js'; document.head.appendChild(s); })" % SINK) == "refused"
        reports = p.errors()
        assert reports and all("Content Security Policy" in r for r in reports), reports
    sent = b.sent()
    assert sent == {k: 0 for k in sent}, sent  # no TCP connection opened, no datagram or packet sent


@pytest.mark.slow
def test_ten_thousand_turns_stay_usable(chromium, tmp_path):
    """A 10,000-turn page renders 50 turns at a time, and the filter runs over all of them."""
    turns = []
    for i in range(10_000):
        tools = (ToolView('Bash\n{"command":"rg -n handler_%d src"}' % i, "src/mod_%d.py:%d: def handler_%d(x):\n" % (i % 97, i, i) * 3,
                          "%064x" % (2 * i), "c%d" % i),)
        v = TurnView("%064x" % (2 * i + 1), "bench-%d" % (i // 10), "turn-%d" % i, ".", "where is handler_%d defined?" % i,
                     "handler_%d is in src/mod_%d.py" % (i, i % 97), tools, "2026-01-01T00:%02d:%02d.000000Z" % (i // 3600 % 60, i % 60), "big.egg")
        turns.append(view.turn_data(v, 0))
    store = {"path": "big.egg", "name": None, "write": False, "bytes": 0, "turns": 10_000, "commits": 1, "missing": False,
             "error": None, "trust": "", "quoted_path": "big.egg", "forget_args": ""}
    data = {"generated": "2026-01-01T00:00:00Z", "version": "test", "project": None, "state_dir": "", "stores": [store],
            "turns": turns, "chats": [], "other_chats": 0}
    page = tmp_path / "big.html"
    size = view.write_private(str(page), view.render(data, view.template_text()))
    assert size > 4_000_000
    with Chromium(str(tmp_path / "chromium")) as b:
        t = time.monotonic()
        p = b.page(url(str(page)))
        p.wait_for("document.documentElement.dataset.ready === '1'", timeout=60)
        loaded = time.monotonic() - t
        assert p.js("document.querySelectorAll('article.turn').length") == 50
        assert p.js("document.documentElement.dataset.matches") == "10000"
        p.js("document.getElementById('more').click()")
        assert p.js("document.querySelectorAll('article.turn').length") == 100
        t = time.monotonic()
        p.type("#q", "handler_4321 ")
        p.wait_for("document.documentElement.dataset.matches === '1'", timeout=30)
        filtered = time.monotonic() - t
        assert "where is handler_4321 defined?" in p.js("document.getElementById('turns').innerText")
        assert p.errors() == []
    print("10,000 turns: %.1f MB page, ready in %.1f s, filtered in %.2f s" % (size / 1e6, loaded, filtered))
    assert loaded < 30 and filtered < 10, (loaded, filtered)


def test_a_missing_chromium_is_a_failure_naming_the_package(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(NoChromium) as e:
        find_chromium()
    assert "apt-get install chromium" in str(e.value)
    assert json.dumps(str(e.value))  # printable as the test's failure message
