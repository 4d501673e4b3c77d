"""Claude Code session files (`~/.claude/projects/PROJECT/SESSION.jsonl`) as turn records.

Read from what Claude Code 2.1 writes (tests/e2e/test_import_claude.py runs it), compared
with what its hooks send for the same chat. Each line is one record; those of the
conversation have `type` `user` or `assistant`, a `message` (a Messages API message),
`sessionId` (the hooks' session_id), `cwd`, `timestamp`, and on user records `promptId`
(the hooks' prompt_id, which Eggshell takes as the turn). Everything else (attachments,
hook summaries, API request shapes, cost records, queue operations) is not part of a turn.

- A turn starts at a user record whose text is a request: not `isMeta` (context Claude
  Code adds), not a compaction summary (`isCompactSummary`), not a local command
  (`<command-name>`, `<local-command-stdout>`: /compact and the like never reach the model
  and fire no UserPromptSubmit), not a tool result. A record of a prompt id already seen
  continues its turn.
- A call is an assistant `tool_use` block (`id`, the hooks' tool_use_id, `name`, `input`)
  and its result the user record's `tool_result` block with that id. What PostToolUse
  reports as the output is the record's `toolUseResult` (Bash: {stdout, stderr, interrupted,
  ...}; Read: the file object); a failed call (`is_error`) is PostToolUseFailure, whose
  `error` is the result's text.
- The answer is the text of the turn's last assistant message when it holds no tool_use
  (the Stop hook's last_assistant_message); "[Request interrupted by user ...]", an API
  error or a last message that is a tool call leave the turn interrupted (no answer).

Subagent side conversations (`isSidechain`, and the files under SESSION/subagents/) are
skipped, not stored as turns of their own: their prompt is one the model wrote, not the
user; they carry the parent's prompt id, so a turn of their own would need an invented
id; and what the parent learned from one is already in the parent's turn, as the Agent
call's result. (Live capture attaches a subagent's calls to the parent turn only while that
turn is still unsaved, so there is no stable live form to match either.)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping


from eggshell.core.binary import without_binary
from eggshell.hosts.transcripts import Found, Records, Transcript, text_of

NAME = "claude"
LABEL = "Claude Code"
LOCAL_COMMAND = ("<command-name>", "<command-message>", "<local-command-")
INTERRUPTED = "[Request interrupted by user"
SYNTHETIC = "<synthetic>"  # the model name of messages Claude Code writes itself (API errors, "No response requested.")


def config_dir(env: Mapping[str, str]) -> str:
    """CLAUDE_CONFIG_DIR when set (blank is unset, as Claude Code treats it), else ~/.claude."""
    d = (env.get("CLAUDE_CONFIG_DIR") or "").strip()
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.abspath(os.path.expanduser(d)) if d else os.path.join(home, ".claude")


def default_roots(env: Mapping[str, str], codex_home: str) -> list[str]:
    return [os.path.join(config_dir(env), "projects")]


def is_transcript_name(name: str) -> bool:
    return name.endswith(".jsonl")


def skip_dir(name: str) -> bool:
    """Subagent side conversations live in SESSION/subagents/: not turns of their own (above)."""
    return name == "subagents"


class _Turn:
    __slots__ = ("pid", "session", "cwd", "prompt", "time", "tools", "last_id", "last_text", "last_call", "cut")

    def __init__(self, pid: str, session: str, cwd: str, prompt: str, time: str):
        self.pid, self.session, self.cwd, self.prompt, self.time = pid, session, cwd, prompt, time
        self.tools: list[dict] = []
        self.last_id: object = None  # the message id of the last assistant message
        self.last_text: list[str] = []
        self.last_call = False  # the last assistant message asked for a tool
        self.cut = False  # interrupted by the user, or ended by an API error

    def answer(self) -> str | None:
        if self.cut or self.last_call or not self.last_text:
            return None
        return "\n".join(self.last_text) or None


def _result(block: dict, record: dict, single: bool) -> object:
    """What the hook reported for one tool_result: toolUseResult, or a failure's text."""
    content = block.get("content")
    if block.get("is_error") is True:
        return text_of(content) if isinstance(content, list) else content if isinstance(content, str) else ""
    if single and "toolUseResult" in record and record["toolUseResult"] is not None:
        return without_binary(record["toolUseResult"])
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return text_of(content)
    return without_binary(content if content is not None else "")


def parse(lines: Iterable[bytes], path: str = "") -> Transcript:
    """The turns of one session file, in order (see the module docstring)."""
    side = orphans = 0
    seen_session = False
    turns: list[_Turn] = []
    by_pid: dict[str, _Turn] = {}
    cur: _Turn | None = None
    calls: dict[str, tuple[_Turn, dict]] = {}
    answered: set[str] = set()
    rows = Records(lines)
    for d in rows:
        if isinstance(d.get("sessionId"), str):
            seen_session = True
        if d.get("isSidechain") is True:
            side += 1
            continue
        kind, msg = d.get("type"), d.get("message")
        if kind not in ("user", "assistant") or not isinstance(msg, dict):
            continue
        content = msg.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        if kind == "assistant":
            if cur is None:
                continue
            if msg.get("model") == SYNTHETIC or d.get("isApiErrorMessage") is True:
                cur.cut, cur.last_id, cur.last_text, cur.last_call = True, None, [], False
                continue
            if msg.get("id") != cur.last_id or msg.get("id") is None:
                cur.last_id, cur.last_text, cur.last_call = msg.get("id"), [], False
            cur.cut = False
            for b in blocks:
                if b.get("type") == "text" and isinstance(b.get("text"), str) and b["text"]:
                    cur.last_text.append(b["text"])
                elif b.get("type") == "tool_use" and isinstance(b.get("id"), str) and isinstance(b.get("name"), str):
                    cur.last_call = True
                    if b["id"] not in calls:
                        tool = {"name": b["name"], "id": b["id"], "input": b.get("input", {})}
                        cur.tools.append(tool)
                        calls[b["id"]] = (cur, tool)
            continue
        if d.get("isMeta") is True or d.get("isCompactSummary") is True or d.get("isVisibleInTranscriptOnly") is True:
            continue
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if results:
            for b in results:
                use = b.get("tool_use_id")
                if use not in calls or use in answered:
                    orphans += use not in calls
                    continue
                answered.add(use)
                calls[use][1]["output"] = _result(b, d, len(results) == 1)
            continue
        text = text_of(content)
        if not text.strip() or text.lstrip().startswith(LOCAL_COMMAND):
            continue
        if text.startswith(INTERRUPTED):
            if cur is not None:
                cur.cut = True
            continue
        pid = d.get("promptId") if isinstance(d.get("promptId"), str) and d["promptId"] else None
        if pid is None:
            pid = "claude-" + str(d.get("uuid") or len(turns))  # before prompt ids: the record's own id, stable across runs
        if pid in by_pid:
            cur = by_pid[pid]
            continue
        session = d.get("sessionId") if isinstance(d.get("sessionId"), str) else ""
        cur = _Turn(pid, session, d.get("cwd") if isinstance(d.get("cwd"), str) else "", text, str(d.get("timestamp") or ""))
        by_pid[pid] = cur
        turns.append(cur)
    if not seen_session:
        return Transcript(path, bad_lines=rows.bad, bad_at=tuple(rows.bad_at), problem="not a Claude Code session file (no record names a sessionId)")
    found, no_result = [], 0
    for i, t in enumerate(turns):
        tools = [x for x in t.tools if "output" in x]
        no_result += len(t.tools) - len(tools)
        answer = t.answer()
        last = i == len(turns) - 1
        record = {"session": t.session, "turn": t.pid, "cwd": t.cwd, "prompt": t.prompt, "tools": tools, "answer": answer}
        found.append(Found(record, t.time, open=last and answer is None and not t.cut))
    session = turns[0].session if turns else None
    cwd = turns[0].cwd if turns else None
    return Transcript(path, session, cwd, tuple(found), bad_lines=rows.bad, no_result=no_result, orphans=orphans, sidechain=side,
                      bad_at=tuple(rows.bad_at))
