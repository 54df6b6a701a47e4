"""The MCP tools refuse a number out of bounds saying the bound in words, whether the tool's
own argument schema or the submit's refuses it (a real server and client, in memory)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import TextContent

from slotline.config.file import Config
from slotline.line import STATUS_HEAD
from slotline.mcp.calls import BackendCalls
from slotline.mcp.tools import build_server
from slotline.models import Status
from slotline.spec import TaskSpec
from slotline.store import Store, open_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(tmp_path / "s.db")
    yield opened
    opened.close()


@pytest.mark.parametrize(
    ("tool", "arguments", "said"),
    [
        (
            "submit_task",
            {"command": ["true"], "expected_duration": 1e20},
            "must be more than 0 seconds and at most 10 years, got 1e+20",
        ),
        ("submit_task", {"command": ["true"], "delay": 0}, "must be more than 0 seconds"),
        ("list_tasks", {"limit": 1000}, "must be between 1 and 500, got 1000"),
        ("move_task", {"task_id": "0" * 32, "to": 0}, "must be at least 1, got 0"),
        ("wait_for_task", {"task_id": "0" * 32, "timeout": 7200}, "at most 1 hour, got 7200"),
    ],
)
def test_a_tool_argument_out_of_bounds_is_refused_in_words(
    store: Store, tool: str, arguments: dict[str, Any], said: str
) -> None:
    calls = BackendCalls(store, Config(), None)
    server = build_server(lambda _ctx: calls)

    async def main() -> None:
        async with create_connected_server_and_client_session(server) as session:
            result = await session.call_tool(tool, arguments)
            assert result.isError
            text = " ".join(c.text for c in result.content if isinstance(c, TextContent))
            assert said in text
            assert "less than or equal" not in text

    anyio.run(main)


@pytest.mark.parametrize(
    ("tool", "flag"),
    [
        ("cancel_task", "cascade"),
        ("restart_task", "force"),
        ("terminate_task", "resumable"),
        ("task_diff", "stat_only"),
        ("merge_task", "squash"),
    ],
)
@pytest.mark.parametrize("value", ["yes", 1, 0])
def test_a_tool_boolean_is_true_or_false_only(
    store: Store, tool: str, flag: str, value: object
) -> None:
    task = store.submit(TaskSpec(command=["true"], hold=True))
    calls = BackendCalls(store, Config(), None)
    server = build_server(lambda _ctx: calls)

    async def main() -> None:
        async with create_connected_server_and_client_session(server) as session:
            result = await session.call_tool(tool, {"task_id": task.id, flag: value})
            assert result.isError
            text = " ".join(c.text for c in result.content if isinstance(c, TextContent))
            assert flag in text
            assert "valid boolean" in text

    anyio.run(main)
    assert store.get(task.id).status is Status.HELD


def test_queue_status_on_a_store_says_the_lines_length(store: Store) -> None:
    # Given more queued tasks than the head a status reads,
    many = STATUS_HEAD + 3
    tasks = store.submit_many([{"command": ["true"]} for _ in range(many)])
    server = build_server(lambda _ctx: BackendCalls(store, Config(), None))

    async def main() -> None:
        async with create_connected_server_and_client_session(server) as session:
            result = await session.call_tool("queue_status", {})
            assert not result.isError
            (content,) = result.content
            assert isinstance(content, TextContent)
            status = json.loads(content.text)
            # the tool says how many wait and which starts first, never the line itself.
            assert (status["queue_length"], status["next_up"]) == (many, tasks[0].id)
            assert "queued" not in status

    anyio.run(main)
