"""A stand-in of the Anthropic Messages API, on 127.0.0.1, for the real Claude Code CLI.

Written from the public API format (docs.anthropic.com, "Messages" and "Streaming
Messages"): `POST /v1/messages` answers with JSON, or with server-sent events when the
request asks `"stream": true` (`message_start`, `content_block_start/delta/stop` for text
and `tool_use` with `input_json_delta`, `message_delta` with the stop reason and output
tokens, `message_stop`). Each test scripts the answers as a queue of turns (`say`,
`write_file`, `refuse`, `hold`, `fail`); every request is recorded, so a test can check
what reached the API (the key header, the tool results) and that nothing else was asked.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The model Claude Code 2.1.332 asks for by default; an answer names the model asked for.
MODEL = "claude-opus-5-5"


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    def tool_results(self) -> list[dict[str, Any]]:
        """The `tool_result` blocks of the request's last message (what the CLI reports
        back after running a tool)."""
        messages = self.body.get("messages") or [{}]
        content = messages[-1].get("content")
        if not isinstance(content, list):
            return []
        return [block for block in content if block.get("type") == "tool_result"]

    def text(self) -> str:
        """Every text of the request's messages, joined (to find a prompt in it)."""
        parts = []
        for message in self.body.get("messages", []):
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts += [block.get("text", "") for block in content if isinstance(block, dict)]
        return "\n".join(parts)


@dataclass
class Turn:
    """One scripted answer of the API."""

    content: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str = "end_turn"
    input_tokens: int = 0
    output_tokens: int = 0
    status: int = 200
    error_type: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    hold: threading.Event | None = None  # answer only once this is set
    always: bool = False  # answer every later request this way


class AnthropicStandin:
    """`url` is the base URL (`ANTHROPIC_BASE_URL`); script turns, then read `requests`."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.holding = threading.Event()  # set once a `hold` turn has a request waiting
        self._turns: list[Turn] = []
        self._holds: list[threading.Event] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                standin._answer(self)

            def do_GET(self) -> None:
                standin._answer(self)

            def do_HEAD(self) -> None:
                standin._answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> AnthropicStandin:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for hold in self._holds:
            hold.set()  # a held answer's thread ends before the server does
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- scripting ------------------------------------------------------------------------

    def say(self, text: str, input_tokens: int = 100, output_tokens: int = 10) -> Turn:
        """A final answer of text."""
        return self._add(
            Turn([{"type": "text", "text": text}], "end_turn", input_tokens, output_tokens)
        )

    def use_tool(
        self,
        name: str,
        tool_input: dict[str, Any],
        input_tokens: int = 100,
        output_tokens: int = 20,
    ) -> Turn:
        """A `tool_use` of `name` (the CLI runs it and asks again with its result)."""
        block = {"type": "tool_use", "id": f"toolu_{next(self._ids):06d}", "name": name}
        return self._add(
            Turn([{**block, "input": tool_input}], "tool_use", input_tokens, output_tokens)
        )

    def write_file(self, path: str, content: str, **tokens: int) -> Turn:
        """A `tool_use` of Claude Code's Write tool creating `path` (relative: in the CLI's
        working folder, the run's worktree) with `content`."""
        return self.use_tool("Write", {"file_path": path, "content": content}, **tokens)

    def refuse(
        self, retry_after: int = 1, reset: str = "", retry: bool = True, always: bool = False
    ) -> Turn:
        """A 429 `rate_limit_error` with `retry-after` and the `anthropic-ratelimit-*-reset`
        headers; with `retry=False` also `x-should-retry: false`, the header by which the
        API tells its clients not to retry (Claude Code then gives up at once instead of
        retrying ten times over three minutes). Once, or for every later request."""
        headers = {"retry-after": str(retry_after)}
        if reset:
            headers |= {
                "anthropic-ratelimit-requests-reset": reset,
                "anthropic-ratelimit-tokens-reset": reset,
            }
        if not retry:
            headers["x-should-retry"] = "false"
        turn = Turn(status=429, error_type="rate_limit_error", headers=headers, always=always)
        return self._add(turn)

    def fail(
        self, status: int = 400, error_type: str = "invalid_request_error", always: bool = False
    ) -> Turn:
        """An error answer, e.g. a 400 `invalid_request_error` (once, or every time)."""
        return self._add(Turn(status=status, error_type=error_type, always=always))

    def hold(self, text: str = "late answer") -> threading.Event:
        """A slow answer: the request waits until the returned event is set (a test
        interrupts the run meanwhile); `holding` says one is waiting."""
        turn = self.say(text)
        turn.hold = threading.Event()
        self._holds.append(turn.hold)
        return turn.hold

    def _add(self, turn: Turn) -> Turn:
        with self._lock:
            self._turns.append(turn)
        return turn

    # -- reading --------------------------------------------------------------------------

    def messages(self) -> list[Request]:
        """The `POST /v1/messages` requests, in order."""
        with self._lock:
            return [r for r in self.requests if _is_message(r)]

    def others(self) -> list[Request]:
        """Every request that was not a `POST /v1/messages` (answered 404)."""
        with self._lock:
            return [r for r in self.requests if not _is_message(r)]

    def pending(self) -> int:
        """How many scripted turns are still to be answered."""
        with self._lock:
            return len(self._turns)

    # -- answering ------------------------------------------------------------------------

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        body = json.loads(raw) if raw.startswith(b"{") else {}
        request = Request(
            handler.command, handler.path, {k.lower(): v for k, v in handler.headers.items()}, body
        )
        with self._lock:
            self.requests.append(request)
            known = _is_message(request)
            turn = self._next_turn() if known else None
        if not known:
            _send_json(handler, 404, _error("not_found_error", f"no route {handler.path}"))
            return
        if turn is None:
            # Nothing scripted: an error the CLI shows, so that a test sees the surprise.
            _send_json(handler, 500, _error("api_error", "the stand-in has no answer scripted"))
            return
        if turn.hold is not None:
            self.holding.set()
            turn.hold.wait(120)
        if turn.status != 200:
            message = (
                "rate limited by the stand-in" if turn.status == 429 else "refused by the stand-in"
            )
            _send_json(handler, turn.status, _error(turn.error_type, message), turn.headers)
            return
        message_id = f"msg_standin_{next(self._ids):06d}"
        model = str(body.get("model") or MODEL)
        try:
            if body.get("stream"):
                _send_stream(handler, _events(message_id, model, turn))
            else:
                _send_json(handler, 200, _message(message_id, model, turn))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the CLI went away while its answer was held (an interrupted run)

    def _next_turn(self) -> Turn | None:
        if not self._turns:
            return None
        turn = self._turns[0]
        if not turn.always:
            self._turns.pop(0)
        return turn


def _route(path: str) -> str:
    return path.split("?", 1)[0]


def _is_message(request: Request) -> bool:
    return request.method == "POST" and _route(request.path) == "/v1/messages"


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _usage(turn: Turn) -> dict[str, int]:
    return {
        "input_tokens": turn.input_tokens,
        "output_tokens": turn.output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _message(message_id: str, model: str, turn: Turn) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": turn.content,
        "stop_reason": turn.stop_reason,
        "stop_sequence": None,
        "usage": _usage(turn),
    }


def _events(message_id: str, model: str, turn: Turn) -> Iterator[tuple[str, dict[str, Any]]]:
    """The server-sent events of one streamed answer."""
    start = _message(message_id, model, turn) | {"content": [], "stop_reason": None}
    start["usage"] = _usage(turn) | {"output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(turn.content):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opened},
        )
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": turn.stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": turn.output_tokens},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _send_json(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> None:
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.send_header("request-id", "req_standin")
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(data)


def _send_stream(
    handler: BaseHTTPRequestHandler, events: Iterator[tuple[str, dict[str, Any]]]
) -> None:
    chunks = b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Content-Length", str(len(chunks)))
    handler.send_header("request-id", "req_standin")
    handler.end_headers()
    handler.wfile.write(chunks)
