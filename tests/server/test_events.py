"""The live event stream: resume from a seq over WebSocket and SSE, heartbeats, and slow
clients cut off without holding anyone else up."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from slotline.models import Event
from slotline.server import ServerOptions
from slotline.server.hub import Dropped, EventHub, Subscriber
from slotline.store import Store

from .conftest import Running, ServerFactory

ECHO = {"command": ["echo", "hi"]}


def ws(server: Running, since: int | None) -> ClientConnection:
    query = "" if since is None else f"?since={since}"
    url = server.url.replace("http://", "ws://") + "/api/events/ws" + query
    return connect(url, open_timeout=10)


def frames(conn: ClientConnection) -> Iterator[dict[str, Any]]:
    while True:
        frame: dict[str, Any] = json.loads(conn.recv(timeout=10))
        yield frame


def events_until_heartbeat(conn: ClientConnection) -> list[tuple[int, str]]:
    """Every event frame received before the first heartbeat (the stream went idle)."""
    seen = []
    for frame in frames(conn):
        if frame["type"] == "heartbeat":
            return seen
        seen.append((frame["seq"], frame["kind"]))
    raise AssertionError("unreachable")


def expected(store: Store, since: int) -> list[tuple[int, str]]:
    return [(e.seq, e.kind) for e in store.events(since)]


def test_websocket_resume_delivers_exactly_the_missed_events(server: Running) -> None:
    store = server.store
    first = store.submit(ECHO)
    # Given a client that read the history and one live event, then went away…
    with ws(server, since=0) as conn:
        assert events_until_heartbeat(conn) == expected(store, 0)
        second = store.submit(ECHO)
        live = next(f for f in frames(conn) if f["type"] == "event")
        assert (live["kind"], live["task_id"]) == ("submitted", second.id)
        last_seen = live["seq"]
    # …when tasks change while it is gone…
    store.hold(first.id)
    store.submit({**ECHO, "title": "third"})
    store.cancel(second.id)
    store.set_setting("max_concurrent", 4)
    missed = expected(store, last_seen)
    assert [kind for _, kind in missed] == ["held", "submitted", "cancelled", "settings"]
    # …then reconnecting with its last seq gives exactly those, in order, and live ones after.
    with ws(server, since=last_seen) as conn:
        assert events_until_heartbeat(conn) == missed
        store.release(first.id)
        live = next(f for f in frames(conn) if f["type"] == "event")
        assert (live["kind"], live["seq"]) == ("released", missed[-1][0] + 1)


def sse_events(response: httpx.Response) -> Iterator[dict[str, Any] | None]:
    """Parsed SSE events; None for a heartbeat comment."""
    for line in response.iter_lines():
        if line.startswith(": heartbeat"):
            yield None
        elif line.startswith("data: "):
            yield json.loads(line.removeprefix("data: "))


def test_sse_resume_with_last_event_id(server: Running) -> None:
    store = server.store
    task = store.submit(ECHO)
    with httpx.Client(base_url=server.url, timeout=10) as http:
        with http.stream("GET", "/api/events/stream", params={"since": 0}) as response:
            stream = sse_events(response)
            first = next(stream)
            assert first is not None
            assert first["kind"] == "submitted"
            last_seen = first["seq"]
        store.hold(task.id)
        store.release(task.id)
        headers = {"Last-Event-ID": str(last_seen)}
        with http.stream("GET", "/api/events/stream", headers=headers) as response:
            got = []
            for item in sse_events(response):
                if item is None:
                    break
                got.append((item["seq"], item["kind"]))
    assert got == expected(store, last_seen)
    assert [kind for _, kind in got] == ["held", "released"]


def test_without_since_only_new_events_arrive(server: Running) -> None:
    server.store.submit(ECHO)
    with ws(server, since=None) as conn:
        assert events_until_heartbeat(conn) == []
        task = server.store.submit(ECHO)
        live = next(f for f in frames(conn) if f["type"] == "event")
        assert live["task_id"] == task.id


def test_a_client_that_falls_behind_is_dropped_with_a_reason(
    make_server: ServerFactory,
) -> None:
    server = make_server(options=ServerOptions(heartbeat=0.5, client_queue=2))
    store = server.store
    with ws(server, since=None) as conn:
        assert events_until_heartbeat(conn) == []
        # One commit of five events reaches the reader as one batch: more than the
        # client's queue holds, however fast it reads.
        store.submit_many([ECHO] * 5)
        with pytest.raises(ConnectionClosed) as closed:
            for _ in frames(conn):
                pass
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4000
    assert "too slow" in closed.value.rcvd.reason
    assert "since=" in closed.value.rcvd.reason
    # It resumes from where it was and gets everything.
    last = int(closed.value.rcvd.reason.rsplit("since=", 1)[1])
    with ws(server, since=last) as conn:
        assert events_until_heartbeat(conn) == expected(store, last)


def test_a_slow_subscriber_never_holds_up_the_others(tmp_path: Any) -> None:
    async def scenario() -> None:
        hub = EventHub(store=None)  # type: ignore[arg-type]  # publish never reads the store
        slow, fast = Subscriber(2), Subscriber(100)
        hub.attach(slow)
        hub.attach(fast)
        for seq in range(1, 6):
            hub.publish(Event(seq, 0.0, "submitted", None))
        assert hub.subscribers == 1
        assert slow.reason is not None
        with pytest.raises(Dropped, match="too slow"):
            await slow.get(0.1)
        got = [await fast.get(1.0) for _ in range(5)]
        assert [e.seq for e in got if e is not None] == [1, 2, 3, 4, 5]
        assert await fast.get(0.01) is None  # idle: the caller sends a heartbeat

    asyncio.run(scenario())


def drain(conn: ClientConnection) -> None:
    """Receive until the connection closes (raises ConnectionClosed), at most 100 frames."""
    for _ in range(100):
        conn.recv(timeout=10)


def test_stopping_the_server_ends_open_streams_at_once(
    make_server: ServerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    server = make_server()
    with (
        ws(server, since=None) as conn,
        httpx.Client(base_url=server.url, timeout=10) as http,
        http.stream("GET", "/api/events/stream") as response,
    ):
        assert events_until_heartbeat(conn) == []
        lines = response.iter_lines()
        assert ": heartbeat" in lines  # reads up to the first heartbeat: the stream is open
        with caplog.at_level(logging.ERROR, logger="uvicorn.error"):
            server.stop()
        # The server ended the streams itself: uvicorn did not have to cancel them when
        # its grace period ran out.
        assert "timeout graceful shutdown exceeded" not in caplog.text
        assert "event: dropped" in list(lines)
        with pytest.raises(ConnectionClosed) as closed:
            drain(conn)  # a heartbeat or notice sent before the close may come first
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code in (1001, 1012)
