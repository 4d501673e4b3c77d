"""A scripted, stdlib-only fake of the Anthropic Messages API, for driving the real Claude Code.

Claude Code (``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT``) sends ``POST /v1/messages?beta=true``
with the whole conversation in ``messages`` and ``stream: true``; the server answers with
server-sent events (``message_start``, one content block, ``message_delta``, ``message_stop``).
Each chat follows a *script*, a list of steps:

    {"bash": "rg -n x src"}                     -> a tool_use of ``Bash`` ({"command", "description"})
    {"bash": "ls", "description": "list"}       -> same, with this description
    {"tool": "Read", "input": {...}}            -> a tool_use of any other tool
    {"say": "Final answer ..."}                 -> an assistant text (ends the turn)

Step selection is stateless: the step index is the number of ``tool_use`` blocks already in the
request's ``messages``, so one server can serve many ``claude -p`` runs at once. Which script a
request follows is decided from the chat's *prompt* (see :func:`prompt_text`), by substring, as
in ``fake_model_server.FakeModelServer``. A request with no script, or past its script's end,
gets ``"no script for this prompt"`` / ``"script exhausted"`` as a final text, so nothing loops.

Claude Code also makes side requests to the same endpoint (e.g. a short title or topic request
with no tools). They are answered and recorded too; :meth:`FakeAnthropicServer.requests_for`
returns only the requests of the main loop (those offering tools). Every request is recorded
(:class:`RecordedRequest`: method, path, parsed JSON body) so a test can assert on exactly what
the model received, with :func:`system_reminders`, :func:`tool_results` and friends.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Mapping

from fake_model_server import EXHAUSTED_TEXT, NO_SCRIPT_TEXT, Script, ScriptSource, ScriptedServer, Step  # noqa: F401 - shared

MODEL = "claude-sonnet-4-5"
REMINDER = "<system-reminder>"


# --------------------------------------------------------------------------------------------
# Reading request bodies


def _body(request: "RecordedRequest | Mapping[str, Any]") -> Mapping[str, Any]:
    body = request.body if isinstance(request, RecordedRequest) else request
    return body if isinstance(body, Mapping) else {}


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, Mapping)]


def messages(request, role: str | None = None) -> list[Mapping[str, Any]]:
    """The ``messages`` of a request body (of one role if given)."""
    return [m for m in _body(request).get("messages") or []
            if isinstance(m, Mapping) and (role is None or m.get("role") == role)]


def user_texts(request) -> list[str]:
    """Every text block of every user message, in order (system reminders included)."""
    return [b.get("text", "") for m in messages(request, "user") for b in _blocks(m) if b.get("type") == "text"]


def system_reminders(request) -> list[str]:
    """The ``<system-reminder>`` texts of the user messages.

    Hook ``additionalContext`` lands here for claude-sonnet-4-5 (what ``ClaudeHome`` pins; for
    claude-opus-5-5 Claude Code 2.1.328 uses a ``role: "system"`` message instead). A reminder
    may be a text block of its own or follow a tool_result's content, so both are searched.
    """
    texts = list(user_texts(request))
    for result in tool_result_blocks(request):
        texts.append(_result_text(result))
    out = []
    for text in texts:
        rest = text
        while REMINDER in rest:
            rest = rest.split(REMINDER, 1)[1]
            inner, _, rest = rest.partition("</system-reminder>")
            out.append(inner.strip())
    return out


def hook_contexts(request, event: str = "UserPromptSubmit") -> list[str]:
    """The ``additionalContext`` texts a hook of ``event`` added, as the model received them."""
    prefix = "%s hook additional context: " % event
    return [r[len(prefix):] for r in system_reminders(request) if r.startswith(prefix)]


def tool_uses(request) -> list[Mapping[str, Any]]:
    """The assistant ``tool_use`` blocks in ``messages`` (earlier model tool calls)."""
    return [b for m in messages(request, "assistant") for b in _blocks(m) if b.get("type") == "tool_use"]


def tool_result_blocks(request) -> list[Mapping[str, Any]]:
    return [b for m in messages(request, "user") for b in _blocks(m) if b.get("type") == "tool_result"]


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, Mapping))


def tool_results(request) -> dict[str, str]:
    """``tool_use_id`` -> the text the model received as that call's result."""
    return {b.get("tool_use_id"): _result_text(b) for b in tool_result_blocks(request)}


def tool_use_id(request, command: str) -> str | None:
    """The id of the ``Bash`` tool_use that ran ``command`` (None if there is none)."""
    for b in tool_uses(request):
        if b.get("name") == "Bash" and (b.get("input") or {}).get("command") == command:
            return b.get("id")
    return None


def prompt_text(request) -> str:
    """The chat's prompt: the first user message's text blocks that are not system reminders.

    Claude Code sends the prompt as a text block of the first user message, beside reminder
    blocks (context, hook output); joined with newlines if there are several.
    """
    users = messages(request, "user")
    if not users:
        return ""
    texts = [b.get("text", "") for b in _blocks(users[0]) if b.get("type") == "text"]
    return "\n".join(t for t in texts if not t.lstrip().startswith(REMINDER))


def tool_names(request) -> list[str]:
    return [t.get("name") for t in _body(request).get("tools") or [] if isinstance(t, Mapping)]


# --------------------------------------------------------------------------------------------
# Recording


@dataclass
class RecordedRequest:
    method: str
    path: str
    body: Any  # parsed JSON, or raw text when not JSON
    time: float  # time.time() when the request arrived
    headers: dict = field(default_factory=dict)
    step: int | None = None  # /v1/messages only: the step index served
    reply: Any = None  # /v1/messages only: the content block sent back (dict)

    @property
    def is_messages(self) -> bool:
        return self.method == "POST" and self.path.rstrip("/").endswith("/v1/messages")

    @property
    def is_main_loop(self) -> bool:
        """A request of the agent loop (it offers tools), not a side request such as a title."""
        return self.is_messages and bool(tool_names(self))

    @property
    def prompt(self) -> str:
        return prompt_text(self) if self.is_messages else ""


# --------------------------------------------------------------------------------------------
# The server


class FakeAnthropicServer(ScriptedServer):
    """A scripted Messages-API server (what Claude Code talks to). Use as a context manager."""

    thread_name = "fake-anthropic-server"

    @property
    def base_url(self) -> str:
        """What goes in ``ANTHROPIC_BASE_URL``: ``http://127.0.0.1:PORT`` (no ``/v1``)."""
        return f"http://{self._host}:{self.port}"

    def messages_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.is_messages]

    def requests_for(self, prompt_substring: str) -> list[RecordedRequest]:
        """Main-loop ``POST /v1/messages`` requests whose chat prompt contains ``prompt_substring``."""
        return [r for r in self.messages_requests() if r.is_main_loop and prompt_substring in r.prompt]

    def other_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if not r.is_main_loop]

    def reply_block(self, body: Mapping[str, Any]) -> tuple[int, dict]:
        """The step index and content block for one ``/v1/messages`` request body.

        Side requests (no tools offered) never advance a script: they get a short text.
        """
        step = len(tool_uses(body))
        n = self._next_id()
        if not tool_names(body):
            return step, _text_block("ok")
        try:
            script = self.script_for(prompt_text(body))
        except Exception as exc:  # a broken chooser must not hang Claude Code
            script = [{"say": f"script chooser failed: {exc!r}"}]
        if script is None:
            return step, _text_block(NO_SCRIPT_TEXT)
        if step >= len(script):
            return step, _text_block(EXHAUSTED_TEXT)
        return step, _step_block(n, script[step])


def _text_block(text: str) -> dict:
    return {"type": "text", "text": text}


def _step_block(n: int, step: Step) -> dict:
    if "say" in step:
        return _text_block(str(step["say"]))
    if "bash" in step:
        command = step["bash"]
        return {"type": "tool_use", "id": f"toolu_{n:04d}", "name": "Bash",
                "input": {"command": command, "description": step.get("description", "Run " + command.split()[0])}}
    if "tool" in step:
        return {"type": "tool_use", "id": f"toolu_{n:04d}", "name": step["tool"], "input": dict(step.get("input", {}))}
    return _text_block(f"bad script step: {dict(step)!r}")


def _sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def stream_events(block: dict, message_id: str, model: str = MODEL) -> bytes:
    """The SSE body of one streamed reply holding ``block``, as the Messages API sends it."""
    usage = {"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    start = {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None, "usage": usage}
    if block["type"] == "tool_use":
        opening = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        stop_reason = "tool_use"
    else:
        opening = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
        stop_reason = "end_turn"
    return b"".join([
        _sse("message_start", {"type": "message_start", "message": start}),
        _sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": opening}),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                               "usage": {"output_tokens": 10}}),
        _sse("message_stop", {"type": "message_stop"}),
    ])


def message_json(block: dict, message_id: str, model: str = MODEL) -> dict:
    """The same reply, unstreamed (for a request without ``stream: true``)."""
    return {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": [block],
            "stop_reason": "tool_use" if block["type"] == "tool_use" else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 10}}


class _Handler(BaseHTTPRequestHandler):
    owner: FakeAnthropicServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # keep test output quiet
        pass

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        if (self.headers.get("Content-Encoding") or "").lower() in ("gzip", "deflate"):
            import zlib
            raw = zlib.decompress(raw, 47)
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if content_type == "text/event-stream":
            self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
            self.wfile.flush()

    def _send_json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def _handle(self) -> None:
        body = self._read_body()
        rec = RecordedRequest(self.command, self.path.split("?", 1)[0], body, time.time(), headers=dict(self.headers.items()))
        path = rec.path.rstrip("/")
        if rec.is_messages:
            body = body if isinstance(body, Mapping) else {}
            rec.step, rec.reply = self.owner.reply_block(body)
            self.owner._record(rec)
            mid = "msg_fake_%04d" % self.owner._next_id()
            model = body.get("model") or MODEL
            if body.get("stream"):
                self._send(200, stream_events(rec.reply, mid, model), "text/event-stream")
            else:
                self._send_json(200, message_json(rec.reply, mid, model))
            return
        self.owner._record(rec)
        if self.command == "POST" and path.endswith("/v1/messages/count_tokens"):
            self._send_json(200, {"input_tokens": 100})
        else:
            self._send_json(404, {"type": "error", "error": {"type": "not_found_error",
                                                             "message": f"fake anthropic server: no {self.command} {rec.path}"}})

    do_POST = do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle


FakeAnthropicServer.handler = _Handler
