"""A scripted, stdlib-only fake of the OpenAI Responses API, for driving the real Codex CLI.

Codex (``wire_api = "responses"``) sends ``POST /v1/responses`` with the whole conversation in
``input``; the server answers with server-sent events (``response.created``,
``response.output_item.done``, ``response.completed``).  Each chat follows a *script*, a list of
steps:

    {"exec": "echo hello"}              -> a function_call to ``exec_command`` ({"cmd": ...})
    {"exec": "ls", "workdir": "/tmp"}    -> same, with extra ``exec_command`` arguments
    {"call": "name", "arguments": {...}} -> a function_call to any other tool
    {"say": "Final answer ..."}         -> an assistant message (ends the turn)

Step selection is stateless: the step index is the number of ``function_call`` items already in
the request ``input``.  So one server can serve many ``codex exec`` runs at once.  Which script a
request follows is decided from the chat's *prompt* (the text of the last real user message in
``input``, see :func:`prompt_text`):

    FakeModelServer({"fix the bug": [...], "explain": [...]})   # prompt-substring -> steps
    FakeModelServer(lambda prompt: [...])                       # any function of the prompt

If no script matches, or a script is exhausted, the server answers ``"script exhausted"`` (or
``"no script for this prompt"``) as a final message, so a chat never loops forever.

Every request is recorded (:class:`RecordedRequest`: method, path, parsed JSON body, time) so
tests can assert on what the model received, with :meth:`FakeModelServer.requests_for`,
:func:`developer_messages`, :func:`function_call_outputs` and friends.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Mapping, Sequence, Union

Step = Mapping[str, Any]
Script = Sequence[Step]
ScriptSource = Union[Mapping[str, Script], Callable[[str], "Script | None"], None]

EXHAUSTED_TEXT = "script exhausted"
NO_SCRIPT_TEXT = "no script for this prompt"


# --------------------------------------------------------------------------------------------
# Reading request bodies


def _content_texts(item: Mapping[str, Any]) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    texts = []
    for part in content or []:
        if isinstance(part, Mapping) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return texts


def _input_items(request: "RecordedRequest | Mapping[str, Any]") -> list[Mapping[str, Any]]:
    body = request.body if isinstance(request, RecordedRequest) else request
    if not isinstance(body, Mapping):
        return []
    items = body.get("input")
    if isinstance(items, str):  # the API allows a bare string; Codex never sends one
        return [{"type": "message", "role": "user", "content": items}]
    return [i for i in items or [] if isinstance(i, Mapping)]


def messages(request, role: str) -> list[str]:
    """Texts of every ``{"type":"message","role":role}`` item in ``input`` (parts joined)."""
    out = []
    for item in _input_items(request):
        if item.get("type", "message") == "message" and item.get("role") == role:
            out.append("".join(_content_texts(item)))
    return out


def user_messages(request) -> list[str]:
    return messages(request, "user")


def developer_messages(request) -> list[str]:
    """Texts of the ``role: developer`` messages (where hook ``additionalContext`` lands)."""
    return messages(request, "developer")


def assistant_messages(request) -> list[str]:
    return messages(request, "assistant")


def function_calls(request) -> list[Mapping[str, Any]]:
    """The ``function_call`` items in ``input`` (earlier model tool calls)."""
    return [i for i in _input_items(request) if i.get("type") == "function_call"]


def function_call_outputs(request) -> list[str]:
    """The ``output`` texts of the ``function_call_output`` items in ``input``."""
    out = []
    for item in _input_items(request):
        if item.get("type") == "function_call_output":
            value = item.get("output")
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, list):  # content-item form
                out.append("".join(p.get("text", "") for p in value if isinstance(p, Mapping)))
            else:
                out.append(json.dumps(value))
    return out


# Codex sends context as user messages too (AGENTS.md, <environment_context>, ...).
_CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md", "<INSTRUCTIONS>",
                     "<user_shell_command>", "<turn_aborted>", "<skill>", "<permissions")


def prompt_text(request) -> str:
    """The chat's prompt: the last user message that is not a Codex context wrapper.

    Falls back to the last user message, then to "".
    """
    users = user_messages(request)
    for text in reversed(users):
        if not text.lstrip().startswith(_CONTEXT_PREFIXES):
            return text
    return users[-1] if users else ""


def tool_names(request) -> list[str]:
    body = request.body if isinstance(request, RecordedRequest) else request
    names = []
    for tool in (body or {}).get("tools") or []:
        if isinstance(tool, Mapping):
            names.append(tool.get("name") or (tool.get("function") or {}).get("name") or tool.get("type"))
    return names


# --------------------------------------------------------------------------------------------
# Recording


@dataclass
class RecordedRequest:
    method: str
    path: str
    body: Any  # parsed JSON, or None / raw text when not JSON
    time: float  # time.time() when the request arrived
    headers: dict = field(default_factory=dict)
    step: int | None = None  # /v1/responses only: the step index served
    reply: Any = None  # /v1/responses only: the output item sent back (dict)

    @property
    def is_responses(self) -> bool:
        return self.method == "POST" and self.path.rstrip("/").endswith("/responses")

    @property
    def prompt(self) -> str:
        return prompt_text(self) if self.is_responses else ""


# --------------------------------------------------------------------------------------------
# The server


class ScriptedServer:
    """A scripted model server on 127.0.0.1 (ephemeral port): scripts, recorded requests, lifecycle.

    The wire protocol is a subclass's: its `handler` (a BaseHTTPRequestHandler whose `owner`
    is set to the server), its `base_url`, and how it turns a request into the next step.
    Use as a context manager.
    """

    handler: type = BaseHTTPRequestHandler
    thread_name = "fake-model-server"

    def __init__(self, scripts: ScriptSource = None, *, host: str = "127.0.0.1", port: int = 0):
        self._lock = threading.Condition()
        self._scripts: dict[str, list[Step]] = {}
        self._chooser: Callable[[str], Script | None] | None = None
        self._requests: list = []
        self._counter = 0
        if callable(scripts):
            self._chooser = scripts
        elif scripts:
            for key, steps in scripts.items():
                self.add_script(key, steps)
        self._host, self._port = host, port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle

    def start(self):
        if self._httpd is not None:
            return self
        server = self

        class Handler(self.handler):
            owner = server

        self._httpd = ThreadingHTTPServer((self._host, self._port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    close = stop

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    # ---- scripts

    def add_script(self, prompt_substring: str, steps: Script) -> None:
        """Chats whose prompt contains ``prompt_substring`` follow ``steps`` (first match wins,
        in insertion order)."""
        with self._lock:
            self._scripts[prompt_substring] = [dict(s) for s in steps]

    def script_for(self, prompt: str) -> Script | None:
        with self._lock:
            if self._chooser is not None:
                return self._chooser(prompt)
            for key, steps in self._scripts.items():
                if key in prompt:
                    return steps
        return None

    # ---- recorded requests

    @property
    def requests(self) -> list:
        """Every request received so far (all paths), oldest first."""
        with self._lock:
            return list(self._requests)

    def wait_for(self, predicate: Callable[[list], Any], timeout: float = 60.0):
        """Block until ``predicate(self.requests)`` is truthy; return its value (or raise
        TimeoutError)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                value = predicate(list(self._requests))
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"condition not met within {timeout}s; "
                                       f"{len(self._requests)} requests recorded")
                self._lock.wait(left)

    def _record(self, rec) -> None:
        with self._lock:
            self._requests.append(rec)
            self._lock.notify_all()

    def _next_id(self) -> int:
        with self._lock:
            self._counter += 1
            return self._counter


class ScriptedHandler(BaseHTTPRequestHandler):
    """What every fake's request handler shares: quiet, HTTP/1.1, a body read into a
    RecordedRequest, a reply with its length. `owner` is the ScriptedServer."""

    owner: ScriptedServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # keep test output quiet
        pass

    def _recorded(self) -> RecordedRequest:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        return RecordedRequest(self.command, self.path.split("?", 1)[0], body, time.time(), headers=dict(self.headers.items()))

    def _send(self, status: int, data: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
            self.wfile.flush()


class FakeModelServer(ScriptedServer):
    """A scripted Responses-API server (what Codex talks to)."""

    thread_name = "fake-model-server"

    def __init__(self, scripts: ScriptSource = None, *, host: str = "127.0.0.1", port: int = 0,
                 model_ids: Iterable[str] = ()):
        super().__init__(scripts, host=host, port=port)
        self.model_ids = list(model_ids)

    @property
    def base_url(self) -> str:
        """What goes in Codex's ``[model_providers.x] base_url``: ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self._host}:{self.port}/v1"

    def responses_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.is_responses]

    def requests_for(self, prompt_substring: str) -> list[RecordedRequest]:
        """``POST /v1/responses`` requests whose chat prompt contains ``prompt_substring``."""
        return [r for r in self.responses_requests() if prompt_substring in r.prompt]

    def other_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if not r.is_responses]

    def reply_item(self, body: Any) -> tuple[int, dict]:
        """The step index and output item for one ``/v1/responses`` request body."""
        step = len(function_calls(body))
        prompt = prompt_text(body)
        try:
            script = self.script_for(prompt)
        except Exception as exc:  # a broken chooser must not hang Codex
            script = [{"say": f"script chooser failed: {exc!r}"}]
        n = self._next_id()
        if script is None:
            return step, _message_item(n, NO_SCRIPT_TEXT)
        if step >= len(script):
            return step, _message_item(n, EXHAUSTED_TEXT)
        return step, _step_item(n, script[step])


def _message_item(n: int, text: str) -> dict:
    return {"type": "message", "role": "assistant", "id": f"msg_{n}", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def _step_item(n: int, step: Step) -> dict:
    if "say" in step:
        return _message_item(n, str(step["say"]))
    if "exec" in step:
        args = {"cmd": step["exec"]}
        args.update({k: v for k, v in step.items() if k != "exec"})
        name = "exec_command"
    elif "call" in step:
        name = step["call"]
        args = step.get("arguments", {})
    else:
        return _message_item(n, f"bad script step: {dict(step)!r}")
    return {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": name,
            "status": "completed", "arguments": args if isinstance(args, str) else json.dumps(args)}


def _sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    owner: FakeModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # keep test output quiet
        pass

    def _read_body(self) -> tuple[Any, bytes]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None, raw
        enc = (self.headers.get("Content-Encoding") or "").lower()
        try:
            if enc == "zstd":  # not expected; recorded raw if we cannot decode
                return raw, raw
            if enc in ("gzip", "deflate"):
                import zlib
                raw = zlib.decompress(raw, 47)
            return json.loads(raw), raw
        except ValueError:
            return raw.decode("utf-8", "replace"), raw

    def _send_json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _handle(self) -> None:
        body, _ = self._read_body()
        rec = RecordedRequest(self.command, self.path.split("?", 1)[0], body, time.time(),
                              headers=dict(self.headers.items()))
        if rec.is_responses:
            step, item = self.owner.reply_item(body if isinstance(body, Mapping) else {})
            rec.step, rec.reply = step, item
            self.owner._record(rec)
            self._send_events(item)
            return
        self.owner._record(rec)
        path = rec.path.rstrip("/")
        if self.command == "GET" and path.endswith("/models"):
            # Both the OpenAI list shape and Codex's own {"models": [...]} shape.
            ids = self.owner.model_ids
            self._send_json(200, {"object": "list", "data": [{"id": i, "object": "model"} for i in ids],
                                  "models": []})
        elif self.command in ("GET", "HEAD"):
            self._send_json(404, {"error": {"message": f"fake model server: no {rec.path}"}})
        else:
            self._send_json(404, {"error": {"message": f"fake model server: no {self.command} {rec.path}"}})

    def _send_events(self, item: dict) -> None:
        rid = f"resp_{item['id']}"
        usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 10,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110}
        payload = b"".join([
            _sse("response.created", {"type": "response.created", "response": {"id": rid}}),
            _sse("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                               "item": item}),
            _sse("response.completed", {"type": "response.completed",
                                        "response": {"id": rid, "usage": usage}}),
        ])
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    do_POST = do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle


FakeModelServer.handler = _Handler
