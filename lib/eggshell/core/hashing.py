"""The project's only hash, in a module of its own so a hook can name files without loading Values."""

from __future__ import annotations

import hashlib


def _len8(n: int) -> bytes:
    return n.to_bytes(8, "big")


def digest(domain: str, *fields: bytes | str) -> bytes:
    """SHA-256 of `len(domain) domain (len(field) field)*`, the project's only hash."""
    h = hashlib.sha256()
    d = domain.encode("utf-8")
    h.update(_len8(len(d)))
    h.update(d)
    for f in fields:
        b = f.encode("utf-8") if isinstance(f, str) else f
        h.update(_len8(len(b)))
        h.update(b)
    return h.digest()


def hexdigest(domain: str, *fields: bytes | str) -> str:
    return digest(domain, *fields).hex()
