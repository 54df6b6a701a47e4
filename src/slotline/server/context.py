"""What every route shares: the server's state, its options, and who the caller is."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ParamSpec, TypeVar

from fastapi import Depends, HTTPException
from starlette.requests import HTTPConnection

from slotline.config import Config
from slotline.errors import NotFound
from slotline.models import Task
from slotline.server.auth import OPEN_MODE, Principal, TokenBook
from slotline.store import Store

if TYPE_CHECKING:
    from slotline.server.events import EventHub
    from slotline.server.metrics import StoreCollector

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class ServerOptions:
    """Knobs of the HTTP server (slotline.yaml's `raw_commands` aside, not in the file)."""

    tokens_path: Path | None = None
    # Set when listening beyond loopback: with every token revoked, refuse all callers
    # instead of falling back to open mode.
    require_tokens: bool = False
    # Bodies larger than this are refused with 413 before they are read in full.
    max_body_bytes: int = 2 * 1024 * 1024
    # Raw commands (argv lists, env) from admins only; agent types and callables stay
    # open. None: as slotline.yaml's `raw_commands` says (admins, by default).
    raw_commands_admin_only: bool | None = None
    # Host names (`name` for any port, `name:port`, `*.domain`, `*`) the server answers
    # to besides loopback names and the address a connection arrived on, with its port;
    # `serve_http` adds the host it binds. Other Hosts are refused (DNS rebinding).
    allowed_hosts: tuple[str, ...] = ()
    # Browser origins (`https://dash.example:8443`; `*` for any) allowed to change things
    # (POST…) and open the WebSocket, besides the server's own.
    allowed_origins: tuple[str, ...] = ()
    # Seconds of silence after which an event stream sends a heartbeat.
    heartbeat: float = 15.0
    # Events one stream client may fall behind by before it is dropped.
    client_queue: int = 1000
    # How long the Hephaestus routes wait for a bumped/restarted task to start.
    compat_start_wait: float = 5.0
    # How often a followed log file is checked for growth.
    log_poll: float = 0.25


@dataclass
class ServerState:
    """Held in `app.state.slotline`."""

    store: Store
    config: Config
    options: ServerOptions
    tokens: TokenBook
    hub: EventHub
    metrics: StoreCollector
    # Set when the server begins to stop: open streams end instead of holding it up.
    closing: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def raw_commands_admin_only(self) -> bool:
        """Whether raw commands are for admins: the options say, else slotline.yaml."""
        chosen = self.options.raw_commands_admin_only
        return self.config.raw_commands == "admins" if chosen is None else chosen

    def close_streams(self) -> None:
        self.closing.set()
        self.hub.close("the server is stopping")

    async def call(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run a synchronous store verb in a worker thread, off the event loop."""
        return await asyncio.to_thread(function, *args, **kwargs)

    async def visible_task(self, who: Principal, ref: str) -> Task:
        """The task `ref` names, if `who` may see it (a user sees only their own).

        Raises:
            NotFound: no such task, or one the caller may not see.
        """
        task = await self.call(self.store.get, ref)
        if not who.sees(task):
            raise hidden(ref)
        return task


def hidden(ref: str) -> NotFound:
    """What the store says of an unknown `ref`, for a task the caller may not see."""
    ref = ref.strip().lower()
    return NotFound(f"no task matches {ref!r}", task_id=ref)


def server_state(conn: HTTPConnection) -> ServerState:
    state: ServerState = conn.app.state.slotline
    return state


def bearer(conn: HTTPConnection, allow_query: bool = False) -> str | None:
    """The token of `Authorization: Bearer …` (or `?token=` where headers are impossible:
    browser WebSockets and EventSource)."""
    header = conn.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if allow_query:
        return conn.query_params.get("token") or None
    return None


def authenticate(conn: HTTPConnection, allow_query: bool = False) -> Principal:
    """Who is calling. Without any token configured, everyone is the local admin.

    Raises:
        HTTPException: 401 when tokens exist and none (or a wrong one) was given.
    """
    state = server_state(conn)
    if not state.tokens.has_tokens():
        if state.options.require_tokens:
            raise HTTPException(401, "no API token exists; create one with `slotline token create`")
        return OPEN_MODE
    token = bearer(conn, allow_query)
    if token is None:
        raise HTTPException(
            401,
            "this server needs a token: send 'Authorization: Bearer TOKEN'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    found = state.tokens.verify(token)
    if found is None:
        raise HTTPException(
            401, "the token is not valid (revoked or mistyped)", {"WWW-Authenticate": "Bearer"}
        )
    return found


def _reader(conn: HTTPConnection) -> Principal:
    return authenticate(conn)


def _stream_reader(conn: HTTPConnection) -> Principal:
    return authenticate(conn, allow_query=True)


def _writer(conn: HTTPConnection) -> Principal:
    who = authenticate(conn)
    if not who.can_write:
        raise HTTPException(403, f"token {who.name!r} is a viewer: it can read, not change")
    return who


def _admin(conn: HTTPConnection) -> Principal:
    who = authenticate(conn)
    if not who.is_admin:
        raise HTTPException(403, f"only an admin may do this; token {who.name!r} is a {who.role}")
    return who


State = Annotated[ServerState, Depends(server_state)]
Reader = Annotated[Principal, Depends(_reader)]
StreamReader = Annotated[Principal, Depends(_stream_reader)]
Writer = Annotated[Principal, Depends(_writer)]
Admin = Annotated[Principal, Depends(_admin)]
