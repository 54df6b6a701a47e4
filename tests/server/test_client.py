"""The HTTP client speaks the store's verbs and raises the store's errors."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

import slotline.client.http as client_module
from slotline.client.http import SlotlineClient
from slotline.errors import (
    AccessDenied,
    BoundExceeded,
    InvalidInput,
    InvalidTransition,
    NotFound,
    ServerUnavailable,
)
from slotline.models import Priority, Status
from slotline.spec import TaskSpec

from .conftest import Running

ECHO = {"command": ["echo", "hi"]}


@pytest.fixture
def client(server: Running) -> Iterator[SlotlineClient]:
    with SlotlineClient(server.url) as c:
        yield c


def test_reads_match_the_store(server: Running, client: SlotlineClient) -> None:
    task = client.submit(TaskSpec(command=["echo", "a"], title="a", priority=Priority.HIGH))
    client.submit({**ECHO, "title": "b", "labels": {"team": "web"}})
    direct = server.store.get(task.id)
    remote = client.get(task.id[:6])
    assert (remote.id, remote.title, remote.priority, remote.status) == (
        direct.id,
        direct.title,
        Priority.HIGH,
        Status.QUEUED,
    )
    assert remote.position == 1
    assert remote.to_dict() == direct.to_dict()
    assert [t.title for t in client.list_tasks()] == ["a", "b"]
    assert [t.title for t in client.list_tasks(label="team=web")] == ["b"]
    assert [t.title for t in client.list_tasks(Status.QUEUED, limit=1)] == ["a"]
    status = client.status()
    assert status.to_dict() == server.store.status().to_dict()
    assert client.counts() == {"queued": 2}
    assert [e.kind for e in client.events(0)] == ["submitted", "submitted"]
    assert client.last_seq() == server.store.last_seq()


def test_steering_through_the_client(client: SlotlineClient) -> None:
    a, b, c = client.submit_many([{**ECHO, "title": t} for t in "abc"])
    assert client.boost(c.id).position == 1
    assert client.move(a.id, after=b.id).position == 3
    assert client.set_priority(b.id, "urgent").priority is Priority.URGENT
    assert client.hold(a.id).status is Status.HELD
    assert client.release(a.id).status is Status.QUEUED
    assert client.bump(a.id).start_now is True
    assert client.cancel(c.id).status is Status.CANCELLED
    assert client.restart(c.id).status is Status.QUEUED
    client.pause()
    assert client.status().paused is True
    client.resume()
    client.set_setting("max_concurrent", 7)
    client.set_limit("agent", "claude", 2)
    settings = client.settings()
    assert settings["max_concurrent"] == 7
    assert [(x.key, x.value, x.max) for x in settings.per_key] == [("agent", "claude", 2)]
    assert client.clear() == 3


def test_errors_come_back_as_the_store_raises_them(client: SlotlineClient) -> None:
    with pytest.raises(NotFound, match="abcdef"):
        client.get("abcdef")
    task = client.submit(ECHO)
    client.cancel(task.id)
    with pytest.raises(InvalidTransition, match="it is cancelled") as refused:
        client.hold(task.id)
    assert refused.value.details["status"] == "cancelled"
    with pytest.raises(InvalidInput, match="max_attempts"):
        client.submit({**ECHO, "max_attempts": 0})
    client.set_setting("max_queue_size", 0)
    with pytest.raises(BoundExceeded) as bound:
        client.submit(ECHO)
    # Nothing is in line to start, so no estimate says when room comes: the default hint.
    assert bound.value.details == {"limit": "max_queue_size", "max": 0, "retry_after": 30}


def test_follow_yields_history_then_live_events(server: Running, client: SlotlineClient) -> None:
    first = client.submit(ECHO)
    events = client.follow(since=0)
    assert next(events).task_id == first.id
    second = server.store.submit(ECHO)
    assert next(events).task_id == second.id
    events.close()


def test_unreachable_server_and_bad_tokens(server: Running) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    with SlotlineClient(f"http://127.0.0.1:{free}") as nowhere, pytest.raises(ServerUnavailable):
        nowhere.status()
    server.token("root", "admin")
    with SlotlineClient(server.url, token="slt_wrong") as wrong, pytest.raises(AccessDenied):
        wrong.status()


def test_watcher_wakes_on_each_event_published_after_it_was_made(
    server: Running, client: SlotlineClient
) -> None:
    async def scenario() -> list[bool]:
        watcher = client.watcher()
        try:
            # An event between making the watcher and waiting on it is not missed.
            await asyncio.to_thread(server.store.submit, ECHO)
            seen = [await watcher.wait(10.0), await watcher.wait(0.2)]
            await asyncio.to_thread(server.store.submit, ECHO)
            return [*seen, await watcher.wait(10.0)]
        finally:
            watcher.close()

    assert asyncio.run(scenario()) == [True, False, True]


def test_a_ref_never_leaves_its_task_route(client: SlotlineClient) -> None:
    # Unescaped, "/api/tasks/../pause?/bump" is POST /api/pause (the rest is a query).
    for ref in ("../pause?", "../pause#", "../../api/pause?", "..%2Fpause?"):
        with pytest.raises((NotFound, InvalidInput)):
            client.bump(ref)
        with pytest.raises((NotFound, InvalidInput)):
            client.hold(ref)
    assert not client.status().paused


def test_bulk_sends_one_request_per_chunk_and_reports_each(
    server: Running, client: SlotlineClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_module, "BULK_CHUNK", 2)
    ids = [client.submit({**ECHO, "title": f"t{i}"}).id for i in range(5)]
    reported: list[tuple[int, int]] = []

    result = client.bulk("cancel", [ids[0][:10], *ids[1:]], progress=lambda *p: reported.append(p))

    assert result.done == ids
    assert reported == [(2, 5), (4, 5), (5, 5)]
    assert {server.store.get(i).status for i in ids} == {Status.CANCELLED}
