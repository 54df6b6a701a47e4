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
from slotline.server.hub import PAGE, WS_REFUSED, Dropped, Subscriber
from slotline.server.schemas import MAX_SEQ
from slotline.server.visibility import Visibility

log = logging.getLogger("slotline.server.events")


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
