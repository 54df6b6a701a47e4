"""The Anthropic API stand-in answers in the API's own shapes, JSON and streamed, without
any agent CLI: what Claude Code reads from it is what the public API sends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .anthropic_standin import AnthropicStandin

ASK = {
    "model": "claude-opus-5-5",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "hi"}],
}


@pytest.fixture
def api() -> Iterator[AnthropicStandin]:
    with AnthropicStandin() as standin:
        yield standin


def events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The (event, data) pairs of a server-sent event stream."""
    found = []
    for chunk in text.strip().split("\n\n"):
        name, data = chunk.split("\n")
        found.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return found


def test_a_json_answer_is_a_message_with_its_usage(api: AnthropicStandin) -> None:
    api.say("hello", input_tokens=12, output_tokens=3)

    answer = httpx.post(f"{api.url}/v1/messages", json=ASK, headers={"x-api-key": "k"})

    assert answer.status_code == 200
    message = answer.json()
    assert (message["type"], message["role"], message["model"]) == (
        "message", "assistant", "claude-opus-5-5",
    )  # fmt: skip
    assert message["content"] == [{"type": "text", "text": "hello"}]
    assert message["stop_reason"] == "end_turn"
    assert (message["usage"]["input_tokens"], message["usage"]["output_tokens"]) == (12, 3)
    (request,) = api.messages()
    assert request.headers["x-api-key"] == "k"


def test_a_streamed_tool_use_comes_as_input_json_deltas(api: AnthropicStandin) -> None:
    api.write_file("a.txt", "x\n", input_tokens=7, output_tokens=5)

    answer = httpx.post(f"{api.url}/v1/messages?beta=true", json={**ASK, "stream": True})

    assert answer.headers["content-type"] == "text/event-stream"
    stream = events(answer.text)
    assert [name for name, _ in stream] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop",
    ]  # fmt: skip
    assert [name == data["type"] for name, data in stream] == [True] * 6
    assert stream[0][1]["message"]["usage"]["input_tokens"] == 7
    block = stream[1][1]["content_block"]
    assert (block["type"], block["name"], block["input"]) == ("tool_use", "Write", {})
    delta = stream[2][1]["delta"]
    assert delta["type"] == "input_json_delta"
    assert json.loads(delta["partial_json"]) == {"file_path": "a.txt", "content": "x\n"}
    assert stream[4][1]["delta"]["stop_reason"] == "tool_use"
    assert stream[4][1]["usage"] == {"output_tokens": 5}


def test_refusals_carry_the_apis_headers_and_unscripted_requests_are_recorded(
    api: AnthropicStandin,
) -> None:
    api.refuse(retry_after=7, reset="2026-01-01T00:00:00Z", retry=False)

    refused = httpx.post(f"{api.url}/v1/messages", json=ASK)
    unscripted = httpx.post(f"{api.url}/v1/messages", json=ASK)
    other = httpx.get(f"{api.url}/v1/models")

    assert refused.status_code == 429
    assert refused.json()["error"]["type"] == "rate_limit_error"
    assert refused.headers["retry-after"] == "7"
    assert refused.headers["anthropic-ratelimit-requests-reset"] == "2026-01-01T00:00:00Z"
    assert refused.headers["x-should-retry"] == "false"
    assert unscripted.status_code == 500
    assert other.status_code == 404
    assert [r.path for r in api.others()] == ["/v1/models"]
