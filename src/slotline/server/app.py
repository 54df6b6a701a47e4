"""The FastAPI application: routes, error handlers, the body cap and the event hub."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, FastAPI
from starlette.responses import JSONResponse
from starlette.routing import Route

from slotline import __version__
from slotline.config.file import Config
from slotline.errors import SlotlineError
from slotline.runner.space import unwritable
from slotline.server import (
    board,
    bulk,
    compat,
    dashboard,
    events,
    external,
    landing,
    logs,
    metrics,
    queue,
    routes,
    schedules,
    terminal,
)
from slotline.server import webhooks as notify
from slotline.server.auth import TokenBook, default_tokens_path
from slotline.server.collector import StoreCollector
from slotline.server.context import ServerState, State
from slotline.server.errors import BodyLimit, install_error_handlers
from slotline.server.guard import RequestGuard
from slotline.server.hub import EventHub
from slotline.server.mcp_mount import mcp_server
from slotline.server.options import ServerOptions
from slotline.store import Store

log = logging.getLogger("slotline.server")

health = APIRouter(tags=["operations"])


@health.get("/healthz")
async def healthz() -> dict[str, Any]:
    """The process is up (no auth, for probes)."""
    return {"status": "ok", "version": __version__}


@health.get("/readyz", responses={503: {"description": "The store or event stream is not ready"}})
async def readyz(state: State) -> JSONResponse:
    """The store answers, the event stream is following it, and the node's logs and a
    SQLite store can be written (no auth, for probes)."""
    try:
        seq = await asyncio.wait_for(state.call(state.store.last_seq), 5.0)
    except (SlotlineError, TimeoutError) as exc:
        return JSONResponse({"status": "unavailable", "reason": str(exc) or "timeout"}, 503)
    full = await asyncio.to_thread(unwritable, state.options.space_dirs)
    if full is not None:
        return JSONResponse({"status": "unavailable", "reason": full}, 503)
    if not state.hub.ready.is_set():
        return JSONResponse({"status": "starting", "reason": "event stream not ready"}, 503)
    return JSONResponse({"status": "ready", "last_seq": seq})


def create_app(
    store: Store, config: Config | None = None, options: ServerOptions | None = None
) -> FastAPI:
    """The HTTP API over `store`. The caller owns the store (and closes it).

    Args:
        store: the store every route reads and steers.
        config: the effective configuration (agent types for submit, /api/config).
        options: server knobs: token file, body cap, stream queue size, hosts and
            origins…
    """
    options = options or ServerOptions()
    state = ServerState(
        store=store,
        config=config or Config(),
        options=options,
        tokens=TokenBook(options.tokens_path or default_tokens_path()),
        hub=EventHub(store),
        metrics=StoreCollector(store),
    )
    tools, tools_endpoint = mcp_server(state)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        hub = asyncio.create_task(state.hub.run(), name="slotline-event-hub")
        if state.options.open_mode:
            log.warning("open mode asked for (auth: none): every caller is admin, tokens unused")
        elif state.access_mode() == "open":  # "closed" is logged by access_mode itself
            log.warning("no API tokens exist: open single-user mode (every caller is admin)")
        try:
            async with tools.session_manager.run():
                yield
        finally:
            hub.cancel()
            await asyncio.gather(hub, return_exceptions=True)

    app = FastAPI(
        title="slotline",
        version=__version__,
        summary="An agent task queue with concurrency control: cap, queue, steer and survive.",
        lifespan=lifespan,
    )
    app.state.slotline = state
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=options.max_body_bytes)
    # Added last, so it runs first: a foreign Host or Origin gets nowhere near a route.
    app.add_middleware(
        RequestGuard,
        allowed_hosts=(*options.allowed_hosts, *state.config.allowed_hosts),
        allowed_origins=(*options.allowed_origins, *state.config.allowed_origins),
    )
    for router in (
        health,
        dashboard.router,
        bulk.router,  # before routes: /api/tasks/bulk is not a task id
        landing.router,
        routes.router,
        board.router,
        queue.router,
        logs.router,
        events.router,
        terminal.router,
        compat.router,
        external.router,
        metrics.router,
        schedules.router,
        notify.router,
    ):
        app.include_router(router)
    # MCP over streamable HTTP (docs/mcp.md), behind the same tokens.
    app.router.routes.append(Route("/mcp", tools_endpoint))
    return app
