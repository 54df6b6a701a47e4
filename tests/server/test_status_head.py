"""The reads of the server hold the head of a long line and its totals, and the whole
line only when asked for it (`?all=true`): /api/status, its client, /api/stats,
/metrics and the MCP tool queue_status."""

from __future__ import annotations

import json

import httpx

from slotline.client.http import SlotlineClient
from slotline.clock import iso
from slotline.line import STATUS_HEAD

from .conftest import Running, mcp_tool

MANY = STATUS_HEAD + 4


def _line(server: Running) -> list[str]:
    """Given more queued tasks than the head a status shows: their ids, in line."""
    tasks = server.store.submit_many([{"command": ["true"], "title": f"t{i}"} for i in range(MANY)])
    return [t.id for t in tasks]


def test_api_status_answers_the_head_and_the_whole_line_when_asked(
    server: Running, http: httpx.Client
) -> None:
    ids = _line(server)
    head = http.get("/api/status").json()
    assert [t["id"] for t in head["queued"]] == ids[:STATUS_HEAD]
    assert (head["queued_total"], head["next_up"]) == (MANY, ids[0])
    assert [t["id"] for t in http.get("/api/status?limit=3").json()["queued"]] == ids[:3]
    whole = http.get("/api/status", params={"all": "true"}).json()
    assert [t["id"] for t in whole["queued"]] == ids
    assert whole["queued_total"] == MANY
    assert http.get("/api/status", params={"all": "yes"}).status_code == 422


def test_the_client_reads_the_head_unless_asked_for_all(server: Running) -> None:
    ids = _line(server)
    with SlotlineClient(server.url) as client:
        head = client.status()
        assert [t.id for t in head.queued] == ids[:STATUS_HEAD]
        assert head.queued_total == MANY
        assert [t.id for t in client.status(limit=2).queued] == ids[:2]
        whole = client.status(all=True)
        assert [t.id for t in whole.queued] == ids
        assert whole.queued_total == MANY


def test_stats_and_metrics_count_the_whole_line_without_listing_it(
    server: Running, http: httpx.Client
) -> None:
    _line(server)
    stats = http.get("/api/stats").json()
    assert stats["queue_depth"] == MANY
    whole = server.store.status(all=True).queued
    assert stats["oldest_queued_at"] == iso(min(t.queued_at or 0 for t in whole))
    assert f"slotline_queue_depth {float(MANY)}" in http.get("/metrics").text


def test_the_mcp_status_says_the_lines_length(server: Running) -> None:
    ids = _line(server)
    failed, said = mcp_tool(server, server.token("ops", "admin"), "queue_status")
    assert not failed, said
    status = json.loads(said)
    assert (status["queue_length"], status["next_up"]) == (MANY, ids[0])
    assert "queued" not in status  # the length, never the line
