"""Red-team round IV, finding 13: token formats and secret shapes redaction kept verbatim.

Each newer token format (Vault, age, Terraform Cloud, Databricks, Grafana, New Relic, Sentry,
Postman, Linear, Pulumi, Doppler, Alibaba, Square, Mapbox, Fly.io) is generated format-valid
(helpers/canaries.py `_tokens`) and shown in every context of TOKEN_CONTEXTS: a prompt
sentence, a .env line, a TOML and a YAML config, a header, JSON. The names around it say
nothing of a secret, so the token's own rule must redact it. The shapes (.netrc, session
cookies, a URL whose user part is the key) have canaries of their own; the red team's
attacks on them run here too, through real hook processes.
"""

from __future__ import annotations

import json
import random
import re

import pytest

from eggshell.core.redact import redact_payload, redact_text
from helpers.canaries import TOKEN_CONTEXTS, Canary, _shapes, token_canaries

TOKENS = token_canaries()
SHAPES = [Canary(k, s, t) for k, s, t in _shapes(random.Random(7))]


def needles(secret: str) -> list[str]:
    """The secret and every 10-character piece of its letter-and-digit runs: a part kept is a leak."""
    runs = re.findall(r"[A-Za-z0-9]{10,}", secret)
    return [secret] + [r[i:i + 10] for r in runs for i in range(0, len(r) - 9)]


def leaked(secret: str, text: str) -> list[str]:
    return [n for n in needles(secret) if n in text]


def test_every_token_kind_is_shown_in_every_context():
    kinds = {c.kind.split("/")[0] for c in TOKENS}
    assert len(kinds) >= 15 and len(TOKENS) == len({c.secret for c in TOKENS}) * len(TOKEN_CONTEXTS)


@pytest.mark.parametrize("c", TOKENS, ids=lambda c: c.kind)
def test_a_token_is_redacted_by_its_own_rule_in_every_context(c):
    out = redact_text(c.text)
    assert leaked(c.secret, out) == [], out
    assert "[redacted: %s]" % c.kind.split("/")[0] in out, out
    assert redact_text(out) == out


@pytest.mark.parametrize("c", SHAPES, ids=lambda c: c.kind)
def test_a_secret_given_away_by_its_shape_is_redacted(c):
    out = redact_text(c.text)
    assert leaked(c.secret, out) == [], out
    assert "[redacted: %s]" % c.kind in out, out
    assert redact_text(out) == out


@pytest.mark.parametrize("c", [c for c in TOKENS if c.kind.endswith("/prompt")] + SHAPES, ids=lambda c: c.kind)
def test_every_payload_field_is_redacted_a_failure_error_too(c):
    """A prompt, a tool's input and output, Claude Code's PostToolUseFailure `error`, an answer."""
    p = {"hook_event_name": "PostToolUseFailure", "session_id": "s", "tool_name": "Bash", "prompt": c.text,
         "tool_input": {"command": "deploy --check <<EOF\n%s\nEOF" % c.text}, "tool_response": {"stdout": c.text, "stderr": c.text},
         "error": "Error: permission denied for %s" % c.text, "last_assistant_message": c.text}
    out = json.dumps(redact_payload(p))
    assert leaked(c.secret, out) == [] and leaked(c.secret, json.loads(out)["error"]) == []


def test_the_shapes_keep_what_is_no_secret():
    assert (redact_text("Cookie: theme=dark; lang=en; sessionid=Zq81Kd0sLm3Xc9Vb2Nq7\n")
            == "Cookie: theme=dark; lang=en; sessionid=[redacted: cookie]\n")
    assert (redact_text("Set-Cookie: __Host-sid=7f3a9b2c4d5e6f70a1b2; Path=/; Secure; HttpOnly; SameSite=Lax\n")
            == "Set-Cookie: __Host-sid=[redacted: cookie]; Path=/; Secure; HttpOnly; SameSite=Lax\n")
    assert (redact_text("curl --cookie=sid=Zq81Kd0sLm3Xc9Vb2Nq7 /a; curl --cookie 'csrftoken=x; sid=Zq81Kd0sLm3Xc9Vb2Nq7' /b")
            == "curl --cookie=sid=[redacted: cookie] /a; curl --cookie 'csrftoken=x; sid=[redacted: cookie]' /b")
    assert (redact_text('{"Cookie": "sid=Zq81Kd0sLm3Xc9Vb2Nq7"} (cookie: sid=Zq81Kd0sLm3Xc9Vb2Nq7)')
            == '{"Cookie": "sid=[redacted: cookie]"} (cookie: sid=[redacted: cookie])')
    assert (redact_text("machine h.example login u password Zq81Kd0sLm\n")
            == "machine h.example login u password [redacted: netrc-password]\n")
    assert (redact_text("SENTRY_DSN=https://0123456789abcdef0123456789abcdef@o1.ingest.sentry.io/5")
            == "SENTRY_DSN=https://[redacted: url-token]@o1.ingest.sentry.io/5")


@pytest.mark.parametrize("line", [
    # cookies that are no session: short, word-like, attributes, a cookie object in code
    "Set-Cookie: chips=ahoy; Path=/; Domain=example.com",
    "#       Set-Cookie: PART_NUMBER=ROCKET_LAUNCHER_0001; path=/",
    "Cookie: _ga=GA1.2.3; theme=dark",
    "cookie = SimpleCookie()",
    'headers["Cookie"] = cookie_header',
    # netrc words in prose and code
    "the machine has no password set",
    "platform.machine() == 'x86_64'",
    "machine h login u password pass",
    "machine h login u password $NETRC_PASSWORD",
    # a URL user that is a name
    "git clone ssh://git@github.com/acme/app.git",
    "https://averylongusername_here@example.com/",
    "ftp://anonymous_user_name@ftp.example.org/pub",
    # the token prefixes inside code, words and base64
    "self.assertEqual(s.someVeryLongAttributeName, 1)",
    "return s.Zq81Kd0sLm3Xc9Vb2Nq7aB1c(x)",
    "x = obj.s.Zq81Kd0sLm3Xc9Vb2Nq7aB1c",
    "dapiKeyHolderForTheServiceAccountNameHere = 1",
    "AAAAEAAAZm9vYmFyYmF6cXV1eDEyMzQ1Njc4OTBhYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0NTY3ODkw+/",
    "b64 = 'xLTAIabcdefghijklmnop'",
    "pul-request handler for pull-request-0123456789",
    "see https://docs.mapbox.com/help/glossary/access-token/ for sk. and pk. tokens",
    "AGE-SECRET-KEY-1 is the prefix of an age identity",
])
def test_code_prose_and_stand_ins_near_the_new_rules_are_left_alone(line):
    assert redact_text(line) == line


@pytest.mark.parametrize("text", ["cookie: a=b;" * 80_000, ("Cookie: " + "x" * 3990 + "\n") * 250, ("Cookie: " + "x " * 1995 + "\n") * 250,
                                  "machine x login y " * 60_000, "s.Ab1" * 200_000, "FlyV1 " + "fm2_" + "A=," * 300_000])
def test_the_new_rules_stay_linear_on_a_megabyte_built_to_be_slow(text):
    import time

    t = time.monotonic()
    redact_text(text)
    assert time.monotonic() - t < 30.0  # a hang guard, not a speed target (bench_redact.py measures speed): backtracking here takes hours


def test_legacy_vault_tokens_need_a_digit_and_both_cases():
    """`s.` and 24 base62 characters before Vault 1.10: `s.` starts too many names to take any 24 letters."""
    assert redact_text("VAULT: s.Wba9wGhG7ZEp7x2nD5ASaPjE") == "VAULT: [redacted: vault-token]"
    assert redact_text("x = s.abcdefghijklmnopqrstuvwx") == "x = s.abcdefghijklmnopqrstuvwx"


# -- the red team's attacks, through real hook processes --------------------------------------------

ATTACKS = ("sec_vault_token", "sec_age_key", "sec_terraform_cloud_token", "sec_databricks_grafana", "sec_newrelic_sentry",
           "sec_postman_linear", "sec_pulumi_doppler", "sec_alibaba_square_mapbox", "sec_flyio_token", "sec_netrc",
           "sec_session_cookie", "sec_env_dump_weak_names", "sec_cli_oauth2_bearer", "sec_claude_failure_new_shapes")


@pytest.mark.parametrize("name", ATTACKS)
def test_the_red_team_attack_holds(tmp_path, monkeypatch, name):
    from redteam import attacks

    monkeypatch.setattr(attacks, "SCRATCH", str(tmp_path))
    fn = next(f for f in attacks.ATTACKS if f.__name__ == name)
    try:
        r = fn()
    except attacks.Result as e:
        r = e
    assert (r.status, name) == ("HELD", name), r.evidence


# The new rules' triggers are short (`hv`, `NR`, `dp.`...) so that rules sharing one search it
# once; test_redact_adversarial repeats each trigger, and these are the whole prefixes behind them.
PREFIXES = ("hvs.", "hvb.", "s.", "AGE-SECRET-KEY-1", "AGE-PLUGIN-X-1", "aB3dE5fG7hJ9kL.atlasv1.", "dapi", "glsa_", "glc_",
            "eyJrIjoi", "NRAK-", "NRII-", "0123456789abcdef0123456789abcdef0123NRAL", "sntrys_", "PMAK-", "lin_api_", "pul-",
            "dp.st.", "dp.st.prd.", "LTAI", "EAAA", "sq0csp-", "sk.eyJ", "FlyV1 fm2_", "fm2_", "machine h login u password ",
            "default password ", "Cookie: ", "Set-Cookie: a=", "--cookie ", "https://")


@pytest.mark.parametrize("prefix", PREFIXES)
def test_no_new_rule_backtracks_on_its_whole_prefix_repeated(prefix):
    import time

    from test_redact_adversarial import FILLS, LIMIT_S, SIZE, _repeated

    redact_text(prefix)
    slow = []
    for fill in FILLS:
        for text in (_repeated(prefix + fill, SIZE), prefix + _repeated(fill or "a", SIZE)):
            t = time.process_time()
            redact_text(text)
            if time.process_time() - t > LIMIT_S:
                slow.append((fill, round(time.process_time() - t, 2)))
    assert not slow, slow
