"""A scripted, stdlib-only fake of the OpenAI Chat Completions API, for driving the real OpenCode.

OpenCode takes a custom provider (``"npm": "@ai-sdk/openai-compatible"``, ``options.baseURL``
``http://127.0.0.1:PORT/v1``) and sends ``POST /v1/chat/completions`` with ``stream: true``
and the whole conversation in ``messages``; the server answers with server-sent events, one
``data:`` chunk holding the step (a text delta or one tool call), then ``data: [DONE]``.
Each chat follows a *script*, as in ``fake_model_server``:

    {"shell": "rg -n x src"}               -> a call of OpenCode's ``bash`` tool
    {"call": "read", "args": {...}}        -> a call of any tool
    {"say": "Final answer ..."}            -> a text (ends the turn)

Step selection is stateless: the step index is the number of tool calls the assistant already
made in ``messages``. The script is chosen by the chat's user texts: the one a user text starts
with (a later chat's handoff may quote an earlier prompt, and must not follow its script).
Requests that are not the main loop (the title a small model writes: no ``tools``) get a short
text and are recorded too.
"""

from __future__ import annotations

import json
import time
from typing import Any, Mapping

from fake_model_server import EXHAUSTED_TEXT, NO_SCRIPT_TEXT, RecordedRequest, ScriptedHandler, ScriptedServer, Step  # noqa: F401

MODEL = "scripted"


def messages(body: Any) -> list[Mapping[str, Any]]:
    return [m for m in (body.get("messages") or []) if isinstance(m, Mapping)] if isinstance(body, Mapping) else []


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)]
    return []


def user_texts(body: Any) -> list[str]:
    """Every text of every user message, in order (a message's parts one by one)."""
    return [t for m in messages(body) if m.get("role") == "user" for t in _texts(m.get("content"))]


def system_texts(body: Any) -> list[str]:
    return [t for m in messages(body) if m.get("role") == "system" for t in _texts(m.get("content"))]


def tool_calls(body: Any) -> list[Mapping[str, Any]]:
    """The assistant's tool calls so far, each ``{"name", "arguments" (parsed)}``."""
    out = []
    for m in messages(body):
        for c in (m.get("tool_calls") or []) if m.get("role") == "assistant" else []:
            fn = c.get("function") if isinstance(c, Mapping) else None
            if isinstance(fn, Mapping):
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    args = fn.get("arguments")
                out.append({"name": fn.get("name"), "arguments": args, "id": c.get("id")})
    return out


def tool_results(body: Any) -> list[str]:
    """What each tool call returned, as the model was shown it."""
    return ["\n".join(_texts(m.get("content"))) for m in messages(body) if m.get("role") == "tool"]


def is_main_loop(rec: RecordedRequest) -> bool:
    return rec.method == "POST" and rec.path.endswith("/chat/completions") and isinstance(rec.body, Mapping) \
        and bool(rec.body.get("tools"))


class FakeOpenAIServer(ScriptedServer):
    """A scripted Chat Completions server (what OpenCode's openai-compatible provider talks to)."""

    thread_name = "fake-openai-server"

    @property
    def base_url(self) -> str:
        """What goes in the provider's ``options.baseURL``: ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self._host}:{self.port}/v1"

    def main_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if is_main_loop(r)]

    def requests_for(self, prompt: str) -> list[RecordedRequest]:
        """Main-loop requests of the chat whose prompt starts with `prompt`."""
        return [r for r in self.main_requests() if any(t.startswith(prompt) for t in user_texts(r.body))]

    def script_for(self, prompt: str) -> list[Step] | None:
        if self._chooser is not None:
            return self._chooser(prompt)
        texts = prompt.split("\x00")
        with self._lock:
            return next((steps for key, steps in self._scripts.items() if any(t.startswith(key) for t in texts)), None)

    def reply_step(self, body: Mapping[str, Any]) -> tuple[int, dict]:
        step = len(tool_calls(body))
        try:
            script = self.script_for("\x00".join(user_texts(body)))
        except Exception as exc:  # a broken chooser must not hang the CLI
            script = [{"say": f"script chooser failed: {exc!r}"}]
        if script is None:
            return step, {"say": NO_SCRIPT_TEXT}
        if step >= len(script):
            return step, {"say": EXHAUSTED_TEXT}
        return step, dict(script[step])


def _delta(step: Step, n: int) -> tuple[dict, str]:
    """The chunk's delta for a step, and its finish reason."""
    if "say" in step:
        return {"role": "assistant", "content": str(step["say"])}, "stop"
    if "shell" in step:
        name, args = "bash", {"command": step["shell"], "description": "run it", **step.get("args", {})}
    elif "call" in step:
        name, args = step["call"], dict(step.get("args", {}))
    else:
        return {"role": "assistant", "content": f"bad script step: {dict(step)!r}"}, "stop"
    call = {"index": 0, "id": "call_%d" % n, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"


def chunks(step: Step, n: int) -> list[dict]:
    delta, finish = _delta(step, n)
    base = {"id": "chatcmpl-%d" % n, "object": "chat.completion.chunk", "created": int(time.time()), "model": MODEL}
    return [dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}]),
            dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]),
            dict(base, choices=[], usage={"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110})]


class _Handler(ScriptedHandler):
    owner: FakeOpenAIServer

    def _handle(self) -> None:
        rec = self._recorded()
        body = rec.body
        if rec.path.endswith("/chat/completions") and isinstance(body, Mapping):
            if body.get("tools"):
                rec.step, step = self.owner.reply_step(body)
            else:
                step = {"say": "Scripted title"}
            rec.reply = step
            self.owner._record(rec)
            n = self.owner._next_id()
            if body.get("stream"):
                data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks(step, n)) + b"data: [DONE]\n\n"
                self._send(200, data, "text/event-stream")
            else:
                delta, finish = _delta(step, n)
                message = {k: v for k, v in delta.items() if v is not None}
                self._send(200, json.dumps({"id": "chatcmpl-%d" % n, "object": "chat.completion", "model": MODEL,
                                            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                                            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}).encode(),
                           "application/json")
        elif rec.path.endswith("/models"):
            self.owner._record(rec)
            self._send(200, json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode(), "application/json")
        else:
            self.owner._record(rec)
            self._send(404, json.dumps({"error": {"message": "fake openai server: no %s %s" % (self.command, rec.path)}}).encode(),
                       "application/json")

    do_POST = do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle


FakeOpenAIServer.handler = _Handler
