"""The live event stream: one reader of the store's event log, fanned out to WebSocket and
Server-Sent-Events clients through a bounded queue each.

A client passes the last `seq` it saw and gets every later event, then live ones. A
client that falls `client_queue` events behind is dropped with a reason and resumes from
its last `seq`; it never slows the reader, dispatch or the other clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Query, Request, WebSocket
from starlette.responses import StreamingResponse

from slotline.bounds import OFFSET
from slotline.errors import SlotlineError
from slotline.models import Event
from slotline.server.access import AccessWatch
from slotline.server.auth import Principal
from slotline.server.context import (
    SUBPROTOCOL,
    Reader,
    ServerState,
    State,
    authenticate,
    presented_token,
    server_state,
)
from slotline.server.errors import ERROR_RESPONSES
from slotline.server.schemas import MAX_SEQ
from slotline.server.visibility import Visibility
from slotline.store import Store

log = logging.getLogger("slotline.server.events")

PAGE = 500
WS_DROPPED = 4000  # close code: too slow, resume from the last seq
WS_REFUSED = 1008  # close code: policy (token refused or revoked, bad since)
WS_GOING_AWAY = 1001  # close code: the server is stopping


class Dropped(Exception):
    """The client was cut off: it fell too far behind, or the server is stopping."""


class Subscriber:
    """One client's bounded queue of live events."""

    def __init__(self, size: int) -> None:
        self.queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=size)
        self.reason: str | None = None
        self.code = WS_DROPPED
        self.gone = asyncio.Event()
        # The last seq written to the client: where it should resume from.
        self.sent = 0

    def offer(self, event: Event) -> bool:
        """Queue an event without waiting; a full queue drops the subscriber."""
        if self.reason is not None:
            return False
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.drop(f"too slow: fell {self.queue.maxsize} events behind")
            return False
        return True

    def drop(self, reason: str, code: int = WS_DROPPED) -> None:
        """Cut the client off; its stream ends with `reason` (a WebSocket with `code`)."""
        if self.reason is None:
            self.reason, self.code = reason, code
            self.gone.set()

    def check(self) -> None:
        """Raises:
        Dropped: the subscriber was cut off (also while it catches up, when nothing
            waits on its queue)."""
        if self.reason is not None:
            raise Dropped(self.reason)

    async def get(self, timeout: float) -> Event | None:
        """The next live event, or None after `timeout` seconds of silence.

        Raises:
            Dropped: the subscriber was cut off.
        """
        self.check()
        if not self.queue.empty():
            return self.queue.get_nowait()
        getter = asyncio.create_task(self.queue.get())
        gone = asyncio.create_task(self.gone.wait())
        try:
            await asyncio.wait((getter, gone), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not getter.done():
                getter.cancel()
        if getter.done() and not getter.cancelled():
            return getter.result()
        self.check()
        return None


class EventHub:
    """Reads new events from the store when it changes and offers them to subscribers."""

    def __init__(self, store: Store, idle_wait: float = 5.0) -> None:
        self.store = store
        self.idle_wait = idle_wait
        self.last_seq = 0
        self.ready = asyncio.Event()
        self.closed: str | None = None
        self._subscribers: set[Subscriber] = set()

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def attach(self, subscriber: Subscriber) -> int:
        """Start offering live events; returns the last seq published before it."""
        if self.closed is not None:
            subscriber.drop(self.closed, WS_GOING_AWAY)
        else:
            self._subscribers.add(subscriber)
        return self.last_seq

    def detach(self, subscriber: Subscriber) -> None:
        self._subscribers.discard(subscriber)

    def close(self, reason: str) -> None:
        """End every stream (the server is stopping); clients reconnect and resume."""
        self.closed = reason
        for subscriber in list(self._subscribers):
            subscriber.drop(reason, WS_GOING_AWAY)
        self._subscribers.clear()

    def publish(self, event: Event) -> None:
        for subscriber in list(self._subscribers):
            if not subscriber.offer(event):
                self._subscribers.discard(subscriber)
                log.info("dropped a slow event-stream client", extra={"seq": event.seq})

    async def run(self) -> None:
        """Follow the event log until cancelled."""
        watcher = self.store.watcher()
        try:
            self.last_seq = await asyncio.to_thread(self.store.last_seq)
            self.ready.set()
            while True:
                try:
                    batch = await asyncio.to_thread(self.store.events, self.last_seq, PAGE)
                except SlotlineError:
                    log.exception("cannot read events; retrying")
                    await watcher.wait(self.idle_wait)
                    continue
                for event in batch:
                    self.last_seq = event.seq
                    self.publish(event)
                if len(batch) < PAGE:
                    await watcher.wait(self.idle_wait)
        finally:
            watcher.close()


async def stream(
    state: ServerState, who: Principal, since: int | None, subscriber: Subscriber
) -> AsyncIterator[Event | None]:
    """Every visible event after `since` (None: only new ones), then live events; None
    marks a heartbeat. Ends by raising Dropped if the subscriber is cut off."""
    hub, store = state.hub, state.store
    await hub.ready.wait()
    visible = Visibility(state, who)
    if since is None:  # "only new ones": new as of now in the store, not as of the hub
        since = await state.call(store.last_seq)
    sent = subscriber.sent = since
    # Catch up from the store without holding a queue slot, then attach and fill the gap
    # between the last page and the attach point; live events at or below `sent` are
    # duplicates of what the catch-up read and are skipped. A subscriber cut off (its
    # token revoked) ends here too: a catch-up through a long log takes seconds.
    while True:
        batch = await state.call(store.events, sent, PAGE)
        for event in batch:
            subscriber.check()
            sent = event.seq
            if shown := await visible(event):
                yield shown
        if len(batch) < PAGE:
            break
    attached_at = hub.attach(subscriber)
    try:
        while sent < attached_at:
            batch = await state.call(store.events, sent, PAGE)
            if not batch:
                break
            for event in batch:
                subscriber.check()
                sent = event.seq
                if shown := await visible(event):
                    yield shown
        while True:
            live = await subscriber.get(state.options.heartbeat)
            if live is None:
                yield None
                continue
            if live.seq <= sent:
                continue
            sent = live.seq
            if shown := await visible(live):
                yield shown
    finally:
        hub.detach(subscriber)


router = APIRouter(tags=["events"])


@router.get(
    "/api/events/stream",
    responses={
        **ERROR_RESPONSES,
        200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events"},
    },
    response_class=StreamingResponse,
)
async def events_sse(
    request: Request,
    state: State,
    who: Reader,
    since: Annotated[int | None, Query(description="Last seq seen; omit: new only"), OFFSET] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """The event log as Server-Sent Events (`id:` is the seq, so EventSource resumes by
    itself); `: heartbeat` comments keep an idle connection alive; a client that falls
    behind gets `event: dropped` and must reconnect with its last seq. When the token
    it was opened with is revoked (or its attempt ends), `event: refused` ends it."""
    if since is None and last_event_id:
        try:
            since = min(max(0, int(last_event_id)), MAX_SEQ)
        except ValueError:
            raise HTTPException(400, "Last-Event-ID must be an event seq (a number)") from None
    subscriber = Subscriber(state.options.client_queue)
    token = presented_token(request)

    async def body() -> AsyncIterator[str]:
        yield "retry: 2000\n\n"
        try:
            async with AccessWatch(state, token, refuse(subscriber)):
                async for event in stream(state, who, since, subscriber):
                    if event is None:
                        yield ": heartbeat\n\n"
                    else:
                        yield f"id: {event.seq}\ndata: {json.dumps(event.to_dict())}\n\n"
                        subscriber.sent = event.seq  # written to the client: resume after it
        except Dropped as exc:
            kind = "refused" if subscriber.code == WS_REFUSED else "dropped"
            dropped = {"reason": str(exc), "since": subscriber.sent}
            yield f"event: {kind}\ndata: {json.dumps(dropped)}\n\n"

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def refuse(subscriber: Subscriber) -> Callable[[str], None]:
    """What ends `subscriber` once its token no longer grants access: a drop, code 1008."""
    return lambda reason: subscriber.drop(reason, WS_REFUSED)


@router.websocket("/api/events/ws")
async def events_ws(websocket: WebSocket, since: int | None = None) -> None:
    """The event log over a WebSocket: `{"type": "event", "seq": …}` frames, then
    `{"type": "heartbeat"}` when idle; a slow client is closed with code 4000, one whose
    token is revoked (or whose attempt ended) with 1008. The token comes from
    `Authorization: Bearer`, or from a browser from the subprotocol
    `slotline-token.TOKEN` offered beside `slotline` (accepted as `slotline`).
    Its Host and Origin were checked before (see `slotline.server.guard`)."""
    state = server_state(websocket)
    try:
        who = await authenticate(websocket)
    except HTTPException as exc:
        await websocket.close(WS_REFUSED, str(exc.detail)[:120])
        return
    if since is not None and not 0 <= since <= MAX_SEQ:
        await websocket.close(WS_REFUSED, "since must be an event seq, 0 or more")
        return
    offered = websocket.scope.get("subprotocols") or ()
    await websocket.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
    subscriber = Subscriber(state.options.client_queue)

    async def pump() -> None:
        with contextlib.suppress(Dropped):
            async for event in stream(state, who, since, subscriber):
                if event is None:
                    await websocket.send_json({"type": "heartbeat", "seq": subscriber.sent})
                else:
                    await websocket.send_json({"type": "event", **event.to_dict()})
                    subscriber.sent = event.seq

    async def listen() -> None:
        while (await websocket.receive())["type"] != "websocket.disconnect":
            pass

    async with AccessWatch(state, presented_token(websocket), refuse(subscriber)):
        tasks = [
            asyncio.create_task(pump()),
            asyncio.create_task(listen()),
            asyncio.create_task(subscriber.gone.wait()),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    if subscriber.reason is not None:
        reason = subscriber.reason
        if subscriber.code != WS_REFUSED:
            reason += f"; resume with since={subscriber.sent}"
        with contextlib.suppress(Exception):
            await asyncio.wait_for(websocket.close(subscriber.code, reason[:120]), 5.0)
