"""The `.egg` line format, version 1: parsing and printing records, nothing else.

Every record is one JSON object on one line. Lines can come in any order (a file
is a set of records), which is what lets two copies merge by concatenation:

    {"magic":"eggshell-egg","version":1,"authority":UUID,"created":TIME}
    {"node":ID,"text":"..."}                 an Atom whose bytes are valid UTF-8
    {"node":ID,"bytes":"<base64>"}           any other Atom
    {"node":ID,"op":"outcome","args":[["s",ID],["e",ID],...]}
    {"commit":ID,"time":TIME,"session":S,"turn":T,"roots":[ID,...],"unions":[[ID,ID],...]}
    {"unlink":ID,"time":TIME,"pair":[ID,ID]}  removes a persistent union
    {"forget":ID,"time":TIME,"roots":[ID,...],"turns":[[ID,ID],...]}  a tombstone

IDs are the 64-hex content ids of `identity.py`; a commit's, an unlink's and a
tombstone's id is the digest of its own body, so duplicated lines are recognised and
counted once. A tombstone names only content ids (roots, and the (session, turn) Atoms
of whole turns), never the text it hides.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass

import ujson

from eggshell.errors import EggshellError
from eggshell.core.identity import canonical_json, hexdigest
from eggshell.core.values import Apply, Atom, Auth, Op, dataclass_reduce

MAGIC = "eggshell-egg"
VERSION = 1
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_OPS = {op.value: op for op in Op}
_AUTHS = {a.value: a for a in Auth}


class RecordError(EggshellError, ValueError):
    """One line that is not a valid version-1 record (the message says what is wrong)."""


@dataclass(frozen=True, slots=True)
class Header:
    authority: str
    version: int
    created: str


@dataclass(frozen=True, slots=True)
class NodeRecord:
    id: str
    atom: bytes | None  # set for atoms
    op: Op | None  # set for applications
    args: tuple[tuple[Auth, str], ...]


@dataclass(frozen=True, slots=True)
class Commit:
    id: str
    time: str
    session: str
    turn: str
    roots: tuple[str, ...]
    unions: tuple[tuple[str, str], ...]

    __reduce__ = dataclass_reduce


@dataclass(frozen=True, slots=True)
class Unlink:
    id: str
    time: str
    pair: tuple[str, str]


@dataclass(frozen=True, slots=True)
class Forget:
    """A tombstone: these roots, and every root of these (session id, turn id) Atom pairs, are forgotten."""

    id: str
    time: str
    roots: tuple[str, ...]
    turns: tuple[tuple[str, str], ...]

    __reduce__ = dataclass_reduce


Record = Header | NodeRecord | Commit | Unlink | Forget


def _id(x: object, what: str) -> str:
    if not isinstance(x, str) or not _HEX64.match(x):
        raise RecordError("%s must be a 64-character lowercase hex content id" % what)
    return x


def _str(d: dict, key: str, what: str) -> str:
    v = d.get(key)
    if not isinstance(v, str):
        raise RecordError("%s record needs a string %r" % (what, key))
    return v


def _pair(x: object, what: str) -> tuple[str, str]:
    if not isinstance(x, list) or len(x) != 2:
        raise RecordError("%s must be a pair [ID, ID]" % what)
    return (_id(x[0], what), _id(x[1], what))


def parse_record(line: bytes | str) -> Record:
    """Parse one line (without its newline) into a record, or raise RecordError."""
    try:
        d = ujson.loads(line)
    except (ValueError, OverflowError, UnicodeDecodeError) as e:
        raise RecordError("not valid JSON (%s)" % e) from None
    if not isinstance(d, dict):
        raise RecordError("a record must be a JSON object")
    if "node" in d:
        nid = _id(d["node"], "node id")
        if "text" in d:
            if not isinstance(d["text"], str) or set(d) != {"node", "text"}:
                raise RecordError("text node must be {\"node\":ID,\"text\":STRING}")
            try:
                data = d["text"].encode("utf-8")
            except UnicodeEncodeError:
                raise RecordError("text node holds text that is not valid UTF-8 (lone surrogate)") from None
            return NodeRecord(nid, data, None, ())
        if "bytes" in d:
            if not isinstance(d["bytes"], str) or set(d) != {"node", "bytes"}:
                raise RecordError("bytes node must be {\"node\":ID,\"bytes\":BASE64}")
            try:
                data = base64.b64decode(d["bytes"], validate=True)
            except ValueError:
                raise RecordError("bytes node holds invalid base64") from None
            return NodeRecord(nid, data, None, ())
        if "op" in d:
            if set(d) != {"node", "op", "args"}:
                raise RecordError("operator node must be {\"node\":ID,\"op\":OP,\"args\":[...]}")
            op = _OPS.get(d["op"])
            if op is None:
                raise RecordError("unknown operator %r (known: %s)" % (d["op"], ", ".join(_OPS)))
            args = d["args"]
            if not isinstance(args, list):
                raise RecordError("operator args must be a list")
            out = []
            for a in args:
                if not isinstance(a, list) or len(a) != 2 or a[0] not in _AUTHS:
                    raise RecordError("each argument must be [\"s\"|\"e\", ID]")
                out.append((_AUTHS[a[0]], _id(a[1], "argument id")))
            return NodeRecord(nid, None, op, tuple(out))
        raise RecordError("node record needs one of text, bytes or op")
    if "commit" in d:
        cid = _id(d["commit"], "commit id")
        roots = d.get("roots")
        unions = d.get("unions", [])
        if not isinstance(roots, list) or not isinstance(unions, list):
            raise RecordError("commit record needs a list of roots and a list of unions")
        c = Commit(
            cid,
            _str(d, "time", "commit"),
            _str(d, "session", "commit"),
            _str(d, "turn", "commit"),
            tuple(_id(r, "root id") for r in roots),
            tuple(_pair(u, "union") for u in unions),
        )
        if commit_id(c) != cid:
            raise RecordError("commit id does not match the commit's content")
        return c
    if "unlink" in d:
        u = Unlink(_id(d["unlink"], "unlink id"), _str(d, "time", "unlink"), _pair(d.get("pair"), "unlink pair"))
        if unlink_id(u) != u.id:
            raise RecordError("unlink id does not match the record's content")
        return u
    if "forget" in d:
        roots, turns = d.get("roots"), d.get("turns")
        if not isinstance(roots, list) or not isinstance(turns, list) or set(d) != {"forget", "time", "roots", "turns"}:
            raise RecordError('tombstone must be {"forget":ID,"time":TIME,"roots":[ID,...],"turns":[[ID,ID],...]}')
        f = Forget(_id(d["forget"], "tombstone id"), _str(d, "time", "tombstone"), tuple(_id(r, "forgotten root id") for r in roots),
                   tuple(_pair(t, "forgotten turn") for t in turns))
        if forget_id(f) != f.id:
            raise RecordError("tombstone id does not match the record's content")
        return f
    if d.get("magic") == MAGIC:
        v = d.get("version")
        if v != VERSION:
            raise RecordError("format version %r is not supported (this Eggshell reads version %d)" % (v, VERSION))
        auth = d.get("authority")
        if not isinstance(auth, str) or not auth:
            raise RecordError("header needs an authority id")
        return Header(auth, v, str(d.get("created", "")))
    raise RecordError("unknown record: expected a header, node, commit, unlink or forget")


def commit_id(c: Commit) -> str:
    body = {"time": c.time, "session": c.session, "turn": c.turn, "roots": list(c.roots), "unions": [list(u) for u in c.unions]}
    return hexdigest("eggshell.commit", canonical_json(body))


def unlink_id(u: Unlink) -> str:
    return hexdigest("eggshell.unlink", canonical_json({"time": u.time, "pair": list(u.pair)}))


def forget_id(f: Forget) -> str:
    body = {"time": f.time, "roots": list(f.roots), "turns": [list(t) for t in f.turns]}
    return hexdigest("eggshell.forget", canonical_json(body))


def _line(obj: dict) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def header_line(h: Header) -> bytes:
    return _line({"magic": MAGIC, "version": h.version, "authority": h.authority, "created": h.created})


def node_line(nid: str, v: Atom | Apply, ids: dict) -> bytes:
    """The record for one node; `ids` maps each child Value to its hex id."""
    if isinstance(v, Atom):
        t = v.as_text()
        if t is not None:
            return _line({"node": nid, "text": t})
        return _line({"node": nid, "bytes": base64.b64encode(v.data).decode("ascii")})
    return _line({"node": nid, "op": v.op.value, "args": [[r.auth.value, ids[r.target]] for r in v.args]})


def commit_line(c: Commit) -> bytes:
    return _line(
        {"commit": c.id, "time": c.time, "session": c.session, "turn": c.turn, "roots": list(c.roots), "unions": [list(u) for u in c.unions]}
    )


def unlink_line(u: Unlink) -> bytes:
    return _line({"unlink": u.id, "time": u.time, "pair": list(u.pair)})


def forget_line(f: Forget) -> bytes:
    return _line({"forget": f.id, "time": f.time, "roots": list(f.roots), "turns": [list(t) for t in f.turns]})
