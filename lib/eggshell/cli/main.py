"""egg: the human CLI (set-up, inspection and maintenance of `.egg` stores).

Every subcommand prints what it did, exits 0 on success, 1 when it found a problem
(damage, nothing found), and 2 on a usage or environment error, with a message that
says what to do.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import stat
import sys

from eggshell import __version__
from eggshell import config as _config
from eggshell.cli import controls, doctor
from eggshell.cli import view
from eggshell.cli import importer
from eggshell.cli.common import PROG, CliError, caught_up, count, say
from eggshell.cli.controls import cmd_status
from eggshell.cli.setup import cmd_init, cmd_install, cmd_uninstall
from eggshell.core.identity import KeyError_, content_hex, display_key
from eggshell.core.values import Atom, readable
from eggshell.graph import eggfile as ef
from eggshell.graph.records import TurnView, command_of, turn_views
from eggshell.graph.store import EggError, Graph, Store, compact, merge
from eggshell.hosts import registry
from eggshell.paths import PROJECT_CONFIG, Paths, UnsafePath, check_data_root, from_env
from eggshell.search.searcher import Searcher
from eggshell.stages import common as stage


# -- init ---------------------------------------------------------------------------


# -- install / uninstall (codex, claude) ------------------------------------------------------


# -- reading stores -------------------------------------------------------------------


def _stores(a, paths: Paths) -> list[Store]:
    caught_up(paths)
    eggs = a.egg
    if not eggs:
        cfg = _config.load(paths, os.getcwd())
        if cfg.project_root is None:
            raise CliError("not in an Eggshell project (no %s here or above); pass --egg PATH or run `egg init`" % PROJECT_CONFIG)
        eggs = cfg.read_eggs
    out = []
    for p in eggs:
        if a.egg and not os.path.exists(p):
            raise CliError("%s: no such file" % p)
        out.append(Store.open(p))
    return out


def _turn_text(v: TurnView) -> str:
    lines = [
        "turn %s  session %s  turn %s  %s" % (v.key, v.session, v.turn, v.time),
        "store %s%s" % (v.store, "  cwd %s" % v.cwd if v.cwd else ""),
        "",
        "REQUEST  [request %s]" % _text_key(v.prompt),
        v.prompt,
        "",
    ]
    for t in v.tools:  # TOOL KEY: the call's outcome (show, forget); [work KEY]: what `egg union` joins
        lines += ["TOOL %s %s: %s  [work %s]" % (display_key(t.id), t.work.partition("\n")[0], command_of(t.work), _text_key(t.work)),
                  t.outcome.rstrip("\n"), ""]
    lines += ["OUTCOME" if v.answer is not None else "OUTCOME none (interrupted before a final answer)"]
    if v.answer is not None:
        lines.append(v.answer)
    return "\n".join(lines)


def _text_key(text: str) -> str:
    """The key of a recorded text (a request, a tool call's Work): the node `egg union` takes."""
    return display_key(content_hex(Atom.text(text)))


def _value_text(g: Graph, nid: str, v) -> str:
    if isinstance(v, Atom):
        return readable(v)
    for t in turn_views(g):
        for tool in t.tools:
            if tool.id == nid:
                return "tool %s from turn %s (session %s, turn %s)\n\nWORK\n%s\n\nOUTCOME\n%s" % (
                    display_key(nid), t.key, t.session, t.turn, tool.work, tool.outcome.rstrip("\n"))
    args = "\n".join("  %s %s %s" % (r.auth.name.lower(), display_key(r.target), _short(r.target)) for r in v.args)
    return "%s %s\n%s" % (v.op.value, display_key(nid), args)


def _short(v) -> str:
    s = " ".join(readable(v).split())
    return s if len(s) <= 80 else s[:79] + "…"


def _visible(stores: list[Store], key: str) -> tuple[str, Store]:
    """The node a key names and a store showing it; a forgotten one is refused (exit 1), never shown."""
    from eggshell.core.identity import resolve_key

    ids: dict[str, Store] = {}
    gone: dict[str, Store] = {}
    for s in stores:
        hidden = s.graph.forgotten()
        for nid in s.graph.nodes:
            (gone if nid in hidden else ids).setdefault(nid, s)
    try:
        nid = resolve_key(key, {**gone, **ids})
    except KeyError_ as e:
        raise CliError(str(e), 1)
    if nid not in ids:
        raise CliError("%s was forgotten (`egg forget`); `egg compact --purge %s` removes it from the file" % (key, gone[nid].path), 1)
    return nid, ids[nid]


def cmd_show(a, paths: Paths) -> int:
    stores = _stores(a, paths)
    nid, store = _visible(stores, a.key)
    for t in turn_views(store.graph):
        if t.id == nid:
            say(_turn_text(t))
            return 0
    say(_value_text(store.graph, nid, store.graph.nodes[nid]))
    return 0


def _resolve(stores: list[Store], key: str):
    nid, store = _visible(stores, key)
    return store.graph.nodes[nid]


def _write_store(a, paths: Paths) -> Store:
    if a.egg:
        return Store.open(a.egg[0])
    cfg = _config.load(paths, os.getcwd())
    if cfg.project_root is None:
        raise CliError("not in an Eggshell project (no %s here or above); pass --egg PATH or run `egg init`" % PROJECT_CONFIG)
    return Store.open(cfg.write_egg)


def cmd_union(a, paths: Paths) -> int:
    """Declare two recorded Works equal, for good: reuse then treats one as the other."""
    from eggshell.core.values import union_admissible

    stores = _stores(a, paths)
    x, y = _resolve(stores, a.a), _resolve(stores, a.b)
    if x == y:
        raise CliError("%s and %s are the same node: nothing to declare" % (a.a, a.b), 1)
    if not union_admissible(x, y):
        (what_x, kind_x, work_x), (what_y, kind_y, work_y) = _union_side(x), _union_side(y)
        hint = ""
        if work_x is not None and kind_x == kind_y:  # two tool outcomes: their works; two turns: their requests
            hint = " For these two: egg union %s %s" % (display_key(content_hex(work_x)), display_key(content_hex(work_y)))
        raise CliError("%s is %s and %s is %s: their provenance (the session, turn and call that observed them) differs, "
                       "and no union may change provenance. A union joins two Works, which carry none: two tool calls' "
                       "works or two requests. `egg show TURN` prints their keys: [work KEY] on each TOOL line, "
                       "[request KEY] on REQUEST.%s" % (a.a, what_x, a.b, what_y, hint), 1)
    store = _write_store(a, paths)
    store.data_root = paths.data_root  # the union is this user's own (trust.own_unions)
    if store.commit([], unions=[(x, y)]) is None:
        say("already equal: %s = %s (nothing written)" % (a.a, a.b))
        return 0
    say("union %s = %s written to %s (undo: egg split %s %s)" % (display_key(content_hex(x)), display_key(content_hex(y)),
                                                               store.path, display_key(content_hex(x)), display_key(content_hex(y))))
    return 0


def _union_side(v) -> tuple[str, str, object]:
    """What a node named to `egg union` is (in words, and its kind), and the Work or request it is about, if any."""
    from eggshell.core.values import Apply, Op
    from eggshell.graph.turns import tool_occurrence

    if not isinstance(v, Apply):
        return "a recorded text", "text", None
    if v.op is Op.OUTCOME:
        native = tool_occurrence(v)
        key = display_key(content_hex(v.args[0].target))
        if native:
            return "a tool outcome (the TOOL key; its work is %s)" % key, "tool", v.args[0].target
        return "a turn (its answer; its request is %s)" % key, "turn", v.args[0].target
    if v.op is Op.ALL:
        return "a turn (interrupted; its request is %s)" % display_key(content_hex(v.args[0].target)), "turn", v.args[0].target
    return "a %s node (provenance itself)" % v.op.value, v.op.value, None


def cmd_split(a, paths: Paths) -> int:
    """Remove a persistent union (the data stays; only the equality goes)."""
    stores = _stores(a, paths)
    x = _resolve(stores, a.a)
    store = _write_store(a, paths)
    if a.b is not None:
        pairs = [(x, _resolve(stores, a.b))]
    else:
        pairs = [(p, q) for p, q in store.graph.unions() if x in (p, q)]
        if len(pairs) > 1:
            listing = "\n".join("  egg split %s %s" % (display_key(content_hex(p)), display_key(content_hex(q))) for p, q in pairs)
            raise CliError("%s is in %s; name both sides:\n%s" % (a.a, count(len(pairs), "union"), listing), 1)
    if not pairs or store.remove_union(*pairs[0]) is None:
        raise CliError("no union in force for %s in %s (see `egg status`)" % (a.a if a.b is None else "%s %s" % (a.a, a.b), store.path), 1)
    say("split %s %s in %s" % (display_key(content_hex(pairs[0][0])), display_key(content_hex(pairs[0][1])), store.path))
    return 0


def cmd_find(a, paths: Paths) -> int:
    searcher = Searcher(_stores(a, paths))
    cfg = _config.load(paths, os.getcwd())  # what a chat's search here would get
    top_k = a.top_k or cfg.top_k
    hits = searcher.search(" ".join(a.text), top_k, cfg.min_coverage if a.min_coverage is None else a.min_coverage)
    if not hits:
        say("no matching turns")
        return 1
    for h in hits:
        v = searcher.by_id[h.id]
        say("%s  %6.2f  %s  %s" % (h.key, h.score, v.time[:10], _short(Atom.text(v.prompt))))
        if v.answer:
            say("              => %s" % _short(Atom.text(v.answer)))
    return 0


def cmd_forget(a, paths: Paths) -> int:
    """Append a tombstone: every reader stops serving the turn or outcome at once; the purge removes it."""
    from eggshell.runtime import forget

    if (a.key is None) == (a.match is None):
        raise CliError("name what to forget: a KEY (from `egg show`, `egg find` or `egg why`) or --match TEXT")
    if a.match is not None and not a.match.strip():
        raise CliError("--match needs a text that is not blank (it would match every turn)")
    stores = _stores(a, paths)
    if a.match is not None:
        from eggshell.runtime.copies import Needles

        swept = _sweep(paths, Needles.matching(a.match))  # turns not in a store yet: open, private, quarantined
        plans = [(s, forget.by_match(s.graph, a.match)) for s in stores]
        held = _journaled_turns(stores, swept.journal + swept.held)
        plans = [(s, t + [h for h in held.get(s.path, []) if not any(set(h.turns) & set(x.turns) for x in t)]) for s, t in plans]
        if not any(t for _, t in plans) and not (swept.journal or swept.quarantined or swept.log_lines):
            raise CliError("no recorded turn contains %r in %s" % (a.match, ", ".join(s.path for s in stores)), 1)
    else:
        from eggshell.core.identity import resolve_key

        try:
            nid = resolve_key(a.key, {n for s in stores for n in s.graph.nodes})
        except KeyError_ as e:
            raise CliError(str(e), 1)
        plans = [(s, forget.by_key(s.graph, nid)) for s in stores if nid in s.graph.nodes and nid not in s.graph.forgotten()]
        if not plans:
            say("already forgotten: %s (nothing written); `egg compact --purge` removes it from the file" % a.key)
            _scrub_chats(paths, stores)
            return 0
        if not any(t for _, t in plans):
            raise CliError("%s is not a turn, a tool outcome or an evidence key (`egg show %s` says what it is); "
                           "`egg forget --match TEXT` forgets every turn holding a text" % (a.key, a.key), 1)
    for s, targets in plans:
        if not targets:
            continue
        t = s.forget([r for x in targets for r in x.roots], [p for x in targets for p in x.turns])
        from eggshell.search import turnindex

        turnindex.drop(paths.data_root, s.path)  # its terms of the forgotten turn; a store with tombstones is read in full
        for x in targets:
            say("%s %s in %s" % ("forgot" if t is not None else "already forgotten:", x.what, s.path))
    if a.match is not None:
        _say_swept(swept)
    files = " ".join(shlex.quote(s.path) for s, t in plans if t)
    if files:
        say("No reader serves it any more (the warm manager included). Its text stays in the file, the vector cache and "
            "the manager's snapshots until `egg compact --purge %s`." % files)
    _scrub_chats(paths, [s for s, t in plans if t], a.match)
    return 0


def _journaled_turns(stores: list[Store], marked) -> dict[str, list]:
    """Tombstones for the journaled and quarantined turns a --match sweep took, in the store each was going
    to: a save that read the journal before the mark, or `egg recover` of a copy put back, then writes nothing."""
    from eggshell.runtime.forget import Target

    out: dict[str, list] = {}
    by_path = {os.path.realpath(s.path): s for s in stores}
    for m in marked:
        s = by_path.get(os.path.realpath(m.write)) if m.write else None
        if s is not None and m.session and m.turn:
            pair = (content_hex(Atom.text(m.session)), content_hex(Atom.text(m.turn)))
            out.setdefault(s.path, []).append(Target("turn (session %s, turn %s; still open or not saved yet)" % (m.session, m.turn),
                                                     turns=(pair,)))
    return out


def _sweep(paths: Paths, needles):
    """Take the copies outside the stores out of the journal, quarantine/ and the logs (runtime/copies.py)."""
    from eggshell.runtime.copies import sweep

    return sweep(paths.data_root, paths.journal_dir, needles, lambda m: say("egg forget: %s" % m, err=True))


def _say_swept(swept) -> None:
    if swept.journal:
        say("marked %d journaled turn%s forgotten (open or not saved yet; nothing of them will be saved)"
            % (len(swept.journal), "" if len(swept.journal) == 1 else "s"))
    if swept.quarantined:
        say("removed %d quarantined cop%s (quarantine/)" % (swept.quarantined, "y" if swept.quarantined == 1 else "ies"))
    if swept.log_lines:
        say("removed %d log line%s that held it" % (swept.log_lines, "" if swept.log_lines == 1 else "s"))


def _scrub_chats(paths: Paths, stores: list[Store], match: str | None = None) -> None:
    """Clear the last handoff (what `egg graph` prints) of every chat that holds something these stores forgot,
    and take what they forgot out of the journal, quarantine/ and the logs (runtime/copies.py)."""
    from eggshell.runtime.chat import ChatBusy, scrub
    from eggshell.runtime.copies import Needles
    from eggshell.runtime.forget import Forgotten

    gone = Forgotten.of([s.graph for s in stores])
    if match is None:
        _say_swept(_sweep(paths, Needles.forgotten(gone.texts | gone.keys, gone.whole)))
    pages = view.drop_pages(paths)  # `egg view` pages hold copies of recorded text
    if pages:
        say("deleted %d `egg view` page%s under the data root (they held copies; run `egg view` again)" % (pages, "" if pages == 1 else "s"))

    def mentions(text: str) -> bool:
        return gone.mentions(text) or (match is not None and match in text)

    try:
        cleared = scrub(paths.state_dir, mentions, lambda m: say("egg forget: %s" % m, err=True))
    except ChatBusy as e:
        raise CliError("%s: that chat's last handoff still holds it; run this again to clear it" % e, 1)
    if cleared:
        say("cleared the last handoff of %d chat%s that held it" % (cleared, "" if cleared == 1 else "s"))


# -- maintenance -------------------------------------------------------------------------


def cmd_fsck(a, paths: Paths) -> int:
    status = 0
    for path in a.files:
        if not _fsck_one(path):
            status = 1
    return status


def cmd_recover(a, paths: Paths) -> int:
    """Save the turns the save queue kept aside (quarantine/turns/) again; exit 1 if any stays."""
    from eggshell.graph.commitindex import AppendStore
    from eggshell.paths import store_problem
    from eggshell.runtime import quarantine
    from eggshell.runtime.commits import recover
    from eggshell.runtime.turnflow import resolver

    held = quarantine.held_turns(paths.data_root)
    if not held:
        say("no quarantined turns in %s" % quarantine.turns_dir(paths.data_root))
        return 0
    if a.list:
        for h in held:
            say("%s  turn %s  %s\n  why: %s" % (h.path, h.why.get("turn"), h.why.get("time") or "", h.reason))
        say("%s quarantined; `egg recover` saves what can be saved now" % count(len(held), "turn"))
        return 0
    opened: dict[str, object] = {}

    def store_for(path: str):
        if path not in opened:
            why = store_problem(path)
            if why is not None:
                raise UnsafePath(why)
            opened[path] = AppendStore.open(path)
        return opened[path]

    done = recover(paths.data_root, store_for, resolver(paths))
    for r in done:
        say("%s: turn %s: %s" % (os.path.basename(r.path), r.turn, r.why))
    left = sum(1 for r in done if not r.saved)
    say("%s saved, %s left in %s" % (count(len(done) - left, "turn"), count(left, "turn"), quarantine.turns_dir(paths.data_root)))
    return 1 if left else 0


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _refused(path: str) -> str | None:
    """Why fsck will not open `path` at all (missing, a symlink, not a regular file), or None.

    Checked with lstat before any open, so a FIFO never blocks and a symlink is named as one.
    """
    for p in (path, os.path.dirname(os.path.abspath(path))):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            if p == path:
                return "%s: no such file" % path
            continue
        if stat.S_ISLNK(st.st_mode):
            what = "is" if p == path else "is in %s, which is" % p
            return ("%s: %s a symbolic link to %s; Eggshell refuses symlinked stores (check the real path: "
                    "egg fsck %s)" % (path, what, os.readlink(p), os.path.realpath(p)))
        if p == path and not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
            return "%s: is %s, not an .egg file; nothing was read" % (path, kind)
    return None


def _fsck_one(path: str) -> bool:
    """Check one store without changing it; says what it found, True when the store is whole."""
    why = _refused(path)
    if why is not None:
        say(why)
        return False
    s = Store(path)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # never blocks, even if a FIFO was swapped in
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            say("%s: is not a regular file (it changed while being checked); nothing was read" % path)
            return False
        size = os.fstat(fd).st_size
        bad, last = _bad_lines(f, path)
        if not bad:
            f.seek(0)
            try:
                s._read_from(f)
            except EggError as e:
                say(str(e))
                bad = 1
        if bad:
            say("%s: DAMAGED (%s); the file was not changed. Keep a copy; `egg compact` refuses damaged files." % (path, "%d bad line%s" % (bad, "" if bad == 1 else "s")))
            return False
        short = _shortened(s, fd, size, last)
    if short:
        say("%s: %s; the file was not changed" % (path, short))
        return False
    g = s.graph
    say("%s: ok: %s" % (path, ", ".join(count(n, noun) for n, noun in (
        (g.lines, "line"), (len(g.commits), "commit"), (len(turn_views(g)), "turn"), (len(g.root_ids), "root"), (len(g.unions()), "union")))))
    return True


def _bad_lines(f, path: str) -> tuple[int, object]:
    """Report every complete line that is not a record (up to a NUL byte): (how many, the last record)."""
    from eggshell.graph.store import read_until_nul

    data, _ = read_until_nul(f, 0)
    bad, rec = 0, None
    for n, line in enumerate(data[: data.rfind(b"\n") + 1].split(b"\n")[:-1], 1):
        try:
            rec = ef.parse_record(line)
        except ef.RecordError as e:
            say("%s:%d: %s" % (path, n, e))
            bad += 1
    return bad, rec


def _shortened(s: Store, fd: int, size: int, last: object) -> str | None:
    """How a store that loads was cut short, if it was: a torn or zero-filled tail, a lost final
    newline, a last commit cut off at a line boundary, or nothing at all."""
    from eggshell.graph.store import complete_record, only_zeros

    if size == 0:
        return ("DAMAGED: it is empty (0 bytes); a store Eggshell wrote starts with a header line, so it was cut to "
                "nothing, or its first commit never finished")
    end = s._offset
    if s.nul_at is not None:
        zeros = only_zeros(fd, s.nul_at, size)
        return ("DAMAGED: %s of NUL from byte %d %s (a zero-filled or sparse tail); readers stop at byte %d, %s" % (
            count(size - s.nul_at, "byte"), s.nul_at, "to the end" if zeros else "and then other data", s.nul_at,
            "the next commit removes them" if zeros else "and commits are refused until it is repaired by hand"))
    if s.tail_len and complete_record(s, os.pread(fd, s.tail_len, end)):
        return ("SHORTENED: the last line (%s) lost its final newline; it is a complete record and is kept: "
                "readers skip it until the next commit adds the newline" % count(s.tail_len, "byte"))
    if s.tail_len:
        return ("DAMAGED: it ends in the middle of a line (%s after byte %d: a write was cut off); readers "
                "ignore it, the next commit removes it, and what that write held is lost" % (count(s.tail_len, "byte"), end))
    if isinstance(last, ef.NodeRecord):
        return ("DAMAGED: its last line is a node, not a commit: every commit ends with its commit line, so the file "
                "was cut at a line boundary and the commit that wrote those nodes is missing")
    return None


def cmd_compact(a, paths: Paths) -> int:
    for path in a.files:
        if not os.path.exists(path):
            raise CliError("%s: no such file" % path)
        if a.purge:
            _purge(path, paths)
            continue
        before, after = compact(path)
        say("%s: compacted, %s -> %d" % (path, count(before, "line"), after))
    return 0


def _purge(path: str, paths: Paths) -> None:
    """Compact without forgotten content, after removing its copies from the data root (under the store's lock)."""
    from eggshell.graph import commitindex
    from eggshell.runtime import forget

    done: list = []

    def before(g: Graph) -> None:  # while the file still holds the text to look for
        done.append(len(g.hidden))
        gone = forget.Forgotten.of([g])
        done.append(forget.purge_data_root(paths, gone, lambda m: say("egg compact: %s" % m, err=True)))
        forget.remove_leftovers(path)
        commitindex.drop(paths.data_root, path)  # it holds ids of what is purged

    from eggshell.runtime.chat import ChatBusy

    try:
        lines_before, lines_after = compact(path, purge=True, before=before)
    except ChatBusy as e:
        raise CliError("%s: %s was not rewritten; run this again" % (e, path), 1)
    snapshots = forget.remove_snapshots(paths.data_root)  # one a manager wrote meanwhile held the old file
    view.drop_pages(paths)  # a page written since the forget
    roots, p = done
    say("%s: purged %s, %s -> %d" % (path, count(roots, "forgotten record"), count(lines_before, "line"), lines_after))
    say("data root %s: %d journal file%s, %d cached window%s (%d segment%s rewritten), %d chat handoff%s cleared, %d snapshot%s removed"
        % (paths.data_root, p.journal, "" if p.journal == 1 else "s", p.windows, "" if p.windows == 1 else "s",
           p.segments, "" if p.segments == 1 else "s", p.chats, "" if p.chats == 1 else "s",
           p.snapshots + snapshots, "" if p.snapshots + snapshots == 1 else "s"))
    if p.quarantined or p.log_lines:
        say("data root %s: %d quarantined cop%s removed, %d log line%s removed"
            % (paths.data_root, p.quarantined, "y" if p.quarantined == 1 else "ies", p.log_lines, "" if p.log_lines == 1 else "s"))


def cmd_merge(a, paths: Paths) -> int:
    if os.path.exists(a.output) and not a.force:
        raise CliError("%s exists; choose another -o or pass --force to replace it" % a.output)
    n = merge(a.inputs, a.output)
    say("merged %s into %s (%s)" % (", ".join(a.inputs), a.output, count(n, "line")))
    return 0


def cmd_index(a, paths: Paths) -> int:
    """Embed every recorded turn the vector cache lacks, so prompts only embed themselves."""
    from eggshell.search.local import Provider
    from eggshell.search.rank import Settings
    from eggshell.search.searcher import semantic_depth

    cfg = _config.load(paths, os.getcwd())
    if cfg.mode == "lexical" or cfg.semantic_matcher is False:
        say("nothing to do: semantic search is off here (mode = %r, semantic_matcher = %r)" % (cfg.mode, cfg.semantic_matcher))
        return 0
    searcher = Searcher(_stores(a, paths))
    searcher.refresh()
    items = searcher.candidates
    if not items:
        say("nothing to do: no recorded turns")
        return 0
    if isinstance(cfg.semantic_matcher, tuple):
        from eggshell.search.provider import ProviderClient

        with ProviderClient(list(cfg.semantic_matcher), log=lambda m: say(m, err=True)) as client:
            ok = client.index(items)
        say("sent %s to %s%s" % (count(len(items), "turn"), cfg.semantic_matcher[0], "" if ok else " (it failed; see above)"))
        return 0 if ok else 1
    kw = {} if cfg.threshold is None else {"threshold": cfg.threshold}
    provider = Provider(Settings(mode="semantic", top_k=semantic_depth(cfg.top_k), model=cfg.model, **kw), paths.data_root,
                        lambda m: say("egg index: %s" % m, err=True))
    bar = _Progress("embedding")
    n = provider.index(items, bar)
    provider.index_background(bar)  # what prompts are calibrated against: embedded once per model
    bar.done()
    index = provider._index()
    cache = index.cache
    from eggshell.search.vectors import committed_segments

    segments = len(committed_segments(cache.dir))
    if segments > a.compact_over:
        merged = cache.compact()
        say("compacted the vector cache: %s into 1" % count(merged, "segment"))
    say("%s indexed; the vector cache holds %s for %s" % (count(n, "turn"), count(len(cache), "window"), index.encoder.model_id))
    return 0


def _duration(seconds: float) -> str:
    s = int(seconds + 0.5)
    return "%d h %02d min" % (s // 3600, s % 3600 // 60) if s >= 3600 else "%d min %02d s" % (s // 60, s % 60) if s >= 60 else "%d s" % s


class _Progress:
    """A one-line progress bar on stderr when it is a terminal; else a line every 30 s (a
    backfill of 100,000 turns takes hours, and a log must show it moving) and one at the end."""

    EVERY_S = 30.0

    def __init__(self, label: str):
        import time

        self.label = label
        self.tty = sys.stderr.isatty()
        self.last = (0, 0)
        self.clock = time.monotonic
        self.started = self.said = self.clock()

    def __call__(self, done: int, total: int) -> None:
        self.last = (done, total)
        if not self.tty:
            now = self.clock()
            if now - self.said >= self.EVERY_S and done < total:
                self.said = now
                rate = done / max(now - self.started, 1e-9)
                left = "about %s left" % _duration((total - done) / rate) if rate else "time left not known yet"
                print("%s: %d/%s embedded, %.1f a second, %s" % (self.label, done, count(total, "window"), rate, left),
                      file=sys.stderr, flush=True)
        else:
            width = 30
            fill = int(width * done / max(total, 1))
            print("\r%s [%s%s] %d/%s" % (self.label, "#" * fill, "." * (width - fill), done, count(total, "window")), end="", file=sys.stderr, flush=True)

    def done(self) -> None:
        done, total = self.last
        if total:
            print(("\r" if self.tty else "") + "%s: %d/%s embedded" % (self.label, done, count(total, "new window")), file=sys.stderr, flush=True)


def cmd_model_check(a, paths: Paths) -> int:
    """Load the offline default model the way search does and embed one sentence.

    install.sh runs this as its model check, so the check goes through the same code
    (offline, telemetry off) as every later search.
    """
    import time

    from eggshell.search.embed import Encoder, ModelError, default_model_dir

    d = a.dir or default_model_dir(paths.prefix)
    t = time.monotonic()
    enc = Encoder(model_dir=d)
    try:
        v = enc.embed(["hello"])
    except ModelError as e:
        raise CliError(str(e), 1)
    norm = float((v[0] ** 2).sum()) ** 0.5
    if v.shape != (1, 384) or not 0.99 < norm < 1.01:
        raise CliError("%s gave a %s vector of norm %.4f; expected one 384-dim unit vector" % (d, v.shape, norm), 1)
    say("loaded %s from %s offline: 384-dim unit vectors (%.1f s)" % (enc.model_id, d, time.monotonic() - t))
    return 0


def cmd_model(a, paths: Paths) -> int:
    from eggshell.search.embed import Encoder, ModelError, default_model_dir, is_offline_default, missing_file

    if is_offline_default(a.name):
        d = default_model_dir(paths.prefix)
        gone = missing_file(d)
        if gone is not None:
            raise CliError("the offline default model is missing from %s (no %s); run ./install.sh" % (d, gone))
        say("the offline default model is installed at %s (install.sh assembles it; nothing to download)" % d)
        return 0
    enc = Encoder(a.name, allow_download=True)
    use = "Use it with `model = %s` in your config." % json.dumps(a.name)
    hubs = _hubs(a.name)
    unreachable = _unreachable(hubs, HUB_TIMEOUT_S) if hubs else None
    if unreachable is not None:
        # fastembed would retry for 40 s (sleeps of 3, 9 and 27 s) before saying the same.
        if os.path.isdir(enc.cache_dir) and os.listdir(enc.cache_dir):
            here = Encoder(a.name, cache_dir=enc.cache_dir)  # offline: only what an earlier install fetched
            try:
                here.load()
            except ModelError:
                pass
            else:
                say("%s is already installed in %s (%s); its model hub cannot be reached (%s), so nothing was "
                    "downloaded. %s" % (a.name, enc.cache_dir, count(here.dim, "dimension"), unreachable, use))
                return 0
        raise CliError("could not install %s: its model hub cannot be reached from here (%s, within %g s).\n"
                       "Nothing was changed; the default model stays in use. Run this where %s can be reached, or "
                       "point HF_ENDPOINT at a mirror (or HTTPS_PROXY at a proxy) that can reach it."
                       % (a.name, unreachable, HUB_TIMEOUT_S, " or ".join(_host(h) for h in hubs)), 1)
    say("downloading %s into %s (needs access to its model hub) ..." % (a.name, enc.cache_dir))
    try:
        enc.load()
    except ModelError as e:
        raise CliError("could not install %s: %s\nNothing was changed; the default model stays in use." % (a.name, str(e).split(" (install it with")[0]), 1)
    say("installed %s (%s). %s" % (a.name, count(enc.dim, "dimension"), use))
    return 0


HUB_TIMEOUT_S = 3.0  # a hub that has not answered in this long is not reachable from here


def _hubs(name: str) -> list[str]:
    """The URLs fastembed would fetch model `name` from ([] for a name it does not know: it says so at once)."""
    from eggshell.search.embed import quiet_runtime

    quiet_runtime(os.environ)  # before fastembed (and the model runtime) is imported
    from fastembed import TextEmbedding

    for m in TextEmbedding.list_supported_models():
        if str(m.get("model", "")).lower() == name.lower():
            src = m.get("sources") or {}
            return ([os.environ.get("HF_ENDPOINT") or "https://huggingface.co"] if src.get("hf") else []) + \
                ([src["url"]] if src.get("url") else [])
    return []


def _host(url: str) -> str:
    import urllib.parse

    return urllib.parse.urlsplit(url).hostname or url


def _unreachable(urls: list[str], timeout: float) -> str | None:
    """Why none of `urls` answers an HTTP request, or None when one does (any status will do).

    Asked with httpx, the client huggingface_hub downloads with, and like it from the environment
    (HTTPS_PROXY, NO_PROXY, SSL_CERT_FILE): a hub only that client cannot reach is no use either.
    """
    import httpx

    why = []
    for url in urls:
        try:
            httpx.head(url, timeout=timeout)
            return None
        except httpx.HTTPError as e:
            why.append("%s: %s" % (_host(url), str(e) or type(e).__name__))
    return "; ".join(why)


def _trust_target(path: str, paths: Paths, verb: str):
    """The store `egg trust`/`egg untrust` acts on, and the ledger to write (refusing a damaged one)."""
    from eggshell.graph import trust

    if not os.path.isfile(path):
        raise CliError("%s: no such store (give the path of a .egg file, e.g. .eggs/work.egg)" % path, 1)
    graph = Store.open(path).graph  # EggError (exit 1) names a damaged file and line
    if graph.header is None:
        raise CliError("%s: holds no records; nothing to %s" % (path, verb), 1)
    ledger = trust.load(paths.data_root)
    if ledger.problem is not None:
        raise CliError("%s\nMove it aside (`mv %s %s.damaged`), then `egg trust` each store of yours again; until then no "
                       "store is trusted and reuse is advice only" % (ledger.problem, ledger.path, ledger.path), 1)
    return graph, trust


def cmd_trust(a, paths: Paths) -> int:
    """Vouch for every record a store holds now: its outcomes may then complete a call (deny it)."""
    graph, trust = _trust_target(a.file, paths, "trust")
    _vouch(trust, paths, graph, "+")
    say("trusted %s: its %d commit%s may now complete calls (stand in for running them again); "
        "`egg untrust %s` undoes this" % (a.file, len(graph.commits), "" if len(graph.commits) == 1 else "s", a.file))
    return 0


def _vouch(trust, paths: Paths, graph, sign: str) -> None:
    try:
        trust.record(paths.data_root, sorted(graph.commits), sign)
    except trust.TrustError as e:
        raise CliError("%s; nothing was changed" % e, 1)


def cmd_untrust(a, paths: Paths) -> int:
    """Withdraw trust from every record a store holds now: its outcomes are advice only from here on."""
    graph, trust = _trust_target(a.file, paths, "untrust")
    _vouch(trust, paths, graph, "-")
    n = len(graph.commits)
    say("untrusted %s: its %s %s advice only now (never deny a call); turns Eggshell records into it from "
        "now on are yours and trusted" % (a.file, count(n, "commit"), "is" if n == 1 else "are"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Eggshell: local memory for coding agents. Records agent turns in .egg stores and hands relevant prior work back.",
        epilog="Run `egg COMMAND --help` for details. Docs: docs/ in the Eggshell source.",
    )
    p.add_argument("--version", action="version", version="eggshell %s" % __version__)
    p.add_argument("--chat", metavar="ID", help="the chat in-chat controls act on (default: $CODEX_THREAD_ID, else $EGGSHELL_CHAT)")
    p.set_defaults(fn=controls.cmd_bare)  # `egg` alone: this chat's status line, or `egg status` outside a chat
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("init", help="start recording a project: write .eggshell.toml and .eggs/")
    s.add_argument("dir", nargs="?", default=".", help="project directory (default: here)")
    s.set_defaults(fn=cmd_init)

    for name, fn, text in (("install", cmd_install, "register Eggshell's hooks with a host"), ("uninstall", cmd_uninstall, "remove Eggshell's hooks from a host, keeping all others")):
        s = sub.add_parser(name, help=text)
        s.add_argument("host", choices=registry.NAMES, help="the agent host")
        for h in registry.every():  # each host names its own settings file's option
            s.add_argument(h.option, metavar=h.option_metavar, help="%s: %s" % (h.name, h.option_help))
        s.set_defaults(fn=fn)

    def stores_opt(s):
        s.add_argument("--egg", action="append", metavar="PATH", help="a store to read (repeatable; default: this project's stores)")

    s = sub.add_parser("show", help="print a recorded turn, tool outcome or node by its key")
    s.add_argument("key", help="a display key (12 hex characters) or any unique prefix of an id")
    stores_opt(s)
    s.set_defaults(fn=cmd_show)

    s = sub.add_parser("union", help="declare two recorded Works equal for reuse (written to this project's store)",
                       description="Declare two recorded Works equal, for good: reuse then treats a call of one as a call "
                       "of the other (its recorded outcome may stand in for running it). A Work is what a tool call ran "
                       "(its tool and input) or a request; it carries no session, turn or call id, so two of them may be "
                       "joined, while a tool outcome or a turn (the keys `egg find` and the TOOL lines print) may not. "
                       "`egg show TURN` prints each Work's key: [work KEY] on every TOOL line, [request KEY] on REQUEST. "
                       "`egg split A B` removes the union again. Exit 0 when written (or already in force), 1 when a key "
                       "names nothing or something that cannot be joined, 2 on a usage error.")
    s.add_argument("a", help="key of one Work: a [work KEY] or [request KEY] from `egg show TURN`")
    s.add_argument("b", help="key of the other")
    stores_opt(s)
    s.set_defaults(fn=cmd_union)

    s = sub.add_parser("split", help="remove a union made with `egg union` (nothing else is removed)")
    s.add_argument("a", help="key of one side")
    s.add_argument("b", nargs="?", help="key of the other side (needed when the first is in several unions)")
    stores_opt(s)
    s.set_defaults(fn=cmd_split)

    s = sub.add_parser("find", help="search recorded turns")
    s.add_argument("text", nargs="+", help="what to look for")
    s.add_argument("--top-k", type=stage.positive_int,
                   help="most turns to list (default: `top_k` in the config, else %d)" % _config.DEFAULT_TOP_K)
    s.add_argument("--min-coverage", type=stage.fraction,
                   help="least share of the query some turn must hold for any hit (default: `min_coverage` in the config, else %s)"
                        % _config.DEFAULT_MIN_COVERAGE)
    stores_opt(s)
    s.set_defaults(fn=cmd_find)

    s = sub.add_parser("forget", help="hide a recorded turn or tool outcome from every reader at once (`egg compact --purge` then removes it)")
    s.add_argument("key", nargs="?", help="a turn's key (egg show/find/why), a tool outcome's (TOOL KEY in egg show) or an evidence key")
    s.add_argument("--match", metavar="TEXT", help="forget every turn whose prompt, answer or tool calls contain TEXT (case-sensitive)")
    stores_opt(s)
    s.set_defaults(fn=cmd_forget)

    s = sub.add_parser("fsck", help="check .egg files; exit 1 on damage (nothing is ever repaired)")
    s.add_argument("files", nargs="+", metavar="FILE")
    s.set_defaults(fn=cmd_fsck)

    s = sub.add_parser("recover", help="save again the turns the save queue kept aside (egg doctor counts them); exit 1 if any stays",
                       description="A turn that could not be saved is never deleted: it is kept whole in the data root's "
                                   "quarantine/turns/ with the reason. This saves each one again, exactly as the save queue "
                                   "would, and removes the copy of each that reached its store.")
    s.add_argument("--list", action="store_true", help="only list the quarantined turns and why each was kept aside")
    s.set_defaults(fn=cmd_recover)

    s = sub.add_parser("compact", help="rewrite a store without duplicate or orphan lines (atomic)")
    s.add_argument("files", nargs="+", metavar="FILE")
    s.add_argument("--purge", action="store_true",
                   help="also remove what `egg forget` hid: from the file, the vector cache, the journal, chat state and snapshots")
    s.set_defaults(fn=cmd_compact)

    s = sub.add_parser("merge", help="combine stores into a new one (git's union merge driver also works: *.egg merge=union)")
    s.add_argument("inputs", nargs="+", metavar="IN")
    s.add_argument("-o", "--output", required=True, metavar="OUT")
    s.add_argument("--force", action="store_true", help="replace OUT if it exists")
    s.set_defaults(fn=cmd_merge)

    s = sub.add_parser("index", help="embed every recorded turn the vector cache lacks (with progress)")
    stores_opt(s)
    s.add_argument("--compact-over", type=int, default=64, metavar="N", help="compact the vector cache when it has more than N segments (default %(default)s)")
    s.set_defaults(fn=cmd_index)

    s = sub.add_parser("model", help="manage embedding models")
    msub = s.add_subparsers(dest="model_command", metavar="ACTION")
    msub.required = True
    m = msub.add_parser("install", help="download a fastembed model where a model hub can be reached",
                        description="Download a fastembed text model into Eggshell's model directory. The model hub "
                                    "(huggingface.co, or $HF_ENDPOINT; through $HTTPS_PROXY when set) is asked first, "
                                    "with a %g s timeout; when it cannot be reached this fails at once, changing "
                                    "nothing (a model an earlier install fetched is reported as installed). Exit 0 when "
                                    "installed, 1 when it could not be, 2 on a usage error." % HUB_TIMEOUT_S)
    m.add_argument("name", help="a fastembed text model, e.g. sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2")
    m.set_defaults(fn=cmd_model)
    m = msub.add_parser("check", help="load the offline default model (no network) and embed one sentence")
    m.add_argument("--dir", metavar="DIR", help="the model directory (default: the installed one)")
    m.set_defaults(fn=cmd_model_check)

    s = sub.add_parser("status", help="show the paths, config and stores in force here (and which are trusted)")
    s.set_defaults(fn=cmd_status)

    trust_doc = ("Only a store's trusted records may complete a call (deny it and hand over the recorded output); "
                 "the rest is advice. Eggshell trusts what it records on this machine; a store that came from "
                 "elsewhere (a cloned repository's, a colleague's) is trusted only once you say so. Exit 0 when "
                 "done, 1 when FILE is no readable store or the trust ledger is damaged, 2 on a usage error.")
    s = sub.add_parser("trust", help="let a store's records complete calls (a store you know is yours)", description=trust_doc)
    s.add_argument("file", metavar="FILE", help="the .egg file, e.g. .eggs/work.egg")
    s.set_defaults(fn=cmd_trust)
    s = sub.add_parser("untrust", help="make a store's records advice only (they never deny a call)", description=trust_doc)
    s.add_argument("file", metavar="FILE", help="the .egg file, e.g. .eggs/work.egg")
    s.set_defaults(fn=cmd_untrust)

    # In-chat controls (`!egg ...` in Codex): they act on one chat, named by --chat ID,
    # $CODEX_THREAD_ID (set by Codex for ! commands) or $EGGSHELL_CHAT.
    def control(name, fn, text):
        c = sub.add_parser(name, help=text)
        c.add_argument("--chat", metavar="ID", default=argparse.SUPPRESS, help="the chat (default: $CODEX_THREAD_ID, else $EGGSHELL_CHAT)")
        c.set_defaults(fn=fn)
        return c

    control("on", controls.cmd_on, "chat: turn memory on for this chat")
    control("off", controls.cmd_off, "chat: turn memory off for this chat (works even with a broken config)")
    control("use", controls.cmd_use, "chat: use a profile from the config for this chat").add_argument("profile", help="a profile name, e.g. work, private, off")
    control("next", controls.cmd_next, "chat: use a profile for the next turn only").add_argument("profile", help="a profile name, e.g. private (read-only) or off")
    control("keep", controls.cmd_keep, "chat: save this chat's current or last turn now (also a read-only one)").add_argument(
        "egg", nargs="?", help="an egg name from [eggs] (default: the turn's write egg)")
    control("drop", controls.cmd_drop, "chat: do not save this chat's current turn")
    control("diff", controls.cmd_diff, "chat: what saving the current turn would write (writes nothing)").add_argument(
        "egg", nargs="?", help="an egg name from [eggs] to compare against (default: the turn's write egg)")
    control("graph", controls.cmd_graph, "chat: the handoff text this chat was last given")
    control("why", controls.cmd_why, "chat: why that handoff was selected")
    control("inspect", controls.cmd_inspect, "chat: the status line and every path this chat uses")
    view.register(sub)
    importer.register(sub)
    s = sub.add_parser("doctor", help="check the installation, hooks, config, model and data root; exit 1 on a problem")
    s.set_defaults(fn=doctor.cmd_doctor)
    return p


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    paths = from_env()
    try:
        check_data_root(paths.data_root)
        return a.fn(a, paths)
    except UnsafePath as e:
        say("%s: %s" % (PROG, e), err=True)
        return 2
    except CliError as e:
        say("%s: %s" % (PROG, e), err=True)
        return e.status
    except (EggError, _config.ConfigError) as e:
        say("%s: %s" % (PROG, e), err=True)
        return 1 if isinstance(e, EggError) else 2
    except BrokenPipeError:
        raise  # `egg show KEY | head`: not an error (__main__ ends it quietly)
    except OSError as e:
        say("%s: %s" % (PROG, e), err=True)
        return 2
