"""Codex CLI hooks (Claude Code sends the same shape and is served here too).

Each event is one short process. What must survive is written first: the prompt at
UserPromptSubmit and every tool result at PostToolUse go to the durable journal
before any search runs; Stop commits the journaled turn with its final answer. The
caller (hook.py) turns any exception into `{}`, so the agent is never blocked.
"""

from __future__ import annotations

import datetime as _dt
import os
import uuid
from typing import Any

from .. import config as _config
from ..journal import Journal, turn_record
from ..paths import Paths, find_project

# Each event is its own process: modules an event does not need are imported inside it.


class PayloadError(ValueError):
    """A hook payload without the fields its event needs."""


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _need_str(p: dict, key: str) -> str:
    v = p.get(key)
    if not isinstance(v, str) or not v:
        raise PayloadError("%s payload has no %r" % (p.get("hook_event_name"), key))
    return v


def _turn_id(p: dict, journal: Journal, session: str) -> str | None:
    # Codex sends turn_id; Claude Code sends prompt_id; otherwise the session's open turn.
    for key in ("turn_id", "prompt_id"):
        v = p.get(key)
        if isinstance(v, str) and v:
            return v
    return journal.current(session)


def _log(paths: Paths):
    def log(msg: str) -> None:
        from ..hook import log_failure

        log_failure(paths, "search", RuntimeError(msg))

    return log


def _pre_index(cfg, paths: Paths, items: list[dict]) -> None:
    """Embed a saved turn in the background, so the next prompt only embeds itself.

    The provider runs detached with its own stdio, so the host does not wait for it.
    """
    import subprocess

    from .. import matcher
    from ..query import semantic_depth

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
    from ..turns import TurnError, compile_turn, parse_turn

    record = turn_record(journal.read(session, turn), None)
    if record is None or not record["tools"]:
        return []
    try:
        return list(compile_turn(parse_turn(record)).roots)
    except TurnError:
        return []


def _reuse(cfg, paths: Paths, session: str, inquiry: str, shown: str, effects: list | None, *, staged=(), retrieved=(),
           enforce: bool = False, evidence: str | None = None, stores=None):
    """Run the reuse engine for one inquiry; the delivery keys are recorded once the reply is out."""
    from ..delivery import Deliveries
    from ..engine import handoff, workspace
    from ..store import Store

    ws = workspace((st.graph for st in (stores if stores is not None else (Store.open(p) for p in cfg.read_eggs))), staged)
    chat = Deliveries(paths.state_dir, session, _log(paths))
    state = chat.load()
    h = handoff(ws, inquiry, shown, retrieved=retrieved, budget=cfg.handoff_chars, delivered=state.delivered, session=session,
                after_compaction=state.after_compaction, enforce=enforce, local_union=cfg.local_union, evidence=evidence,
                log=_log(paths))
    if h.delivered and effects is not None:
        effects.append(lambda keys=h.delivered: chat.add(keys))
    return h


def handle(payload: Any, paths: Paths, effects: list | None = None) -> dict:
    """The JSON reply for one hook event; `effects` collects what runs after it is written."""
    if not isinstance(payload, dict):
        raise PayloadError("hook payload is not a JSON object")
    event = _need_str(payload, "hook_event_name")
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) and payload.get("cwd") else os.getcwd()
    root = find_project(cwd)
    if root is None:
        return {}  # not an Eggshell project: leave it alone
    session = _need_str(payload, "session_id")
    journal = Journal(paths.journal_dir)

    if event == "PostToolUse":
        # Durable before anything else (no config read, no store opened). A turn is only
        # journaled if its prompt was, which is also how `enabled = false` is honoured.
        turn = _turn_id(payload, journal, session)
        if turn is None or not journal.has(session, turn):
            return {}
        journal.append(
            session,
            turn,
            {
                "event": "tool",
                "name": _need_str(payload, "tool_name"),
                "id": payload.get("tool_use_id") if isinstance(payload.get("tool_use_id"), str) else uuid.uuid4().hex,
                "input": payload.get("tool_input"),
                "output": payload.get("tool_response"),
                "time": _now(),
            },
        )
        cfg = _config.load(paths, cwd)
        if not cfg.enabled:
            return {}
        from ..turns import normalize_output

        work, shown = _tool_work(payload)
        h = _reuse(cfg, paths, session, work, shown, effects, staged=_staged(journal, session, turn),
                   evidence=normalize_output(payload.get("tool_response")))
        return _context("PostToolUse", h.text)

    cfg = _config.load(paths, cwd)
    if not cfg.enabled:
        return {}

    if event == "PostCompact" or (event == "SessionStart" and payload.get("source") == "compact"):
        from ..delivery import Deliveries

        Deliveries(paths.state_dir, session, _log(paths)).compacted()  # what was delivered is no longer in context
        if event == "PostCompact":
            return {}

    if event == "PreToolUse":
        work, shown = _tool_work(payload)
        h = _reuse(cfg, paths, session, work, shown, effects, staged=_staged(journal, session, _turn_id(payload, journal, session)),
                   enforce=True)
        if h.deny:
            return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": h.text}}
        return _context("PreToolUse", h.text)

    if event == "SessionStart":
        from ..records import turn_views
        from ..store import Store

        store = Store.open(cfg.write_egg)
        n = len(turn_views(store.graph))
        rel = os.path.relpath(cfg.write_egg, cfg.project_root)
        return {"systemMessage": "Eggshell: recording this project; %d prior turn%s in %s." % (n, "" if n == 1 else "s", rel)}

    if event == "UserPromptSubmit":
        prompt = _need_str(payload, "prompt")
        # A new prompt opens a new turn: never fall back to the session's previous one.
        turn = next((payload[k] for k in ("turn_id", "prompt_id") if isinstance(payload.get(k), str) and payload[k]), uuid.uuid4().hex)
        journal.append(session, turn, {"event": "prompt", "session": session, "turn": turn, "cwd": cwd, "prompt": prompt, "time": _now()})
        journal.set_current(session, turn)
        from .. import matcher
        from ..handoff import relevant_tools
        from ..query import Searcher, semantic_depth
        from ..store import Store

        semantic, close = matcher.choose(cfg, paths.data_root, paths.bin_dir, semantic_depth(cfg.top_k), _log(paths), prefer_in_process=True)
        try:
            trace = os.path.join(paths.data_root, "semantic", "matcher-trace.jsonl")
            searcher = Searcher((Store.open(p) for p in cfg.read_eggs), cfg.mode, semantic, trace=trace, model=cfg.model,
                                k1=cfg.bm25_k1, b=cfg.bm25_b)
            hits = searcher.search(prompt, cfg.top_k, cfg.min_coverage)
        finally:
            close()
        views = [searcher.by_id[h.id] for h in hits if h.session != session or h.turn != turn]
        # Retrieval nominates whole turns and their tool calls that share terms with the
        # prompt; the engine adds what intrinsic matching proves and renders it all.
        retrieved = [i for v in views for i in (v.id, *(t.id for t in relevant_tools(v, prompt)))]
        h = _reuse(cfg, paths, session, prompt, prompt, effects, retrieved=retrieved, stores=searcher.stores)  # loaded once
        return _context("UserPromptSubmit", h.text)

    if event == "Stop":
        turn = _turn_id(payload, journal, session)
        if turn is None:
            return {}
        answer = payload.get("last_assistant_message")
        record = turn_record(journal.read(session, turn), answer if isinstance(answer, str) else None)
        if record is None:
            return {}
        if record["tools"] or record["answer"]:
            from ..save import save_turn
            from ..store import Store

            saved = save_turn(Store.open(cfg.write_egg), record, cfg.project_root)
            if saved.index:
                _pre_index(cfg, paths, saved.index)
        journal.discard(session, turn)
        return {}

    return {}  # SessionEnd and other events: nothing to add


def _tool_work(payload: dict) -> tuple[str, str]:
    """(canonical tool Work, the command as people read it) of a tool event."""
    from ..intrinsic import canonical_tool_work
    from ..records import command_of

    work = canonical_tool_work(_need_str(payload, "tool_name"), payload.get("tool_input"))
    return work, command_of(work)


def _context(event: str, text: str) -> dict:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}} if text else {}
