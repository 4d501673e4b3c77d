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


def handle(payload: Any, paths: Paths) -> dict:
    """The JSON reply for one hook event."""
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
        return {}

    cfg = _config.load(paths, cwd)
    if not cfg.enabled:
        return {}

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
        from ..handoff import render
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
        text = render(prompt, views, cfg.handoff_chars).text
        if not text:
            return {}
        return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": text}}

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

    return {}  # PreToolUse and other events: nothing to add yet
