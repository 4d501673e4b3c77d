"""Issue 31.5: secret shapes that capture once kept, each with format-valid canaries.

The shapes the red team found stored verbatim: a private key split over two tool outputs
(the half with the END line has no BEGIN line); a URL password with an empty user or an
`@` inside it; a token cut in two by the 1 MiB output cap (its head no longer matches its
rule); a password given on a command line (`curl -u user:pw`, `mysql -pPW`...) in a
proposed call, which chat state (`egg why`) and the `egg view` page kept. Each is checked
on redact.py itself, in its variants (key kinds, URL schemes, token kinds at several cut
offsets, clients), and through the hooks' own path (helpers.hook_env.Env) into every file
under the data root, the prefix and the project.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from eggshell.core import redact
from eggshell.core.redact import redact_payload, redact_text
from eggshell.graph import events
from eggshell.graph.events import OUTPUT_CHARS
from eggshell.runtime import quarantine
from eggshell.runtime.turnflow import admit
from helpers import regular_files
from helpers.canaries import canaries, password, private_key
from helpers.hook_env import Env

_CANARIES = canaries(315)


def _store_bytes(env: Env) -> bytes:
    with open(env.egg, "rb") as f:
        return f.read()


def pieces(secret: str, n: int = 16) -> list[str]:
    """The secret's letter-and-digit runs cut into n-character pieces: a part of it kept is a leak too."""
    runs = re.findall(r"[A-Za-z0-9]{%d,}" % n, secret)
    return [r[i:i + n] for r in runs for i in range(0, len(r) - n + 1, n)]


def files_holding(needles: list[str], *roots: str) -> dict[str, list[str]]:
    """Every regular file under these directories that holds one of the needles (as text or JSON-escaped)."""
    found: dict[str, list[str]] = {}
    for p, raw in regular_files(*roots):
        data = raw.decode("utf-8", "replace")
        hit = [x for x in needles if x in data or json.dumps(x)[1:-1] in data]
        if hit:
            found[p] = hit
    return found


@pytest.mark.parametrize("c", _CANARIES, ids=lambda c: c.kind)
def test_a_secret_in_a_structured_output_past_the_cap_is_redacted(tmp_path, c):
    """A structured output (Claude Code's Read, an MCP result) over the 1 MiB cap was cut as its
    JSON text, where `"password": "..."` reads `\\"password\\": \\"...\\"` and no rule matched."""
    env = Env(tmp_path)
    env.respond(env.prompt("what does the deploy config hold?"))
    body = "x = 1\n" * (OUTPUT_CHARS // 6 + 10)
    out = {"type": "text", "file": {"filePath": "/p/deploy.cfg", "content": c.text + "\n" + body, "numLines": 3}}
    env.respond(env.tool("cat deploy.cfg", out))
    env.respond(env.stop("it holds the deploy settings"))
    stored = _store_bytes(env)
    assert c.secret.encode() not in stored
    assert b"output truncated by Eggshell at" in stored


# -- a. a private key split over two outputs ---------------------------------------------------------

KEY_KINDS = [("RSA PRIVATE KEY", False), ("EC PRIVATE KEY", False), ("OPENSSH PRIVATE KEY", False), ("ENCRYPTED PRIVATE KEY", False),
             ("DSA PRIVATE KEY", False), ("PRIVATE KEY", False), ("RSA PRIVATE KEY", True)]
KEY_IDS = [label.split()[0] + (" legacy-encrypted" if headers else "") for label, headers in KEY_KINDS]


def _split_key(label: str, headers: bool, seed: int) -> tuple[list[str], str, str]:
    """(body lines, the first output: BEGIN and the first lines, the second: the rest and END), as
    `head -n 6 key.pem` and `tail -n +7 key.pem` show it."""
    lines, block = private_key(seed, label, headers)
    rows = block.split("\n")
    return lines, "\n".join(rows[:6]) + "\n", "\n".join(rows[6:])


def _body_leaks(lines: list[str], text: str) -> list[str]:
    return [p for ln in lines for p in pieces(ln) if p in text]


@pytest.mark.parametrize("label,headers", KEY_KINDS, ids=KEY_IDS)
@pytest.mark.parametrize("form", ["lines", "crlf", "json", "yaml", "mid-line", "one-line"])
def test_each_part_of_a_split_private_key_is_redacted_on_its_own(label, headers, form):
    """The part with the body and the END line but no BEGIN line was stored verbatim: the block rule
    starts at BEGIN. Each part, in each form it is shown in (a file, CRLF lines, a JSON string with
    escaped newlines, an indented YAML value, a part starting mid-line, one line with spaces for
    newlines), is redacted by itself."""
    lines, first, second = _split_key(label, headers, seed=len(label) + headers)
    if form == "crlf":
        first, second = first.replace("\n", "\r\n"), second.replace("\n", "\r\n")
    elif form == "json":
        first, second = json.dumps({"key": first})[:-2], '"' + json.dumps(second)[1:]  # one JSON text cut in two
    elif form == "yaml":
        first = "tls:\n  key: |\n" + "".join("    %s\n" % r for r in first.splitlines())
        second = "".join("    %s\n" % r for r in second.splitlines()) + "  cert: server.crt\n"
    elif form == "one-line":  # an environment variable's value, its newlines turned into spaces
        first, second = first.replace("\n", " "), second.replace("\n", " ")
    elif form == "mid-line":
        whole = first + second
        at = whole.index(lines[len(lines) // 2]) + 30
        first, second = whole[:at], whole[at:]
    for part in (first, second):
        out = redact_text(part)
        assert "[redacted: private-key]" in out
        assert _body_leaks(lines, out) == [], out
        assert redact_text(out) == out
    if form == "yaml":
        assert redact_text(second).endswith("  cert: server.crt\n")  # what follows the key stays


def test_the_end_part_keeps_the_text_around_it():
    lines, _, second = _split_key("RSA PRIVATE KEY", False, 7)
    assert redact_text("$ tail -n +7 deploy.pem\n" + second + "$ echo done\n") == (
        "$ tail -n +7 deploy.pem\n[redacted: private-key]\n$ echo done\n")
    assert redact_text("the rest of the key:\n" + second) == "the rest of the key:\n[redacted: private-key]\n"


@pytest.mark.parametrize("text", [
    'PEM_FOOTER = "-----END RSA PRIVATE KEY-----"',
    "if line == '-----END OPENSSH PRIVATE KEY-----':\n    break",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ2xvdWQgQ0EgUm9vdCBDZXJ0aWZpY2F0ZTAeFw0y\n-----END CERTIFICATE-----\n",
    "MIIBszCCAVmgAwIBAgIUQ2xvdWQgQ0EgUm9vdCBDZXJ0aWZpY2F0ZTAeFw0y\n-----END PUBLIC KEY-----\n",
])
def test_an_end_line_alone_or_a_public_block_is_left_alone(text):
    assert redact_text(text) == text


@pytest.mark.parametrize("label,headers", KEY_KINDS[:3] + KEY_KINDS[-1:], ids=KEY_IDS[:3] + KEY_IDS[-1:])
def test_a_key_split_over_two_tool_outputs_reaches_no_file(tmp_path, label, headers):
    env = Env(tmp_path)
    lines, first, second = _split_key(label, headers, seed=99 + len(label))
    env.respond(env.prompt("show me the deploy key"))
    env.respond(env.tool("head -n 6 deploy.pem", first, use="c1"))
    env.respond(env.tool("tail -n +7 deploy.pem", {"stdout": second, "stderr": "", "interrupted": False}, use="c2"))
    env.respond(env.stop("the key is in deploy.pem"))
    stored = _store_bytes(env).decode()
    assert stored.count("[redacted: private-key]") >= 2
    assert _body_leaks(lines, stored) == []
    assert files_holding([p for ln in lines for p in pieces(ln)], env.data, env.project, env.prefix) == {}


# -- b. URL passwords: an empty user, an `@` inside ------------------------------------------------------

SCHEMES = ["redis", "rediss", "postgres", "postgresql", "mysql", "mongodb+srv", "amqp", "https"]


def _url_cases():
    for i, scheme in enumerate(SCHEMES):
        plain = password(100 + i)
        yield scheme, "empty-user", "%s://:%s@db.internal:5432/app" % (scheme, plain), plain
        at = password(200 + i, extra="@")
        yield scheme, "@-inside", "%s://app:%s@db.internal/app" % (scheme, at), at
        two = password(300 + i, 20, extra="@@")
        yield scheme, "two-@-empty-user", "%s://:%s@db.internal" % (scheme, two), two
        pct = "p%40" + password(400 + i, 14)
        yield scheme, "percent-encoded", "%s://:%s@db.internal/x" % (scheme, pct), pct
        lead = "%21" + password(500 + i, 14)
        yield scheme, "percent-first", "%s://svc:%s@db.internal/x" % (scheme, lead), lead


URL_CASES = list(_url_cases())


@pytest.mark.parametrize("scheme,shape,url,pw", URL_CASES, ids=["%s-%s" % (c[0], c[1]) for c in URL_CASES])
@pytest.mark.parametrize("context", ["DATABASE_URL=%s\n", "connecting to %s ...", '{"url": "%s"}', "git clone '%s'"])
def test_a_url_password_with_an_empty_user_or_an_at_inside_is_redacted(scheme, shape, url, pw, context):
    text = context % url
    out = redact_text(text)
    assert pw not in out and not [p for p in pieces(pw, 6) if p in out], out
    assert "[redacted: url-password]@db.internal" in out  # the host stays: the line still says where
    assert out.startswith(context.split("%s")[0]) and out.endswith(context.split("%s")[1])


@pytest.mark.parametrize("text", [
    "ssh://git@github.com:22/acme/app.git",
    "https://example.com:8443/path/@user/x",
    "see https://github.com/@acme and mailto:me@example.com",
    "redis://:6379",
    "http://[::1]:8080/api",
    "postgres://user:${DB_PASSWORD}@db/x",
    "postgres://:%(password)s@db/x",
])
def test_urls_without_a_password_are_left_alone(text):
    assert redact_text(text) == text


def test_url_passwords_reach_no_file_through_the_hooks(tmp_path):
    env = Env(tmp_path)
    cases = [c for c in URL_CASES if c[1] in ("empty-user", "@-inside")]
    text = "\n".join("%s_URL=%s" % (c[0].upper().replace("+", "_"), c[2]) for c in cases)
    env.respond(env.prompt("the services are:\n" + text))
    env.respond(env.tool("cat .env", text + "\n"))
    env.respond(env.stop("found %d service URLs: %s" % (len(cases), text)))
    assert files_holding([c[3] for c in cases], env.data, env.project, env.prefix) == {}
    assert _store_bytes(env).decode().count("[redacted: url-password]") >= 3 * len(cases)


# -- c. a token cut in two by the output cap ----------------------------------------------------------

CUT_CANARIES = canaries(31)


def _offsets(secret: str) -> list[int]:
    """Where the cap falls inside the secret: a few characters in, half way, and just before its end."""
    return sorted({k for k in (6, len(secret) // 2, len(secret) - 2) if 0 < k < len(secret)})


def _across(c, k: int, cap: int) -> str:
    """A text whose `cap`-th character falls `k` characters into the canary's secret."""
    pad = cap - (c.text.index(c.secret) + k)
    head = ("x = 1\n" * (pad // 6 + 1))[:pad]
    text = head + c.text + "\nmore output\n" * 20
    assert text[cap - k:cap] == c.secret[:k]
    return text


def _kept_heads(c, out: str) -> list[str]:
    """Heads of the secret the output holds that redacting the whole canary would have removed."""
    whole = redact_text(c.text)
    return [c.secret[:k] for k in _offsets(c.secret) if c.secret[:k] in out and c.secret[:k] not in whole]


@pytest.mark.parametrize("shape", ["terminal", "structured"])
@pytest.mark.parametrize("placed", ["in-context", "bare"])
@pytest.mark.parametrize("c", CUT_CANARIES, ids=lambda c: c.kind)
def test_no_head_of_a_secret_cut_by_the_output_cap_is_kept(monkeypatch, c, placed, shape):
    """The cap cut `ghp_` and 36 characters after 20 of them; the head no longer matched its rule
    and was stored. Each canary kind crosses the cap at several offsets, in its context (where a key
    such as `GITHUB_TOKEN=` may catch the head anyway) and bare, in a terminal output and in a
    structured one, through the hook's own steps (turnflow.admit, then redaction)."""
    if placed == "bare":
        c = c._replace(text="value %s\n" % c.secret)
    cap = 20_000
    monkeypatch.setattr(events, "OUTPUT_CHARS", cap)  # the same cut as at 1 MiB, a fiftieth of the text to scan
    for k in _offsets(c.secret):
        if shape == "terminal":
            output = text = _across(c, k, cap)
        else:  # the cap counts the keys and strings before the content too (events.measure)
            before = len("type") + len("text") + len("file") + len("filePath") + len("/p/x") + len("content")
            text = _across(c, k, cap - before)
            output = {"type": "text", "file": {"filePath": "/p/x", "content": text}}
        p = admit({"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": "cat x"}, "tool_response": output})
        got = p["tool_response"] if shape == "terminal" else p["tool_response"]["file"]["content"]
        assert "output truncated by Eggshell at" in got and len(got) < cap + 100
        out = redact_payload(p)["tool_response"]
        out = out if shape == "terminal" else out["file"]["content"]
        assert _kept_heads(c, out) == [], (k, out[cap - 200 - k:])


def test_the_cut_moves_only_when_it_would_split_a_secret():
    text = "x = 1\n" * 10_000
    assert redact.cut_point(text, 20_000) == 20_000
    token = "ghp_" + "Zq9Rt" * 7 + "a"
    text = "a" * 1000 + " token " + token + " tail"
    at = text.index(token) + 10
    assert redact.cut_point(text, at) == text.index(token)
    assert redact.resume_point(text, at) == text.index(token) + len(token)


def test_a_token_across_the_real_cap_is_not_stored_in_part(tmp_path):
    """The whole path at the real 1 MiB cap: a Codex output and a Claude Code one."""
    env = Env(tmp_path)
    env.respond(env.prompt("dump the environment"))
    kinds = {c.kind: c for c in CUT_CANARIES if c.kind in ("github-token", "aws-access-key-id", "jwt", "url-password", "private-key")}
    for i, c in enumerate(kinds.values()):
        text = _across(c, len(c.secret) // 2, OUTPUT_CHARS)
        out = text if i % 2 else {"stdout": text, "stderr": "", "interrupted": False}
        env.respond(env.tool("env #%d" % i, out, use="c%d" % i))
    env.respond(env.stop("done"))
    stored = _store_bytes(env).decode()
    assert stored.count("output truncated by Eggshell at") == len(kinds)
    for c in kinds.values():
        assert _kept_heads(c, stored) == [], c.kind


def test_text_past_the_scan_cap_is_never_cut_inside_a_token(monkeypatch):
    """With no line or word end within 4,096 characters before the scan cap (minified JSON), the
    cap cut there, inside whatever token it met."""
    monkeypatch.setattr(redact, "SCAN_CAP", 10_000)
    token = "ghp_" + "Zq9Rt" * 7 + "a"
    head = "ok line\n" * 700  # 5,600 characters; then no space or newline past the fallback cut (10,000 - 4,096)
    text = head + "," * 290 + token + "," * 6000
    out = redact_payload({"tool_response": text})["tool_response"]
    assert token[:10] not in out and out.startswith(head)
    assert "characters past the redaction limit]" in out


def test_a_quarantined_payload_is_not_cut_inside_a_secret():
    token = "ghp_" + "Zq9Rt" * 7 + "a"
    raw = "y" * (OUTPUT_CHARS - 16) + " " + token + " rest" * 10  # the cut falls 15 characters into the token
    out = redact_text(quarantine.cut(raw))
    assert token[:12] not in out and "quarantined payload truncated by Eggshell" in out


# -- d. passwords on a proposed command line ------------------------------------------------------------

def _flag_cases():
    pw = [password(600 + i) for i in range(20)]
    yield "curl -u", "curl -u deploy:%s https://api.internal/v1/releases" % pw[0], pw[0]
    yield "curl --user", "curl --user deploy:%s -X POST https://api.internal/v1" % pw[1], pw[1]
    yield "curl --user=", "curl -s --user=deploy:%s https://api.internal/v1" % pw[2], pw[2]
    yield "curl -uUSER", "curl -udeploy:%s https://api.internal/v1" % pw[3], pw[3]
    yield "curl -u quoted", "curl -u 'deploy:%s' https://api.internal/v1" % pw[4], pw[4]
    yield "curl -u quoted spaces", 'curl -u "deploy:%s %s" https://x' % (pw[5][:8], pw[5][8:]), pw[5][:8]
    yield "curl --proxy-user", "curl --proxy-user ops:%s -x proxy:3128 https://x" % pw[6], pw[6]
    yield "curl -U", "curl -U ops:%s -x proxy:3128 https://x" % pw[7], pw[7]
    yield "mysql -pPASS", "mysql -h db -u root -p%s app < dump.sql" % pw[8], pw[8]
    yield "mysqldump -pPASS", "mysqldump -uroot -p'%s' app > dump.sql" % pw[9], pw[9]
    yield "mysql --password", "mysql -u root --password=%s app" % pw[10], pw[10]
    yield "MYSQL_PWD", "MYSQL_PWD=%s mysql -u root app" % pw[11], pw[11]
    yield "PGPASSWORD", "PGPASSWORD=%s psql -h db -U app app" % pw[12], pw[12]
    yield "psql URL", "psql 'postgresql://app:%s@db:5432/app' -c 'select 1'" % pw[13], pw[13]
    yield "sshpass -p", "sshpass -p %s ssh deploy@web1 uptime" % pw[14], pw[14]
    yield "sshpass -pPASS", "sshpass -p'%s' scp app.tar deploy@web1:" % pw[15], pw[15]
    yield "docker login -p", "docker login -u deploy -p %s registry.internal" % pw[16], pw[16]
    yield "redis-cli -a", "redis-cli -h cache -p 6379 -a %s ping" % pw[17], pw[17]
    yield "Authorization Basic", "curl -H 'Authorization: Basic %s' https://x" % password(700, 24), password(700, 24)
    yield "wget --http-password", "wget --http-user=deploy --http-password=%s https://x/a.tar" % pw[18], pw[18]


FLAG_CASES = list(_flag_cases())


@pytest.mark.parametrize("name,command,pw", FLAG_CASES, ids=[c[0] for c in FLAG_CASES])
def test_a_password_on_a_command_line_is_redacted(name, command, pw):
    out = redact_text(command)
    assert pw not in out and "[redacted: " in out, out
    assert out.split()[-1] == command.split()[-1]  # the rest of the command stays readable


@pytest.mark.parametrize("command", [
    "python -u manage.py runserver 0.0.0.0:8000",
    "docker run -u 1000:1000 -p 8080:80 app",
    "sort -u names.txt | uniq -c",
    "mysql -u root -p app",
    "mysql -u root -p -h db app",
    "docker login -u deploy --password-stdin registry.internal",
    "redis-cli -h cache -p 6379 ping",
    "mkdir -p build/out && cp -pr src build",
    "PWD=/home/dev/project make",
    "curl -u $API_USER:$API_PASSWORD https://x",
])
def test_command_lines_without_a_password_are_left_alone(command):
    assert redact_text(command) == command


def test_a_password_in_a_proposed_call_reaches_no_file_chat_state_or_page(tmp_path, monkeypatch, capsys):
    """PreToolUse is redacted in the hook (turnflow.record) before anything reads it; the copies a
    proposed call leaves are the journal, the call's line in chat state (`egg why`) and the
    `egg view` page built from chat state and the store. With the password shapes no rule knew,
    each kept it; now none holds it."""
    from eggshell.cli import main as cli

    env = Env(tmp_path)
    cases = [c for c in FLAG_CASES if c[0] in ("curl -u", "curl --user", "curl -uUSER", "mysql -pPASS", "sshpass -p",
                                                "docker login -p", "redis-cli -a", "MYSQL_PWD")]
    # an earlier chat ran these calls, so a later proposal of each is matched and noted in chat state
    env.record_turn("release the build", [(cmd, "ok: %d\n" % i) for i, (_, cmd, _) in enumerate(cases)], "released", session="chat-1")
    env.respond(env.prompt("release the build again", turn="u1", session_id="chat-2"))
    for i, (_, cmd, _) in enumerate(cases):
        reply = env.respond(env.ev("PreToolUse", session="chat-2", turn_id="u1", tool_name="Bash", tool_input={"command": cmd},
                                   tool_use_id="p%d" % i))
        assert not [pw for _, _, pw in cases if pw in json.dumps(reply)]
    env.respond(env.stop("released again", turn="u1", session_id="chat-2"))
    chats = os.path.join(env.paths.state_dir, "chats")
    noted = "".join(open(os.path.join(chats, n), encoding="utf-8").read() for n in os.listdir(chats))
    assert noted.count("PreToolUse ") >= 5 and "PreToolUse sshpass -p [redacted: password-flag] ssh" in noted  # the calls were noted
    for k, v in {"EGGSHELL_PREFIX": env.prefix, "EGGSHELL_DATA_ROOT": env.data, "CODEX_HOME": env.paths.codex_home}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(env.project)
    assert cli.main(["view"]) == 0
    page = capsys.readouterr().out.strip().splitlines()[-1]
    assert page.startswith(env.data) and "[redacted: password-flag]" in open(page, encoding="utf-8").read()
    assert cli.main(["why", "--chat", "chat-2"]) == 0
    assert "[redacted: password-flag]" in capsys.readouterr().out
    assert files_holding([pw for _, _, pw in cases], env.data, env.project, env.prefix) == {}
