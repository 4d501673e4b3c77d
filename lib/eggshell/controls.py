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
import shlex
from dataclasses import dataclass, replace
from typing import Callable, Mapping

from . import cli as _cli, config as _config
from .chat import Chat, ChatBusy, ChatControl
from .journal import Journal, turn_record
from .paths import PROJECT_CONFIG, Paths

NO_CHAT = "no chat: run this inside Codex as !egg ... (CODEX_THREAD_ID is unset), or pass --chat ID"


def _fail(msg: str) -> Exception:
    return _cli.CliError(msg, 1)


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
    """The chat a control acts on: --chat, else Codex's CODEX_THREAD_ID, else EGGSHELL_CHAT."""
    return getattr(a, "chat", None) or env.get("CODEX_THREAD_ID") or env.get("EGGSHELL_CHAT") or None


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
    import sys

    print("%s: %s" % (_cli.PROG, msg), file=sys.stderr, flush=True)


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
    name = ctl.profile or cfg.default
    try:
        read, write = _egg_names(cfg, name)
    except _config.ConfigError:
        read, write = [], "?"
        name += " (not in the config; the default %s is used)" % cfg.default
    on = ctl.enabled and cfg.enabled
    line = "egg %s %s [%s] -> %s" % ("on" if on else "off", name, " ".join(read), write)
    if ctl.next_profile:
        line += "  next:%s" % ctl.next_profile
    if j is None:
        line += "  turn:none"
    else:
        n = len(j.tools)
        state = "dropped" if j.turn in ctl.dropped else "finished" if j.sealed else "open"
        line += "  turn:%s (%d tool call%s journaled, %s)" % (_short(j.turn), n, "" if n == 1 else "s", state)
    if ctl.corrupt:
        line += "  [chat state was unreadable: memory is off until `egg on`]"
    elif not cfg.enabled:
        line += "  [enabled = false in %s]" % ", ".join(cfg.sources)
    return line


def cmd_bare(a, paths: Paths, env: Mapping[str, str] | None = None) -> int:
    """`egg` alone: this chat's status line, or outside a chat the paths and stores (`egg status`)."""
    env = os.environ if env is None else env
    session = chat_id(a, env)
    if session is None:
        return _cli.cmd_status(a, paths)
    cfg = _load(paths, env)
    ctl = _chat(paths, session).load()
    _cli.say(status_line(cfg, ctl, _journaled(paths, session, ctl)))
    return 0


# -- on / off / use / next ------------------------------------------------------------------


@_control
def cmd_on(a, paths: Paths, env: Mapping[str, str]) -> int:
    session = _need_chat(a, env)
    chat = _chat(paths, session)
    was = chat.peek()
    chat.turn_on()
    corrupt = was is not None and was.corrupt
    _cli.say("egg on (memory enabled for this chat%s)" % ("; the profile is the config's default again" if corrupt else ""))
    return 0


@_control
def cmd_off(a, paths: Paths, env: Mapping[str, str]) -> int:
    session = _need_chat(a, env)
    _chat(paths, session).turn_off()  # reads neither the config nor the old state
    _cli.say("egg off (memory disabled for this chat: nothing is read, recorded or sent until `egg on`)")
    return 0


def _known_profile(cfg: _config.Config, name: str) -> None:
    try:
        cfg.profile(name)
    except _config.ConfigError as e:
        raise _fail(str(e)) from None


@_control
def cmd_use(a, paths: Paths, env: Mapping[str, str]) -> int:
    session = _need_chat(a, env)
    cfg = _load(paths, env)
    _known_profile(cfg, a.profile)
    ctl = _chat(paths, session).update(lambda c: replace(c, profile=a.profile))
    read, write = _egg_names(cfg, a.profile)
    _cli.say("egg %s selected: reads [%s] -> %s%s" % (a.profile, " ".join(read), write, _off_note(ctl)))
    return 0


@_control
def cmd_next(a, paths: Paths, env: Mapping[str, str]) -> int:
    session = _need_chat(a, env)
    cfg = _load(paths, env)
    _known_profile(cfg, a.profile)
    ctl = _chat(paths, session).update(lambda c: replace(c, next_profile=a.profile))
    _cli.say("egg next %s (the next turn only; then %s again)%s" % (a.profile, ctl.profile or cfg.default, _off_note(ctl)))
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
    from .save import save_turn
    from .store import Store
    from .turns import TurnError

    session = _need_chat(a, env)
    chat = _chat(paths, session)
    ctl = chat.load()
    j = _journaled(paths, session, ctl)
    record = _storable(j, "keep")
    if j.turn in ctl.dropped:
        raise _fail("turn %s was dropped (`egg drop`); it is not kept" % _short(j.turn))
    path, root = _target(a, paths, env, j)
    try:
        store = Store.open(path)
        store.data_root = paths.data_root  # vouched for in this data root's trust ledger
        saved = save_turn(store, record, root)
    except TurnError as e:
        raise _fail("turn %s cannot be saved: %s" % (_short(j.turn), e)) from None
    n = len(record["tools"])
    note = "" if saved.commit_id is not None else "; it was already there, nothing new written"
    _cli.say("egg kept %s -> %s (%d tool call%s%s)" % (_short(j.turn), path, n, "" if n == 1 else "s", note))
    return 0


@_control
def cmd_drop(a, paths: Paths, env: Mapping[str, str]) -> int:
    session = _need_chat(a, env)
    chat = _chat(paths, session)
    ctl = chat.load()
    j = _journaled(paths, session, ctl)
    if j is None:
        raise _fail("nothing journaled in this chat: no turn to drop")
    chat.drop(j.turn)
    Journal(paths.journal_dir).discard(session, j.turn)
    _cli.say("egg dropped turn %s: it will not be saved, and its journal was discarded.\n"
             "What already reached the .egg stays (its tool calls may have been saved while it ran, and "
             "`egg split`/`egg compact` do not remove turns). To keep a turn out of memory, run `egg next private` (read-only) or "
             "`egg next off` before sending it." % _short(j.turn))
    return 0


@_control
def cmd_diff(a, paths: Paths, env: Mapping[str, str]) -> int:
    from .identity import content_hex
    from .records import command_of
    from .store import Store
    from .turns import TurnError, compile_turn, normalize_output, parse_turn, work_text
    from .values import walk

    session = _need_chat(a, env)
    ctl = _chat(paths, session).load()
    j = _journaled(paths, session, ctl)
    if j is None:
        raise _fail("nothing journaled in this chat: no turn to compare")
    try:
        path, root = _target(a, paths, env, j)
    except _cli.CliError as e:
        if not str(e).startswith("turn "):
            raise
        path, root = None, None
    out = ["target  %s" % (path or "none: the turn is read-only (`egg keep EGG` saves it to a named egg)"),
           "turn    %s (%s%s)" % (_short(j.turn), "finished" if j.sealed else "open", ", dropped" if j.turn in ctl.dropped else "")]
    for t in j.tools:
        work = work_text(str(t.get("name")), t.get("input"))
        size = len(normalize_output(t.get("output")).encode("utf-8", "replace"))
        out.append("tool    %s: %s  (%d bytes of output)" % (t.get("name"), " ".join(command_of(work).split())[:120], size))
    record = j.record
    answer = record.get("answer") if record else None
    out.append("answer  %s" % ("yes (%d characters)" % len(answer) if isinstance(answer, str) else "none yet"))
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
    _cli.say("\n".join(out))
    return 0


def _relative(record: dict, root: str | None) -> dict:
    """The record with its cwd as save_turn stores it, so node ids match what a save would write."""
    from .paths import find_project
    from .turns import relative_cwd

    cwd = record.get("cwd")
    if isinstance(cwd, str) and cwd:
        return dict(record, cwd=relative_cwd(cwd, root if root is not None else find_project(cwd)))
    return record


# -- graph / why / inspect -------------------------------------------------------------------

NOTHING_SENT = "no handoff was sent to this chat"


@_control
def cmd_graph(a, paths: Paths, env: Mapping[str, str]) -> int:
    ctl = _chat(paths, _need_chat(a, env)).load()
    _cli.say(ctl.last_handoff or NOTHING_SENT)
    return 0


@_control
def cmd_why(a, paths: Paths, env: Mapping[str, str]) -> int:
    ctl = _chat(paths, _need_chat(a, env)).load()
    _cli.say(ctl.last_reason or NOTHING_SENT)
    return 0


def _egg_summary(path: str) -> str:
    from .store import EggError, Store

    if not os.path.exists(path):
        return "missing"
    try:
        with open(path, "rb") as f:
            header = f.readline().decode("utf-8", "replace").strip()
        commits = len(Store.open(path).graph.commits)
    except (OSError, EggError) as e:
        return "unreadable (%s)" % e
    header = header if len(header) <= 100 else header[:99] + "…"
    return "%d bytes, %d commit%s, header %s" % (os.path.getsize(path), commits, "" if commits == 1 else "s", header)


@_control
def cmd_inspect(a, paths: Paths, env: Mapping[str, str]) -> int:
    from .delivery import Deliveries

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
    _cli.say("\n".join(out))
    return 0


# -- doctor ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Checkup:
    """What the doctor's checks look at."""

    paths: Paths
    cwd: str
    env: Mapping[str, str]


Check = Callable[[Checkup], tuple[str, str]]  # -> ("ok" | "FAIL" | "note", text)


def check_hook_bin(c: Checkup) -> tuple[str, str]:
    p = os.path.join(c.paths.bin_dir, "egg-hook")
    if os.path.isfile(p) and os.access(p, os.X_OK):
        return "ok", "egg-hook is installed at %s" % p
    return "FAIL", "egg-hook is missing or not executable at %s: run ./install.sh" % p


def _registered(path: str) -> tuple[set[str] | None, str]:
    """The events whose hooks run egg-hook in a hooks/settings file (None: unreadable)."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None, "does not exist"
    except (OSError, ValueError) as e:
        return None, "cannot be read (%s)" % e
    hooks = data.get("hooks") if isinstance(data, dict) else None
    events = set()
    for event, groups in (hooks.items() if isinstance(hooks, dict) else ()):
        for g in groups if isinstance(groups, list) else ():
            for h in (g.get("hooks") if isinstance(g, dict) and isinstance(g.get("hooks"), list) else ()):
                cmd = h.get("command") if isinstance(h, dict) else None
                try:
                    argv = shlex.split(cmd) if isinstance(cmd, str) else []
                except ValueError:
                    argv = []
                if argv and os.path.basename(argv[0]) == "egg-hook":
                    events.add(event)
    return events, ""


def check_codex_hooks(c: Checkup) -> tuple[str, str]:
    path = os.path.join(c.paths.codex_home, "hooks.json")
    events, why = _registered(path)
    if events is None:
        return "FAIL", "Codex hooks: %s %s: run `egg install codex`" % (path, why)
    missing = [e for e in _cli.HOOK_EVENTS if e not in events]
    if missing:
        return "FAIL", "Codex hooks: %s lacks egg-hook for %s: run `egg install codex`" % (path, ", ".join(missing))
    return "ok", "Codex hooks: %s runs egg-hook for %s" % (path, ", ".join(_cli.HOOK_EVENTS))


def check_codex_trust(c: Checkup) -> tuple[str, str]:
    return "note", "Codex runs new or changed hooks only once you review and trust them: open /hooks in Codex"


def check_claude_hooks(c: Checkup) -> tuple[str, str] | None:
    home = c.env.get("HOME") or os.path.expanduser("~")
    config_dir = (c.env.get("CLAUDE_CONFIG_DIR") or "").strip()
    path = os.path.join(os.path.expanduser(config_dir) if config_dir else os.path.join(home, ".claude"), "settings.json")
    if not os.path.exists(path):
        return None
    events, why = _registered(path)
    if events:
        return "ok", "Claude Code: %s runs egg-hook for %s" % (path, ", ".join(sorted(events)))
    return "note", "Claude Code: %s %s" % (path, why or "does not run egg-hook (`egg install claude` adds it)")


def check_config(c: Checkup) -> tuple[str, str]:
    try:
        cfg = _config.load(c.paths, c.cwd, env=c.env)
    except _config.ConfigError as e:
        return "FAIL", "config: %s" % e
    if cfg.project_root is None:
        return "note", "config loads (%s); no project here: `egg init` starts recording one" % (", ".join(cfg.sources) or "defaults")
    return "ok", "config loads: %s (default profile %s)" % (", ".join(cfg.sources), cfg.default)


def check_model(c: Checkup) -> tuple[str, str]:
    from .embed import default_model_dir

    d = default_model_dir(c.paths.prefix)
    if os.path.isfile(os.path.join(d, "model.onnx")):
        return "ok", "embedding model at %s" % d
    try:
        cfg = _config.load(c.paths, c.cwd, env=c.env)
    except _config.ConfigError:
        cfg = None
    if cfg is not None and (cfg.mode == "lexical" or cfg.semantic_matcher is not True):
        return "note", "embedding model missing at %s; not needed here (mode = %r, semantic_matcher = %r)" % (
            d, cfg.mode, cfg.semantic_matcher)
    return "FAIL", "embedding model missing at %s: run ./install.sh (or set mode = \"lexical\")" % d


def check_data_root(c: Checkup) -> tuple[str, str]:
    d = c.paths.data_root
    probe = d
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    if os.path.isdir(probe) and os.access(probe, os.W_OK | os.X_OK):
        return "ok", "data root %s is writable%s" % (d, "" if probe == d else " (it will be created)")
    return "FAIL", "data root %s is not writable (%s): fix its permissions or set EGGSHELL_DATA_ROOT" % (d, probe)


def check_manager(c: Checkup) -> tuple[str, str]:
    """The warm manager answers, and the save queue is not stuck."""
    import time

    from .client import LOG, request, run_dir
    from .journal import Journal

    files = Journal(c.paths.journal_dir).files()
    stale = [f for f in files if _sealed_for(f) > 120]
    trouble = manager_trouble(c.paths.data_root)
    if trouble is not None:
        return "FAIL", "warm manager: %s; %d turn%s journaled (saved once a manager serves)" % (
            trouble, len(files), "" if len(files) == 1 else "s")
    r = request(c.paths.data_root, {"op": "ping"}, timeout=2.0)
    log = os.path.join(run_dir(c.paths.data_root), LOG)
    crash = ""
    if os.path.isfile(log) and os.path.getsize(log):
        with open(log, "rb") as f:
            f.seek(max(0, os.path.getsize(log) - 400))
            crash = f.read().decode("utf-8", "replace").strip().splitlines()[-1:]
            crash = " (last line of %s: %s)" % (log, crash[0]) if crash else ""
    if stale:
        return "FAIL", ("%d finished turn%s waiting over 2 minutes to be saved (%s); the manager %s%s: see %s, then run a "
                        "prompt (it restarts the manager) or `egg keep` in that chat") % (
            len(stale), "" if len(stale) == 1 else "s", stale[0], "is not running" if r is None else "is stuck", crash,
            c.paths.log_file)
    if r is None:
        return "note", "warm manager: not running (the next hook starts one)%s; %d turn%s journaled" % (
            crash, len(files), "" if len(files) == 1 else "s")
    return "ok", "warm manager: pid %d, up %.0f s, %.0f MB resident, %d requests, %d turn%s journaled (checked at %s)" % (
        r.get("pid", 0), r.get("uptime_s", 0), r.get("rss_kb", 0) / 1024, r.get("requests", 0), len(files),
        "" if len(files) == 1 else "s", time.strftime("%H:%M:%S"))


def manager_trouble(data_root: str) -> str | None:
    """Why hooks answer without the manager though one could serve, with the fix; None if nothing is wrong.

    A stopped or hung manager, a socket directory that is not this user's alone, something
    other than a socket at the socket's path, another user's process listening there, or a
    manager that refused to serve: each makes every hook answer cold (fast, and logged).
    """
    import time

    from . import client

    run = client.run_dir(data_root)
    noted = client.unresponsive(run)
    state = client.proc_state(noted[0]) if noted is not None else None
    if noted is not None and state in ("T", "t"):
        return ("pid %d is stopped (state %s in /proc/%d/stat), so hooks answer without it: `kill -CONT %d` resumes it, "
                "`kill %d` ends it (the next hook starts a new one)" % (noted[0], state, noted[0], noted[0], noted[0]))
    if noted is not None and state not in (None, "Z", "X"):
        return ("pid %d accepted a hook %.0f s ago and said nothing (state %s in /proc/%d/stat): it is hung; `kill %d` "
                "(the next hook starts a new one)" % (noted[0], time.time() - noted[1], state, noted[0], noted[0]))
    why = client.refused(run)
    if why is not None:
        return "the last manager started refused to serve: %s (the next try is at most %.0f s after it)" % (why[0], client.REFUSED_S)
    try:
        client.reach(data_root, time.monotonic() + 2.0).close()
    except client.NoManager as e:
        return str(e) or None
    return None


def check_store_lock(c: Checkup) -> tuple[str, str] | None:
    """The project's store is not locked by another process (the manager's saves would wait for it)."""
    try:
        cfg = _config.load(c.paths, c.cwd, env=c.env)
    except _config.ConfigError:
        return None  # check_config says why
    egg = cfg.write_egg
    if egg is None or not os.path.exists(egg + ".lock"):
        return None
    holders = _held_by(egg + ".lock")
    if not holders:
        return "ok", "store lock %s.lock is free" % egg
    who = ", ".join("pid %d (%s)" % (p, _cmdline(p)) for p in holders)
    return "FAIL", ("store lock %s.lock is held by %s: saves wait for it (the manager tries again every few seconds, the "
                    "turns stay journaled); if that process is stuck, end it (`kill PID`)" % (egg, who))


def _held_by(lock_path: str, settle_s: float = 0.5) -> list[int]:
    """Processes holding `lock_path` locked for all of `settle_s` (a commit holds it for milliseconds)."""
    import time

    import portalocker

    deadline = time.monotonic() + settle_s
    with open(lock_path, "rb") as f:
        while True:
            try:
                portalocker.lock(f, portalocker.LOCK_EX | portalocker.LOCK_NB)
                portalocker.unlock(f)
                return []
            except portalocker.LockException:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        ino = os.fstat(f.fileno()).st_ino
    pids = []
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            for line in f:
                parts = line.split()
                if "->" not in parts and len(parts) > 5 and parts[5].rsplit(":", 1)[-1] == str(ino):
                    pids.append(int(parts[4]))
    except (OSError, ValueError):
        pass
    return sorted(set(pids)) or [-1]


def _cmdline(pid: int) -> str:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:80] or "?"
    except OSError:
        return "unknown"


def _sealed_for(path: str) -> float:
    """Seconds since a journaled turn that should be saved was sealed (0: open, or read-only)."""
    import time

    from .commits import target
    from .journal import Journal, sealed

    events = Journal(os.path.dirname(os.path.dirname(path))).read_file(path)
    write, _, named = target(events)
    if sealed(events) is None or (named and write is None):
        return 0.0  # a read-only turn waits for `egg keep` (or expires), it is not stuck
    try:
        return time.time() - os.stat(path).st_mtime
    except OSError:
        return 0.0


def check_store_trust(c: Checkup) -> tuple[str, str] | None:
    """Which of the project's stores may complete calls (trust.py): a cloned repository's store is advice only."""
    from . import trust
    from .store import EggError, Store

    ledger = trust.load(c.paths.data_root)
    if ledger.problem is not None:
        return "FAIL", ("%s. No store is trusted: prior work is advice only and never stands in for a call. Move it aside "
                        "(`mv %s %s.damaged`) and `egg trust` each store of yours again" % (ledger.problem, ledger.path, ledger.path))
    try:
        cfg = _config.load(c.paths, c.cwd, env=c.env)
    except _config.ConfigError:
        return None  # check_config says why
    said, doubt = [], False
    for p in cfg.read_eggs:
        if not os.path.exists(p):
            continue
        try:
            g = Store.open(p).graph
        except EggError:
            continue  # `egg fsck` reports damage
        said.append("%s: %s" % (trust.shown_path(p), trust.describe(trust.shown_path(p), g, ledger)))
        doubt = doubt or trust.vouched(g, ledger) < len(g.commits)
    if not said:
        return None
    return ("note" if doubt else "ok"), "stores: " + "; ".join(said)


def check_quarantine(c: Checkup) -> tuple[str, str] | None:
    """Events no turn could store are kept aside; the user should know they exist (and may delete them)."""
    from . import quarantine

    q = quarantine.path(c.paths.data_root)
    try:
        with open(q, "rb") as f:
            n = sum(1 for _ in f)
    except OSError:
        return None
    if n == 0:
        return None
    return "note", ("%d hook event%s could not be stored and %s kept in %s (the rest of each turn was recorded): "
                    "read it, then delete it" % (n, "" if n == 1 else "s", "is" if n == 1 else "are", q))


def check_telemetry_leftover(c: Checkup) -> tuple[str, str] | None:
    """~/.cache/Microsoft is what onnxruntime's telemetry writes (a device id); Eggshell keeps it
    off, so one found here was left by an older Eggshell or another program using onnxruntime."""
    home = c.env.get("HOME") or os.path.expanduser("~")
    d = os.path.join(c.env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), "Microsoft")
    if not os.path.isdir(d):
        return None
    return "note", ("%s exists: onnxruntime telemetry (a device id, an event store) written by another program or an "
                    "Eggshell before 1 Dec 2026; Eggshell runs with it off (ORT_DISABLE_TELEMETRY=1): delete it" % d)


DOCTOR_CHECKS: tuple[Callable[[Checkup], tuple[str, str] | None], ...] = (
    check_hook_bin, check_codex_hooks, check_codex_trust, check_claude_hooks, check_config, check_model, check_data_root,
    check_manager, check_store_lock, check_store_trust, check_quarantine, check_telemetry_leftover,
)


def checkup(c: Checkup, checks=DOCTOR_CHECKS) -> list[tuple[str, str]]:
    """Run each check (None: not applicable here); a check that crashes is a FAIL of its own."""
    out = []
    for check in checks:
        try:
            r = check(c)
        except Exception as e:  # a doctor must report, not crash
            r = ("FAIL", "%s crashed: %s: %s" % (check.__name__, type(e).__name__, e))
        if r is not None:
            out.append(r)
    return out


def cmd_doctor(a, paths: Paths, env: Mapping[str, str] | None = None) -> int:
    results = checkup(Checkup(paths, os.getcwd(), os.environ if env is None else env))
    _cli.say("\n".join("%-4s %s" % r for r in results))
    return 1 if any(s == "FAIL" for s, _ in results) else 0
