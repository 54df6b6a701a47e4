"""A real uvicorn server on 127.0.0.1 (a free port) over a temporary SQLite store.

The server runs in a background thread with its own event loop and its own store handle,
as a separate `slotline serve` would; the test talks to it over HTTP and may set things
up through a second store handle on the same file. With `node=True` a real Node runs in
the server's loop too, so commands really start and stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from slotline.config.file import Config
from slotline.errors import InvalidTransition, StaleAttempt
from slotline.models import Status
from slotline.node.node import Node
from slotline.server import ServerOptions, create_token, serve_http
from slotline.store import Store, open_store
from waiting import until

PY = sys.executable


@dataclass
class Running:
    """A server running in a thread; `stop()` shuts it down and waits for it."""

    url: str
    store: Store
    tokens_path: Path
    log_dir: Path
    thread: threading.Thread
    loop: asyncio.AbstractEventLoop
    stop_event: asyncio.Event
    errors: list[BaseException] = field(default_factory=list)

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0, **kwargs)

    def token(self, name: str, role: str) -> str:
        return create_token(name, role, self.tokens_path)

    def stop(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.stop_event.set)
            self.thread.join(30)
        assert not self.thread.is_alive(), "the server did not stop"
        if self.errors:
            raise self.errors[0]


NODE_ID = "test-node"


def _end_running_tasks(store: Store) -> None:
    """Commands outlive a stopping node: cancel them and wait until they are gone.
    Attempts claimed by the test itself (external runners) are finished directly."""
    for task in store.list_tasks(Status.RUNNING):
        attempt = task.attempts[-1]
        # It may end on its own meanwhile: then there is nothing left to stop.
        with contextlib.suppress(InvalidTransition, StaleAttempt):
            if attempt.node_id == NODE_ID:
                store.cancel(task.id)
            else:
                store.finish(attempt.id, attempt.token, None, "test teardown")
    until(lambda: not store.list_tasks(Status.RUNNING), what="running tasks ending")


ServerFactory = Callable[..., Running]


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[ServerFactory]:
    """make_server(node=False, options=None, config=None, tokens_path=None, store_url=None)
    -> Running. A node's runs reach the server through SLOTLINE_URL, as under `serve`."""
    started: list[Running] = []
    test_store = open_store(tmp_path / "store.db")
    stores = [test_store]

    def start(
        node: bool = False,
        options: ServerOptions | None = None,
        config: Config | None = None,
        tokens_path: Path | None = None,
        store_url: str | None = None,
    ) -> Running:
        url = store_url or str(tmp_path / "store.db")
        own_store = test_store if store_url is None else open_store(store_url)
        if own_store is not test_store:
            stores.append(own_store)
        tokens = tokens_path or tmp_path / "tokens.json"
        opts = options or ServerOptions(heartbeat=0.5, compat_start_wait=10.0)
        opts = dataclasses.replace(opts, tokens_path=tokens)
        ready = threading.Event()
        box: dict[str, Any] = {}
        errors: list[BaseException] = []

        async def main() -> None:
            box["loop"] = asyncio.get_running_loop()
            stop = box["stop"] = asyncio.Event()
            store = open_store(url)
            agents = None if config is None else config.agents
            worker = Node(
                store, node_id=NODE_ID, log_dir=tmp_path / "logs", kill_grace=2.0, agents=agents
            )

            def on_ready(host: str, port: int) -> None:
                box["url"] = worker.api_url = f"http://{host}:{port}"
                ready.set()

            jobs = [
                serve_http(store, config, "127.0.0.1", 0, stop, options=opts, on_ready=on_ready)
            ]
            if node:
                jobs.append(worker.run(stop))
            try:
                await asyncio.gather(*jobs)
            finally:
                store.close()

        def run() -> None:
            try:
                asyncio.run(main())
            except BaseException as exc:
                errors.append(exc)
                ready.set()

        thread = threading.Thread(target=run, name="slotline-test-server", daemon=True)
        thread.start()
        assert ready.wait(20), "the server did not start"
        if errors:
            raise errors[0]
        running = Running(
            url=box["url"],
            store=own_store,
            tokens_path=tokens,
            log_dir=tmp_path / "logs",
            thread=thread,
            loop=box["loop"],
            stop_event=box["stop"],
            errors=errors,
        )
        started.append(running)
        with running.client() as http:
            until(lambda: http.get("/readyz").status_code == 200, what="server ready")
        return running

    yield start
    try:
        for store in stores:
            _end_running_tasks(store)
    finally:
        for running in started:
            running.stop()
        for store in stores:
            store.close()


@pytest.fixture
def server(make_server: ServerFactory) -> Running:
    """A server in open single-user mode, without a node: nothing starts by itself."""
    return make_server()


@pytest.fixture
def http(server: Running) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def command(*lines: str) -> list[str]:
    """A Python one-off as an argv list."""
    return [PY, "-c", "\n".join(lines)]


async def _tool(url: str, token: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool(tool, arguments)
    return result.isError, " ".join(c.text for c in result.content if isinstance(c, TextContent))


def mcp_tool(server: Running, token: str, tool: str, **arguments: Any) -> tuple[bool, str]:
    """Call the MCP tool `tool` over the server's /mcp as `token`: whether it failed,
    and what it said."""
    return asyncio.run(_tool(server.url, token, tool, arguments))
