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
UPPER_DIGITS = string.ascii_uppercase + string.digits
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l".upper()


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
    tokens = _tokens(rng)
    for i, (kind, secret, shown) in enumerate(tokens):
        name = sorted(TOKEN_CONTEXTS)[i % len(TOKEN_CONTEXTS)]
        add(kind, secret, TOKEN_CONTEXTS[name] % shown)
    for kind, secret, text in _shapes(rng):
        add(kind, secret, text)
    v = "private note " + _r(rng, ALNUM, 16)
    add("private", v, "fix the login bug <private>%s</private> and push" % v)
    v = "the launch is on " + _r(rng, ALNUM, 12)
    add("private", v, "<PRIVATE>\n%s\n</PRIVATE>\nthen summarise" % v)
    return out


# How a bare token turns up (%s is the token): each token kind below is tested in every one
# (tests/unit/core/test_redact_tokens.py). The names around it say nothing of a secret, so
# the token's own rule is what redacts it.
TOKEN_CONTEXTS = {
    "prompt": "here is the new one %s please set up the deploy with it",
    "env": "DEPLOY_CFG=%s\n",
    "config": '[deploy]\nvalue = "%s"\nregion = "eu"\n',
    "yaml": "deploy:\n  value: %s\n  region: eu\n",
    "header": "curl -H 'X-Deploy: %s' https://api.example.com/v1/me",
    "json": '{"deploy": {"value": "%s", "region": "eu"}}',
}


def _mixed(rng: random.Random, alphabet: str, n: int) -> str:
    """n characters of `alphabet` with a digit and (if the alphabet has them) both cases among them."""
    while True:
        v = _r(rng, alphabet, n)
        if (any(c.isdigit() for c in v) and (not any(c.isupper() for c in alphabet) or any(c.isupper() for c in v))
                and (not any(c.islower() for c in alphabet) or any(c.islower() for c in v))):
            return v


def _b64json(obj: dict, url: bool = False) -> str:
    raw = json.dumps(obj, separators=(",", ":")).encode()
    return _b64url(raw) if url else base64.b64encode(raw).decode()


def _tokens(rng: random.Random) -> list[tuple[str, str, str]]:
    """(kind, secret, as shown) of one token of each newer published format (docs/privacy.md lists them)."""
    out = []
    out.append(("vault-token", "hvs.CAESI" + _r(rng, B64URL, 86), None))  # Vault >= 1.10 service token (~95)
    out.append(("vault-token", "hvb.AAAAAQ" + _r(rng, B64URL, 128), None))  # batch token (138+)
    out.append(("vault-token", "s." + _mixed(rng, ALNUM, 24), None))  # a service token before Vault 1.10
    out.append(("age-secret-key", "AGE-SECRET-KEY-1" + _r(rng, BECH32, 58), None))
    out.append(("terraform-cloud-token", _r(rng, ALNUM, 14) + ".atlasv1." + _r(rng, ALNUM, 67), None))
    out.append(("databricks-token", "dapi" + _mixed(rng, HEX, 32), None))
    out.append(("databricks-token", "dapi" + _mixed(rng, HEX, 32) + "-2", None))
    out.append(("grafana-token", "glsa_" + _r(rng, ALNUM, 32) + "_" + _r(rng, HEX, 8), None))
    glc = {"o": str(rng.randrange(10**5, 10**7)), "n": "stack-%d-hm-read" % rng.randrange(10**5, 10**6),
           "k": _r(rng, ALNUM, 24), "m": {"r": "prod-us-east-0"}}
    out.append(("grafana-token", "glc_" + _b64json(glc), None))
    out.append(("newrelic-key", "NRAK-" + _r(rng, UPPER_DIGITS, 27), None))
    out.append(("newrelic-key", _r(rng, HEX, 36) + "NRAL", None))  # an ingest license key
    org = {"iat": rng.randrange(1_600_000_000, 1_800_000_000), "url": "https://sentry.io", "region_url": "https://us.sentry.io",
           "org": "acme-%d" % rng.randrange(1000)}
    out.append(("sentry-token", "sntrys_" + _b64json(org) + "_" + _r(rng, ALNUM + "+/", 43), None))
    out.append(("sentry-token", "sntryu_" + _r(rng, HEX, 64), None))
    out.append(("postman-api-key", "PMAK-" + _r(rng, HEX, 24) + "-" + _r(rng, HEX, 34), None))
    out.append(("linear-api-key", "lin_api_" + _r(rng, ALNUM, 40), None))
    out.append(("pulumi-token", "pul-" + _mixed(rng, HEX, 40), None))
    out.append(("doppler-token", "dp.st.prd." + _r(rng, ALNUM, 43), None))
    out.append(("doppler-token", "dp.pt." + _r(rng, ALNUM, 43), None))
    out.append(("alibaba-access-key-id", "LTAI5t" + _r(rng, ALNUM, 18), None))
    out.append(("square-token", "EAAA" + _r(rng, B64URL, 60), None))
    out.append(("square-token", "sq0csp-" + _r(rng, B64URL, 43), None))
    mb = {"u": "acme-%d" % rng.randrange(1000), "a": _r(rng, ALNUM, 25)}
    out.append(("mapbox-token", "sk." + _b64json(mb, url=True) + "." + _r(rng, B64URL, 22), None))
    fly = "fm2_" + base64.b64encode(rng.randbytes(180)).decode() + ",fm2_" + base64.b64encode(rng.randbytes(90)).decode()
    out.append(("flyio-token", fly, "FlyV1 " + fly))
    return [(k, t, shown or t) for k, t, shown in out]


def token_canaries(seed: int = 20) -> list[Canary]:
    """Every token of `_tokens` in every TOKEN_CONTEXTS, named `kind/context`."""
    out = []
    for kind, secret, shown in _tokens(random.Random(seed)):
        for name in sorted(TOKEN_CONTEXTS):
            out.append(Canary("%s/%s" % (kind, name), secret, TOKEN_CONTEXTS[name] % shown))
    return out


def _shapes(rng: random.Random) -> list[tuple[str, str, str]]:
    """(kind, secret, text) of secrets whose shape, not their own format, gives them away: a .netrc
    password, a session cookie, a URL whose user part is the key (a Sentry DSN)."""
    out = []
    pw = _r(rng, ALNUM, 16)
    out.append(("netrc-password", pw, "$ cat ~/.netrc\nmachine api.example.com\n  login deploy\n  password %s\n" % pw))
    pw = _r(rng, ALNUM + "!#%", 14)
    out.append(("netrc-password", pw, "# ~/.netrc\nmachine git.example.com login ci account acme password %s\n" % pw))
    pw = _r(rng, ALNUM, 12)
    out.append(("netrc-password", pw, "netrc:\nmachine a.example login x password p\ndefault login anonymous password %s\n" % pw))
    sid = _r(rng, ALNUM, 32)
    out.append(("cookie", sid, "> GET /admin HTTP/1.1\n> Host: app.local\n> Cookie: theme=dark; sessionid=%s; lang=en\n" % sid))
    sid = _r(rng, HEX, 40)
    out.append(("cookie", sid, "< HTTP/1.1 200 OK\n< Set-Cookie: __Host-session=%s; Path=/; Secure; HttpOnly; SameSite=Lax\n" % sid))
    sid = "s%3A" + _r(rng, B64URL, 32) + "." + _r(rng, ALNUM, 43)
    out.append(("cookie", sid, '{"headers": {"Cookie": "connect.sid=%s"}}' % sid))
    sid = _r(rng, B64URL, 24)
    out.append(("cookie", sid, "curl --cookie 'csrftoken=x; sid=%s' https://app.local/api" % sid))
    key = _r(rng, HEX, 32)
    out.append(("url-token", key, "SENTRY_DSN=https://%s@o%d.ingest.sentry.io/%d\n" % (key, rng.randrange(10**5, 10**7), rng.randrange(10**6))))
    key = _r(rng, HEX, 32)
    out.append(("url-token", key, '{"sentry": {"dsn": "https://%s@o%d.ingest.us.sentry.io/%d"}}' % (key, rng.randrange(10**5, 10**7), rng.randrange(10**6))))
    tok = _r(rng, ALNUM, 40)
    out.append(("url-token", tok, "git remote set-url origin https://%s@git.example.com/acme/app.git" % tok))
    return out
