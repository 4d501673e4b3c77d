"""`egg view`: one self-contained HTML page of what is remembered, to read in a browser.

The page is a file, not a server: nothing listens, and the page loads nothing (its
Content-Security-Policy allows no fetch at all, only its own inline script and style by
hash). Everything recorded is untrusted text: it reaches the page only inside one JSON
data block, escaped so that no recorded byte can end the block or start markup, and the
page's script puts it in the DOM as text nodes. The page holds copies of recorded text,
so by default it is written owner-only under the data root (`view/`), which `egg forget`
empties (`drop_pages`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shlex
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources

from eggshell.cli.common import PROG, CliError, caught_up, count, say
from eggshell.core.identity import display_key
from eggshell.graph.records import command_of
from eggshell.paths import PROJECT_CONFIG, Paths, UnsafePath, private_dir, private_problem, refusal, write_all

VIEW_DIR = "view"
OUTPUT_CAP = 20_000  # characters of one tool output in the page; `egg show KEY` prints the rest
TEXT_CAP = 50_000  # characters of a request, an answer or a handoff in the page
TEMPLATE = "view_page.html"
OPEN_WAIT_S = 3  # how long `--open` waits to hear whether the opener failed

# JSON escapes that keep recorded text inert inside <script type="application/json">: no `<`
# can start `</script>` or `<!--`, no `&` an entity, no `/` a URL the page seems to hold, and
# U+2028/2029 stay escaped for any reader that takes the block for JavaScript. (A chain of
# str.replace: str.translate takes seconds on the 10 MB of a 10,000-turn store.)
_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("/", "\\/"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))
_SURROGATE = re.compile("[\ud800-\udfff]")
_RETRIEVED = re.compile(r"^retrieved (\S+)\s+rank (\d+)\s+score (\S+)\s+\((.*?)\)(?:\s\s(.*))?$")  # then the relevance verdict


class ViewError(CliError):
    """The page could not be written where asked, or its template is not the one installed with the package."""


@dataclass(frozen=True)
class Collected:
    """The page's data, and the problems met gathering it (a damaged store, an unreadable chat)."""

    data: dict
    problems: tuple[str, ...]


# -- the page (pure) ----------------------------------------------------------------------


def embed_json(obj: object) -> str:
    """`obj` as JSON that can sit inside a <script type="application/json"> element as it is."""
    text = _SURROGATE.sub("\ufffd", json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
    for char, escape in _ESCAPES:
        text = text.replace(char, escape)
    return text


def _digest(text: str) -> str:
    return "'sha256-%s'" % base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _inline(template: str, tag: str) -> str:
    """The body of the template's one inline <tag> element without attributes (its script or style)."""
    found = re.findall(r"<%s>(.*?)</%s>" % (tag, tag), template, re.S)
    if len(found) != 1:
        raise ViewError("%s: expected one inline <%s>, found %d; run ./install.sh again" % (TEMPLATE, tag, len(found)))
    return found[0]


def csp(template: str) -> str:
    """The policy: no fetch of any kind; only the template's own script and style, by hash."""
    return ("default-src 'none'; script-src %s; style-src %s; img-src 'none'; font-src 'none'; connect-src 'none'; "
            "media-src 'none'; object-src 'none'; frame-src 'none'; worker-src 'none'; manifest-src 'none'; "
            "base-uri 'none'; form-action 'none'" % (_digest(_inline(template, "script")), _digest(_inline(template, "style"))))


def render(data: dict, template: str) -> str:
    """The whole page; it states its own size in UTF-8 bytes (the meta egg-page-bytes)."""
    head, size_mark, rest = template.partition("@@SIZE@@")
    middle, data_mark, tail = rest.partition("@@DATA@@")
    if not (size_mark and data_mark) or head.count("@@CSP@@") != 1 or "@@" in middle + tail:
        raise ViewError("%s: needs @@CSP@@, @@SIZE@@ and @@DATA@@ once each, in that order; run ./install.sh again" % TEMPLATE)
    head = head.replace("@@CSP@@", csp(template))
    body = embed_json(data)  # recorded text: never passed through another substitution
    fixed = len((head + middle + tail).encode("utf-8")) + len(body.encode("utf-8"))
    size = fixed
    while fixed + len(str(size)) != size:  # the size's own digits count too: settles in a round or two
        size = fixed + len(str(size))
    return head + str(size) + middle + body + tail


def template_text() -> str:
    where = resources.files("eggshell.cli").joinpath(TEMPLATE)
    try:
        return where.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ViewError("%s: missing from the installed package (it is package data: pyproject.toml); run ./install.sh "
                        "again" % where) from None


def _cut(text: str, cap: int) -> tuple[str, int]:
    return (text, 0) if len(text) <= cap else (text[:cap], len(text) - cap)


def reason_lines(reason: str) -> tuple[list[dict], list[str]]:
    """A chat's `egg why` text: (the turns retrieval ranked, the other lines as they are)."""
    ranked, rest = [], []
    for line in reason.split("\n"):
        m = _RETRIEVED.match(line.strip())
        if m:
            ranked.append({"key": m.group(1), "rank": int(m.group(2)), "score": m.group(3), "store": m.group(4), "verdict": m.group(5) or ""})
        elif line.strip():
            rest.append(line)
    return ranked, rest


def turn_data(v, store_index: int) -> dict:
    """One recorded turn (a graph.records.TurnView) as the page shows it."""
    prompt, prompt_cut = _cut(v.prompt, TEXT_CAP)
    answer, answer_cut = _cut(v.answer, TEXT_CAP) if v.answer is not None else (None, 0)
    tools = []
    for t in v.tools:
        out, cut = _cut(t.outcome, OUTPUT_CAP)
        tools.append({"key": display_key(t.id), "name": t.work.partition("\n")[0], "command": command_of(t.work),
                      "output": out, "cut": cut})
    return {"store": store_index, "key": v.key, "session": v.session, "turn": v.turn, "time": v.time, "cwd": v.cwd,
            "prompt": prompt, "prompt_cut": prompt_cut, "answer": answer, "answer_cut": answer_cut, "tools": tools, "chat": None}


# -- gathering (reads the stores and the chat state) ---------------------------------------


def config_stores(cfg) -> list[str]:
    """Every store the config reads or writes, under any profile: the default profile's first."""
    out = list(cfg.read_eggs)
    for name in cfg.profiles:
        read, write = cfg.paths_of(name)
        out += list(read) + ([write] if write else [])
    return list(dict.fromkeys(out))


def collect(paths: Paths, store_paths: list[str], *, names: dict[str, str] | None = None, write: str | None = None,
            project: str | None = None, explicit: bool = False, log=lambda m: None) -> Collected:
    """The page's data for these stores and the chats under the data root that touch them."""
    import time

    from eggshell import __version__
    from eggshell.graph import trust
    from eggshell.graph.records import turn_views
    from eggshell.graph.store import EggError, Store

    names = names or {}
    ledger = trust.load(paths.data_root)
    problems: list[str] = []
    stores, turns = [], []
    for i, p in enumerate(store_paths):
        entry = {"path": p, "name": names.get(p), "write": p == write, "bytes": 0, "turns": 0, "commits": 0,
                 "missing": False, "error": None, "trust": "", "quoted_path": shlex.quote(p),
                 "forget_args": " --egg %s" % shlex.quote(p) if explicit else ""}
        stores.append(entry)
        if not os.path.exists(p):
            entry["missing"] = True
            continue
        entry["bytes"] = os.path.getsize(p)
        log("reading %s (%s bytes)" % (p, format(entry["bytes"], ",")))
        try:
            g = Store.open(p).graph
        except (EggError, OSError) as e:
            entry["error"] = str(e)
            problems.append("%s: %s" % (p, e))
            continue
        views = turn_views(g)
        entry.update(turns=len(views), commits=len(g.commits), trust=trust.describe(p, g, ledger))
        turns += [turn_data(v, i) for v in views]
    turns.sort(key=lambda t: (t["time"], t["store"], t["key"]), reverse=True)  # newest first
    chats, others = _chats(paths, turns, problems)
    if ledger.problem is not None:
        problems.append(ledger.problem)
    data = {"generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "version": __version__, "project": project,
            "state_dir": paths.state_dir, "stores": stores, "turns": turns, "chats": chats, "other_chats": others,
            "caps": {"output": OUTPUT_CAP, "text": TEXT_CAP}}
    return Collected(data, tuple(problems))


def _chats(paths: Paths, turns: list[dict], problems: list[str]) -> tuple[list[dict], int]:
    """The chat states that touch these turns (by session, or by a retrieved key), and how many others there are."""
    from eggshell.reuse.delivery import Deliveries
    from eggshell.runtime.chat import Chat

    d = os.path.join(paths.state_dir, "chats")
    try:
        files = sorted(n for n in os.listdir(d) if n.endswith(".control.json"))
    except FileNotFoundError:
        return [], 0
    sessions = {hashlib.sha256(t["session"].encode("utf-8", "surrogatepass")).hexdigest()[:32]: t["session"] for t in turns}
    keys = {t["key"] for t in turns}
    out, others = [], 0
    for name in files:
        file_id = name[: -len(".control.json")]
        path = os.path.join(d, name)
        session = sessions.get(file_id)
        ctl = Chat(paths.state_dir, session or "", path=path).peek()  # read only: a viewer changes no chat
        if ctl is None:
            if session is None:
                others += 1
            else:
                problems.append("%s: unreadable chat state (the chat's next hook sets it aside)" % path)
                out.append({"file": file_id, "session": session, "path": path, "unreadable": True})
            continue
        ranked, rest = reason_lines(ctl.last_reason)
        if session is None and not any(r["key"] in keys for r in ranked):
            others += 1
            continue
        deliveries = Deliveries(paths.state_dir, session or "")
        deliveries.path = os.path.join(d, file_id + ".json")  # the chat's file, whether or not its session is known
        state = deliveries.load()
        handoff, cut = _cut(ctl.last_handoff, TEXT_CAP)
        out.append({"file": file_id, "session": session, "path": path, "unreadable": False, "enabled": ctl.enabled,
                    "profile": ctl.profile, "next_profile": ctl.next_profile, "last_turn": ctl.last_turn,
                    "dropped": len(ctl.dropped), "delivered": len(state.delivered), "epoch": state.epoch,
                    "handoff": handoff, "handoff_cut": cut, "retrieved": ranked, "reasons": rest})
    index = {c["session"]: i for i, c in enumerate(out) if c["session"] is not None}
    for t in turns:
        t["chat"] = index.get(t["session"])
    return out, others


# -- writing and opening ----------------------------------------------------------------------


def view_dir(paths: Paths) -> str:
    """`<data root>/view`, yours alone (0700): it holds copies of recorded text.

    Made 0700; an existing one open to others is refused with the chmod that fixes it, never
    chmodded (paths.private_problem: Eggshell changes the mode of no directory it did not make)."""
    import stat

    d = os.path.join(paths.data_root, VIEW_DIR)
    private_dir(d)
    st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafePath("%s: is not a directory (a symbolic link or a file); move it aside and run egg view again" % d)
    if st.st_uid != os.geteuid():
        raise UnsafePath(refusal(d, "another user owns it (mode %04o)" % (st.st_mode & 0o7777), "directories for recorded text", "700"))
    why = private_problem(d, "a directory of recorded text", "directories for recorded text")
    if why is not None:
        raise UnsafePath(why)
    return d


def default_output(paths: Paths, store_paths: list[str], label: str) -> str:
    """One page per set of stores, replaced by the next `egg view` of the same set."""
    tag = hashlib.sha256("\0".join(store_paths).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.") or "stores"
    return os.path.join(view_dir(paths), "%s-%s.html" % (safe[:60], tag))


def write_private(path: str, text: str) -> int:
    """Write the page whole (a temporary file renamed over it), owner-only; its size in bytes."""
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise ViewError("%s: no such directory (create it, or choose another -o FILE)" % d)
    if os.path.isdir(path):
        raise ViewError("%s: is a directory; give -o the path of the file to write" % path)
    data = text.encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=".egg-view.", suffix=".tmp", dir=d)  # 0600, O_EXCL
    try:
        try:
            os.fchmod(fd, 0o600)
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)  # a symlink at `path` is replaced, never followed
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return len(data)


def opener() -> str | None:
    """The desktop's opener on this system, if there is one (never Debian's `open`, which is openvt)."""
    import shutil

    return shutil.which("open" if sys.platform == "darwin" else "xdg-open")


def open_page(path: str) -> tuple[bool, str]:
    """Hand the page to the desktop's opener: (done or still opening, what to tell the user)."""
    import subprocess

    prog = opener()
    if prog is None:
        return True, "no desktop opener (%s) found; open %s in a browser" % ("open" if sys.platform == "darwin" else "xdg-open", path)
    p = subprocess.Popen([prog, path], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        rc = p.wait(OPEN_WAIT_S)
    except subprocess.TimeoutExpired:
        return True, "opening %s with %s" % (path, prog)
    if rc != 0:
        return False, "%s could not open it (exit %d); open %s in a browser" % (prog, rc, path)
    return True, "opened %s with %s" % (path, prog)


def drop_pages(paths: Paths) -> int:
    """Delete the pages `egg view` wrote under the data root (they hold copies of what was just forgotten)."""
    d = os.path.join(paths.data_root, VIEW_DIR)
    try:
        names = os.listdir(d)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    n = 0
    for name in names:
        if name.endswith((".html", ".tmp")):
            try:
                os.unlink(os.path.join(d, name))
                n += 1 if name.endswith(".html") else 0
            except FileNotFoundError:
                pass
    return n


# -- the command ---------------------------------------------------------------------------------


def _note(msg: str) -> None:
    say("%s view: %s" % (PROG, msg), err=True)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return "%.1f %s (%s bytes)" % (n / scale, unit, format(n, ","))
    return count(n, "byte")


def cmd_view(a, paths: Paths) -> int:
    from eggshell import config as _config

    cfg = None
    if a.egg:
        for p in a.egg:
            if not os.path.isfile(p):
                raise CliError("%s: no such file (give the path of a .egg store)" % p)
        store_paths = list(dict.fromkeys(os.path.abspath(p) for p in a.egg))
        label = os.path.splitext(os.path.basename(store_paths[0]))[0]
    else:
        cfg = _config.load(paths, os.getcwd())
        if cfg.project_root is None:
            raise CliError("not in an Eggshell project (no %s here or above); pass --egg PATH or run `egg init`" % PROJECT_CONFIG)
        store_paths = config_stores(cfg)
        label = os.path.basename(cfg.project_root)
    caught_up(paths)
    names = {p: n for n, p in cfg.egg_paths.items()} if cfg else {}
    got = collect(paths, store_paths, names=names, write=cfg.write_egg if cfg else None,
                  project=cfg.project_root if cfg else None, explicit=bool(a.egg), log=_note)
    out = a.output or default_output(paths, store_paths, label)
    size = write_private(out, render(got.data, template_text()))
    d = got.data
    say(os.path.abspath(out))
    _note("%d turn%s from %d store%s and %d chat%s; the page is %s. It holds recorded text: owner-only (0600)%s" % (
        len(d["turns"]), "" if len(d["turns"]) == 1 else "s", len(d["stores"]), "" if len(d["stores"]) == 1 else "s",
        len(d["chats"]), "" if len(d["chats"]) == 1 else "s", _size(size),
        "" if a.output else ", and `egg forget` deletes it"))
    for p in got.problems:
        _note("problem: %s" % p)
    ok = True
    if a.open:
        ok, msg = open_page(os.path.abspath(out))
        _note(msg)
    return 1 if got.problems or not ok else 0


DESCRIPTION = """\
Write one self-contained HTML page of what is remembered and print its path: each store's
size (bytes, turns, commits) and trust, a timeline of its turns (request, every tool call
with its output, the answer, when, which chat and turn), a filter box, the handoff each chat
was last given and why (the turns retrieval ranked, with their scores), and for each turn and
tool call the `egg forget KEY` that hides it.

The page loads nothing: no server, no network (its Content-Security-Policy forbids every
fetch), and all recorded text in it is shown as text. It holds copies of recorded text, so
by default it is written owner-only (0600) under the data root's view/ directory (0700), one
page per set of stores, and `egg forget` deletes those pages. Exit 0 when written, 1 when a
store or chat state could not be read (the page is still written, without it) or --open
failed, 2 on a usage error.
"""


def register(sub) -> None:
    """Add `egg view` to the CLI's subcommands."""
    s = sub.add_parser("view", help="write an HTML page of what is remembered (stores, turns, handoffs) and print its path",
                       description=DESCRIPTION)
    s.add_argument("--open", action="store_true", help="open the page with the desktop's opener (xdg-open; open on macOS)")
    s.add_argument("-o", "--output", metavar="FILE", help="write the page to FILE (default: under the data root's view/)")
    s.add_argument("--egg", action="append", metavar="PATH",
                   help="a store to show (repeatable; default: every store this project's config reads)")
    s.set_defaults(fn=cmd_view)
