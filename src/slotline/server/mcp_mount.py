"""`/mcp` on the server: the MCP tools over streamable HTTP, behind the API's own tokens.

Every request to `/mcp` is authenticated as any API request is (Bearer token, task
tokens included); the tools then call the REST routes' own functions as that principal,
so each check (roles, a user's own tasks, a task's subtree, raw commands) is the same
one. A viewer reads and is refused every change. A call that lasts (`wait_for_task`)
re-checks the token as every stream does (`slotline.server.access`): once it is revoked,
the call ends with a tool error saying so within about a second, and reports no more
progress.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from fastapi import HTTPException
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from slotline.mcp import calls as mcp_calls
from slotline.mcp import tools as mcp
from slotline.models import Priority, Status
from slotline.server import board, landing, queue, routes
from slotline.server.access import AccessEnded, AccessWatch
from slotline.server.auth import Principal
from slotline.server.bodies import (
    CancelBody,
    FollowupBody,
    InputBody,
    MoveBody,
    PriorityBody,
    RestartBody,
    SubmitBody,
    TerminateBody,
)
from slotline.server.context import ServerState, presented_token, resolve
from slotline.server.errors import error_body
from slotline.store import Watcher
from slotline.taskfilter import TaskFilter

PRINCIPAL = "slotline.principal"
ACCESS = "slotline.access"


class RouteCalls:
    """The tools' calls as the REST routes make them, for one principal, while `access`
    (the request's token, re-checked) lasts."""

    def __init__(self, state: ServerState, who: Principal, access: AccessWatch) -> None:
        self.state = state
        self.who = who
        self.access = access

    def _writer(self) -> Principal:
        if not self.who.can_write:
            raise ToolError(
                f"not allowed: token {self.who.name!r} is a viewer: it can read, not change"
            )
        return self.who

    async def status(self) -> dict[str, Any]:
        data = await queue.queue_status(self.state, self.who, mine=True, root=None)
        store = self.state.store
        settings, running = await self.state.call(
            lambda: (store.settings(), store.list_tasks(Status.RUNNING))
        )
        used = board.usage_for(self.who, settings, running)
        return mcp_calls.status_summary(data, data.get("mine") or [], used)

    async def submit(self, fields: dict[str, Any]) -> dict[str, Any]:
        who = self._writer()
        fields["priority"] = Priority.parse(fields.get("priority", "normal")).label
        try:
            body = SubmitBody(**fields)
        except ValidationError as exc:
            raise ToolError(f"invalid submit: {exc.errors()[0]['msg']}") from None
        return await routes.submit_one(self.state, who, body)

    async def get(self, ref: str) -> dict[str, Any]:
        return await routes.get_task(self.state, self.who, ref)

    async def list(
        self, filters: dict[str, Any], limit: int, offset: int, after: str | None
    ) -> dict[str, Any]:
        status = filters.get("status")
        wanted = TaskFilter(status=[Status(status)] if status else [], agent=filters.get("agent"))
        found = await routes.list_tasks(
            self.state,
            self.who,
            wanted,
            parent=filters.get("parent_id"),
            limit=limit,
            after=after,
            offset=offset,
        )
        return {k: found[k] for k in ("tasks", "total", "next_after")}

    async def log(self, ref: str, max_bytes: int) -> str:
        task = await self.state.visible_task(self.who, ref)
        return await self.state.call(mcp_calls.task_log, task, max_bytes)

    def watcher(self) -> Watcher:
        return _UntilAccessEnds(self.state.store.watcher(), self.access)

    async def steer(self, verb: str, ref: str, **options: Any) -> dict[str, Any]:
        who, state = self._writer(), self.state
        if verb == "cancel":
            return await routes.cancel(state, who, ref, CancelBody(**options))
        if verb == "bump":
            return await routes.bump(state, who, ref)
        if verb == "boost":
            return await routes.boost(state, who, ref)
        if verb == "move":
            return await routes.move(state, who, ref, MoveBody(**options))
        if verb == "priority":
            body = PriorityBody(priority=Priority.parse(options["level"]).label)
            return await routes.set_priority(state, who, ref, body)
        if verb == "terminate":
            return await routes.terminate(state, who, ref, TerminateBody(**options))
        return await routes.restart(state, who, ref, RestartBody(**options))

    async def send_input(self, ref: str, text: str, enter: bool) -> dict[str, Any]:
        body = InputBody(text=text, enter=enter)
        return await routes.send_input(self.state, self._writer(), ref, body)

    async def followup(self, ref: str, prompt: str) -> dict[str, Any]:
        body = FollowupBody(prompt=prompt)
        return await routes.followup(self.state, self._writer(), ref, body)

    async def diff(self, ref: str, stat_only: bool, max_bytes: int) -> dict[str, Any]:
        return await landing.task_diff(self.state, self.who, ref, stat_only, max_bytes)

    async def merge(self, ref: str, into: str | None, squash: bool) -> dict[str, Any]:
        body = landing.MergeBody(into=into, squash=squash)
        return await landing.task_merge(self.state, self._writer(), ref, body)


class _UntilAccessEnds(Watcher):
    """A store watcher that also wakes once access is lost, so that a wait between two
    looks at the store (`wait_for_task`) ends then, not at its next tick."""

    def __init__(self, inner: Watcher, access: AccessWatch) -> None:
        self.inner = inner
        self.access = access

    async def wait(self, timeout: float | None) -> bool:
        changed = asyncio.create_task(self.inner.wait(timeout))
        lost = asyncio.create_task(self.access.lost.wait())
        try:
            await asyncio.wait((changed, lost), return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            changed.cancel()
            await asyncio.gather(changed, lost, return_exceptions=True)
        return lost.done() or (changed.done() and not changed.cancelled() and changed.result())

    def close(self) -> None:
        self.inner.close()


def _calls_for(state: ServerState) -> Any:
    def calls(ctx: Context[Any, Any, Any]) -> mcp_calls.Calls:
        request = ctx.request_context.request
        scope = {} if request is None else request.scope
        who, access = scope.get(PRINCIPAL), scope.get(ACCESS)
        if not isinstance(who, Principal) or not isinstance(access, AccessWatch):
            raise ToolError("no caller: /mcp is reached through the server's authentication")
        return _Refusing(RouteCalls(state, who, access))

    return calls


class _Refusing:
    """RouteCalls with the routes' HTTP refusals (403, 404…) as tool errors, and every
    call refused once the token it came with no longer grants access."""

    def __init__(self, inner: RouteCalls) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if not inspect.iscoroutinefunction(method):
            return method  # `watcher`: no route behind it

        async def refused(*args: Any, **kwargs: Any) -> Any:
            try:
                self.inner.access.check()
                return await method(*args, **kwargs)
            except AccessEnded as exc:
                raise ToolError(f"not allowed: {exc}") from None
            except HTTPException as exc:
                why = "not allowed" if exc.status_code == 403 else f"refused ({exc.status_code})"
                raise ToolError(f"{why}: {exc.detail}") from None

        return refused


class McpEndpoint:
    """The ASGI endpoint at /mcp: authenticate, then hand the request to the MCP session
    manager with the principal in its scope."""

    def __init__(self, state: ServerState, manager: StreamableHTTPSessionManager) -> None:
        self.state = state
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = presented_token(HTTPConnection(scope))
        try:
            who = await resolve(self.state, token)
        except HTTPException as exc:
            body = error_body(str(exc.detail), "Unauthorized")
            response = JSONResponse(body, exc.status_code, headers=exc.headers)
            await response(scope, receive, send)
            return
        scope[PRINCIPAL] = who
        # The tool runs while the request's response is open: as long as this block.
        async with AccessWatch(self.state, token) as access:
            scope[ACCESS] = access
            await self.manager.handle_request(scope, receive, send)


def mcp_server(state: ServerState) -> tuple[FastMCP, McpEndpoint]:
    """The MCP server of one app and its /mcp endpoint; run `server.session_manager.run()`
    for the app's lifetime. The app's own Host/Origin guard applies, so the SDK's is off."""
    server = mcp.build_server(
        _calls_for(state),
        streamable_http_path="/mcp",
        # No session state between requests: each is authenticated on its own, any node
        # of the store answers it, and progress goes out on the request's own stream.
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    server.streamable_http_app()  # creates the session manager
    return server, McpEndpoint(state, server.session_manager)
