"""The MCP tools through the SDK's own client, over stdio (`slotline mcp`) and over HTTP
(`/mcp` on `slotline serve`), against a real node running real commands: a supervising
script submits ten subtasks at limit 2, watches its place in line, hits the queue bound,
waits for a task and cancels one; a viewer is refused every change."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from slotline import __version__

from .conftest import Run, Serve, Start, ok

TOOLS = {
    "queue_status", "submit_task", "get_task", "list_tasks", "task_log", "cancel_task",
    "start_now", "boost_task", "move_task", "set_priority", "restart_task", "wait_for_task",
    "terminate_task", "followup_task", "task_diff", "merge_task", "send_input",
}  # fmt: skip
# The prompt is how many seconds to sleep, or "go:PATH": wait until PATH exists.
SLEEP = """import os, sys, time
arg = sys.argv[1]
if arg.startswith("go:"):
    while not os.path.exists(arg[3:]):
        time.sleep(0.05)
else:
    time.sleep(float(arg))
"""


@pytest.fixture(autouse=True)
def sleeper_agent(tmp_path: Path) -> None:
    """slotline.yaml (read from the working directory) with an agent type `sleeper`
    whose prompt is how many seconds it sleeps (or "go:PATH", see SLEEP)."""
    command = json.dumps([sys.executable, "-c", SLEEP, "{prompt}"])
    # Its expected run time is configured: before any run has finished, estimates rest on it.
    # A user (the supervisor) may start one run over the limit.
    (tmp_path / "slotline.yaml").write_text(
        f"agents:\n  sleeper:\n    command: {command}\n    expected_duration: 1\n"
        "    max_concurrent: 5\nusers:\n  start_now: 1\n"
    )


def payload(result: CallToolResult) -> Any:
    assert not result.isError, result.content
    (content,) = result.content
    assert isinstance(content, TextContent)
    return json.loads(content.text)


def error_text(result: CallToolResult) -> str:
    assert result.isError, result.content
    return " ".join(c.text for c in result.content if isinstance(c, TextContent))


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    return payload(await session.call_tool(tool, arguments))


async def mine(session: ClientSession, task_id: str) -> dict[str, Any]:
    status = await call(session, "queue_status")
    found: dict[str, Any] = next(t for t in status["mine"] if t["id"] == task_id)
    return found


async def supervise(
    session: ClientSession, operator: Callable[[str], Awaitable[None]], go: Path
) -> None:
    """What a supervising agent does, asserting what it must see on the way; `operator`
    sets a limit (`max_queue_size=0`: the queue is full) as a person would; the long task
    ends once the file `go` exists."""
    listed = await session.list_tools()
    assert {t.name for t in listed.tools} == TOOLS
    assert all(len(t.description or "") > 40 for t in listed.tools)
    # Ten subtasks at limit 2: most wait, each with a place in line and an estimate.
    ids = []
    for i in range(10):
        task = await call(session, "submit_task", agent="sleeper", prompt="0.5", title=f"s{i}")
        ids.append(task["id"])
    # A task with an idempotency key, to start in an hour (it does not take a slot here).
    keyed = await call(session, "submit_task", agent="sleeper", prompt="0", key="once", delay=3600)
    assert (keyed["deduplicated"], keyed["status"]) == (False, "queued")
    assert keyed["run_at"] is not None
    first = await mine(session, ids[-1])
    assert first["status"] == "queued"
    assert first["eta_start"] is not None
    assert first["eta_basis"]
    # Positions fall as the node works through the line.
    deadline = time.monotonic() + 30
    later = first
    while later["status"] == "queued" and later["position"] >= first["position"]:
        assert time.monotonic() < deadline, "the last subtask never moved up"
        await anyio.sleep(0.1)
        later = await mine(session, ids[-1])
    # One to wait for, and one to cancel (it waits for the first, which runs until the
    # wait below has reported progress: the cancel comes first however slow the machine).
    awaited = await call(session, "submit_task", agent="sleeper", prompt=f"go:{go}", title="long")
    victim = await call(session, "submit_task", agent="sleeper", prompt="1", after=[awaited["id"]])
    assert victim["status"] == "waiting"
    # Its estimate starts after the one it waits for ends, read in one snapshot (each
    # submit's answer is estimated at its own moment, and the first may have started).
    seen = {t["id"]: t for t in (await call(session, "queue_status"))["mine"]}
    assert seen[victim["id"]]["eta_start"] >= seen[awaited["id"]]["eta_finish"]
    assert (await call(session, "cancel_task", task_id=victim["id"]))["status"] == "cancelled"
    # The queue is full: refused, nothing created, with when to retry.
    await operator("max_queue_size=0")
    refused = error_text(
        await session.call_tool("submit_task", {"agent": "sleeper", "prompt": "1"})
    )
    assert "queue is full" in refused
    assert "retry_after_seconds=" in refused
    # A retried submit with the key gets the first task back, full queue or not.
    retried = await call(session, "submit_task", agent="sleeper", prompt="0", key="once")
    assert (retried["deduplicated"], retried["id"]) == (True, keyed["id"])
    # Wait for one, with progress notifications while it waits.
    notes: list[str] = []

    async def progress(_done: float, _total: float | None, message: str | None) -> None:
        notes.append(message or "")
        go.touch()

    result = await session.call_tool(
        "wait_for_task", {"task_id": awaited["id"][:10], "timeout": 120}, progress_callback=progress
    )
    assert payload(result)["status"] == "succeeded"
    assert notes
    assert all(awaited["id"][:8] in note for note in notes)
    log = await session.call_tool("task_log", {"task_id": awaited["id"]})
    assert not log.isError
    # The cancelled one, found in a listing, back in line and steered to the front, while
    # nothing starts by itself.
    await operator("max_concurrent=0")
    cancelled = await call(session, "list_tasks", status="cancelled")
    assert [t["id"] for t in cancelled["tasks"]] == [victim["id"]]
    assert (await call(session, "restart_task", task_id=victim["id"]))["status"] == "queued"
    assert (await call(session, "set_priority", task_id=victim["id"], priority="high"))[
        "priority"
    ] == "high"
    assert (await call(session, "boost_task", task_id=victim["id"]))["boosted"] is True
    assert (await call(session, "move_task", task_id=victim["id"], to=1))["position"] == 1
    # Start now: over the limit of 0, the node starts it.
    await call(session, "start_now", task_id=victim["id"])
    deadline = time.monotonic() + 30
    while (await call(session, "get_task", task_id=victim["id"]))["status"] == "queued":
        assert time.monotonic() < deadline, "start_now did not start it"
        await anyio.sleep(0.1)
    # Terminated (resumable: a restart would resume its agent session).
    stopped = await call(session, "terminate_task", task_id=victim["id"], resumable=True)
    assert stopped["id"] == victim["id"]
    # A follow-up needs an agent type with a `resume` template: refused, with the reason.
    refused = await session.call_tool("followup_task", {"task_id": victim["id"], "prompt": "go"})
    assert refused.isError
    assert "has no resume template" in str(refused.content)


def limits(run: Run, *settings: str, remote: tuple[str, ...] = ()) -> None:
    ok(run(*remote, "--json", "limits", *(a for s in settings for a in ("--set", s))))


def operator(run: Run, remote: tuple[str, ...] = ()) -> Callable[[str], Awaitable[None]]:
    async def set_limit(setting: str) -> None:
        await anyio.to_thread.run_sync(lambda: limits(run, setting, remote=remote))

    return set_limit


def test_the_server_introduces_itself_as_slotline_with_its_version(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    # Given `slotline mcp` on stdio, as an agent's MCP configuration starts it
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "slotline", "mcp"], env=base_env, cwd=str(tmp_path)
    )

    async def main() -> None:
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            # When the client initializes, then the server names slotline and its version
            # (not the MCP library's)
            hello = await session.initialize()
            assert (hello.serverInfo.name, hello.serverInfo.version) == ("slotline", __version__)

    anyio.run(main)


def test_a_supervisor_over_stdio_on_the_store(
    cli: Run, serve: Serve, base_env: dict[str, str], tmp_path: Path
) -> None:
    # Given a node on the store, and the supervisor's own task (held: it is this test)
    limits(cli, "max_concurrent=2")
    serve()
    me = ok(cli("--json", "submit", "--hold", "--title", "pm", "--", "true"))
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "slotline", "mcp"],
        env={**base_env, "SLOTLINE_TASK_ID": me["id"]},
        cwd=str(tmp_path),
    )

    async def main() -> None:
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await supervise(session, operator(cli), tmp_path / "go")
            # Its subtasks were submitted under its task: they are "mine".
            status = await call(session, "queue_status")
            assert me["id"] in {t["id"] for t in status["mine"]}
            # The agent type's limit from slotline.yaml is in force, and said.
            (sleeper,) = status["limits"]
            assert (sleeper["key"], sleeper["value"], sleeper["max"]) == ("agent", "sleeper", 5)
            assert set(sleeper["used"]) == {"sleeper"}

    anyio.run(main)


def test_a_supervisor_over_http_and_a_viewer_refused(
    run: Run, serve_http: Start, tmp_path: Path
) -> None:
    # Given a server with a user token (the supervisor) and a viewer token
    url = serve_http()
    pm = ok(run("--json", "token", "create", "--role", "user", "--name", "pm"))["token"]
    eye = ok(run("--json", "token", "create", "--role", "viewer", "--name", "eye"))["token"]
    admin = ok(run("--json", "token", "create", "--role", "admin", "--name", "root"))["token"]
    remote = ("--url", url, "--token", admin)
    limits(run, "max_concurrent=2", remote=remote)

    async def session_as(token: str, scenario: Any) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            hello = await session.initialize()
            assert (hello.serverInfo.name, hello.serverInfo.version) == ("slotline", __version__)
            await scenario(session)

    async def viewer(session: ClientSession) -> None:
        status = await call(session, "queue_status")
        assert status["max_concurrent"] == 0  # as the operator left it
        # The sleepers that started before it did end (on a busy machine, after a while).
        deadline = time.monotonic() + 60
        while status["active"]:
            assert time.monotonic() < deadline, "the runs started before the stop never ended"
            await anyio.sleep(0.1)
            status = await call(session, "queue_status")
        assert {"key": "agent", "value": "sleeper", "max": 5, "used": {"sleeper": 0}} in (
            status["limits"]
        )
        for tool, arguments in (
            ("submit_task", {"agent": "sleeper", "prompt": "1"}),
            ("cancel_task", {"task_id": "0" * 32}),
        ):
            assert "viewer" in error_text(await session.call_tool(tool, arguments))
        # Errors say what is wrong and what would be right, not a bare exception.
        unknown = error_text(await session.call_tool("get_task", {"task_id": "0" * 32}))
        assert "no task matches" in unknown
        bad = error_text(await session.call_tool("list_tasks", {"status": "nonsense"}))
        assert "unknown status 'nonsense': one of waiting, queued" in bad

    async def main() -> None:
        await session_as(
            pm, lambda session: supervise(session, operator(run, remote), tmp_path / "go")
        )
        await session_as(eye, viewer)
        # Without a token, /mcp answers 401 as the rest of the API does.
        async with httpx.AsyncClient() as http:
            response = await http.post(f"{url}/mcp", json={})
            assert response.status_code == 401

    anyio.run(main)


def test_a_supervisor_over_stdio_through_a_server(
    run: Run, serve_http: Start, base_env: dict[str, str], tmp_path: Path
) -> None:
    # Given a server whose slotline.yaml has the agent type, where nothing starts, and a
    # task of another user first in line
    url = serve_http()
    pm = ok(run("--json", "token", "create", "--role", "user", "--name", "pm"))["token"]
    admin = ok(run("--json", "token", "create", "--role", "admin", "--name", "root"))["token"]
    limits(run, "max_concurrent=0", remote=("--url", url, "--token", admin))
    ok(run("--url", url, "--token", admin, "--json", "submit", "--", "true"))
    # And `slotline mcp` run elsewhere, with no slotline.yaml, on a user token
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "slotline", "--url", url, "--token", pm, "mcp"],
        env=base_env,
        cwd=str(elsewhere),
    )

    async def main() -> None:
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            # The server fills the agent type: a user token sends no raw command.
            task = await call(session, "submit_task", agent="sleeper", prompt="1")
            assert task["command"][-1] == "1"
            assert task["position"] == 2
            # The whole line's length, but not whose task is first.
            status = await call(session, "queue_status")
            assert (status["queue_length"], status["next_up"]) == (2, None)
            assert [t["id"] for t in status["mine"]] == [task["id"]]
            bad = error_text(
                await session.call_tool("set_priority", {"task_id": task["id"], "priority": "x"})
            )
            assert "unknown priority 'x'; use one of urgent" in bad
            # Once a slot opens, waiting ends when the task does.
            limits(run, "max_concurrent=1", remote=("--url", url, "--token", admin))
            done = await call(session, "wait_for_task", task_id=task["id"], timeout=60)
            assert done["status"] == "succeeded"

    anyio.run(main)
