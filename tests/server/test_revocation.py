"""Revoking a token ends what it opened within about a second (`auth_recheck`): an SSE
stream still catching up through a long event log beside other streams, and an MCP
`wait_for_task` call that would otherwise wait up to an hour."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from slotline.server import ServerOptions, revoke_token

from .conftest import ServerFactory

# The docs promise about a second; the bound is generous, so a loaded machine passes,
# and still far below what a stream that ignores the revocation takes.
GUARD = 10.0


def _events(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: ") :]) for line in lines if line.startswith("data: {")]


def test_revoking_a_token_ends_an_sse_stream_still_catching_up(
    make_server: ServerFactory,
) -> None:
    # Given a long event log, thousands of ann's tasks, then one of bob's last; and a
    # server that re-checks tokens often, so that a catch-up of a second or two is long
    server = make_server(options=ServerOptions(heartbeat=0.5, auth_recheck=0.1))
    admin, bob = server.token("root", "admin"), server.token("bob", "user")
    specs = [{"command": ["true"], "user": "ann", "hold": True} for _ in range(8000)]
    server.store.submit_many(specs)
    last = server.store.submit({"command": ["true"], "user": "bob", "hold": True})
    with (
        server.client(admin) as other,
        other.stream("GET", "/api/events/stream", params={"since": 0}) as beside,
        other.stream("GET", "/api/events/stream", params={"since": 0}) as beside_too,
        server.client(bob) as http,
        # When bob opens a stream from the start, beside the others, and his token is
        # revoked as soon as it answers
        http.stream("GET", "/api/events/stream", params={"since": 0}) as sse,
    ):
        assert (beside.status_code, beside_too.status_code, sse.status_code) == (200, 200, 200)
        lines = sse.iter_lines()
        assert next(lines) == "retry: 2000"
        revoke_token("bob", server.tokens_path)
        revoked = time.monotonic()
        seen = list(lines)
        took = time.monotonic() - revoked
    # Then it ends with `event: refused` without waiting for its catch-up to finish:
    # bob's own task, last in the log, is never sent on a revoked token
    assert "event: refused" in seen, seen[-5:]
    assert last.id not in {e.get("task_id") for e in _events(seen)}
    assert took < GUARD, f"the stream ended {took:.1f}s after the revocation"


async def _wait_as(url: str, token: str, task_id: str, revoke: Any) -> tuple[str, list[str], float]:
    """Call wait_for_task over /mcp with `token`, revoke it after the first progress;
    returns the error text, the progress messages, and the seconds from revocation to
    the answer."""
    progress: list[str] = []
    revoked: list[float] = []

    async def on_progress(_done: float, _total: float | None, message: str | None) -> None:
        progress.append(message or "")
        if not revoked:
            revoke()
            revoked.append(time.monotonic())

    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await asyncio.wait_for(
            session.call_tool(
                "wait_for_task",
                {"task_id": task_id, "timeout": 3600},
                progress_callback=on_progress,
            ),
            timeout=60,
        )
    took = time.monotonic() - revoked[0]
    assert result.isError, result.content
    return " ".join(c.text for c in result.content if isinstance(c, TextContent)), progress, took


def test_revoking_a_token_ends_an_mcp_wait_for_task_with_an_auth_error(
    make_server: ServerFactory,
) -> None:
    # Given bob waiting over /mcp on a task of his that will not end by itself
    server = make_server()
    server.token("root", "admin")  # stays: the server stays one that needs tokens
    bob = server.token("bob", "user")
    task = server.store.submit({"command": ["true"], "user": "bob", "hold": True})
    progress_at_revocation = 1

    # When his token is revoked while he waits (after the first progress report)
    error, progress, took = asyncio.run(
        _wait_as(server.url, bob, task.id, lambda: revoke_token("bob", server.tokens_path))
    )

    # Then the call ends with an error saying why, sends no progress after the
    # revocation has been seen, and ends within the guard, not at its hour's timeout
    assert "access ended" in error, error
    assert "not valid" in error, error
    assert took < GUARD, f"wait_for_task ended {took:.1f}s after the revocation"
    # A report a second at most, until the re-check a second later: a few, not a stream.
    assert len(progress) <= progress_at_revocation + 3, progress
