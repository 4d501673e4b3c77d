"""One canonical byte encoding and one hash for everything.

Every content id, file name and cache key in Eggshell is `digest(domain, fields...)`:
SHA-256 over length-prefixed fields, separated by a domain name, so two uses can
never collide by construction. A Value's content id hashes its full canonical
encoding; the id only nominates candidates, equality of the encoding decides.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from eggshell.errors import EggshellError
from eggshell.core.hashing import _len8, digest, hexdigest  # noqa: F401 - the one hash, re-exported
from eggshell.core.values import Atom, Auth, Value

DISPLAY_KEY_LEN = 12
VALUE_DOMAIN = "eggshell.value"


def encode(v: Value) -> bytes:
    """The canonical, injective byte encoding of a Value (the whole tree)."""
    parts: list[bytes] = []
    _encode_into(v, parts)
    return b"".join(parts)


def _encode_into(v: Value, parts: list[bytes]) -> None:
    if isinstance(v, Atom):
        parts.append(b"A")
        parts.append(_len8(len(v.data)))
        parts.append(v.data)
        return
    name = v.op.value.encode("ascii")
    parts.append(b"P")
    parts.append(bytes([len(name)]))
    parts.append(name)
    parts.append(len(v.args).to_bytes(4, "big"))
    for r in v.args:
        parts.append(b"S" if r.auth is Auth.SEMANTIC else b"E")
        _encode_into(r.target, parts)


def content_id(v: Value) -> bytes:
    """The 32-byte content id of a Value (cached on the Value, which is immutable)."""
    cid = v._cid
    if cid is None:
        cid = digest(VALUE_DOMAIN, encode(v))
        object.__setattr__(v, "_cid", cid)
    return cid


def content_hex(v: Value) -> str:
    return content_id(v).hex()


def display_key(v_or_hex: Value | str) -> str:
    h = v_or_hex if isinstance(v_or_hex, str) else content_hex(v_or_hex)
    return h[:DISPLAY_KEY_LEN]


class KeyError_(EggshellError, LookupError):
    """A display key that names no Value, or more than one."""


def resolve_key(prefix: str, ids: Iterable[str]) -> str:
    """The one id in `ids` starting with `prefix`; "unknown" or "ambiguous" otherwise."""
    p = prefix.strip().lower()
    if not p or any(c not in "0123456789abcdef" for c in p):
        raise KeyError_("%r is not a key: keys are hexadecimal, like the 12 characters `egg find` shows" % prefix)
    found = [i for i in ids if i.startswith(p)]
    unique = sorted(set(found))
    if not unique:
        raise KeyError_("unknown key %s" % prefix)
    if len(unique) > 1:
        raise KeyError_("ambiguous key %s: it starts %s; give more characters" % (prefix, ", ".join(u[:16] for u in unique[:5])))
    return unique[0]


def canonical_json(obj: Any) -> str:
    """Compact JSON with sorted keys: the one spelling of a tool input in stored Work text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
