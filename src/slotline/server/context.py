"""What every route shares: the server's state, its options, and who the caller is."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Literal, ParamSpec, TypeVar

from fastapi import Depends, HTTPException
from starlette.requests import HTTPConnection

from slotline.bounds import parse_id
from slotline.config.file import Config
from slotline.errors import NotFound
from slotline.models import Attempt, Task
from slotline.server.auth import OPEN_MODE, Principal, TokenBook
from slotline.server.options import ServerOptions
from slotline.store import Store
from slotline.tasktoken import is_task_token, task_token_attempt, task_token_matches

if TYPE_CHECKING:
    from slotline.server.collector import StoreCollector
    from slotline.server.hub import EventHub

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger("slotline.server")

# A browser WebSocket cannot send headers: it offers these two subprotocols instead,
# `slotline` and `slotline-token.TOKEN`, and the server accepts with `slotline`.
SUBPROTOCOL = "slotline"
TOKEN_SUBPROTOCOL = "slotline-token."  # noqa: S105 - a prefix, not a secret
Mode = Literal["open", "tokens", "closed"]


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
    # Whether the token file has held a token while this server ran: once it has, its
    # last token going away closes the server instead of opening it.
    tokens_seen: bool = False
    _closed_logged: bool = False

    def access_mode(self) -> Mode:
        """open: a caller without a token is the local admin; tokens: a token is needed;
        closed: a token would be needed and none exists (every caller but a running task
        is refused). Open needs `open_mode`, or a token file that never existed on a
        server that does not require tokens."""
        if self.options.open_mode:
            return "open"
        if self.tokens.has_tokens():
            self.tokens_seen, self._closed_logged = True, False
            return "tokens"
        if not (self.options.require_tokens or self.tokens_seen or self.tokens.exists()):
            return "open"
        if not self._closed_logged:
            self._closed_logged = True
            log.warning(
                "no API token exists, but tokens have (%s): refusing every request until "
                "one is created (`slotline token create`) or open mode is asked for "
                "(`auth: none` in slotline.yaml, or `slotline serve --no-auth`)",
                self.tokens.path,
            )
        return "closed"

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

    async def visible_task(self, who: Principal, ref: str, estimate: bool = True) -> Task:
        """The task `ref` names, if `who` may see it (a user sees only their own).

        For a user token, a prefix matches only the user's own tasks, so an ambiguous
        prefix or an unknown id never reveals that another user's task exists.

        Raises:
            NotFound: no such task, or one the caller may not see.
            AmbiguousId: the prefix matches several tasks the caller may see.
        """
        task = await self.call(self.store.get, ref, who.prefix_owner, estimate)
        if not who.sees(task):
            raise hidden(ref)
        return task

    async def visible_attempt(self, who: Principal, attempt_id: str) -> tuple[Attempt, Task]:
        """The attempt `attempt_id` names and its task, if `who` may see the task; one of
        another user's tasks is answered exactly as an unknown attempt id.

        Raises:
            NotFound: no such attempt, or one of a task the caller may not see.
        """
        attempt = await self.call(self.store.attempt, attempt_id)
        task = await self.call(self.store.get, attempt.task_id)
        if not who.sees(task):
            raise NotFound(f"no attempt {attempt.id}", attempt_id=attempt.id)
        return attempt, task


def hidden(ref: str) -> NotFound:
    """What the store says of an unknown `ref`, for a task the caller may not see."""
    ref = parse_id(ref)
    return NotFound(f"no task matches {ref!r}", task_id=ref)


def server_state(conn: HTTPConnection) -> ServerState:
    state: ServerState = conn.app.state.slotline
    return state


def presented_token(conn: HTTPConnection) -> str | None:
    """The token of `Authorization: Bearer …`, else (a WebSocket) of the offered
    subprotocol `slotline-token.TOKEN`. Never from the URL: URLs end up in logs."""
    header = conn.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if conn.scope["type"] == "websocket":
        for offered in conn.scope.get("subprotocols") or ():
            if offered.startswith(TOKEN_SUBPROTOCOL) and len(offered) > len(TOKEN_SUBPROTOCOL):
                return str(offered[len(TOKEN_SUBPROTOCOL) :])
    return None


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(401, detail, headers={"WWW-Authenticate": "Bearer"})


def task_principal(store: Store, token: str) -> Principal | None:
    """The principal of a task token whose attempt is still its task's running one: role
    `task`, scoped to the task's subtree; None for any other token (a blocking read)."""
    attempt_id = task_token_attempt(token)
    if attempt_id is None:
        return None
    try:
        attempt = store.attempt(attempt_id)
        if attempt.finished_at is not None or not task_token_matches(token, attempt):
            return None
        task = store.get(attempt.task_id)
        if task.current_attempt != attempt.id:
            return None
        subtree = store.subtree(task.id)
    except NotFound:
        return None
    return Principal(f"task:{task.id}", "task", frozenset(subtree), owner=task.user)


async def resolve(state: ServerState, token: str | None) -> Principal:
    """Who a request presenting `token` (None: no token) is.

    Raises:
        HTTPException: 401 when the token is wrong, revoked or its attempt has ended, or
            when a token is needed and none was given (or none exists at all).
    """
    if token is not None and is_task_token(token):
        found = await state.call(task_principal, state.store, token)
        if found is None:
            raise _unauthorized(
                "the task token is not valid: its attempt has ended (a task token dies "
                "with its attempt), or it is mistyped"
            )
        return found
    mode = state.access_mode()
    if mode == "open":
        return OPEN_MODE
    if mode == "closed":
        raise _unauthorized(
            "no API token exists any more: create one with `slotline token create`, or "
            "ask for open mode (`auth: none` in slotline.yaml, `slotline serve --no-auth`)"
        )
    if token is None:
        raise _unauthorized("this server needs a token: send 'Authorization: Bearer TOKEN'")
    found = state.tokens.verify(token)
    if found is None:
        raise _unauthorized("the token is not valid (revoked or mistyped)")
    return found


async def authenticate(conn: HTTPConnection) -> Principal:
    """Who is calling (see `resolve`); a token in the URL is refused, saying why.

    Raises:
        HTTPException: 401 as `resolve` says.
    """
    token = presented_token(conn)
    try:
        return await resolve(server_state(conn), token)
    except HTTPException as exc:
        if token is None and "token" in conn.query_params:
            raise _unauthorized(
                "a token in the URL (?token=) is not accepted, since URLs end up in logs: "
                "send 'Authorization: Bearer TOKEN', or from a browser WebSocket the "
                "subprotocols ['slotline', 'slotline-token.TOKEN']"
            ) from exc
        raise


async def _reader(conn: HTTPConnection) -> Principal:
    return await authenticate(conn)


async def _writer(conn: HTTPConnection) -> Principal:
    who = await authenticate(conn)
    if not who.can_write:
        raise HTTPException(403, f"token {who.name!r} is a viewer: it can read, not change")
    return who


async def _admin(conn: HTTPConnection) -> Principal:
    who = await authenticate(conn)
    if not who.is_admin:
        raise HTTPException(403, f"only an admin may do this; token {who.name!r} is a {who.role}")
    return who


State = Annotated[ServerState, Depends(server_state)]
Reader = Annotated[Principal, Depends(_reader)]
Writer = Annotated[Principal, Depends(_writer)]
Admin = Annotated[Principal, Depends(_admin)]
