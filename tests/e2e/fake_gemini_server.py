"""A scripted, stdlib-only fake of the Gemini API, for driving the real Gemini CLI.

Gemini CLI (``GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT``, ``GEMINI_API_KEY`` set) sends
``POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`` with the whole conversation in
``contents``; the server answers with server-sent events, one ``data:`` chunk holding a
candidate. Each chat follows a *script*, as in ``fake_model_server``:

    {"shell": "rg -n x src"}               -> a functionCall of ``run_shell_command``
    {"call": "read_file", "args": {...}}   -> a functionCall of any tool
    {"say": "Final answer ..."}            -> a model text (ends the turn)

Step selection is stateless: the step index is the number of ``functionCall`` parts the model
already made in ``contents``. The script is chosen by the chat's user texts (the
prompt, with whatever a BeforeAgent hook appended to it): the one a user text starts with. Requests that are not the main
loop (``:generateContent`` side calls such as the next-speaker check, ``:countTokens``) are
answered with something harmless and recorded too.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from fake_model_server import EXHAUSTED_TEXT, NO_SCRIPT_TEXT, RecordedRequest, ScriptedHandler, ScriptedServer, Step  # noqa: F401

MODEL = "gemini-2.5-flash"


def contents(body: Any) -> list[Mapping[str, Any]]:
    return [c for c in (body.get("contents") or []) if isinstance(c, Mapping)] if isinstance(body, Mapping) else []


def parts(body: Any, role: str | None = None) -> list[Mapping[str, Any]]:
    return [p for c in contents(body) if role is None or c.get("role") == role
            for p in (c.get("parts") or []) if isinstance(p, Mapping)]


def user_texts(body: Any) -> list[str]:
    """Every text part of every user turn, in order."""
    return [p["text"] for p in parts(body, "user") if isinstance(p.get("text"), str)]


def function_calls(body: Any) -> list[Mapping[str, Any]]:
    return [p["functionCall"] for p in parts(body, "model") if isinstance(p.get("functionCall"), Mapping)]


def function_responses(body: Any) -> list[Mapping[str, Any]]:
    return [p["functionResponse"] for p in parts(body, "user") if isinstance(p.get("functionResponse"), Mapping)]


def is_main_loop(rec: RecordedRequest) -> bool:
    return rec.method == "POST" and rec.path.endswith(":streamGenerateContent") and isinstance(rec.body, Mapping) \
        and bool(rec.body.get("tools"))


class FakeGeminiServer(ScriptedServer):
    """A scripted Gemini API server (what Gemini CLI talks to). Use as a context manager."""

    thread_name = "fake-gemini-server"

    @property
    def base_url(self) -> str:
        """What goes in ``GOOGLE_GEMINI_BASE_URL``: ``http://127.0.0.1:PORT``."""
        return f"http://{self._host}:{self.port}"

    def main_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if is_main_loop(r)]

    def requests_for(self, prompt: str) -> list[RecordedRequest]:
        """Main-loop requests of the chat whose prompt starts with `prompt`."""
        return [r for r in self.main_requests() if any(t.startswith(prompt) for t in user_texts(r.body))]

    def script_for(self, prompt: str) -> list[Step] | None:
        """The script whose key a user text starts with: a later chat's prompt may quote an
        earlier one inside the handoff appended to it, and must not follow that one's script."""
        if self._chooser is not None:
            return self._chooser(prompt)
        texts = prompt.split("\x00")
        with self._lock:
            return next((steps for key, steps in self._scripts.items() if any(t.startswith(key) for t in texts)), None)

    def reply_part(self, body: Mapping[str, Any]) -> tuple[int, dict]:
        step = len(function_calls(body))
        try:
            script = self.script_for("\x00".join(user_texts(body)))
        except Exception as exc:  # a broken chooser must not hang the CLI
            script = [{"say": f"script chooser failed: {exc!r}"}]
        if script is None:
            return step, {"text": NO_SCRIPT_TEXT}
        if step >= len(script):
            return step, {"text": EXHAUSTED_TEXT}
        return step, _step_part(script[step])


def _step_part(step: Step) -> dict:
    if "say" in step:
        return {"text": str(step["say"])}
    if "shell" in step:
        return {"functionCall": {"name": "run_shell_command", "args": {"command": step["shell"], **step.get("args", {})}}}
    if "call" in step:
        return {"functionCall": {"name": step["call"], "args": dict(step.get("args", {}))}}
    return {"text": f"bad script step: {dict(step)!r}"}


def candidate(part: dict) -> dict:
    return {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
            "modelVersion": MODEL}


class _Handler(ScriptedHandler):
    owner: FakeGeminiServer

    def _handle(self) -> None:
        rec = self._recorded()
        body = rec.body
        path = rec.path
        if path.endswith(":streamGenerateContent") and isinstance(body, Mapping):
            if body.get("tools"):
                rec.step, part = self.owner.reply_part(body)
            else:
                part = {"text": "ok"}
            rec.reply = part
            self.owner._record(rec)
            self._send(200, b"data: " + json.dumps(candidate(part)).encode() + b"\r\n\r\n", "text/event-stream")
        elif path.endswith(":generateContent"):
            # Side calls that want JSON (the next-speaker check) get it: the user speaks next.
            rec.reply = {"text": json.dumps({"reasoning": "the model has answered", "next_speaker": "user"})}
            self.owner._record(rec)
            self._send(200, json.dumps(candidate(rec.reply)).encode(), "application/json")
        elif path.endswith(":countTokens"):
            self.owner._record(rec)
            self._send(200, json.dumps({"totalTokens": 100}).encode(), "application/json")
        else:
            self.owner._record(rec)
            self._send(404, json.dumps({"error": {"code": 404, "message": "fake gemini server: no %s %s" % (self.command, path)}}).encode(),
                       "application/json")

    do_POST = do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle


FakeGeminiServer.handler = _Handler
