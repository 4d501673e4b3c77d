"""Redaction at capture: secrets and `<private>` text never reach the journal or a store.

Every hook payload is redacted in the hook process before anything is written or sent
(runtime/turnflow.record): the prompt, each tool's input and output, the final answer. What
a rule recognises becomes a typed placeholder, `[redacted: KIND]` (only the value of a
`KEY=value` pair or the password of a URL, the rest of the line stays); a
`<private>...</private>` span becomes `[redacted: private]`; the output of a call that
a `never_record` glob names becomes `[withheld by never_record: GLOB]`. Stored text that
holds one of these markers is not the real output of its call, so the reuse engine
never lets it stand in for running a call (intrinsic.Match.completed).

Speed: the hook path is a fresh process per event, so this module imports only `os` and
`collections` (for one namedtuple).
Each rule starts with a literal (its trigger), which lets the regex engine skip to the
candidates as fast as a substring search; a rule is compiled on first use, and only when
its trigger occurs, so a short output with no trigger costs no `re` import at all.
Case-insensitive rules run on the lower-cased text. Text past SCAN_CAP characters per
payload is withheld rather than stored unscanned: a 50 MB output costs a bounded time.
Every cut made before redaction (this cap, the 1 MiB output cap, the quarantine's) asks
cut_point first: the head of a token cut in two no longer matches its rule, so a cut
inside a secret moves back to the secret's start.
No dataclasses or typing here: hooks import this module.
"""

from __future__ import annotations

import os
from collections import namedtuple

from eggshell.core.binary import without_binary

PLACEHOLDER = "[redacted: %s]"
WITHHELD = "[withheld by never_record: %s]"
PAST_CAP = "\n[withheld: %d characters past the redaction limit]"
MARKERS = ("[redacted: ", "[withheld by never_record: ", "[withheld: ")
SCAN_CAP = 4 << 20  # characters of one payload's text scanned; what is past it is withheld
TAIL_KEPT = 1 << 16  # of a text past the cap, its last characters are kept (and scanned) too
# Payload fields the host generates as structure, not content: never rewritten.
STRUCTURAL = frozenset(("hook_event_name", "session_id", "turn_id", "prompt_id", "cwd", "transcript_path", "tool_name",
                        "tool_use_id", "permission_mode", "source", "model", "stop_hook_active", "is_interrupt"))


class Rules(namedtuple("Rules", "extra never_record")):
    """The user's rules in force for a turn: compiled `redact` patterns and `never_record` globs.

    The built-in rules always apply on top; a namedtuple, since hooks import this module.
    """

    __slots__ = ()


BUILTIN = Rules((), ())

# (kind, on lower-cased text, trigger literal the pattern starts with, pattern, lead)
# The whole match is replaced, or only the group named `v`. `lead` = (characters, most):
# the secret also covers up to `most` such characters right before the match (a prefix
# no literal can start, such as a Telegram token's bot id).
_V_QUOTED = r"\"[^\"\n]{1,500}\"|'[^'\n]{1,500}'"
_KEY_TAIL = (r"(?![a-z0-9])[\"']?(?P<sep>[ \t]{0,3}(?:=|:=|=>|:)[ \t]{0,3})"
             r"(?P<v>%s|[^\s\"',;()\[\]{}<>`]{1,500})" % _V_QUOTED)
_NETRC_TAIL = r"(?:\s+(?:login|account|port|protocol|user)\s+[^\s]{1,300}){0,4}\s+password\s+(?P<v>%s|[^\s\"']{1,500})" % _V_QUOTED
_DIGITS = ("0123456789", 10)
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_HEX = "0123456789abcdefABCDEF"
_AZURE_LEAD = ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_~.-", 4)

_TOKENS = (
    ("private-key", False, "-----BEGIN",
     r"-----BEGIN[A-Z0-9 ]{0,20}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]{0,20}PRIVATE KEY(?: BLOCK)?-----|\Z)", None),
    # The END part of a key split over two outputs (its BEGIN line went with the first): the
    # base64 lines before the END line are the secret (_pem_body walks back over them).
    ("private-key", False, "-----END", r"-----END[A-Z0-9 ]{0,20}PRIVATE KEY(?: BLOCK)?-----", "pem-body"),
    ("private-key", False, "PuTTY-User-Key-File-", r"PuTTY-User-Key-File-\d+:[\s\S]*?(?:Private-MAC: *[0-9a-fA-F]+|\Z)", None),
    ("aws-access-key-id", False, ("AKIA", "ASIA", "ABIA", "ACCA"), r"A(?<![A-Z0-9]A)(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Za-z0-9])", None),
    ("google-api-key", False, "AIza", r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])", None),
    ("google-oauth-secret", False, "GOCSPX-", r"GOCSPX-[0-9A-Za-z_-]{28}", None),
    ("google-oauth-token", False, "ya29.", r"ya29\.(?<![A-Za-z0-9_]ya29\.)[0-9A-Za-z_-]{20,}", None),
    ("azure-client-secret", False, "Q~", r"Q~(?<=[A-Za-z0-9_~.-]{3}[0-9]Q~)[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])", _AZURE_LEAD),
    ("azure-sas-signature", False, "sig=", r"sig=(?<=[?&]sig=)(?P<v>[A-Za-z0-9%+/=]{30,})", None),
    ("github-token", False, "gh", r"gh[pousr]_(?<![A-Za-z0-9_]gh._)[A-Za-z0-9]{36,255}", None),
    ("github-token", False, "github_pat_", r"github_pat_[A-Za-z0-9_]{60,255}", None),
    ("gitlab-token", False, "gl", r"gl(?:pat|dt|rt|ptt|ft|soat|cbt|imt|agent)-[A-Za-z0-9_-]{20,}", None),
    ("gitlab-token", False, "GR1348941", r"GR1348941[A-Za-z0-9_-]{20,}", None),
    ("bitbucket-token", False, "ATBB", r"ATBB[A-Za-z0-9_=.-]{28,}", None),
    ("atlassian-token", False, "ATATT3", r"ATATT3[A-Za-z0-9_=+/-]{40,}", None),
    ("slack-token", False, "xox", r"xox[abposre]-[A-Za-z0-9-]{10,}", None),
    ("slack-token", False, "xapp-", r"xapp-[A-Za-z0-9-]{10,}", None),
    ("slack-webhook", False, "hooks.slack.com/", r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{20,}", None),
    ("discord-webhook", False, "/api/webhooks/",
     r"/api/webhooks/(?:(?<=discord\.com/api/webhooks/)|(?<=discordapp\.com/api/webhooks/))\d+/[A-Za-z0-9_-]{20,}", None),
    ("discord-token", False, "M", r"M(?<![A-Za-z0-9_-]M)[A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}(?![A-Za-z0-9_-])", None),
    ("discord-token", False, "N", r"N(?<![A-Za-z0-9_-]N)[A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}(?![A-Za-z0-9_-])", None),
    ("discord-token", False, "O", r"O(?<![A-Za-z0-9_-]O)[A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}(?![A-Za-z0-9_-])", None),
    ("telegram-bot-token", False, ":AA", r":AA(?<=[0-9]{8}:AA)[A-Za-z0-9_-]{32,33}(?![A-Za-z0-9_-])", _DIGITS),
    ("stripe-key", False, ("k_live_", "k_test_"), r"k_(?<=[sr]k_)(?:live|test)_[A-Za-z0-9]{20,}", ("rs", 1)),
    ("stripe-key", False, "whsec_", r"whsec_[A-Za-z0-9]{24,}", None),
    ("twilio-api-key", False, "SK", r"SK(?<![A-Za-z0-9]SK)[0-9a-fA-F]{32}(?![A-Za-z0-9])", None),
    ("sendgrid-api-key", False, "SG.", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", None),
    ("mailgun-api-key", False, "key-", r"key-(?<![A-Za-z0-9_-]key-)[0-9a-f]{32}(?![A-Za-z0-9])", None),
    ("npm-token", False, "npm_", r"npm_(?<![A-Za-z0-9_]npm_)[A-Za-z0-9]{36}(?![A-Za-z0-9])", None),
    ("pypi-token", False, "pypi-AgE", r"pypi-AgE[A-Za-z0-9_-]{50,}", None),
    ("docker-hub-token", False, "dckr_pat_", r"dckr_pat_[A-Za-z0-9_-]{27,}", None),
    ((("ant", "anthropic-api-key"), ("oai", "openai-api-key"), ("sk", "api-key")), False, "sk-",
     r"sk-(?<![A-Za-z0-9_-]sk-)(?:(?P<ant>ant-[A-Za-z0-9_-]{20,})|(?P<oai>(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"
     r"|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})|(?P<sk>(?:or-v1-)?[A-Za-z0-9]{32,}(?![A-Za-z0-9_-])))", None),
    ("huggingface-token", False, "hf_", r"hf_(?<![A-Za-z0-9_]hf_)[A-Za-z0-9]{30,}", None),
    ("huggingface-token", False, "api_org_", r"api_org_[A-Za-z0-9]{30,}", None),
    ("groq-api-key", False, "gsk_", r"gsk_(?<![A-Za-z0-9_]gsk_)[A-Za-z0-9]{40,}", None),
    ("xai-api-key", False, "xai-", r"xai-(?<![A-Za-z0-9_-]xai-)[A-Za-z0-9]{50,}", None),
    ("perplexity-api-key", False, "pplx-", r"pplx-[A-Za-z0-9]{40,}", None),
    ("replicate-token", False, "r8_", r"r8_(?<![A-Za-z0-9_]r8_)[A-Za-z0-9]{30,}", None),
    ("langsmith-api-key", False, "lsv2_", r"lsv2_(?:pt|sk)_[0-9a-f]{32}_[0-9a-f]{10}", None),
    ("digitalocean-token", False, "_v1_", r"_v1_(?<=do[por]_v1_)[a-f0-9]{64}", (None, 3)),
    ("shopify-token", False, "shp", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", None),
    # HashiCorp Vault: hvs. (service), hvb. (batch), hvr. (recovery) since 1.10; before it a
    # service token was `s.` and 24 base62 characters (kept only with a digit and both cases,
    # and not before `(`: `s.` starts many a name in code).
    ("vault-token", False, "hv", r"hv(?<![A-Za-z0-9_.-]hv)[sbr]\.[A-Za-z0-9_-]{24,}", None),
    ("vault-token", False, "s.",
     r"s\.(?<![A-Za-z0-9_./@%-]s\.)(?=[A-Za-z]{0,23}[0-9])(?=[a-z0-9]{0,23}[A-Z])(?=[A-Z0-9]{0,23}[a-z])[A-Za-z0-9]{24}"
     r"(?![A-Za-z0-9_.(-])", None),
    # age: AGE-SECRET-KEY-1 and 58 upper-case bech32 characters (a plugin's identity, AGE-PLUGIN-NAME-1...)
    ("age-secret-key", False, "AGE-", r"AGE-(?:SECRET-KEY|PLUGIN-[A-Z0-9]{1,30})-1[0-9A-Z]{40,}", None),
    # Terraform Cloud / Enterprise: 14 characters, .atlasv1., then about 67
    ("terraform-cloud-token", False, ".atlasv1.", r"\.atlasv1\.(?<=[A-Za-z0-9]{14}\.atlasv1\.)[A-Za-z0-9_=-]{60,}", (_ALNUM, 14)),
    # Databricks: dapi and 32 hex (optionally -N); any letters taken, a digit required
    ("databricks-token", False, "dapi",
     r"dapi(?<![A-Za-z0-9_-]dapi)(?=[A-Za-z]{0,39}[0-9])[A-Za-z0-9]{32,40}(?:-[0-9])?(?![A-Za-z0-9])", None),
    # Grafana: service account glsa_ + 32 + _ + 8 hex; Cloud glc_ + base64; a legacy API key eyJrIjoi...
    ("grafana-token", False, "glsa_", r"glsa_[A-Za-z0-9]{32,40}_[A-Fa-f0-9]{8}", None),
    ("grafana-token", False, "glc_", r"glc_(?<![A-Za-z0-9_]glc_)[A-Za-z0-9+/]{32,400}={0,2}", None),
    ("grafana-token", False, "eyJ", r"eyJrIjoi[A-Za-z0-9+/]{42,400}={0,2}", None),
    # New Relic: user key NRAK- + 27, admin NRAA-, insert key NRII- + 32; license key 36 hex + NRAL
    ("newrelic-key", False, "NR", r"NR(?<![A-Za-z0-9]NR)(?:AK|AA|II)-[A-Za-z0-9_-]{20,40}(?![A-Za-z0-9])", None),
    ("newrelic-key", False, "NR", r"NRAL(?<=[0-9a-fA-F]{36}NRAL)(?![A-Za-z0-9])", (_HEX, 36)),
    # Sentry: an org token sntrys_ + base64 JSON + _ + secret; a user token sntryu_ + 64 hex
    ("sentry-token", False, "sntry", r"sntry[su]_[A-Za-z0-9+/=_-]{40,}", None),
    ("postman-api-key", False, "PMAK-", r"PMAK-[A-Za-z0-9]{24}-[A-Za-z0-9]{30,}", None),
    ("linear-api-key", False, "lin_", r"lin_(?:api|oauth)_[A-Za-z0-9]{40,}", None),
    # Pulumi: pul- + 40 hex (any letters taken, a digit required)
    ("pulumi-token", False, "pul-", r"pul-(?<![A-Za-z0-9_-]pul-)(?=[A-Za-z]{0,39}[0-9])[A-Za-z0-9]{40}(?![A-Za-z0-9])", None),
    # Doppler: dp.pt. (personal), dp.st.[config.] (service), dp.ct. (CLI), dp.sa., dp.scim., dp.audit. + 40-44
    ("doppler-token", False, "dp.",
     r"dp\.(?<![A-Za-z0-9_.-]dp\.)(?:pt|st|ct|sa|scim|audit)\.(?:[A-Za-z0-9_-]{1,35}\.)?[A-Za-z0-9]{40,}", None),
    # Alibaba Cloud AccessKey ID: LTAI + 12 to 20 (not inside a base64 run)
    ("alibaba-access-key-id", False, "LTAI", r"LTAI(?<![A-Za-z0-9+/]LTAI)[A-Za-z0-9]{12,20}(?![A-Za-z0-9+/=])", None),
    # Square: an access token EAAA + 60 (not inside a base64 run); sq0atp- + 22, the OAuth secret sq0csp- + 43
    ("square-token", False, "EAAA", r"EAAA(?<![A-Za-z0-9+/_-]EAAA)[A-Za-z0-9_-]{50,70}(?![A-Za-z0-9+/=_-])", None),
    ("square-token", False, "sq0", r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}", None),
    # Mapbox: a secret (sk.) or temporary (tk.) token: base64 JSON . 20+
    ("mapbox-token", False, "eyJ", r"k\.eyJ(?<=[st]k\.eyJ)(?<![A-Za-z0-9_.-][st]k\.eyJ)[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{20,}", ("st", 1)),
    # Fly.io: `FlyV1 fm2_...` (macaroons, comma separated), or a bare fm1_/fm2_ token
    ("flyio-token", False, "FlyV1 ", r"FlyV1 (?:fm[12]_[A-Za-z0-9+/=_-]{20,}(?:, ?)?)+", None),
    ("flyio-token", False, "fm", r"fm(?<![A-Za-z0-9_]fm)[12]_[A-Za-z0-9+/=_-]{40,}", None),
    ("jwt", False, "eyJ", r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", None),
    ("bearer-token", False, "Bearer", r"Bearer(?<![A-Za-z]Bearer)\s+(?P<v>[A-Za-z0-9._~+/-]{20,}=*)", None),
    # The user may be empty (`redis://:pw@host`) and the password may hold `@`: as in urllib,
    # the last `@` before the host ends it (`https://user:p@ss@host/`).
    ("url-password", False, "://", r"://[^\s:/?#@'\"<>\\]{0,100}:(?P<v>[^\s/?#'\"<>\\]{1,200})@", None),
    # A URL whose user part is the key, with no password (a Sentry DSN `https://<32 hex>@o1.ingest.sentry.io/5`,
    # `https://TOKEN@github.com/`): kept unless it reads as a key (long hex, or random-looking).
    ("url-token", False, "://", r"://(?P<v>[A-Za-z0-9_~%+-]{16,200})@(?=[A-Za-z0-9\[])", None),
    # .netrc: `machine HOST [login U] [account A] password P` (or `default ...`), on one line or several.
    ("netrc-password", False, "machine", r"machine(?<![A-Za-z0-9_.-]machine)[ \t]+[^\s]{1,300}" + _NETRC_TAIL, None),
    ("netrc-password", False, "default", r"default(?<![A-Za-z0-9_.-]default)" + _NETRC_TAIL, None),
    # `curl -u user:password` (--user, --proxy-user, -U, -uuser:password): the part after the first colon.
    ("password-flag", False, ("-u", "-U", "--user", "--proxy-user"),
     r"-(?<![A-Za-z0-9_.-]-)(?:-(?:proxy-)?user(?:[ \t]+|=)|[uU][ \t]*)(?P<q>[\"'])?[^\s:\"'@/`]{1,100}:"
     r"(?P<v>(?(q)[^\"'\n]{1,300}|[^\s\"'`]{1,300}))", None),
    # A password given to `-p` (or redis-cli's `-a`) of the clients that take it there: mysql's
    # family only attached (`-pPASS`: `-p db` asks for one), sshpass, docker/podman/helm login.
    ("password-flag", False, ("mysql", "mariadb"),
     r"m(?<![A-Za-z0-9_.-]m)(?:ysql|ariadb)[a-z]{0,10}[ \t][^\n|;&<>]{0,300}?(?<=\s)-p(?P<v>%s|[^\s\"'`;|&]{1,300})"
     % _V_QUOTED, None),
    ("password-flag", False, ("sshpass", " login", "redis-cli"),
     r"(?:sshpass|(?:docker|podman|helm|buildah|skopeo|oras)(?: registry)? login)[ \t](?:[^\n|;&<>]{0,300}?(?<=\s))?-p"
     r"[ \t]*(?P<v>%s|[^\s\"'`;|&]{1,300})" % _V_QUOTED, None),
    ("password-flag", False, "redis-cli",
     r"redis-cli[ \t](?:[^\n|;&<>]{0,300}?(?<=\s))?-a[ \t]*(?P<v>%s|[^\s\"'`;|&]{1,300})" % _V_QUOTED, None),
    # case-insensitive rules (on the lower-cased text)
    ("private", True, "<private>", r"<private>[\s\S]*?(?:</private>|\Z)", None),
    ("aws-secret-key", True, "aws", r"aws[_.-]?(?:secret(?:[_.-]?access)?(?:[_.-]?key)?|sk)(?![a-z0-9])[\"']?[ \t]{0,3}(?:=|:|=>)?[ \t]{0,3}[\"']?"
                                    r"(?P<v>[a-z0-9/+]{40})(?![a-z0-9/+=])", None),
    ("aws-secret-key", True, ("secretaccesskey", "secret_access_key"),
     r"secret_?access_?key[\"']?\s{0,3}[=:]\s{0,3}[\"']?(?P<v>[a-z0-9/+]{40})(?![a-z0-9/+=])", None),
    ("azure-storage-key", True, "accountkey=", r"accountkey=(?P<v>[a-z0-9+/]{40,}={0,2})", None),
    ("azure-storage-key", True, "sharedaccesskey=", r"sharedaccesskey=(?P<v>[a-z0-9+/]{40,}={0,2})", None),
    ("auth-header", True, "authorization", r"authorization[\"']?\s{0,3}[:=]\s{0,3}[\"']?(?:bearer|basic|token|digest)\s+(?P<v>[a-z0-9._~+/-]{8,}=*)", None),
    # Cookie:/Set-Cookie: headers (and `"cookie": "..."`, `--cookie ...`): each cookie's value is
    # judged on its own (_cookies): a session's is redacted, `theme=dark` and `Path=/` stay.
    ("cookie", True, "cookie", r"cookie[\"']?[ \t]{0,3}:[ \t]{0,3}[\"']?(?P<v>[^\r\n\"']{1,4000})", "cookie"),
    ("cookie", True, "cookie", r"--cookie(?:[ \t]+|=)(?P<v>%s|[^\s\"']{1,4000})" % _V_QUOTED, "cookie"),
    ("secret-flag", True, "--", r"--(?:[a-z0-9]{1,20}-){0,3}(?:password|passwd|pass|token|secret|api-?key|access-?key|private-?key|bearer)[= ]"
                               r"(?P<v>%s|[^\s\"']{1,300})" % _V_QUOTED, None),
)

# Words that name a secret when a key ends in one (DB_PASSWORD, apiToken, "client_secret"):
# the value is redacted when it reads as data rather than code or a stand-in. A weak word
# (`key`, `auth`...) only redacts a high-entropy value, unless a strong word precedes it
# (`secret_key`, `api-key`, `private.key`).
_STRONG = ("password", "passwd", "passphrase", "secret", "token", "credential", "credentials")
_STRONG_BEFORE_KEY = ("secret", "api", "access", "private", "auth", "signing", "encryption", "master", "client")
# `pwd` alone is the working directory (PWD=/home/x); after these it is a password (MYSQL_PWD=...)
_STRONG_BEFORE_PWD = ("mysql", "mariadb", "db", "database")
# (trigger, the key words it starts): weak words are `key`, `auth`, `pwd`, `pass`, `sig`, `signature`, `salt`
_KEY_WORDS = (("pass", r"pass(?:word|wd|phrase)?"), ("secret", "secret"), ("token", "token"), ("credential", r"credentials?"),
              ("key", "key"), ("auth", "auth"), ("pwd", "pwd"), ("sig", r"sig(?:nature)?"), ("salt", "salt"))
_KEYED = tuple(("secret", True, t, "(?P<w>%s)%s" % (w, _KEY_TAIL), None) for t, w in _KEY_WORDS)
_RULES = _TOKENS + _KEYED
_STRONG_WORDS = frozenset(_STRONG)

_PLACEHOLDER_VALUES = frozenset(("password", "passwd", "pass", "secret", "token", "none", "null", "nil", "true", "false",
                                 "undefined", "changeme", "example", "redacted", "hidden", "str", "string", "bytes", "int",
                                 "optional", "required", "xxx", "todo", "value", "default", "empty", "dummy", "placeholder"))

_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-")

_compiled: dict = {}  # (rule index, ignore case) -> compiled pattern, filled on first use per process


def _rx(i: int, fold: bool):
    key = (i, fold)
    rx = _compiled.get(key)
    if rx is None:
        import re

        rx = _compiled[key] = re.compile(_RULES[i][3], re.IGNORECASE if fold else 0)
    return rx


def _spans(text: str) -> list:
    """(start, -end, rule index, kind) of every secret found, unsorted, possibly overlapping."""
    low = folded = None
    fold = False
    out = []
    seen: dict = {}  # (trigger, lower) -> whether it occurs: rules sharing a trigger search the text once
    for i, (kind, lower, trigger, _, lead) in enumerate(_RULES):
        if lower and low is None:
            low = text.lower()
            fold = len(low) != len(text)  # a few characters change length when lower-cased
            folded = text if fold else low
        if (i, lower and fold) not in _compiled and not _triggered(trigger, low if lower else text, seen, lower):
            continue  # not compiled yet, and it cannot match: leave it so
        for s, e, k in _matches(_rx(i, lower and fold), folded if lower else text, text, kind):
            if lead == "cookie":
                out.extend((cs, -ce, i, k) for cs, ce in _cookies(text, s, e))
                continue
            if lead == "pem-body":
                s = _pem_body(text, s)
                if s is None:
                    continue  # an END line alone (a constant in code) hides nothing
            elif lead:
                s = _extend_back(text, s, lead)
            out.append((s, -e, i, k))
    return out


def _matches(rx, hay: str, text: str, kind):
    """The spans one rule redacts. A value judged no secret is searched again, so a key inside
    what was taken for a value (`password: "x password: "real"`, `key: SECRET_KEY=real`) is
    still seen. A bare value is searched again once, not again inside what that finds:
    `key:key:key:...` stays linear."""
    if "v" not in rx.groupindex:
        for m in rx.finditer(hay):
            yield _judge(text, m, kind)
        return
    pos = inside = 0
    while True:
        m = rx.search(hay, pos)
        if m is None:
            return
        span = _judge(text, m, kind)
        if span is None:
            v = m.start("v")
            if hay[v] in "\"'":
                pos = v + 1
            elif m.start() >= inside:
                pos, inside = v, m.end()
            else:
                pos = m.end()
        else:
            yield span
            pos = max(m.end(), m.start() + 1)


def _triggered(trigger, hay: str, seen: dict, lower: bool) -> bool:
    for t in (trigger,) if isinstance(trigger, str) else trigger:
        hit = seen.get((t, lower))
        if hit is None:
            hit = seen[(t, lower)] = t in hay
        if hit:
            return True
    return False


def _extend_back(text: str, s: int, lead: tuple) -> int:
    chars, most = lead
    n = 0
    while s > 0 and n < most and (chars is None or text[s - 1] in chars):
        s -= 1
        n += 1
    return s


_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
PEM_BACK = 1 << 15  # characters before an END line searched for its body (an 8192-bit RSA key is ~6,500)
PEM_ONE_LINE = 40  # a base64 run after a space (not a line break) is body only this long: a key pasted on one line


def _pem_body(text: str, end: int):
    """Where the base64 body before a private key's END line (at `end`) starts; None when none does.

    A key split over two tool outputs leaves the body and the END line in the second, with
    no BEGIN line for the block rule to start from; those lines are as secret as the whole
    block. Walks back line by line while each line is base64: lines may end in a newline or
    an escaped one (`\\n` in JSON text) and be indented; the topmost line may be cut short
    (the output began mid-line) or sit after a quote. A header (`DEK-Info:`), a BEGIN line,
    a blank line or prose ends the body. A bare END line (a constant in code) is no secret.
    """
    floor = max(0, end - PEM_BACK)
    i, start, chars, run = end, None, 0, 0
    while i > floor:
        # the separator before position i: indentation, then a newline, an escaped one, or (first) a space
        k = i
        while k > floor and text[k - 1] in " \t":
            k -= 1
        if k > 0 and text[k - 1] == "\n":
            k -= 2 if k > 1 and text[k - 2] == "\r" else 1
        elif k > 1 and text[k - 2:k] == "\\n":
            k -= 4 if k > 3 and text[k - 4:k - 2] == "\\r" else 2
        elif k == i or (start is not None and run < PEM_ONE_LINE):
            break  # no break before: prose, or a space after a short run (a one-line key has long ones)
        j = k
        while j > floor and text[j - 1] in _B64:
            j -= 1
        if j == k:
            break  # a blank line, a header, the BEGIN line
        if j > 0 and text[j - 1] == "\\" and text[j] in "nr":
            j += 1  # an escaped newline ends the line before: `n` is no part of this one
        if j == k:
            break
        # a whole line (after a break, an indentation, a quote or the start), or a long run on one line
        b = j
        while b > floor and text[b - 1] in " \t":
            b -= 1
        whole = b == 0 or text[b - 1] in "\n\"'" or (b > 1 and text[b - 2:b] in ("\\n", "\\r"))
        if not whole and (k - j < PEM_ONE_LINE or b == j):
            break
        start, run, i = j, k - j, j
        chars += run
    return start if start is not None and chars >= 16 else None


_COOKIE_ATTRIBUTES = frozenset(("path", "domain", "expires", "max-age", "samesite", "secure", "httponly", "priority",
                                "partitioned", "version", "comment"))
_COOKIE_SECRET_WORDS = ("sess", "sid", "auth", "token", "jwt", "csrf", "xsrf", "remember", "login", "key", "secret", "pass",
                        "cred", "identity", "user", "account")


def _cookies(text: str, s: int, e: int):
    """The (start, end) of each cookie value in a Cookie/Set-Cookie header value text[s:e] that is a secret:
    a random-looking value (_high_entropy), or one of 12 characters or more under a session-like
    name (sessionid, __Host-sid, csrftoken...). Set-Cookie's attributes (Path, Expires...) and
    short, stand-in or word-like values (`theme=dark`, `ROCKET_LAUNCHER_0001`) are left as they are."""
    rx = _compiled.get("cookie")
    if rx is None:
        import re

        rx = _compiled["cookie"] = re.compile(r"(?<![^;\s,()\\:=\"'])([^=;\s,()\\:]{1,200})=([^;\s,()\\]+)")  # a name starts after a separator
    for m in rx.finditer(text, s, e):
        name, value = m.group(1).lower(), m.group(2)
        if (name not in _COOKIE_ATTRIBUTES and not _stand_in(value)
                and ((_high_entropy(value) and not _words(value))
                     or (len(value) >= 12 and any(w in name for w in _COOKIE_SECRET_WORDS)))):
            yield m.span(2)


def _words(v: str) -> bool:
    """A value made of words and numbers (`ROCKET_LAUNCHER_0001`), not random characters."""
    return all(w.isalpha() or w.isdigit() for w in v.replace("-", "_").replace(".", "_").split("_") if w)


def _judge(text: str, m, kind):
    """The span a match redacts, with its kind; None when the value is no secret after all."""
    if not isinstance(kind, str):
        kind = next(k for g, k in kind if m.group(g) is not None)
    if "v" not in m.re.groupindex:
        return m.start(), m.end(), kind
    s, e = m.span("v")
    v = text[s:e]
    if kind == "secret":
        kind = _keyed(text, m, v, m.group("w").lower())
        if kind is None:
            return None
    elif kind == "url-token" and not _url_token(v):
        return None
    elif kind in ("url-password", "secret-flag", "password-flag", "netrc-password") and (_stand_in(v, kind == "url-password") or v.startswith("-")):
        return None  # a stand-in, or the next option rather than a value
    if len(v) > 1 and v[0] in "\"'" and v[-1] == v[0]:
        s, e = s + 1, e - 1  # keep the quotes: the line still parses
    return s, e, kind


def _url_token(v: str) -> bool:
    """A URL's user part that is a key rather than a name: 20 hex or more, or random-looking."""
    if all(c in "0123456789abcdefABCDEF" for c in v) and len(v) >= 20 and any(c.isdigit() for c in v):
        return True
    return _high_entropy(v) and not _stand_in(v)


def _keyed(text: str, m, v: str, word: str):
    """"secret" for the value of a KEY=value pair that holds one (`word` ends the key), else None."""
    if _stand_in(v) or word in v.lower():  # `password=KEY_PASSWORD`, `authkey=authkey`: a reference
        return None
    if _high_entropy(v):
        return "secret"
    strong = (word in _STRONG_WORDS or (word == "key" and _after_strong(text, m.start()))
              or (word == "pwd" and _after_strong(text, m.start(), _STRONG_BEFORE_PWD)))
    if not strong or _code_like(v, m.group("sep"), text[m.end():m.end() + 1]):
        return None
    return "secret"


def _after_strong(text: str, s: int, words=None) -> bool:
    before = text[max(0, s - 12): s].lower().rstrip("_.-")
    return before.endswith(words or _STRONG_BEFORE_KEY)


def _stand_in(v: str, url: bool = False) -> bool:
    """A value that is a stand-in, a reference or already redacted rather than a secret.

    In a URL (`url`) a leading `%` followed by two hex digits is percent-encoding
    (`:%40pw@`), not a `%(name)s` template."""
    bare = v.strip("\"'")
    if len(bare) < 4 or bare.lower() in _PLACEHOLDER_VALUES or len(set(bare)) <= 2:
        return True
    if url and bare[0] == "%" and all(c in "0123456789abcdefABCDEF" for c in bare[1:3]):
        return False
    return bare[0] in "$%{<*.@#&!" or bare.startswith(("[redacted", "[withheld", "os.", "self.", "process.env", "env.", "getenv"))


def _code_like(v: str, sep: str, after: str) -> bool:
    """A value that reads as code (a variable, an argument, a type) or prose, not data.

    `KEY=value` with nothing between key and `=` is a shell or .env assignment: its bare
    word is data, unless a `,` or `)` follows (a keyword argument, `f(password=pw)`).
    Elsewhere (`password = password`, `token: str`) a bare identifier is code, and a
    quoted phrase ("Enter password: ") is prose.
    """
    if v[0] in "\"'":
        return " " in v or "\t" in v
    if sep == "=":
        return after in (",", ")", "(")
    return all(c.isalpha() or c in "_." for c in v)


def _high_entropy(v: str) -> bool:
    """A long random-looking value: letters and digits mixed, about 3.5 bits a character or more."""
    bare = v.strip("\"'")
    if len(bare) < 16 or not any(c.isdigit() for c in bare) or not any(c.isalpha() for c in bare):
        return False
    if any(c not in _TOKEN_CHARS for c in bare):  # dots, colons, spaces: a name or a path, not a token
        return False
    import math

    counts: dict = {}
    for c in bare:
        counts[c] = counts.get(c, 0) + 1
    n = len(bare)
    return -sum(k / n * math.log2(k / n) for k in counts.values()) >= 3.5


def _merge(spans: list) -> list:
    """Overlapping spans become one: no part of a secret is left out. The widest span at a
    position names the kind, and of equal ones the earliest rule (a token's own kind wins
    over the key it was assigned to)."""
    out: list = []
    for s, e, _, k in sorted(spans):
        e = -e
        if out and s < out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e, out[-1][2])
            continue
        out.append((s, e, k))
    return out


CUT_WINDOW = 4096  # characters either side of a cut scanned for a secret it would split


def _crossing(text: str, at: int):
    """The (start, end) of a secret a rule recognises whole that a cut at `at` would split, or None."""
    if at <= 0 or at >= len(text):
        return None
    lo = max(0, at - CUT_WINDOW)
    for s, e, _ in _merge(_spans(text[lo:at + CUT_WINDOW])):
        if s + lo < at < e + lo:
            return s + lo, e + lo
        if s + lo >= at:
            return None
    return None


def cut_point(text: str, at: int) -> int:
    """Where to cut `text` to keep at most its first `at` characters without splitting a secret.

    A token cut by a cap (events.OUTPUT_CHARS, SCAN_CAP) keeps a head its rule no longer
    matches (`ghp_` and 20 of its 36 characters, `password: "two wo`), which would then be
    stored as it is. So the text around the cut is scanned whole first, and a cut inside a
    secret moves back to the secret's start: the head never holds part of one.
    """
    span = _crossing(text, at)
    return at if span is None else span[0]


def resume_point(text: str, at: int) -> int:
    """Where to resume keeping `text` at or after `at` (a kept tail) without starting inside a secret."""
    span = _crossing(text, at)
    return at if span is None else span[1]


def redact_text(text: str, extra=(), until: float | None = None) -> str:
    """`text` with every recognised secret replaced by its placeholder.

    `extra` are the user's compiled patterns (config `redact`, userrx.py), applied after the
    built-in ones, on RE2 and within the deadline `until` (by default userrx.TIME_S from now).
    """
    spans = _merge(_spans(text))
    if spans:
        parts = []
        at = 0
        for s, e, k in spans:
            parts.append(text[at:s])
            parts.append(PLACEHOLDER % k)
            at = e
        parts.append(text[at:])
        text = "".join(parts)
    if extra:
        from eggshell.core import userrx

        text = userrx.redact_all(extra, text, userrx.deadline() if until is None else until)
    return text


def compile_extra(patterns) -> tuple:
    """The user's `redact` patterns compiled by RE2 (userrx.py); ValueError naming the first bad one."""
    if not patterns:
        return ()
    from eggshell.core.userrx import compile_user

    return tuple(compile_user(p) for p in patterns)


def rules(redact=(), never_record=()) -> Rules:
    """The Rules for a turn's snapshotted `redact` patterns and `never_record` globs."""
    if not redact and not never_record:
        return BUILTIN
    return Rules(compile_extra(redact), tuple(never_record))


_MARKERS_UTF8 = tuple(m.encode() for m in MARKERS)


def marked(text) -> bool:
    """Whether stored text (str or UTF-8 bytes) carries a redaction or withheld marker."""
    return any(m in text for m in (_MARKERS_UTF8 if isinstance(text, bytes) else MARKERS))


# -- payloads -------------------------------------------------------------------------


def redact_payload(payload: dict, rules: Rules = BUILTIN) -> dict:
    """Redact a hook payload in place (and return it): every content string, at any depth.

    A tool call that a `never_record` glob names keeps only its command or path; its
    output and any other content it carried are withheld. Base64 payloads (an image a
    tool returned) become placeholders first (binary.py).
    """
    budget = [SCAN_CAP]
    if rules.extra:  # one deadline for all user patterns of the payload (userrx.py)
        from eggshell.core import userrx

        budget.append(userrx.deadline())
    glob = withheld_by(rules.never_record, payload) if rules.never_record else None
    for k in sorted(payload, key=lambda k: k in ("tool_response", "error")):  # a huge output never starves the rest
        if k in STRUCTURAL:
            continue
        if glob is not None and k in ("tool_response", "error"):
            payload[k] = WITHHELD % glob
        elif glob is not None and k == "tool_input" and isinstance(payload[k], dict):
            payload[k] = {ik: (iv if ik in _CALL_KEYS else WITHHELD % glob) for ik, iv in payload[k].items()}
            payload[k] = _walk(payload[k], rules.extra, budget)
        else:
            payload[k] = _walk(without_binary(payload[k]), rules.extra, budget)
    return payload


# A turn record's fields that are structure, not content: never rewritten, so redaction cannot
# make a record that capture accepted uncompilable (a tool name cut by the scan limit once lost
# whole turns), and a fingerprint is kept exactly as it was taken.
RECORD_STRUCTURAL = frozenset(("session", "turn", "cwd"))
TOOL_STRUCTURAL = frozenset(("name", "id", "observed"))
# What a capped text can grow past SCAN_CAP by: the marks capture put in (PAST_CAP and the
# withheld rest of its payload). A save-time budget this much larger never cuts again what
# capture already cut, so a journaled record comes out of redact_record unchanged.
SAVE_SLACK = 4096


def scheme(_memo: list = []) -> str:  # noqa: B006 - one digest per process, read once
    """A digest of this module's own source: the redaction a journal event was made with.

    A journaled turn whose prompt event names the scheme in force at save time was redacted by
    exactly this code at capture, and redact_record would change nothing of it (the property
    test_save_queue proves), so the save skips the second pass: for a 50 MB turn that pass
    was seconds of a Stop hook. Any change to the rules or their code changes the digest, and
    a journal from before it is redacted again at save.
    """
    if not _memo:
        import hashlib

        with open(__file__, "rb") as f:
            _memo.append(hashlib.sha256(f.read()).hexdigest()[:16])
    return _memo[0]


def redact_record(record):
    """A turn record (turns.py: egg-save's input) redacted by the built-in rules, as capture would.

    Each unit capture redacted on its own (the prompt, each tool call's input and output, the
    answer) has its own scan budget here too, never one budget for the whole turn: a turn of six
    1 MB outputs is as ordinary as one. Structural fields (session, turn, cwd; a tool's name, id
    and fingerprint) are left exactly as they are. Base64 payloads become placeholders first.
    """
    if not isinstance(record, dict):
        return record
    out = {}
    for k, v in record.items():
        if k in RECORD_STRUCTURAL:
            out[k] = v
        elif k == "tools" and isinstance(v, list):
            out[k] = [_record_tool(t) for t in v]
        else:
            out[k] = _walk(without_binary(v), (), [SCAN_CAP + SAVE_SLACK])
    return out


def _record_tool(tool):
    if not isinstance(tool, dict):
        return tool  # the turn compiler names what is wrong with it
    budget = [SCAN_CAP + SAVE_SLACK]
    out = {}
    for k in sorted(tool, key=lambda k: k == "output"):  # as at capture: the output is scanned last
        v = tool[k]
        out[k] = v if k in TOOL_STRUCTURAL else _walk(without_binary(v), (), budget)
    return {k: out[k] for k in tool}  # the record's own key order


def _walk(v, extra, budget, key=None):
    """`v` redacted at any depth; `budget` is [characters left to scan] (+ [the user patterns' deadline])."""
    if isinstance(v, str):
        if key is not None and _secret_key(key) and v and not _stand_in(v):
            return PLACEHOLDER % "secret"
        return _text(v, extra, budget)
    if isinstance(v, list):
        return [_walk(x, extra, budget) for x in v]
    if isinstance(v, dict):
        return {k: _walk(x, extra, budget, k) for k, x in v.items()}
    return v


def _secret_key(key) -> bool:
    """A structured field whose name says its value is a secret ({"password": ...})."""
    if not isinstance(key, str):
        return False
    k = key.lower().rstrip("s") if key.lower().endswith("credentials") else key.lower()
    return k.endswith(_STRONG) or (k.endswith("key") and _after_strong(k, len(k) - 3))


def _text(s: str, extra, budget) -> str:
    """One string redacted within the payload's scan budget; what is past it is withheld.

    A long text keeps its last TAIL_KEPT characters (scanned too) as well as its head: a
    pasted log ends with the question about it, and an output with its verdict.
    """
    left = budget[0]
    until = budget[1] if len(budget) > 1 else None
    if len(s) <= left:
        budget[0] = left - len(s)
        return redact_text(s, extra, until)
    budget[0] = 0
    tail = TAIL_KEPT if left > 4 * TAIL_KEPT else 0
    cut = cut_point(s, _cut(s, left - tail))
    if not tail:
        return redact_text(s[:cut], extra, until) + PAST_CAP % (len(s) - cut)
    start = resume_point(s, _start(s, len(s) - tail))
    return redact_text(s[:cut], extra, until) + PAST_CAP % (start - cut) + "\n" + redact_text(s[start:], extra, until)


def _cut(s: str, at: int) -> int:
    """Where to stop scanning: at a line (or word) end before `at`, so no token is cut in two."""
    for sep in ("\n", " "):
        i = s.rfind(sep, max(0, at - 4096), at)
        if i != -1:
            return i
    return max(0, at - 4096)


def _start(s: str, at: int) -> int:
    """Where to resume scanning: at a line (or word) start after `at`, so no token is cut in two."""
    for sep in ("\n", " "):
        i = s.find(sep, at, at + 4096)
        if i != -1:
            return i + 1
    return at


# -- never_record ------------------------------------------------------------------------

_CALL_KEYS = ("command", "cmd", "file_path", "path", "notebook_path", "filePath", "paths", "pattern", "glob", "workdir", "cwd")
_PATH_KEYS = ("file_path", "path", "notebook_path", "filePath", "paths")


def withheld_by(globs, payload: dict):
    """The first `never_record` glob naming this tool call (its command or a path it uses), or None.

    A glob with a `/` or starting with `~` is a path (`~/.ssh/*`), matched against the
    absolute paths the call names; one without (`.env*`) also matches a path's last
    component; every glob is matched against each command of a shell call (`cat .env*`).
    """
    inp = payload.get("tool_input")
    if not isinstance(inp, dict):
        return None
    import fnmatch

    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else os.getcwd()
    commands = _commands(inp)
    paths = _paths(inp, commands, cwd)
    for g in globs:
        gx = os.path.expanduser(g)
        pathlike = "/" in g or g.startswith("~")
        if any(fnmatch.fnmatchcase(c, g) for c in commands):
            return g
        for p in paths:
            if pathlike and fnmatch.fnmatchcase(p, gx if os.path.isabs(gx) else os.path.join(cwd, gx)):
                return g
            if not pathlike and fnmatch.fnmatchcase(os.path.basename(p), g):
                return g
    return None


def _commands(inp: dict) -> list:
    """A shell call's commands: the whole line and each clause between && || ; | and newlines."""
    cmd = inp.get("command", inp.get("cmd"))
    if isinstance(cmd, list):
        cmd = cmd[-1] if len(cmd) >= 3 and cmd[-2] in ("-c", "-lc") else " ".join(str(x) for x in cmd)
    if not isinstance(cmd, str):
        return []
    split = cmd
    for sep in ("&&", "||", ";", "|"):
        split = split.replace(sep, "\n")
    return [c for c in dict.fromkeys([cmd.strip()] + [c.strip() for c in split.split("\n")]) if c]


def _paths(inp: dict, commands: list, cwd: str) -> list:
    """Absolute paths the call names: its path fields and the words of its commands."""
    raw = []
    for k in _PATH_KEYS:
        v = inp.get(k)
        raw.extend([v] if isinstance(v, str) else [x for x in v if isinstance(x, str)] if isinstance(v, list) else [])
    for c in commands:
        raw.extend(w.strip("'\"<>") for w in c.split())
    out = []
    for p in raw:
        if p and not p.startswith("-"):
            out.append(os.path.normpath(os.path.join(cwd, os.path.expanduser(p))))
    return list(dict.fromkeys(out))
