"""`egg forget` and `egg compact --purge`: what a key or a text names, and every copy of it.

What is forgotten (docs/privacy.md#deleting-data says the same to users):

- a turn (its key as `egg show`, `egg find` and `egg why`'s `retrieved` print it, or its
  Receipt's): every root of that (session, turn): its tool Outcomes, its answer Outcome,
  its Receipt, and its decomposition (an All, hidden once every Receipt pinning it is),
  including roots the turn commits later;
- a tool Outcome (a `TOOL KEY` of `egg show`, the `[KEY]` of a handoff's `Call`): that call's
  Work -> output relation, wherever it appears (the turn's view, search text, the reuse
  workspace). The turn's prompt and answer stay, and so does the command line inside the
  turn's decomposition and Receipt; forget the turn to hide those;
- an evidence key (`egg why`'s `evidence KEY`: an output): every Outcome whose output it is,
  each as above (a tool call, or the turn whose answer it is);
- `--match TEXT`: every turn any of whose texts (prompt, answer, a tool's name, input or
  output, its session, turn, call ids and working directory) contains TEXT, case-sensitive.

A tombstone names only content ids. Purging then removes every node only forgotten
roots reach, and every copy the data root holds: the journal files of those turns (an
open one is marked forgotten, so its Stop saves nothing), their quarantined turns and
events and the log lines holding their texts (copies.py), the vector-cache windows cut
from any text those turns ever had, the last handoff of a chat that mentions them, and
the warm manager's snapshots.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

from eggshell.core.identity import content_hex, display_key
from eggshell.graph.records import TurnView, _native, searchable_text, turn_views
from eggshell.graph.store import Graph, _pinned_alls, turn_key
from eggshell.graph.turns import INTERRUPTED, RECEIPT_MARK, REMAINDER_MARKER
from eggshell.core.values import Apply, Atom, Op, Value, walk

MENTION_MIN = 8  # shorter forgotten texts ("ok", "0\n") are too common to clear a chat's handoff for
LINE_MIN = 16  # a cached window holding a whole forgotten line this long is purged even if no known form has it


@dataclass(frozen=True)
class Target:
    """One thing to forget: a whole turn (a (session, turn) Atom id pair) or single roots."""

    what: str  # what `egg forget` prints
    roots: tuple[str, ...] = ()
    turns: tuple[tuple[str, str], ...] = ()


def _text(v: Value) -> str:
    return (v.as_text() or "") if isinstance(v, Atom) else ""


def _turn_label(g: Graph, pair: tuple[str, str], views: dict[tuple[str, str], TurnView]) -> str:
    v = views.get(pair)
    if v is None:
        s, t = g.nodes.get(pair[0]), g.nodes.get(pair[1])
        return "turn (session %s, turn %s; not answered)" % (_text(s) if s else "?", _text(t) if t else "?")
    return "turn %s (session %s, turn %s, %s; %d tool call%s)" % (v.key, v.session, v.turn, v.time, len(v.tools),
                                                                 "" if len(v.tools) == 1 else "s")


def _views_by_pair(g: Graph) -> dict[tuple[str, str], TurnView]:
    return {(content_hex(Atom.text(v.session)), content_hex(Atom.text(v.turn))): v for v in turn_views(g)}


def _receipts_pinning(g: Graph, all_id: str) -> list[str]:
    return [r for r in g.root_ids if all_id in _pinned_alls(g.nodes[r])]


def _targets_of_root(g: Graph, rid: str, views) -> list[Target]:
    v = g.nodes[rid]
    if isinstance(v, Apply) and v.op is Op.ALL:
        pairs = [turn_key(g.nodes[r]) for r in _receipts_pinning(g, rid)]
        if pairs:
            return [Target(_turn_label(g, p, views), turns=(p,)) for p in dict.fromkeys(pairs)]
        return [Target("decomposition %s" % display_key(rid), roots=(rid,))]
    pair = turn_key(v)
    if isinstance(v, Apply) and v.op is Op.OUTCOME and _native(v) is not None:
        name = _text(v.args[0].target).partition("\n")[0]
        owner = views.get(pair)
        return [Target("tool call %s (%s) of %s" % (display_key(rid), name, "turn %s" % owner.key if owner else "an unanswered turn"),
                       roots=(rid,))]
    if pair is not None:
        return [Target(_turn_label(g, pair, views), turns=(pair,))]
    return [Target("record %s" % display_key(rid), roots=(rid,))]


def by_key(g: Graph, nid: str) -> list[Target]:
    """What forgetting node `nid` of this graph means (see the module docstring); [] if nothing."""
    views = _views_by_pair(g)
    if nid in g.root_ids:
        return _targets_of_root(g, nid, views)
    v = g.nodes.get(nid)
    if not isinstance(v, Atom):
        return []
    out: list[Target] = []
    for rid in g.root_ids:  # an evidence key: the Outcomes whose output it is
        r = g.nodes[rid]
        if isinstance(r, Apply) and r.op is Op.OUTCOME and len(r.args) > 1 and content_hex(r.args[1].target) == nid:
            out.extend(t for t in _targets_of_root(g, rid, views) if t not in out)
    return out


def _searched_text(v: Atom) -> str:
    """The part of an Atom a --match looks at: none of Eggshell's own fixed sentences."""
    t = v.as_text()
    if t is None or t in (RECEIPT_MARK, INTERRUPTED):
        return ""
    return t[len(REMAINDER_MARKER):] if t.startswith(REMAINDER_MARKER) else t


def by_match(g: Graph, text: str) -> list[Target]:
    """Every turn (and turnless root) whose texts contain `text`."""
    hit = {nid for nid, v in g.nodes.items() if isinstance(v, Atom) and text in _searched_text(v)}
    if not hit:
        return []
    views = _views_by_pair(g)
    reaches: dict[str, bool] = {}

    def reaches_hit(v: Value) -> bool:
        for node in walk(v):  # children first: a parent's answer is known when it comes
            h = content_hex(node)
            if h not in reaches:
                reaches[h] = h in hit or (isinstance(node, Apply) and any(reaches[content_hex(r.target)] for r in node.args))
        return reaches[content_hex(v)]

    out: list[Target] = []
    for rid in g.root_ids:
        if reaches_hit(g.nodes[rid]):
            for t in _targets_of_root(g, rid, views):
                if t.turns and t.roots == () and t not in out:
                    out.append(t)
                elif not t.turns:  # a single root: match the whole turn it belongs to, if it has one
                    pair = turn_key(g.nodes[rid])
                    t = Target(_turn_label(g, pair, views), turns=(pair,)) if pair is not None else t
                    if t not in out:
                        out.append(t)
    return out


# -- what a purge must find elsewhere ---------------------------------------------------------


@dataclass(frozen=True)
class Forgotten:
    """Everything forgotten roots hold, gathered from graphs before their purge."""

    keys: frozenset[str] = frozenset()  # display keys of forgotten nodes
    texts: frozenset[str] = frozenset()  # their texts (MENTION_MIN or longer)
    turns: frozenset[tuple[str, str]] = frozenset()  # (session, turn) of turns with forgotten roots
    forms: tuple[str, ...] = ()  # every searchable text those turns ever had
    whole: frozenset[tuple[str, str]] = frozenset()  # (session, turn) of turns forgotten whole, not a call of them

    @staticmethod
    def of(graphs: list[Graph]) -> "Forgotten":
        keys: set[str] = set()
        texts: set[str] = set()
        turns: set[tuple[str, str]] = set()
        forms: list[str] = []
        whole: set[tuple[str, str]] = set()
        for g in graphs:
            for sid, tid in g.forgotten_turns:
                s, t = g.nodes.get(sid), g.nodes.get(tid)
                if isinstance(s, Atom) and isinstance(t, Atom):
                    whole.add((_text(s), _text(t)))
            for nid in g.forgotten() | set(g.hidden):
                keys.add(display_key(nid))
                v = g.nodes[nid]
                if isinstance(v, Atom) and len(_searched_text(v)) >= MENTION_MIN:
                    texts.add(_searched_text(v))
            pairs = {p for p in (turn_key(g.nodes[r]) for r in g.hidden) if p is not None}
            for p in pairs:
                s, t = g.nodes.get(p[0]), g.nodes.get(p[1])
                if isinstance(s, Atom) and isinstance(t, Atom):
                    turns.add((_text(s), _text(t)))
            forms.extend(_forms(g, pairs))
        return Forgotten(frozenset(keys), frozenset(texts), frozenset(turns), tuple(dict.fromkeys(forms)), frozenset(whole))

    def mentions(self, s: str) -> bool:
        return bool(s) and (any(k in s for k in self.keys) or any(t in s for t in self.texts))

    def window_dropper(self) -> Callable[[str], bool]:
        """Whether a cached window was cut from a forgotten turn's text: a substring of one of its
        forms, or (should a form be missing: another version's text) holding a whole line of one."""
        joined = "\0\0".join(self.forms)
        lines = {ln for t in self.texts for ln in t.splitlines() if len(ln.strip()) >= LINE_MIN}

        def drop(w: str) -> bool:
            return bool(w) and (w in joined or any(ln in lines for ln in w.splitlines()))

        return drop


def _forms(g: Graph, pairs: set[tuple[str, str]]) -> list[str]:
    """Each searchable text these turns could have been embedded with, before anything was forgotten.

    A running turn is saved (and embedded) as interrupted after each few calls, so every
    prefix of its calls counts, in call order (as saved) and grouped by Work (as a store
    shows it), each without the answer and the whole turn with it.
    """
    if not pairs:
        return []
    every = dict(sorted({**g.root_ids, **g.hidden}.items(), key=lambda kv: (kv[1].time, kv[1].roots.index(kv[0]))))
    order = {r: i for i, r in enumerate(every)}
    whole = SimpleNamespace(root_ids=every, nodes=g.nodes, path=g.path)
    out: list[str] = []
    for v in turn_views(whole):
        if (content_hex(Atom.text(v.session)), content_hex(Atom.text(v.turn))) not in pairs:
            continue
        calls = sorted(v.tools, key=lambda t: order.get(t.id, len(order)))
        for k in range(len(calls) + 1):
            for tools in (calls[:k], _grouped(calls[:k])):
                for answer in ((None, v.answer) if k == len(calls) else (None,)):
                    out.append(searchable_text(TurnView(v.id, v.session, v.turn, v.cwd, v.prompt, answer, tuple(tools), v.time, v.store)))
    return list(dict.fromkeys(out))


def _grouped(tools: list) -> list:
    works = list(dict.fromkeys(t.work for t in tools))
    return sorted(tools, key=lambda t: works.index(t.work))


# -- the data root ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Purged:
    journal: int
    chats: int
    windows: int
    segments: int
    snapshots: int
    quarantined: int = 0  # quarantined turns removed and quarantined event lines dropped
    log_lines: int = 0  # lines of hook.log, run/manager.log and the matcher trace


def purge_data_root(paths, f: Forgotten, log: Callable[[str], None]) -> Purged:
    """Remove what the data root holds of forgotten turns (see the module docstring).

    A forgotten turn still open in its chat is marked forgotten in the journal rather than
    deleted (journal.py says why); the journal, the quarantine and the logs are swept
    as `egg forget` sweeps them (copies.py).
    """
    from eggshell.runtime.chat import scrub
    from eggshell.runtime.copies import Needles, sweep
    from eggshell.runtime.journal import Journal, forgotten, sealed
    from eggshell.search.vectors import purge, vectors_root

    journal = Journal(paths.journal_dir)
    removed = 0
    for session, turn in sorted(f.turns):
        p = journal.turn_path(session, turn)
        events = journal.read_file(p)
        if events and journal.is_current(p) and sealed(events) is None:  # still open in its chat
            if (session, turn) in f.whole and not forgotten(events):
                journal.mark_forgotten(p)
                removed += 1
            continue  # only a call of it forgotten: its save leaves that call out (the store's tombstone)
        try:
            os.unlink(p)
            removed += 1
        except FileNotFoundError:
            pass
    swept = sweep(paths.data_root, paths.journal_dir, Needles.forgotten(f.texts | f.keys, f.whole), log)
    chats = scrub(paths.state_dir, f.mentions, log)
    windows, segments = purge(vectors_root(paths.data_root), f.window_dropper(), log) if f.forms or f.texts else (0, 0)
    from eggshell.search.turnindex import drop_all

    drop_all(paths.data_root)  # the search indexes hold forgotten turns' terms: rebuilt from the purged stores
    return Purged(removed + len(swept.journal), chats, windows, segments, remove_snapshots(paths.data_root),
                  swept.quarantined, swept.log_lines)


def remove_snapshots(data_root: str) -> int:
    """The warm manager's snapshots hold copies of whole stores: remove them all (the next manager writes new ones)."""
    from eggshell.paths import remove_files_in

    return remove_files_in(os.path.join(data_root, "run", "snapshots"))


def remove_leftovers(path: str) -> int:
    """Temporary files of an interrupted compaction or merge beside a store (they hold its text)."""
    d, base = os.path.split(os.path.abspath(path))
    n = 0
    for name in os.listdir(d):
        if name.startswith(base + ".tmp-"):
            try:
                os.unlink(os.path.join(d, name))
                n += 1
            except FileNotFoundError:
                pass
    return n
