"""Format-valid fake secrets (canaries), each in the kind of text it turns up in.

Every canary is generated from a seeded random source with the real format of its kind
(AWS AKIA + 16, a 40-character secret key, GitHub ghp_ + 36, a JWT of three base64url
parts, a PEM block...), so a redactor that only knows examples from documentation cannot
pass. `secret` is what must never be found in any file; `text` is how it is shown to the
agent (a prompt sentence, a .env line, a config file, a header). No pytest here: the
redaction benchmark uses it too.
"""

from __future__ import annotations

import base64
import json
import random
import string
from typing import NamedTuple

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"


class Canary(NamedTuple):
    kind: str  # the placeholder kind the redactor should name (documentation only; not asserted)
    secret: str  # the exact text that must never be stored
    text: str  # the secret in context


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _jwt(rng: random.Random) -> str:
    head = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64url(json.dumps({"sub": _r(rng, HEX, 12), "iat": rng.randrange(1_600_000_000, 1_800_000_000)}).encode())
    return "%s.%s.%s" % (head, body, _b64url(rng.randbytes(32)))


def _pem(rng: random.Random, label: str) -> tuple[str, str]:
    """(a body line that must never be stored, the whole block)."""
    body = base64.b64encode(rng.randbytes(48 * 12)).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return lines[3], "-----BEGIN %s-----\n%s\n-----END %s-----\n" % (label, "\n".join(lines), label)


def private_key(seed: int, label: str, headers: bool = False) -> tuple[list[str], str]:
    """(the base64 body lines, the whole PEM block) of a format-valid fake key `-----BEGIN LABEL-----`.

    `headers`: the legacy encrypted form (`Proc-Type: 4,ENCRYPTED`, `DEK-Info:` and a blank line
    before the body), as `openssl rsa -aes128` writes it.
    """
    rng = random.Random(seed)
    body = base64.b64encode(rng.randbytes(48 * 20)).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    head = ["Proc-Type: 4,ENCRYPTED", "DEK-Info: AES-128-CBC,%s" % _r(rng, HEX, 32).upper(), ""] if headers else []
    return lines, "-----BEGIN %s-----\n%s\n-----END %s-----\n" % (label, "\n".join(head + lines), label)


def password(seed: int, n: int = 18, extra: str = "") -> str:
    """A random password of `n` characters: letters and digits, and any of `extra` inside it."""
    rng = random.Random(seed)
    pw = list(_r(rng, ALNUM, n))
    for i, ch in enumerate(extra):
        pw[1 + (i * 5) % (n - 2)] = ch
    return "".join(pw)


def canaries(seed: int = 10) -> list[Canary]:
    """At least 50 canaries of at least 15 kinds, the same for the same seed."""
    rng = random.Random(seed)
    out: list[Canary] = []

    def add(kind: str, secret: str, text: str) -> None:
        assert secret in text
        out.append(Canary(kind, secret, text))

    for i in range(3):
        key = "AKIA" + _r(rng, string.ascii_uppercase + string.digits, 16)
        add("aws-access-key-id", key, "the deploy user is %s, keep it quiet" % key)
        sk = _r(rng, B64, 40)
        add("aws-secret-key", sk, "[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n" % (key, sk))
    sk = _r(rng, B64, 40)
    add("aws-secret-key", sk, "export AWS_SECRET_ACCESS_KEY=%s\n" % sk)
    sk = _r(rng, B64, 40)
    add("aws-secret-key", sk, '{"Credentials": {"AccessKeyId": "ASIA%s", "SecretAccessKey": "%s"}}' % (_r(rng, string.ascii_uppercase, 16), sk))
    for prefix in ("ghp_", "gho_", "ghs_"):
        t = prefix + _r(rng, ALNUM, 36)
        add("github-token", t, "git push https://x-access-token:%s@github.com/acme/app.git" % t if prefix == "ghs_" else "export GITHUB_TOKEN=%s" % t)
    t = "github_pat_" + _r(rng, ALNUM, 22) + "_" + _r(rng, ALNUM, 59)
    add("github-token", t, "use the fine-grained token %s for the release" % t)
    t = "glpat-" + _r(rng, B64URL, 20)
    add("gitlab-token", t, "GITLAB_TOKEN: %s" % t)
    t = "ATBB" + _r(rng, ALNUM, 32)
    add("bitbucket-token", t, "bitbucket app password %s" % t)
    for p in ("xoxb-", "xoxp-"):
        t = p + "%d-%d-%s" % (rng.randrange(10**11, 10**12), rng.randrange(10**11, 10**12), _r(rng, ALNUM, 24))
        add("slack-token", t, 'SLACK_BOT_TOKEN="%s"' % t)
    t = "https://hooks.slack.com/services/T%s/B%s/%s" % (_r(rng, string.ascii_uppercase + string.digits, 8), _r(rng, string.ascii_uppercase + string.digits, 10), _r(rng, ALNUM, 24))
    add("slack-webhook", t, "curl -X POST -d '{\"text\":\"hi\"}' %s" % t)
    t = "%d/%s" % (rng.randrange(10**17, 10**18), _r(rng, B64URL, 68))
    add("discord-webhook", t, "webhook: https://discord.com/api/webhooks/%s" % t)
    t = "M" + _r(rng, B64URL, 23) + "." + _r(rng, B64URL, 6) + "." + _r(rng, B64URL, 27)
    add("discord-token", t, "the bot token is %s" % t)
    t = "%d:AA%s" % (rng.randrange(10**8, 10**10), _r(rng, B64URL, 33))
    add("telegram-bot-token", t, "TELEGRAM_BOT_TOKEN=%s" % t)
    for p in ("sk_live_", "rk_test_"):
        t = p + _r(rng, ALNUM, 24)
        add("stripe-key", t, "stripe.api_key = '%s'" % t)
    t = "whsec_" + _r(rng, ALNUM, 32)
    add("stripe-key", t, "endpoint secret %s" % t)
    t = "SK" + _r(rng, HEX, 32)
    add("twilio-api-key", t, "twilio api key sid %s" % t)
    t = "SG." + _r(rng, B64URL, 22) + "." + _r(rng, B64URL, 43)
    add("sendgrid-api-key", t, "SENDGRID_API_KEY=%s" % t)
    t = "npm_" + _r(rng, ALNUM, 36)
    add("npm-token", t, "//registry.npmjs.org/:_authToken=%s" % t)
    t = "pypi-AgEIcHlwaS5vcmc" + _r(rng, B64URL, 60)
    add("pypi-token", t, "[pypi]\nusername = __token__\npassword = %s\n" % t)
    t = "sk-proj-" + _r(rng, B64URL, 74) + "T3BlbkFJ" + _r(rng, B64URL, 74)
    add("openai-api-key", t, "OPENAI_API_KEY=%s" % t)
    t = "sk-" + _r(rng, ALNUM, 20) + "T3BlbkFJ" + _r(rng, ALNUM, 20)
    add("openai-api-key", t, "client = OpenAI(api_key=\"%s\")" % t)
    t = "sk-ant-api03-" + _r(rng, B64URL, 93) + "AA"
    add("anthropic-api-key", t, "here is my anthropic key %s please configure it" % t)
    t = "AIza" + _r(rng, B64URL, 35)
    add("google-api-key", t, "maps key=%s&libraries=places" % t)
    t = "GOCSPX-" + _r(rng, B64URL, 28)
    add("google-oauth-secret", t, '{"installed": {"client_id": "x.apps.googleusercontent.com", "client_secret": "%s"}}' % t)
    t = "hf_" + _r(rng, ALNUM, 34)
    add("huggingface-token", t, "huggingface-cli login --token %s" % t)
    t = "gsk_" + _r(rng, ALNUM, 52)
    add("groq-api-key", t, "GROQ_API_KEY=%s" % t)
    t = "xai-" + _r(rng, ALNUM, 80)
    add("xai-api-key", t, "xai key %s" % t)
    t = "dckr_pat_" + _r(rng, B64URL, 27)
    add("docker-hub-token", t, "echo %s | docker login -u acme --password-stdin" % t)
    for _ in range(3):
        t = _jwt(rng)
        add("jwt", t, "session cookie: %s" % t)
    t = _jwt(rng)
    add("auth-header", t, "curl -H 'Authorization: Bearer %s' https://api.example.com/v1/me" % t)
    t = _r(rng, B64URL, 32)
    add("auth-header", t, "Authorization: Bearer %s" % t)
    line, block = _pem(rng, "RSA PRIVATE KEY")
    add("private-key", line, "cat ~/.ssh/deploy_rsa\n" + block)
    line, block = _pem(rng, "OPENSSH PRIVATE KEY")
    add("private-key", line, block)
    line, block = _pem(rng, "PRIVATE KEY")
    add("private-key", line, json.dumps({"type": "service_account", "private_key": block}))
    line, block = _pem(rng, "EC PRIVATE KEY")
    add("private-key", line, "key file:\n" + block + "(end)")
    for scheme in ("postgres", "https", "redis"):
        pw = _r(rng, ALNUM, 18)
        add("url-password", pw, "DATABASE_URL=%s://app:%s@db.internal:5432/app" % (scheme, pw))
    for key in ("DB_PASSWORD", "SECRET_KEY", "api_key", "client_secret", "JWT_SECRET"):
        v = _r(rng, ALNUM, 20)
        add("secret", v, "%s=%s\n" % (key, v))
    v = _r(rng, ALNUM + "!#", 14)
    add("secret", v, 'password: "%s"\n' % v)
    v = _r(rng, ALNUM, 24)
    add("secret", v, '{"username": "admin", "password": "%s"}' % v)
    v = _r(rng, ALNUM, 16)
    add("secret", v, "mysql --user=root --password=%s app" % v)
    v = _r(rng, HEX, 32)
    add("secret", v, "encryption_key = '%s'" % v)
    t = "AccountKey=" + _r(rng, B64, 86) + "=="
    add("azure-storage-key", t[len("AccountKey="):], "DefaultEndpointsProtocol=https;AccountName=acme;%s;EndpointSuffix=core.windows.net" % t)
    v = "private note " + _r(rng, ALNUM, 16)
    add("private", v, "fix the login bug <private>%s</private> and push" % v)
    v = "the launch is on " + _r(rng, ALNUM, 12)
    add("private", v, "<PRIVATE>\n%s\n</PRIVATE>\nthen summarise" % v)
    return out
