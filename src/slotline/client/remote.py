"""A server's live streams for remote followers: a Watcher on the event stream, a log follow."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Protocol

import httpx

from slotline.client.refusals import response_error
from slotline.errors import ServerUnavailable
from slotline.store import Watcher

# The server sends a heartbeat on an idle event stream (every 15 s by default): a longer
# silence is a dead connection. A log has no heartbeat: a quiet run may say nothing for hours.
EVENTS_TIMEOUT = httpx.Timeout(10.0, read=60.0)
LOG_TIMEOUT = httpx.Timeout(10.0, read=None)
RECONNECT_SECONDS = 1.0
REFUSED = (401, 403, 404)


class Server(Protocol):
    """The server a stream is opened on (a `SlotlineClient` is one): its address, and an
    async client on it with the caller's token."""

    url: str

    def async_http(self, timeout: httpx.Timeout) -> httpx.AsyncClient: ...


class EventWatcher(Watcher):
    """Wakes when the server publishes an event after seq `since`, like a store's watcher.

    The stream is opened on the first `wait` and read in the background, resuming from the
    last seq seen when it breaks. A stream that cannot be had (a server gone, a token
    refused) only makes `wait` time out: the caller's next read reports why.
    """

    def __init__(self, client: Server, since: int) -> None:
        self._client = client
        self._since = since
        self._changed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    async def wait(self, timeout: float | None) -> bool:
        if self._reader is None:
            self._reader = asyncio.create_task(self._read())
        if not self._changed.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):  # never swallows a cancellation
                    await self._changed.wait()
        changed = self._changed.is_set()
        self._changed.clear()
        return changed

    def close(self) -> None:
        # The reader ends (and closes its connection) when the loop next runs it.
        if self._reader is not None:
            self._reader.cancel()

    async def _read(self) -> None:
        async with self._client.async_http(EVENTS_TIMEOUT) as http:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    params = {"since": self._since}
                    async with http.stream("GET", "/api/events/stream", params=params) as reply:
                        if reply.status_code in REFUSED:
                            return
                        async for line in reply.aiter_lines():
                            self._take(line)
                await asyncio.sleep(RECONNECT_SECONDS)

    def _take(self, line: str) -> None:
        """An `id: SEQ` line starts each event; heartbeats and `dropped` notices have none."""
        if line.startswith("id: ") and line[4:].strip().isdigit():
            self._since = int(line[4:])
            self._changed.set()


async def follow_log(
    client: Server, ref: str, attempt: int, offset: int = 0
) -> AsyncIterator[bytes]:
    """The output of attempt number `attempt` of task `ref` from byte `offset` on, as it is
    written, until the attempt has ended (or the server, stopping, ends the stream).

    Raises:
        NotFound: no such task or attempt; AccessDenied: the token is refused.
        ServerUnavailable: the server cannot be reached, or the stream broke.
    """
    params: dict[str, str | int] = {"attempt": attempt, "follow": "true", "offset": offset}
    path = f"/api/tasks/{ref}/log"
    try:
        async with (
            client.async_http(LOG_TIMEOUT) as http,
            http.stream("GET", path, params=params) as reply,
        ):
            if not reply.is_success:
                await reply.aread()
                raise response_error(reply)
            async for chunk in reply.aiter_bytes():
                yield chunk
    except httpx.HTTPError as exc:
        raise ServerUnavailable(f"the log stream from {client.url} broke: {exc}") from exc
