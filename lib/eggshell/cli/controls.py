"""In-chat controls: `!egg on|off|use|next|keep|drop|diff|graph|why|inspect|doctor`.

Codex runs `!egg ...` as a shell command, never shown to the model, with the chat's id in
CODEX_THREAD_ID; Claude Code has no such variable, so EGGSHELL_CHAT or `--chat ID` name
the chat there. Every command prints one line (or a block) and exits 0, or prints
`egg: ...` on stderr and exits 1. `egg off` reads neither the config nor the chat's
state, so it works when either is broken.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from typing import Mapping

from eggshell import __version__
from eggshell.cli.common import PROG, CliError, count, say
from eggshell import config as _config
from eggshell.runtime.chat import Chat, ChatBusy, ChatControl
from eggshell.runtime.journal import Journal, turn_record
from eggshell.graph.records import turn_views
from eggshell.graph.store import Store
from eggshell.hosts import registry
from eggshell.paths import PROJECT_CONFIG, Paths

NO_CHAT = "no chat: run this inside Codex as !egg ... (CODEX_THREAD_ID is unset), or pass --chat ID"


def _fail(msg: str) -> Exception:
    return CliError(msg, 1)


def _control(fn):
    """A chat control: a broken config or a busy chat is `egg: ...` and exit 1, like every control error."""

    @functools.wraps(fn)
    def run(a, paths: Paths, env: Mapping[str, str] | None = None) -> int:
        try:
            return fn(a, paths, os.environ if env is None else env)
        except (_config.ConfigError, ChatBusy) as e:
            raise _fail(str(e)) from None

    return run


def chat_id(a, env: Mapping[str, str]) -> str | None:
    """The chat a control acts on: --chat, else the chat id a host sets for the agent's commands
    (Codex's CODEX_THREAD_ID: hosts.base.Host.chat_env), else EGGSHELL_CHAT."""
    hosts = (env.get(h.chat_env) for h in registry.every() if h.chat_env)
    return getattr(a, "chat", None) or next((v for v in hosts if v), None) or env.get("EGGSHELL_CHAT") or None


def _need_chat(a, env: Mapping[str, str]) -> str:
    session = chat_id(a, env)
    if session is None:
        raise _fail(NO_CHAT)
    return session


def _load(paths: Paths, env: Mapping[str, str]) -> _config.Config:
    try:
        return _config.load(paths, os.getcwd(), env=env)
    except _config.ConfigError as e:
        raise _fail(str(e)) from None


def _note(msg: str) -> None:
    say("%s: %s" % (PROG, msg), err=True)


def _chat(paths: Paths, session: str) -> Chat:
    return Chat(paths.state_dir, session, _note)  # e.g. an unreadable state that was set aside


def _short(turn: str | None) -> str:
    return (turn or "none")[:8]


# -- the turn a control acts on ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Journaled:
    """The chat's current (or last) turn as the journal holds it."""

    turn: str
    path: str
    events: tuple[dict, ...]

    @property
    def prompt(self) -> dict | None:
        return next((e for e in self.events if e.get("event") == "prompt"), None)

    @property
    def tools(self) -> list[dict]:
        return list({e.get("id"): e for e in self.events if e.get("event") == "tool"}.values())

    @property
    def sealed(self) -> bool:
        return any(e.get("event") == "stop" for e in self.events)

    @property
    def record(self) -> dict | None:
        return turn_record(list(self.events), None)


def _journaled(paths: Paths, session: str, ctl: ChatControl) -> Journaled | None:
    journal = Journal(paths.journal_dir)
    for turn in dict.fromkeys(t for t in (journal.current(session), ctl.last_turn) if t):
        events = journal.read(session, turn)
        if events:
            return Journaled(turn, journal.turn_path(session, turn), tuple(events))
    return None


# -- the status line ----------------------------------------------------------------------


def _egg_names(cfg: _config.Config, name: str) -> tuple[list[str], str]:
    """(what the profile reads, what it writes) as the user named them."""
    prof = cfg.profile(name)
    eggs = cfg.egg_paths
    read = [n for n in dict.fromkeys(([prof.write] if prof.write else []) + list(prof.read)) if n in eggs]
    if prof.legacy_read and cfg.project_root is not None:
        extra = [os.path.normpath(os.path.join(cfg.project_root, os.path.expanduser(p))) for p in cfg.read]
        read += [os.path.relpath(p, cfg.project_root) for p in dict.fromkeys(extra) if p not in {eggs[n] for n in read}]
    write = prof.write if prof.write in eggs else "read-only"
    return read, write


def status_line(cfg: _config.Config, ctl: ChatControl, j: Journaled | None) -> str:
    """One line a person reads in the middle of a chat: on or off, then what the profile does in words."""
    name = ctl.profile or cfg.default
    on = ctl.enabled and cfg.enabled
    line = "egg %s: profile %s %s" % ("on" if on else "off", name, _does(cfg, name))
    if ctl.next_profile:
        line += "; the next turn uses %s" % ctl.next_profile
    if j is None:
        line += "; no turn journaled yet"
    else:
        state = "dropped" if j.turn in ctl.dropped else "finished" if j.sealed else "open"
        line += "; turn %s: %s journaled, %s" % (_short(j.turn), count(len(j.tools), "tool call"), state)
    if ctl.corrupt:
        line += "  [chat state was unreadable: memory is off until `egg on`]"
    elif not cfg.enabled:
        line += "  [enabled = false in %s]" % ", ".join(cfg.sources)
    elif not ctl.enabled:
        line += "  [memory is off for this chat until `egg on`]"
    return line


def cmd_bare(a, paths: Paths, env: Mapping[str, str] | None = None) -> int:
    """`egg` alone: this chat's status line, or outside a chat the paths and stores (`egg status`)."""
    env = os.environ if env is None else env
    session = chat_id(a, env)
    if session is None:
        return cmd_status(a, paths)
    cfg = _load(paths, env)
    ctl = _chat(paths, session).load()
    say(status_line(cfg, ctl, _journaled(paths, session, ctl)))
    return 0


# -- on / off / use / next ------------------------------------------------------------------


@_control
def cmd_on(a, paths: Paths, env: Mapping[str, str]) -> int:
    session = _need_chat(a, env)
    chat = _chat(paths, session)
    was = chat.peek()
    chat.turn_on()
    corrupt = was is not None and was.corrupt
    say("egg on (memory enabled for this chat%s)" % ("; the profile is the config's default again" if corrupt else ""))
    return 0


@_control
def cmd_off(a, paths: Paths, env: Mapping[str, str]) -> int:
    session = _need_chat(a, env)
    _chat(paths, session).turn_off()  # reads neither the config nor the old state
    say("egg off (memory disabled for this chat: nothing is read, recorded or sent until `egg on`)")
    return 0


def _known_profile(cfg: _config.Config, name: str) -> None:
    try:
        cfg.profile(name)
    except _config.ConfigError as e:
        raise _fail(str(e)) from None


def _does(cfg: _config.Config, name: str) -> str:
    """What a profile does with a turn, in words: where it records (what matters most), then what it reads."""
    try:
        read, write = _egg_names(cfg, name)
    except _config.ConfigError:
        return "is not in the config any more (so the default %s applied)" % cfg.default
    records = "records nothing" if write == "read-only" else "records each turn to %s" % write
    return "%s and reads %s" % (records, ", ".join(read) if read else "nothing")


@_control
def cmd_use(a, paths: Paths, env: Mapping[str, str]) -> int:
    session = _need_chat(a, env)
    cfg = _load(paths, env)
    _known_profile(cfg, a.profile)
    old: list[ChatControl] = []

    def choose(c: ChatControl) -> ChatControl:
        old.append(c)  # the state replaced, read under the same lock
        return replace(c, profile=a.profile)

    ctl = _chat(paths, session).update(choose)
    was = old[0].profile or cfg.default
    if was == a.profile:
        say("egg: this chat already uses profile %s: it %s (nothing changed)%s" % (a.profile, _does(cfg, a.profile), _off_note(ctl)))
        return 0
    say("egg: from the next prompt on, this chat %s (profile %s; was %s, which %s)%s"
        % (_does(cfg, a.profile), a.profile, was, _does(cfg, was), _off_note(ctl)))
    return 0


@_control
def cmd_next(a, paths: Paths, env: Mapping[str, str]) -> int:
    session = _need_chat(a, env)
    cfg = _load(paths, env)
    _known_profile(cfg, a.profile)
    ctl = _chat(paths, session).update(lambda c: replace(c, next_profile=a.profile))
    say("egg next %s (the next turn only; then %s again)%s" % (a.profile, ctl.profile or cfg.default, _off_note(ctl)))
    return 0


def _off_note(ctl: ChatControl) -> str:
    return "; memory is off for this chat until `egg on`" if not ctl.enabled else ""


# -- keep / drop / diff -----------------------------------------------------------------------


def _target(a, paths: Paths, env: Mapping[str, str], j: Journaled) -> tuple[str, str | None]:
    """(the egg to save to, the project root) for `keep` and `diff`."""
    prompt = j.prompt or {}
    root = prompt.get("root") if isinstance(prompt.get("root"), str) else None
    if a.egg:
        cfg = _load(paths, env)
        eggs = cfg.egg_paths
        if a.egg not in eggs:
            raise _fail("unknown egg %r (known: %s; define it under [eggs] in %s)" % (
                a.egg, ", ".join(eggs) or "none", cfg.sources[-1] if cfg.sources else PROJECT_CONFIG))
        return eggs[a.egg], root or cfg.project_root
    write = prompt.get("write")
    if not isinstance(write, str) or not write:
        if "write" not in prompt:  # a turn journaled before turns carried their target
            cfg = _load(paths, env)
            if cfg.write_egg is not None:
                return cfg.write_egg, root or cfg.project_root
        sel = prompt.get("selection") if isinstance(prompt.get("selection"), dict) else {}
        raise _fail("turn %s is read-only (profile %s): name the egg to save it to, e.g. `egg keep project`"
                    % (_short(j.turn), sel.get("profile", "?")))
    return write, root


def _storable(j: Journaled | None, what: str) -> dict:
    if j is None:
        raise _fail("nothing journaled in this chat: no turn to %s (memory may be off, or the turn was already saved and "
                    "removed from the journal)" % what)
    record = j.record
    if record is None or not (record["tools"] or record["answer"] is not None):
        raise _fail("nothing journaled for turn %s yet: no tool call and no answer to %s" % (_short(j.turn), what))
    return record


@_control
def cmd_keep(a, paths: Paths, env: Mapping[str, str]) -> int:
    from eggshell.graph.commitindex import AppendStore
    from eggshell.graph.save import save_turn
    from eggshell.graph.turns import TurnError

    session = _need_chat(a, env)
    chat = _chat(paths, session)
    ctl = chat.load()
    j = _journaled(paths, session, ctl)
    record = _storable(j, "keep")
    if j.turn in ctl.dropped:
        raise _fail("turn %s was dropped (`egg drop`); it is not kept" % _short(j.turn))
    path, root = _target(a, paths, env, j)
    try:
        store = AppendStore.open(path, paths.data_root)  # vouched for in this data root's trust ledger
        saved = save_turn(store, record, root)
    except TurnError as e:
        raise _fail("turn %s cannot be saved: %s" % (_short(j.turn), e)) from None
    n = len(record["tools"])
    note = "" if saved.commit_id is not None else "; it was already there, nothing new written"
    say("egg kept %s -> %s (%d tool call%s%s)" % (_short(j.turn), path, n, "" if n == 1 else "s", note))
    return 0


def _saved(paths: Paths, env: Mapping[str, str], j: Journaled | None, session: str, turn: str):
    """(store, TurnView) of this turn where it is stored already (`egg keep`, or the save queue
    while it ran), else None: the turn's own target first, then every egg the config names."""
    from eggshell.graph.store import EggError

    prompt = (j.prompt if j is not None else None) or {}
    places = [prompt["write"]] if isinstance(prompt.get("write"), str) and prompt["write"] else []
    try:
        places += list(_config.load(paths, os.getcwd(), env=env).egg_paths.values())
    except _config.ConfigError:
        pass  # a broken config must not stop a drop: the turn's own target is still checked
    for path in dict.fromkeys(places):
        try:
            views = turn_views(Store.open(path).graph) if os.path.isfile(path) else []
        except (EggError, OSError):
            continue
        view = next((v for v in views if v.session == session and v.turn == turn), None)
        if view is not None:
            return path, view
    return None


def _stored_note(path: str, view) -> str:
    what = count(len(view.tools), "tool call") + (" and its answer" if view.answer is not None else "")
    return ("it was already saved to %s (%s): `egg forget %s` takes it out of memory, and `egg compact --purge %s` "
            "then removes its text from the file" % (path, what, view.key, path))


@_control
def cmd_drop(a, paths: Paths, env: Mapping[str, str]) -> int:
    session = _need_chat(a, env)
    chat = _chat(paths, session)
    ctl = chat.load()
    j = _journaled(paths, session, ctl)
    if j is None:
        done = _saved(paths, env, None, session, ctl.last_turn) if ctl.last_turn else None
        raise _fail("nothing journaled in this chat: no turn to drop" +
                    ("" if done is None else " (the last turn, %s: %s)" % (_short(ctl.last_turn), _stored_note(*done))))
    chat.drop(j.turn)
    Journal(paths.journal_dir).discard(session, j.turn)
    done = _saved(paths, env, j, session, j.turn)
    if done is not None:
        say("egg dropped turn %s: its journal was discarded and nothing more of it will be saved, but %s."
            % (_short(j.turn), _stored_note(*done)))
        return 0
    say("egg dropped turn %s: nothing of it was saved, and its journal was discarded, so nothing of it will be.\n"
        "To keep a turn out of memory from its start, run `egg next private` (read-only) or `egg next off` before "
        "sending it." % _short(j.turn))
    return 0


@_control
def cmd_diff(a, paths: Paths, env: Mapping[str, str]) -> int:
    from eggshell.core.identity import content_hex
    from eggshell.graph.records import command_of
    from eggshell.graph.store import Store
    from eggshell.graph.turns import TurnError, compile_turn, normalize_output, parse_turn, work_text
    from eggshell.core.values import walk

    session = _need_chat(a, env)
    ctl = _chat(paths, session).load()
    j = _journaled(paths, session, ctl)
    if j is None:
        raise _fail("nothing journaled in this chat: no turn to compare")
    try:
        path, root = _target(a, paths, env, j)
    except CliError as e:
        if not str(e).startswith("turn "):
            raise
        path, root = None, None
    out = ["target  %s" % (path or "none: the turn is read-only (`egg keep EGG` saves it to a named egg)"),
           "turn    %s (%s%s)" % (_short(j.turn), "finished" if j.sealed else "open", ", dropped" if j.turn in ctl.dropped else "")]
    for t in j.tools:
        work = work_text(str(t.get("name")), t.get("input"))
        size = len(normalize_output(t.get("output")).encode("utf-8", "replace"))
        out.append("tool    %s: %s  (%s of output)" % (t.get("name"), " ".join(command_of(work).split())[:120], count(size, "byte")))
    record = j.record
    answer = record.get("answer") if record else None
    out.append("answer  %s" % ("yes (%s)" % count(len(answer), "character") if isinstance(answer, str) else "none yet"))
    if record is None or not (record["tools"] or answer is not None):
        out.append("new     nothing to save yet")
    else:
        try:
            roots = compile_turn(parse_turn(_relative(record, root))).roots
        except TurnError as e:
            raise _fail("turn %s cannot be saved: %s" % (_short(j.turn), e)) from None
        ids = {content_hex(n) for r in roots for n in walk(r)}
        if path is None:
            out.append("new     %d graph node%s in this turn (no target store to compare with)" % (len(ids), "" if len(ids) == 1 else "s"))
        else:
            have = Store.open(path).graph.nodes if os.path.exists(path) else {}
            new = sum(1 for i in ids if i not in have)
            out.append("new     %d graph node%s (of %d in this turn)" % (new, "" if new == 1 else "s", len(ids)))
    say("\n".join(out))
    return 0


def _relative(record: dict, root: str | None) -> dict:
    """The record with its cwd as save_turn stores it, so node ids match what a save would write."""
    from eggshell.paths import find_project
    from eggshell.graph.turns import relative_cwd

    cwd = record.get("cwd")
    if isinstance(cwd, str) and cwd:
        return dict(record, cwd=relative_cwd(cwd, root if root is not None else find_project(cwd)))
    return record


# -- graph / why / inspect -------------------------------------------------------------------

NOTHING_SENT = "no handoff was sent to this chat"


@_control
def cmd_graph(a, paths: Paths, env: Mapping[str, str]) -> int:
    ctl = _chat(paths, _need_chat(a, env)).load()
    say(ctl.last_handoff or NOTHING_SENT)
    return 0


@_control
def cmd_why(a, paths: Paths, env: Mapping[str, str]) -> int:
    ctl = _chat(paths, _need_chat(a, env)).load()
    say(ctl.last_reason or NOTHING_SENT)
    return 0


def _egg_summary(path: str) -> str:
    from eggshell.graph.store import EggError, Store

    if not os.path.exists(path):
        return "missing"
    try:
        with open(path, "rb") as f:
            header = f.readline().decode("utf-8", "replace").strip()
        commits = len(Store.open(path).graph.commits)
    except (OSError, EggError) as e:
        return "unreadable (%s)" % e
    header = header if len(header) <= 100 else header[:99] + "…"
    return "%s, %s, header %s" % (count(os.path.getsize(path), "byte"), count(commits, "commit"), header)


@_control
def cmd_inspect(a, paths: Paths, env: Mapping[str, str]) -> int:
    from eggshell.reuse.delivery import Deliveries

    session = _need_chat(a, env)
    cfg = _load(paths, env)
    chat = _chat(paths, session)
    ctl = chat.load()
    j = _journaled(paths, session, ctl)
    out = [status_line(cfg, ctl, j),
           "config     %s" % (", ".join(cfg.sources) or "(defaults)"),
           "project    %s" % (cfg.project_root or "none here (run `egg init`)")]
    name = ctl.profile or cfg.default
    try:
        sel = cfg.selection(name)
        paths_of = cfg.paths_of(name)
    except _config.ConfigError:
        sel, paths_of = cfg.selection(None), cfg.paths_of(cfg.default)
    names = {p: n for n, p in cfg.egg_paths.items()}
    for p in paths_of[0]:
        out.append("read       %s = %s (%s)" % (names.get(p, "-"), p, _egg_summary(p)))
    out.append("write      %s" % (paths_of[1] or "none (read-only)"))
    if not sel.enabled:
        out.append("           (this profile is off: nothing is read or written)")
    out += ["data root  %s" % paths.data_root,
            "journal    %s" % ("%s (%d event%s)" % (j.path, len(j.events), "" if len(j.events) == 1 else "s") if j else "none (no turn journaled for this chat)"),
            "state      %s%s" % (chat.path, "" if os.path.exists(chat.path) else " (not written yet)"),
            "delivered  %s%s" % (Deliveries(paths.state_dir, session).path,
                                 "" if os.path.exists(Deliveries(paths.state_dir, session).path) else " (not written yet)")]
    say("\n".join(out))
    return 0


# -- doctor ----------------------------------------------------------------------------------


def cmd_status(a, paths: Paths) -> int:
    cfg = _config.load(paths, os.getcwd())
    say("eggshell %s" % __version__)
    say("prefix     %s" % paths.prefix)
    say("data root  %s" % paths.data_root)
    say("config     %s" % (", ".join(cfg.sources) or "(defaults)"))
    say("matcher    %s" % matcher_line(cfg, paths))
    if cfg.project_root is None:
        say("project    none here (run `egg init` to record this directory)")
        return 0
    say("project    %s" % cfg.project_root)
    say("profiles   %s (default %s; a chat picks one with `egg use`)" % (", ".join(cfg.profiles), cfg.default))
    from eggshell.graph import trust

    from eggshell.runtime.client import request

    ledger = trust.load(paths.data_root)
    warm = (request(paths.data_root, {"op": "counts", "stores": list(cfg.read_eggs)}, timeout=6.0) or {}).get("counts") or {}
    for p in cfg.read_eggs:
        got = warm.get(p) if isinstance(warm.get(p), dict) else None
        if got is not None:  # the warm manager holds it: its counts, no second read of the file
            say("store      %s (%s)%s" % (p, count(got.get("turns") or 0, "turn"), "  [write]" if p == cfg.write_egg else ""))
            if isinstance(got.get("trust"), str):
                say("           %s" % got["trust"])
            say("           %s" % embedded_line(got))
            continue
        indexed = _indexed_counts(p, paths) if os.path.exists(p) else None
        if indexed is not None:  # its indexes are current: counted without reading the store
            n, commits = indexed
            standing = trust.describe_commits(p, commits, ledger)
        else:
            g = Store.open(p).graph if os.path.exists(p) else None
            n = len(turn_views(g)) if g is not None else 0
            standing = trust.describe(p, g, ledger) if g is not None else None
        say("store      %s (%s)%s" % (p, count(n, "turn"), "  [write]" if p == cfg.write_egg else ""))
        if standing is not None:
            say("           %s" % standing)
            say("           embedded: not counted (no manager holds this store; `egg index` embeds what is missing and counts it)")
    from eggshell.runtime import embedder

    backlog = embedder.progress(paths.data_root)
    if backlog is not None:
        say("vectors    %s" % embedder.describe(backlog))
    if ledger.problem is not None:
        say("trust      %s" % ledger.problem)
    return 0


STATUS_READ_BYTES = 8 << 20  # what `egg status` may read of a store to bring its indexes up to date (about a second)


def _indexed_counts(path: str, paths: Paths) -> tuple[int, list[str]] | None:
    """(turns, commit ids) of a store from its commit and search indexes, brought up to date if
    little was appended since; None when they cannot say (missing, far behind, tombstones): then
    the store is read whole. At 10,000 turns a whole read took `egg status` 7 s."""
    import sqlite3

    from eggshell.errors import EggshellError
    from eggshell.graph.commitindex import AppendStore
    from eggshell.search.turnindex import TurnIndex

    try:
        s = AppendStore.open(path, paths.data_root, most=STATUS_READ_BYTES)
    except (EggshellError, OSError, sqlite3.Error):
        return None
    try:
        ix = TurnIndex(paths.data_root, path)
        try:
            ix.update(s, most=STATUS_READ_BYTES)
            return ix.turns(), s.commit_ids()
        finally:
            ix.close()
    except (EggshellError, OSError, sqlite3.Error):
        return None
    finally:
        s.close()


def embedded_line(counts: dict) -> str:
    """How much of a store the semantic side ranks by all its windows, as the warm manager counts it."""
    done, total = counts.get("embedded"), counts.get("searchable")
    if done is None or not total:
        return "embedded: not counted yet (the manager counts it once a prompt has ranked with the model)"
    if done >= total:
        return "embedded: all %s" % count(total, "turn")
    return ("embedded: %d of %s (%.0f%%); the manager embeds the rest between hooks, `egg index` does it now"
            % (done, count(total, "turn"), 100.0 * done / total))


def matcher_line(cfg: _config.Config, paths: Paths) -> str:
    """The semantic matcher a search gets (search/installed.py), or lexical only and why."""
    from eggshell.search import installed

    m = installed.in_force(cfg, paths.prefix)
    if m.problem is not None:
        return "lexical only: %s" % m.problem
    return m.text if m.kind == "lexical" else "%s, mode %s" % (m.text, cfg.mode)
