"""The turn lifecycle, host-neutral: what each hook event records, and what it answers.

Events arrive in the lifecycle's own shape (hosts/base.py EVENT_KEYS: a host's adapter
maps its payload onto it) and answers leave as neutral answers ({"context"}, {"deny"},
{"status"} or {}), which the host's adapter turns into its reply. Every event is handled in two steps. `record` is what must be durable, and it always
runs in the hook's own process before anything else: the prompt (with the turn's
snapshotted selection: which stores it reads and writes) at UserPromptSubmit, each tool
result at PostToolUse, the seal at Stop and SessionEnd, the reset of delivered keys at
compaction. It reads no store and loads no model. `answer` computes the reply (the
handoff, a denial, a status line) from loaded Resources: in the warm manager when one
is running, else in the hook itself. Saving is neither: the journal is the save queue
(commits.py), drained by the manager or, with no manager, at Stop.

The caller (hookflow.py) turns any exception into `{}`, so the agent is never blocked.
"""

from __future__ import annotations

import os
from collections import namedtuple

from eggshell.errors import EggshellError
from eggshell.log import utc_now
from eggshell.runtime.journal import Journal, forgotten, sealed, turn_record
from eggshell.paths import Paths, UnsafePath, find_project, store_problem

# Each event is its own process: modules an event does not need are imported inside it.

CONTEXT_CAP = 48000  # characters of context when the host's own cap is not given (hosts.base.Host.context_cap)
SEALING = ("Stop", "SessionEnd", "Interrupt")  # events that end a turn
# A failed tool call (a non-zero exit) may come as PostToolUseFailure; its text is the output.
TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
DEFAULT_BUDGET = 8000  # handoff characters when a turn's selection does not say (config.Config.handoff_chars)
OBSERVE_SECONDS = 1.0  # a fingerprint taking longer is given up: the event is journaled with an unknown one
INQUIRY_CHARS = 4096  # characters of a prompt that search and matching see (see inquiry_of)


class PayloadError(EggshellError, ValueError):
    """A hook payload without the fields its event needs."""


class Step(namedtuple("Step", "event session turn cwd selection config_file answer_needed off", defaults=(None,))):
    """What `record` learned, handed to `answer` (possibly in another process): the event, the
    session and turn, the payload's cwd, the turn's snapshotted selection
    (config.Selection.to_json; None: memory is off), the hook's EGGSHELL_CONFIG, whether
    the event has a reply to compute, and `off`: at SessionStart, the line saying why memory
    is off for this project (a broken config), which is then the reply (runtime/health.py).
    A namedtuple: this module is imported by every hook.
    """

    __slots__ = ()

    def to_json(self) -> dict:
        return self._asdict()

    @staticmethod
    def from_json(d: dict) -> "Step":
        return Step(**{k: d.get(k) for k in Step._fields})


def _now() -> str:
    return utc_now()


def _need_str(p: dict, key: str) -> str:
    v = p.get(key)
    if not isinstance(v, str) or not v:
        raise PayloadError("%s payload has no %r" % (p.get("hook_event_name"), key))
    return v


def _turn_id(p: dict, journal: Journal, session: str) -> str | None:
    # The host's turn id when it names one (hosts map theirs onto turn_id), else the session's open turn.
    v = p.get("turn_id")
    return v if isinstance(v, str) and v else journal.current(session)


def _log(paths: Paths, what: str = "memory"):
    """A logger for hook.log whose lines say which part complained (search, reuse, chat state)."""

    def log(msg: str) -> None:
        from eggshell.log import log_failure

        log_failure(paths, what, RuntimeError(msg))

    return log


def _load_config(paths: Paths, cwd: str, config_file: str | None):
    """The config in force for `cwd`, with the hook's own EGGSHELL_CONFIG (a manager has none)."""
    from eggshell import config as _config

    env = {k: v for k, v in os.environ.items() if k != "EGGSHELL_CONFIG"}
    if config_file:
        env["EGGSHELL_CONFIG"] = config_file
    return _config.load(paths, cwd, env=env)


def _selection(cfg, paths: Paths, session: str, turn: str) -> dict | None:
    """The selection this new turn runs under (the chat's profile, or a one-turn override)."""
    from eggshell.runtime.chat import Chat, ChatBusy

    log = _log(paths, "chat state")
    chat = Chat(paths.state_dir, session, log)
    try:
        sel = chat.begin_turn(cfg, turn)
    except ChatBusy as e:  # a held lock must not cost the turn: decide from what the state says now
        sel = chat.begin_turn_unlocked(cfg)
        log("%s; turn %s runs under profile %s (%s), read without the lock; a one-turn profile stays set"
            % (e, turn, sel.profile, "recorded" if sel.write else "not recorded"))
    problem = store_problem(sel.write) if sel.write is not None else None
    if problem is not None:  # journal nothing for a store it may not be written to
        raise UnsafePath(problem)
    return sel.to_json() if sel.enabled else None


def _recorded(journal: Journal, session: str, turn: str) -> bool:
    """Whether a journaled turn is being recorded (it has a write store), so its events may be kept."""
    sel = _turn_selection(journal.read(session, turn)) if journal.has(session, turn) else None
    return bool(sel and sel.get("write"))


def _turn_selection(events: list[dict]) -> dict | None:
    prompt = next((e for e in events if e.get("event") == "prompt"), None)
    sel = prompt.get("selection") if prompt else None
    return sel if isinstance(sel, dict) else None


REDACT_KEYS = ("redact", "never_record")  # the config's own rules, snapshotted in the turn's prompt event


def _redact(payload: dict, rules: dict | None) -> None:
    """Redact the payload in place before any of it is journaled or sent (redact.py).

    `rules` holds the turn's snapshotted REDACT_KEYS (the prompt event, or the config at
    UserPromptSubmit); the built-in rules always apply. Everything downstream (the journal,
    the manager, the handoff and chat state built from it) sees only the redacted payload.
    """
    from eggshell.core.redact import redact_payload, rules as compiled

    rules = rules or {}
    redact_payload(payload, compiled(rules.get("redact") or (), rules.get("never_record") or ()))


def _scheme() -> str:
    from eggshell.core.redact import scheme

    return scheme()


def _prompt_event(events: list[dict]) -> dict | None:
    return next((e for e in events if e.get("event") == "prompt"), None)


def _seal(journal: Journal, session: str, turn: str, answer: object, why: str, events: list | None = None,
          note: dict | None = None) -> None:
    """Mark a journaled turn finished: from here it is whole and may leave the queue.

    Once per turn, except that the host's own Stop may follow our interrupted mark.
    `events` are the turn's journaled events when the caller has just read them.
    """
    if not journal.has(session, turn):
        return
    seal = sealed(journal.read(session, turn) if events is None else events)
    if seal is not None and (why != "Stop" or seal.get("why") == "Stop"):
        return
    journal.append(session, turn, {"event": "stop", "answer": answer if isinstance(answer, str) else None, "why": why, "time": _now(), **(note or {})})


def _journal_tool(paths: Paths, journal: Journal, session: str, turn: str, event: str, ev: dict) -> bool:
    """Journal one tool result (True), or quarantine it alone when no turn could store it."""
    from eggshell.graph.events import tool_problem

    why = tool_problem(ev)
    if why is None:
        journal.append(session, turn, ev)
        return True
    if not _recorded(journal, session, turn):  # a read-only turn keeps nothing once it ends
        _log(paths, "quarantine")("%s of turn %s: %s; not kept, since the turn is not recorded" % (event, turn, why))
        return False
    from eggshell.runtime import quarantine

    where = quarantine.add(paths.data_root, session, turn, event, why, quarantine.payload_text(ev))
    _log(paths, "quarantine")("%s of turn %s: %s; the event is kept in %s, the rest of the turn is recorded" % (event, turn, why, where))
    return False


def _late_tool(paths: Paths, session: str, turn: str, event: str, payload: dict, cwd: str, config_file: str | None) -> None:
    """A tool result of a recorded turn that arrives after the turn was saved (a host delivering
    out of order, a background call ending late) is kept aside, redacted, instead of vanishing:
    the store's turn is whole as the agent answered it, and nothing recorded is ever dropped."""
    from eggshell.runtime.chat import Chat, ChatBusy, ChatStateError

    try:
        state = Chat(paths.state_dir, session, _log(paths, "chat state")).load()
    except (ChatBusy, ChatStateError, OSError):
        return
    if state.last_turn != turn or not state.last_recorded:
        return  # not a turn this chat recorded: nothing of it may be kept
    from eggshell.config import ConfigError
    from eggshell.runtime import quarantine

    try:
        cfg = _load_config(paths, cwd, config_file)
        rules = {k: list(getattr(cfg, k)) for k in REDACT_KEYS if getattr(cfg, k)}
    except ConfigError:
        rules = {}
    _redact(payload, rules)
    ev = {"event": "tool", "name": payload.get("tool_name"), "id": payload.get("tool_use_id"),
          "input": payload.get("tool_input"), "output": payload.get("tool_response", payload.get("error"))}
    why = "arrived after its turn was saved; the stored turn is as the agent answered it"
    where = quarantine.add(paths.data_root, session, turn, event, why, quarantine.payload_text(ev))
    _log(paths, "quarantine")("%s of turn %s %s; kept in %s" % (event, turn, why, where))


def quarantine_raw(raw: str, fields: dict, paths: Paths, why: str) -> str | None:
    """Keep a payload no parser can read (a 5,000-digit number, 10,000 nested lists) when it is an
    event of a recorded turn; the quarantine file's path, or None when it is not one.

    `fields` are what the host's adapter could still read of it (hosts.base.Host.raw_event).
    """
    session, cwd = fields.get("session_id"), fields.get("cwd") or os.getcwd()
    if session is None or (not os.environ.get("EGGSHELL_CONFIG") and find_project(cwd) is None):
        return None
    journal = Journal(paths.journal_dir)
    turn = fields.get("turn_id") or journal.current(session)
    if turn is None or not _recorded(journal, session, turn):
        return None  # not a recorded turn: nothing of it may be kept
    from eggshell.runtime import quarantine
    from eggshell.core.redact import compile_extra, redact_text

    event = fields.get("hook_event_name") or "?"
    extra = compile_extra((_prompt_event(journal.read(session, turn)) or {}).get("redact") or ())
    text = redact_text(quarantine.cut(raw), extra)  # kept as text, so redacted as text
    return quarantine.add(paths.data_root, session, turn, event, why, text)  # the caller logs it


REPAIRED = "eggshell_lone_surrogates"  # set by admit: how many lone surrogates became U+FFFD


def admit(payload: object) -> object:
    """The payload as it will be handled: a tool output past events.OUTPUT_CHARS cut (with a
    mark), and every lone UTF-16 surrogate replaced by U+FFFD (counted under REPAIRED).

    Done before the journal, the manager or matching sees it, so a 50 MB log costs what 1 MB
    does and no later step meets text that cannot be UTF-8.
    """
    if not isinstance(payload, dict):
        return payload
    from eggshell.graph.events import capped_output, well_formed

    out = dict(payload)
    if out.get("hook_event_name") in TOOL_EVENTS:
        if "tool_response" in out:
            out["tool_response"] = capped_output(out["tool_response"])
    try:
        out, n = well_formed(out)
    except RecursionError:
        return out  # nested past any limit: quarantined at record
    if n:
        out[REPAIRED] = n
    return out


def _noted(payload: dict, ev: dict) -> dict:
    """The journal event, saying how many lone surrogates of its payload became U+FFFD."""
    if payload.get(REPAIRED):
        ev["lone_surrogates"] = payload[REPAIRED]
    return ev


def _observed(paths: Paths, payload: dict, cwd: str, prompt: dict | None, when: str) -> dict:
    """{"observed": fingerprint} of a read or shell call's inputs, as they are right after it ran
    (fingerprint.py); {} for other tools or when it cannot be taken (the call is then never
    verified, so never denied: nothing is lost but a later reuse)."""
    from eggshell.reuse import fingerprint

    name = payload.get("tool_name")
    root = prompt.get("root") if prompt else None
    if not isinstance(name, str) or name.casefold() not in fingerprint.SHELL_TOOLS | fingerprint.READ_TOOLS or not isinstance(root, str):
        return {}
    import threading
    import time

    box: dict = {}

    def work() -> None:
        try:
            key = fingerprint.key_of(paths.state_dir, create=True)
            budget = fingerprint.Budget(deadline=time.monotonic() + OBSERVE_SECONDS)
            box["fp"] = fingerprint.observe(name, payload.get("tool_input"), cwd, root, key, when, budget=budget)
        except Exception as e:  # fail open: the tool result is journaled without it
            box["error"] = e

    # A thread we stop waiting for: whatever the file system does (a FIFO, a hung mount), the
    # tool event is journaled within the budget, its fingerprint unknown (never verified, never denied).
    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(OBSERVE_SECONDS + 0.25)
    if "fp" in box:
        return {"observed": box["fp"]}
    why = "took longer than %.1f s" % OBSERVE_SECONDS if t.is_alive() else "%s: %s" % (type(box.get("error")).__name__, box.get("error"))
    _log(paths, "freshness")("fingerprint of a %s call: %s" % (name, why))
    return {"observed": fingerprint.unknown(when, "the fingerprint " + why[:200])}


def record(payload: object, paths: Paths) -> Step | None:
    """The durable part of one event; None when the project or the turn is not recorded."""
    if not isinstance(payload, dict):
        raise PayloadError("hook payload is not a JSON object")
    event = _need_str(payload, "hook_event_name")
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) and payload.get("cwd") else os.getcwd()
    config_file = os.environ.get("EGGSHELL_CONFIG") or None
    if config_file is None and find_project(cwd) is None:
        # Not an Eggshell project: leave it alone, unless it is a call (or the end) of a turn a
        # project journaled. Codex gives a tool hook the call's own working directory, so a
        # command the agent ran in /tmp or a sibling checkout still belongs to the turn.
        if (event not in TOOL_EVENTS and event not in SEALING) or not isinstance(payload.get("session_id"), str):
            return None
    session = _need_str(payload, "session_id")
    journal = Journal(paths.journal_dir)

    def step(turn, selection, answer_needed=True, off=None):
        return Step(event, session, turn, cwd, selection, config_file, answer_needed, off)

    if event in TOOL_EVENTS:
        turn = _turn_id(payload, journal, session)
        if turn is None or not journal.has(session, turn):
            if turn is not None and event != "PreToolUse":
                _late_tool(paths, session, turn, event, payload, cwd, config_file)
            return None  # a turn is journaled only if its prompt was: memory is off for it
        events = journal.read(session, turn)
        if forgotten(events):
            return None  # `egg forget` named this turn: none of its later calls is kept (journal.py)
        _redact(payload, _prompt_event(events))  # stored and proposed inputs alike, before anything is kept
        if event != "PreToolUse":  # durable before anything else
            tid = payload.get("tool_use_id")
            when = _now()
            kept = _journal_tool(paths, journal, session, turn, event, _noted(payload, {
                "event": "tool",
                "name": payload.get("tool_name"),
                "id": tid if isinstance(tid, str) and tid else os.urandom(16).hex(),
                "input": payload.get("tool_input"),
                "output": payload.get("tool_response"),
                "time": when,
                **_observed(paths, payload, cwd, _prompt_event(events), when),
            }))
            if not kept:
                return None  # quarantined: nothing to answer from
        else:
            _need_str(payload, "tool_name")
        return step(turn, _turn_selection(events))

    if event == "UserPromptSubmit":
        prompt = _need_str(payload, "prompt")
        # A new prompt opens a new turn: never fall back to the session's previous one,
        # and the previous one is finished (interrupted if it never reached Stop).
        turn = payload["turn_id"] if isinstance(payload.get("turn_id"), str) and payload["turn_id"] else os.urandom(16).hex()
        previous = journal.current(session)
        if previous and previous != turn:
            _seal(journal, session, previous, None, "a new prompt")
        cfg = _load_config(paths, cwd, config_file)
        sel = _selection(cfg, paths, session, turn)
        if sel is None:
            return None
        rules = {k: list(getattr(cfg, k)) for k in REDACT_KEYS if getattr(cfg, k)}  # the turn's tool events use these
        _redact(payload, rules)
        prompt = payload["prompt"]
        journal.append(session, turn, _noted(payload, {"event": "prompt", "session": session, "turn": turn, "cwd": cwd, "prompt": prompt,
                                       "selection": sel, "write": sel.get("write"), "root": cfg.project_root, "time": _now(),
                                                        "redacted": _scheme(), **rules}))
        journal.set_current(session, turn)
        return step(turn, sel)

    if event in SEALING:
        turn = _turn_id(payload, journal, session)
        if turn is None or not journal.has(session, turn):
            return None  # nothing journaled: nothing to seal or save
        events = journal.read(session, turn)
        if forgotten(events):  # sealed without its answer, so the save queue removes it
            _seal(journal, session, turn, None, event, events)
            return step(turn, None, answer_needed=False)
        _redact(payload, _prompt_event(events))
        _seal(journal, session, turn, payload.get("last_assistant_message") if event == "Stop" else None, event, events, _noted(payload, {}))
        return step(turn, None, answer_needed=False)

    if event == "PostCompact" or (event == "SessionStart" and payload.get("source") == "compact"):
        from eggshell.reuse.delivery import Deliveries

        Deliveries(paths.state_dir, session, _log(paths, "chat state")).compacted()  # what was delivered is no longer in context
        return step(None, None, answer_needed=False)

    if event == "SessionStart":
        from eggshell.config import ConfigError

        try:
            cfg = _load_config(paths, cwd, config_file)
        except ConfigError as e:  # every hook of this project fails open from here: the user must hear why
            from eggshell.log import log_failure
            from eggshell.runtime import health

            log_failure(paths, event, e)
            return step(None, None, answer_needed=False, off=health.config_off(e))
        if not cfg.enabled:
            return None  # memory is off in this project: start nothing
        _redact(payload, None)  # it goes to the manager
        return step(None, None)
    return step(None, None, answer_needed=False)  # other events: nothing to add


def answer(payload: dict, st: Step, paths: Paths, res, effects: list | None = None, cap: int | None = None) -> dict:
    """The neutral answer for a recorded event, from loaded Resources (warm or cold); `cap`: the
    host's limit on context characters (hosts.base.Host.context_cap)."""
    if not st.answer_needed:
        return {}
    if st.event == "SessionStart":
        return _status(paths, st, res)
    sel = st.selection
    if sel is None or not sel.get("read"):
        return {}
    read = tuple(sel["read"])
    budget = min(int(sel.get("handoff_chars") or DEFAULT_BUDGET), int(cap or CONTEXT_CAP))
    local_union = bool(sel.get("local_union", True))
    journal = Journal(paths.journal_dir)

    if st.event in TOOL_EVENTS:
        from eggshell.reuse.engine import Inquiry

        work, shown = _tool_work(payload)
        staged = _staged(journal, st.session, st.turn)
        evidence = None
        if st.event != "PreToolUse":
            from eggshell.graph.turns import normalize_output

            evidence = normalize_output(payload.get("tool_response"))
        q = Inquiry(work, shown, (), budget, st.session, enforce=st.event == "PreToolUse", local_union=local_union, evidence=evidence)
        h = _reuse(paths, res, read, q, effects, staged=staged, standing=_judge(paths, res, journal, st, _call_cwd(payload, st.cwd)), call=st.event)
        if h.deny:
            return {"deny": h.text}
        return _context(h.text)

    if st.event == "UserPromptSubmit":
        from eggshell.reuse.engine import inquiry_from_hits
        from eggshell.search.searcher import hits_message

        cfg = _load_config(paths, st.cwd, st.config_file)  # how to rank (the stores are the turn's own)
        searcher = res.searcher(cfg, read)
        # egg-query's step and then egg-extract's, on the messages a pipe would carry: the same
        # handoff as `echo MESSAGE | egg-query | egg-extract` in this project, for this chat.
        # Retrieval nominates the ranked turns that bear on the prompt and their tool calls that
        # share terms with it; the engine adds what intrinsic matching proves and renders it all.
        message = {"query": {"text": inquiry_of(_need_str(payload, "prompt")), "chat": st.session, "turn": st.turn}}
        found = hits_message(searcher, message, cfg.top_k, cfg.min_coverage)
        q = inquiry_from_hits(found, searcher, budget, local_union=local_union)
        h = _reuse(paths, res, read, q, effects, hits=q.considered, standing=_judge(paths, res, journal, st, None))
        return _context(h.text)
    return {}


def inquiry_of(prompt: str) -> str:
    """What of a prompt is searched and matched: all of it, or its head and tail past INQUIRY_CHARS.

    Matching costs grow with the text (a 1 MB pasted log took seconds); the question is
    usually at one end. The journal and the store keep the whole prompt.
    """
    if len(prompt) <= INQUIRY_CHARS:
        return prompt
    half = INQUIRY_CHARS // 2
    return prompt[:half] + "\n" + prompt[-half:]


def refused_root(payload: object, paths: Paths, why: str) -> dict:
    """The answer when the data root is refused: SessionStart of a project that records says that
    memory is off and why ({} for any other event, and outside a project)."""
    if not isinstance(payload, dict) or payload.get("hook_event_name") != "SessionStart" or payload.get("source") == "compact":
        return {}
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) and payload.get("cwd") else os.getcwd()
    config_file = os.environ.get("EGGSHELL_CONFIG") or None
    if config_file is None and find_project(cwd) is None:
        return {}
    from eggshell.config import ConfigError
    from eggshell.runtime import health

    try:
        if not _load_config(paths, cwd, config_file).enabled:
            return {}
    except ConfigError:
        pass  # broken too: the data root is what stops everything, so it is named first
    return {"status": health.root_off(why)}


def _status(paths: Paths, st: Step, res) -> dict:
    """SessionStart's one line: what this chat's memory will do (its own profile, not only the default),
    or why it is off when its store is refused or cannot be read, and whether the semantic side the
    config asks for can run (health.py)."""
    from eggshell.runtime.chat import Chat, turn_profile
    from eggshell.config import ConfigError
    from eggshell.graph.store import EggError
    from eggshell.runtime import health

    cfg = _load_config(paths, st.cwd, st.config_file)
    ctl = Chat(paths.state_dir, st.session, _log(paths, "chat state")).peek()
    if ctl is not None and not ctl.enabled:
        return {"status": "Eggshell: memory is off in this chat (`egg on` turns it back on)."}
    name = turn_profile(ctl, cfg) if ctl is not None else cfg.default
    try:
        sel = cfg.selection(name)
    except ConfigError:
        sel = cfg.selection(None)
    if not sel.enabled:
        return {"status": "Eggshell: memory is off in this chat (profile %s)." % sel.profile}
    target = sel.write or sel.read[0]
    problem = store_problem(sel.write) if sel.write else None
    if problem is not None:  # each prompt of this chat would be refused before it is journaled
        return {"status": health.store_off(problem)}
    from eggshell.runtime.warm import TooLargeCold

    try:
        n = res.turn_count(target)
    except EggError as e:  # every prompt's search fails on it, and no save lands
        from eggshell.log import log_failure

        log_failure(paths, st.event, e)
        return {"status": health.damaged_off(e, target)}
    except TooLargeCold:  # a cold hook on a big store: the status still comes, without the count
        n = None
    rel = os.path.relpath(target, cfg.project_root) if cfg.project_root else target
    doing = "recording this project" if sel.write else "reading, not recording (profile %s)" % sel.profile
    if n is None:
        line = "Eggshell: %s in %s (too large to count before the manager has loaded it)" % (doing, rel)
    else:
        line = "Eggshell: %s; %d prior turn%s in %s" % (doing, n, "" if n == 1 else "s", rel)
    note = health.matcher_note(cfg, paths.prefix)
    return {"status": health.one_line(line + ("; " + note if note else "") + ".")}


def settle_here(paths: Paths, st: Step, res) -> None:
    """With no manager, this hook saves the turn it just sealed (and embeds it in the background)."""
    from eggshell.runtime.commits import settle

    if st.turn is None:
        return
    journal = Journal(paths.journal_dir)
    path = journal.turn_path(st.session, st.turn)
    if not os.path.exists(path):
        return
    done = settle(journal, path, res.store, resolver(paths), _log(paths, "save queue"))
    if done.index:
        from eggshell.config import ConfigError

        try:
            cfg = _load_config(paths, st.cwd, st.config_file)
        except ConfigError:
            return  # embedding ahead is only a speed-up; the next prompt embeds what it needs
        _pre_index(cfg, paths, list(done.index))


def resolver(paths: Paths):
    """(write egg, root) for a journal written before turns carried their target."""

    def resolve(cwd: str):
        from eggshell import config as _config

        cfg = _config.load(paths, cwd or os.getcwd())
        return (cfg.write_egg if cfg.enabled else None), cfg.project_root

    return resolve


def _pre_index(cfg, paths: Paths, items: list[dict]) -> None:
    """Embed a saved turn in the background, so the next prompt only embeds itself.

    The provider runs detached with its own stdio, so the host does not wait for it.
    """
    import subprocess

    from eggshell.search import matcher
    from eggshell.search.searcher import semantic_depth

    if cfg.mode == "lexical" or cfg.semantic_matcher is False:
        return
    argv = list(cfg.semantic_matcher) if isinstance(cfg.semantic_matcher, tuple) else matcher.builtin_argv(cfg, paths.bin_dir, semantic_depth(cfg.top_k))
    import ujson

    env = dict(os.environ, EGGSHELL_PREFIX=paths.prefix, EGGSHELL_DATA_ROOT=paths.data_root)
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=null, stderr=null, start_new_session=True, close_fds=True, env=env)
    try:
        p.stdin.write((ujson.dumps({"index": items}, ensure_ascii=False) + "\n").encode("utf-8"))
        p.stdin.close()
    except OSError:
        pass


def _staged(journal: Journal, session: str, turn: str | None) -> list:
    """The current turn's journaled tool calls as Values: work done in this turn, not committed yet."""
    if turn is None:
        return []
    from eggshell.graph.turns import TurnError, compile_turn, parse_turn

    record = turn_record(journal.read(session, turn), None)
    if record is None or not record["tools"]:
        return []
    try:
        return list(compile_turn(parse_turn(record)).roots)
    except TurnError:
        return []


def _call_cwd(payload: dict, cwd: str | None) -> str | None:
    """Where the proposed call runs (its `workdir` joined), as its fingerprint would be taken."""
    from eggshell.reuse.fingerprint import call_cwd

    name = payload.get("tool_name")
    return cwd if cwd is None or not isinstance(name, str) else call_cwd(name, payload.get("tool_input"), cwd)


def _judge(paths: Paths, res, journal: Journal, st: Step, cwd: str | None):
    """How each prior outcome stands now (standing.Judge): its inputs checked just now (freshness.py),
    in the project the turn runs in; `cwd`: where a proposed call runs (None at prompt time)."""
    from eggshell.reuse.freshness import reuse_judge

    prompt = _prompt_event(journal.read(st.session, st.turn)) if st.turn and journal.has(st.session, st.turn) else None
    root = prompt.get("root") if prompt and isinstance(prompt.get("root"), str) else find_project(st.cwd or os.getcwd())
    return reuse_judge(root, cwd, getattr(res, "freshness", None), paths.state_dir, _log(paths, "freshness"))


def _reuse(paths: Paths, res, read: tuple[str, ...], q, effects: list | None, *, staged=(), hits=(), standing=None,
           call: str | None = None):
    """Run the reuse engine for one inquiry (engine.Inquiry) of the chat `q.session`, on what it
    was given before; the delivery keys are recorded once the reply is out.

    `standing`: the freshness judge (trust joins it here); `call`: the tool event asking
    (PreToolUse, PostToolUse), None for the prompt; `hits`: the prompt's (as dicts), for `egg why`."""
    from dataclasses import replace

    from eggshell.reuse.delivery import Deliveries
    from eggshell.reuse.engine import handoff
    from eggshell.core.standing import judges
    from eggshell.graph.trust import judge as trust_judge, own_unions

    ledger = res.ledger()
    ws = own_unions(res.workspace(read, staged), ledger)
    # A prior outcome may stand in for a call only if its inputs are unchanged (freshness, the
    # `standing` passed in) and it is the user's own (trust): standing.join of the two.
    standing = judges(standing or _not_checked, trust_judge(ws.graphs, ledger, staged))
    session = q.session
    chat = Deliveries(paths.state_dir, session, _log(paths, "chat state"))
    state = chat.load()
    q = replace(q, delivered=state.delivered, after_compaction=state.after_compaction)
    with res.unlocked():  # the engine only reads the workspace: the manager's tool worker may answer meanwhile
        h = handoff(ws, q, log=_log(paths, "reuse"), standing=standing)
    if h.delivered and effects is not None:
        effects.append(lambda keys=h.delivered: chat.add(keys))
    # a prompt's outcome is remembered handed or not, so `egg why` explains a miss too
    if effects is not None and (h.text or call is None):
        effects.append(lambda: _remember(paths, session, h, hits, None if call is None else "%s %s" % (call, q.shown)))
    return h


def _not_checked(owner, outcome):
    """No freshness judge was given: inputs not checked, so nothing may stand in for a call."""
    from eggshell.core.standing import NOT_CHECKED

    return NOT_CHECKED


def _remember(paths: Paths, session: str, h, hits, call: str | None = None) -> None:
    """What `egg graph` and `egg why` show: the prompt's handoff this chat was last given.

    What a tool call was given (a denial, advice) is added to the reason and leaves the
    prompt's handoff in place, so `egg why` after a denial still explains the turn.
    """
    from eggshell.runtime.chat import Chat

    chat = Chat(paths.state_dir, session, _log(paths, "chat state"))
    if call is None:
        chat.delivered(h.text, _reason(h, hits))
    else:
        chat.noted(_call_reason(h, call))


def _call_reason(h, call: str) -> str:
    """One line for `egg why`: what a tool call was given."""
    keys = ", ".join(dict.fromkeys((*h.keys, *h.omitted))) or "already in context"
    if h.deny:
        return "%s: denied, completed prior work covers %s (%s)" % (call, "; ".join(h.covered), keys)
    return "%s: prior work added (%s)" % (call, keys)


def _reason(h, considered=()) -> str:
    """Why this handoff: each candidate turn (ranked, with its fused score, or weighed beside the
    ranking), whether the relevance decision let it through and on which check, or every check
    it failed and by how much; then what the engine showed. So a user can tell "nothing relevant"
    from "held back", and by what."""
    lines = []
    for j in considered:
        x = j.hit
        store = os.path.basename(x["store"])
        head = ("retrieved %s  rank %d  score %.3f  (%s)" % (x["key"], x["rank"], x["score"], store) if x.get("via", "ranked") == "ranked"
                else "weighed %s  %s%s  (%s)" % (x["key"], x.get("via"), ", cosine %.3f" % x["semantic"] if isinstance(x.get("semantic"), float) else "", store))
        if j.verdict.bears:
            lines.append("%s  bears on the prompt: %s" % (head, j.verdict.check))
        else:
            lines.append("%s  held back, no check passed:" % head)
            lines += ["    %s" % m for m in j.verdict.missing()]
    if not considered and not h.text:
        lines.append("no prior turn came near the last prompt: nothing ranked, nothing weighed")
    lines += ["evidence  %s  shown in full" % k for k in dict.fromkeys(h.keys)]
    lines += ["evidence  %s  listed only (over the budget; egg show reads it)" % k for k in dict.fromkeys(h.omitted)]
    return "\n".join(lines)


def _tool_work(payload: dict) -> tuple[str, str]:
    """(canonical tool Work, the command as people read it) of a tool event."""
    from eggshell.reuse.intrinsic import canonical_tool_work
    from eggshell.graph.records import command_of

    work = canonical_tool_work(_need_str(payload, "tool_name"), payload.get("tool_input"))
    return work, command_of(work)


def _context(text: str) -> dict:
    return {"context": text} if text else {}
