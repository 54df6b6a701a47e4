"""How long a stream or a long call may go on: the token it was opened with, re-checked.

A request is authenticated once, when it arrives; a response that lasts (the event
stream over WebSocket or SSE, a log follow, an MCP `wait_for_task`) must also stop when
its token stops granting access: revoked, open mode ended, a task token's attempt over.
Each of them holds an `AccessWatch`, which re-checks the token every
`ServerOptions.auth_recheck` seconds (one second by default) beside the work, and tells
the work at once: an event to wait on beside its own, a callback, or `check()` before
each step. The re-check is its own task, so no work in progress (a catch-up through a
long event log, a wait for a store change) delays it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from types import TracebackType

from fastapi import HTTPException

from slotline.errors import SlotlineError
from slotline.server.context import ServerState, resolve

log = logging.getLogger("slotline.server.access")


class AccessEnded(Exception):
    """The token a stream or long call was opened with no longer grants access."""


async def access_lost(state: ServerState, token: str | None) -> str:
    """Wait until a stream opened with `token` may no longer be served (the token was
    revoked, its attempt ended, or open mode ended) and return why. Checked every
    `auth_recheck` seconds: a token file change or an attempt's end is seen that fast."""
    while True:
        await asyncio.sleep(state.options.auth_recheck)
        try:
            await resolve(state, token)
        except HTTPException as exc:
            return f"access ended: {exc.detail}"
        except SlotlineError:  # the store is briefly unavailable: check again later
            log.warning("cannot re-check a stream's token; retrying", exc_info=True)


class AccessWatch:
    """Re-checks `token` while the `async with` block runs; once access is lost, `lost`
    is set, `reason` says why and `on_lost(reason)` is called (once)."""

    def __init__(
        self,
        state: ServerState,
        token: str | None,
        on_lost: Callable[[str], None] | None = None,
    ) -> None:
        self.state = state
        self.token = token
        self.on_lost = on_lost
        self.lost = asyncio.Event()
        self.reason: str | None = None
        self._task: asyncio.Task[None] | None = None

    async def _watch(self) -> None:
        reason = await access_lost(self.state, self.token)
        log.info("ending a stream or long call: %s", reason)
        self.reason = reason
        self.lost.set()
        if self.on_lost is not None:
            self.on_lost(reason)

    def check(self) -> None:
        """Raises:
        AccessEnded: access was lost; its message says why."""
        if self.reason is not None:
            raise AccessEnded(self.reason)

    async def __aenter__(self) -> AccessWatch:
        self._task = asyncio.create_task(self._watch())
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            # Its own cancellation is returned, not raised: a cancellation of the block
            # that holds the watch still propagates.
            await asyncio.gather(self._task, return_exceptions=True)
