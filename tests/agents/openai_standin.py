"""A stand-in of the OpenAI API on 127.0.0.1, for the real Codex CLI, opencode and aider.

It serves the two formats those CLIs call, from the public API reference:
- the Responses API, `POST /v1/responses` (Codex CLI, opencode): a stream of server-sent
  events, `response.created`, then for each output item (a `function_call` to one of
  the CLI's tools, or an assistant `message`) `response.output_item.added`, its
  arguments or text (`…arguments.delta/.done`, `…output_text.delta/.done`) and
  `response.output_item.done`, then `response.completed` whose `response.usage` has
  the token counts;
- Chat Completions, `POST /v1/chat/completions` (aider, through litellm): one
  `chat.completion` object, or with `"stream": true` its `chat.completion.chunk` events
  ending in `data: [DONE]`, with `usage`.

Given as the CLIs' HTTP(S) proxy too (`proxy_env`), it records, and refuses, any request
meant for another host (a price list, an update check, telemetry): `outside` lists them.

A test scripts its answers in order (`answer`): a `Reply` (tool calls and/or text, with
token counts, optionally held until released: a slow answer), or a `Refusal` (an HTTP
error: a 429 with `retry-after` and `x-ratelimit-reset-*` headers, a 500…). `always`
answers every request once the script is used up; `aside` answers side requests (a
session title) off the script. Every request is recorded, answered or not, so that a
test can check the key header arrived and nothing else was asked.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "gpt-4o-mini"


@dataclass
class Call:
    """A call of one of the CLI's tools: its name and its JSON arguments."""

    name: str
    arguments: dict[str, Any]


@dataclass
class Reply:
    """One answer of the model: tool calls (Responses API), then text; its usage."""

    text: str = ""
    calls: list[Call] = field(default_factory=list)
    input_tokens: int = 100
    output_tokens: int = 10
    # A slow answer: the stand-in holds it until the test sets this event.
    hold: threading.Event | None = None


@dataclass
class Refusal:
    """An HTTP error answer, as the API sends it (a 429 by default)."""

    status: int = 429
    message: str = "Rate limit reached for requests. Please try again in 20s."
    retry_after: int | None = 20
    code: str = "rate_limit_exceeded"

    def headers(self) -> dict[str, str]:
        if self.status != 429:
            return {}
        after = str(self.retry_after or 0)
        return {
            "retry-after": after,
            "x-ratelimit-limit-requests": "500",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": f"{after}s",
            "x-ratelimit-reset-tokens": f"{after}s",
        }

    def body(self) -> dict[str, Any]:
        kind = "requests" if self.status == 429 else "invalid_request_error"
        if self.status >= 500:
            kind = "server_error"
        return {"error": {"message": self.message, "type": kind, "param": None, "code": self.code}}


Answer = Reply | Refusal


@dataclass
class Request:
    """A request as it arrived: method, path, headers (lower-case names) and JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def bearer(self) -> str | None:
        value = self.headers.get("authorization", "")
        return value.removeprefix("Bearer ") if value.startswith("Bearer ") else None


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A CLI that went away (killed while an answer was held) is no error here."""


class OpenAIStandin:
    """`base_url` (…/v1) serves the scripted answers; `requests` lists what arrived."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.always: Answer | None = None
        self._script: deque[Answer] = deque()
        self._asides: list[tuple[str, Answer]] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._holds: list[threading.Event] = []
        self.held = threading.Event()  # set once a held answer is waiting
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_CONNECT(self) -> None:
                standin._record(self, None)
                self._json(403, {"error": {"message": "the stand-in reaches no other host"}})

            def do_GET(self) -> None:
                standin._record(self, None)
                if self.path.startswith("http"):
                    self._json(403, {"error": {"message": "the stand-in reaches no other host"}})
                    return
                self._json(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                standin._record(self, body)
                path = self.path.split("?")[0].rstrip("/")
                if self.path.startswith("http"):
                    self._json(403, {"error": {"message": "the stand-in reaches no other host"}})
                elif path.endswith("/responses"):
                    standin._respond(self, body, standin._responses)
                elif path.endswith("/chat/completions"):
                    standin._respond(self, body, standin._chat)
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}"}})

            def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def proxy_env(self) -> dict[str, str]:
        """Proxy variables that send a CLI's requests for any other host here."""
        proxy = self.base_url.removesuffix("/v1")
        names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
        return {
            **dict.fromkeys(names, proxy),
            **{name.lower(): proxy for name in names},
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }

    def outside(self) -> list[Request]:
        """The requests meant for another host than the stand-in."""
        with self._lock:
            return [r for r in self.requests if r.method == "CONNECT" or "://" in r.path]

    def answer(self, *answers: Answer) -> None:
        """Queue answers, given in the order requests will get them."""
        with self._lock:
            self._script.extend(answers)

    def aside(self, marker: str, answer: Answer) -> None:
        """Answer every request whose body holds `marker` with `answer`, off the script
        (a side request a CLI makes beside its turn, such as a session title)."""
        with self._lock:
            self._asides.append((marker, answer))

    def release(self) -> None:
        """Let every held answer go."""
        for hold in self._holds:
            hold.set()

    def model_requests(self) -> list[Request]:
        """The requests for a model answer (Responses or Chat Completions)."""
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and "://" not in r.path]

    def __enter__(self) -> OpenAIStandin:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

    # -- serving ---------------------------------------------------------------------

    def _record(self, handler: BaseHTTPRequestHandler, body: Any) -> None:
        headers = {k.lower(): v for k, v in handler.headers.items()}
        with self._lock:
            self.requests.append(Request(handler.command, handler.path, headers, body))

    def _next(self, body: Any) -> Answer | None:
        text = json.dumps(body)
        with self._lock:
            for marker, answer in self._asides:
                if marker in text:
                    return answer
            return self._script.popleft() if self._script else self.always

    def _respond(self, handler: Any, body: Any, render: Any) -> None:
        answer = self._next(body)
        if answer is None:
            refusal = Refusal(500, "stand-in: no answer scripted", None, "server_error")
            handler._json(500, refusal.body())
            return
        if isinstance(answer, Refusal):
            handler._json(answer.status, answer.body(), answer.headers())
            return
        if answer.hold is not None:
            self._holds.append(answer.hold)
            self.held.set()
            answer.hold.wait(120)
        fields = body if isinstance(body, dict) else {}
        render(handler, answer, bool(fields.get("stream")), fields.get("model", MODEL))

    def _responses(self, handler: Any, reply: Reply, stream: bool, model: str) -> None:
        """A Responses API answer: its output items, then `response.completed`."""
        rid = f"resp_{next(self._ids)}"
        items: list[dict[str, Any]] = []
        for call in reply.calls:
            n = next(self._ids)
            items.append({
                "type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
                "name": call.name, "arguments": json.dumps(call.arguments),
                "status": "completed",
            })  # fmt: skip
        if reply.text:
            items.append({
                "type": "message", "id": f"msg_{next(self._ids)}", "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            })  # fmt: skip
        usage = {
            "input_tokens": reply.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.input_tokens + reply.output_tokens,
        }
        response = {"id": rid, "object": "response", "created_at": int(time.time()),
                    "model": model, "status": "in_progress", "output": []}  # fmt: skip
        if not stream:
            handler._json(200, {**response, "status": "completed", "output": items, "usage": usage})
            return
        events: list[dict[str, Any]] = [{"type": "response.created", "response": response}]
        for index, item in enumerate(items):
            events.extend(_item_events(index, item))
        done = {**response, "status": "completed", "output": items, "usage": usage}
        events.append({"type": "response.completed", "response": done})
        for number, event in enumerate(events):
            event["sequence_number"] = number
        self._sse(handler, [(e["type"], e) for e in events], done_marker=False)

    def _chat(self, handler: Any, reply: Reply, stream: bool, model: str) -> None:
        """A Chat Completions answer: the text, finish reason `stop`, and `usage`."""
        cid = f"chatcmpl-{next(self._ids)}"
        created = int(time.time())
        usage = {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        }
        base = {"id": cid, "created": created, "model": model}
        if not stream:
            message = {"role": "assistant", "content": reply.text}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            handler._json(200, {**base, "object": "chat.completion", "choices": [choice],
                                "usage": usage})  # fmt: skip
            return
        chunk = {**base, "object": "chat.completion.chunk"}
        delta = {"role": "assistant", "content": reply.text}
        events = [
            {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {**chunk, "choices": [], "usage": usage},
        ]
        self._sse(handler, [(None, e) for e in events], done_marker=True)

    def _sse(self, handler: Any, events: list[tuple[str | None, Any]], done_marker: bool) -> None:
        lines = []
        for name, data in events:
            head = f"event: {name}\n" if name else ""
            lines.append(f"{head}data: {json.dumps(data)}\n\n")
        if done_marker:
            lines.append("data: [DONE]\n\n")
        payload = "".join(lines).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    """The stream of one output item: added, its text or arguments (one delta), done."""
    at = {"output_index": index, "item_id": item["id"]}
    if item["type"] == "function_call":
        arguments = item["arguments"]
        middle = [
            {"type": "response.function_call_arguments.delta", **at, "delta": arguments},
            {"type": "response.function_call_arguments.done", **at, "arguments": arguments},
        ]
        started = {**item, "arguments": "", "status": "in_progress"}
    else:
        part = item["content"][0]
        at = {**at, "content_index": 0}
        middle = [
            {"type": "response.content_part.added", **at, "part": {**part, "text": ""}},
            {"type": "response.output_text.delta", **at, "delta": part["text"]},
            {"type": "response.output_text.done", **at, "text": part["text"]},
            {"type": "response.content_part.done", **at, "part": part},
        ]
        started = {**item, "content": [], "status": "in_progress"}
    return [
        {"type": "response.output_item.added", "output_index": index, "item": started},
        *middle,
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]
