"""The Hephaestus queue workflows replayed over HTTP against a server running a real node."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from .conftest import Running, ServerFactory, command, until

SLEEPER = command("import time", "time.sleep(120)")


@pytest.fixture
def hephaestus(make_server: ServerFactory) -> Running:
    server = make_server(node=True)
    server.store.set_setting("max_concurrent", 2)
    return server


def queue(http: httpx.Client) -> dict[str, Any]:
    body: dict[str, Any] = http.get("/api/queue_status").json()
    return body


def submit(http: httpx.Client, title: str) -> str:
    response = http.post("/api/tasks", json={"command": SLEEPER, "title": title})
    assert response.status_code == 201
    task_id: str = response.json()["id"]
    return task_id


def line(http: httpx.Client) -> list[tuple[str, int]]:
    return [(t["description"], t["queue_position"]) for t in queue(http)["queued_tasks"]]


def agent_of(http: httpx.Client, task_id: str) -> str:
    agent: str = http.get(f"/api/tasks/{task_id}").json()["current_attempt"]
    return agent


def status_of(http: httpx.Client, task_id: str) -> str:
    status: str = http.get(f"/api/tasks/{task_id}").json()["status"]
    return status


def test_queued_tasks_carry_their_phase_id_or_null(http: httpx.Client) -> None:
    # Given a paused queue with a task of a Hephaestus phase and one without
    assert http.post("/api/pause").status_code == 200
    body = {"command": SLEEPER, "title": "phased", "labels": {"phase_id": "phase-2"}}
    assert http.post("/api/tasks", json=body).status_code == 201
    submit(http, "plain")

    # Then queue_status gives each its phase_id, null where it has none
    queued = queue(http)["queued_tasks"]
    assert [(t["description"], t["phase_id"]) for t in queued] == [
        ("phased", "phase-2"),
        ("plain", None),
    ]


def test_queue_workflows(hephaestus: Running) -> None:
    with hephaestus.client() as http:
        # At capacity: two run, the rest queue with positions.
        t1, t2 = submit(http, "t1"), submit(http, "t2")
        until(lambda: queue(http)["active_agents"] == 2, what="two agents running")
        t3, t4, t5 = submit(http, "t3"), submit(http, "t4"), submit(http, "t5")
        status = queue(http)
        assert status["max_concurrent_agents"] == 2
        assert (status["at_capacity"], status["slots_available"]) == (True, 0)
        assert status["queued_tasks_count"] == 3
        assert line(http) == [("t3", 1), ("t4", 2), ("t5", 3)]
        first = status["queued_tasks"][0]
        assert set(first) == {
            "task_id",
            "description",
            "priority",
            "priority_boosted",
            "queue_position",
            "queued_at",
            "phase_id",
            # slotline's estimates, beside Hephaestus' own fields
            "eta_start",
            "eta_finish",
            "eta_basis",
            "eta_unavailable",
            "waiting_reason",
        }
        assert (first["task_id"], first["priority"], first["priority_boosted"]) == (
            t3,
            "medium",
            False,
        )

        # Bump & Start: the last one starts now, over the limit (3/2).
        bumped = http.post("/api/bump_task_priority", json={"task_id": t5}).json()
        assert bumped["success"] is True
        assert bumped["agent_id"] == agent_of(http, t5)
        assert "bypassing agent limit" in bumped["message"]
        status = queue(http)
        assert (status["active_agents"], status["max_concurrent_agents"]) == (3, 2)
        assert line(http) == [("t3", 1), ("t4", 2)]

        # Cancel a queued task: the positions behind it renumber.
        cancelled = http.post("/api/cancel_queued_task", json={"task_id": t3}).json()
        assert cancelled == {
            "success": True,
            "message": f"Task {t3[:8]} cancelled and removed from queue",
        }
        assert line(http) == [("t4", 1)]
        assert status_of(http, t3) == "cancelled"

        # Terminate: over the limit, one ending brings it back to 2/2 and nothing starts…
        old_agent = agent_of(http, t1)
        ended = http.post(
            "/api/terminate_agent", json={"agent_id": old_agent, "reason": "stuck"}
        ).json()
        assert ended == {
            "success": True,
            "message": f"Agent {old_agent[:8]} terminated successfully",
        }
        until(lambda: status_of(http, t1) == "failed", what="t1 terminated")
        assert http.get(f"/api/tasks/{t1}").json()["failure_reason"] == "terminated: stuck"
        assert line(http) == [("t4", 1)]
        # …and terminating another frees a slot, so the next one starts.
        http.post("/api/terminate_agent", json={"agent_id": agent_of(http, t2)})
        until(lambda: status_of(http, t4) == "running", what="t4 started after a terminate")
        assert queue(http)["queued_tasks_count"] == 0

        # Restart at capacity: queued.
        restarted = http.post("/api/restart_task", json={"task_id": t1}).json()
        assert restarted == {
            "success": True,
            "message": f"Task {t1[:8]} restarted and added to queue",
            "status": "queued",
        }
        assert line(http) == [("t1", 1)]
        # Restart with a free slot: assigned at once to a new agent.
        http.post("/api/terminate_agent", json={"agent_id": agent_of(http, t5)})
        until(lambda: status_of(http, t1) == "running", what="t1 started again")
        http.post("/api/terminate_agent", json={"agent_id": agent_of(http, t4)})
        until(lambda: queue(http)["active_agents"] == 1, what="a free slot")
        again = http.post("/api/restart_task", json={"task_id": t2}).json()
        assert (again["success"], again["status"]) == (True, "assigned")
        assert again["agent_id"] == agent_of(http, t2)

        # Errors keep slotline's codes with a `detail`.
        stale = http.post("/api/terminate_agent", json={"agent_id": old_agent, "reason": "x"})
        assert stale.status_code == 409
        assert "not running" in stale.json()["detail"]
        running = http.post("/api/cancel_queued_task", json={"task_id": t2})
        assert running.status_code == 409
        assert "running" in running.json()["detail"]
        assert http.post("/api/bump_task_priority", json={"task_id": "abcdef99"}).status_code == 404
        assert http.post("/api/restart_task", json={"task_id": t2}).status_code == 409
        assert http.post("/api/terminate_agent", json={}).status_code == 422
