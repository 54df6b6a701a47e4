"""External tasks: claimed over HTTP by an outside agent system, reported with the token."""

from __future__ import annotations

from typing import Any

import httpx

from slotline.config.file import Config
from slotline.reach import UsersConfig

from .conftest import Running, ServerFactory

EXTERNAL = {"kind": "external", "title": "review PR 12", "agent": "reviewer"}


def claim(http: httpx.Client, **body: Any) -> list[dict[str, Any]]:
    response = http.post("/api/external/claim", json=body)
    assert response.status_code == 200, response.text
    claims: list[dict[str, Any]] = response.json()["claims"]
    return claims


def test_claim_heartbeat_and_succeed(http: httpx.Client) -> None:
    task = http.post("/api/tasks", json=EXTERNAL).json()
    http.post("/api/tasks", json={"command": ["echo", "not external"]})
    (claimed,) = claim(http, claimant="agents-r-us", lease=30)
    assert claimed["task"]["id"] == task["id"]
    assert claimed["task"]["status"] == "running"
    assert claimed["task"]["attempts"][0]["node_id"] == "external:agents-r-us"
    assert claimed["token"]
    assert claim(http) == []  # nothing else external is queued
    attempt, token = claimed["attempt_id"], claimed["token"]
    beat = http.post(f"/api/external/attempts/{attempt}/heartbeat", json={"token": token})
    assert beat.status_code == 200
    assert beat.json()["stop_requested"] is None
    done = http.post(f"/api/external/attempts/{attempt}/succeeded", json={"token": token})
    assert done.json()["status"] == "succeeded"
    assert done.json()["attempts"][0]["outcome"] == "succeeded"


def test_failure_is_retried_while_attempts_are_left(http: httpx.Client) -> None:
    http.post("/api/tasks", json={**EXTERNAL, "max_attempts": 2, "backoff": 0})
    (first,) = claim(http)
    failed = http.post(
        f"/api/external/attempts/{first['attempt_id']}/failed",
        json={"token": first["token"], "reason": "model refused", "exit_code": 2},
    ).json()
    assert failed["status"] == "queued"
    (second,) = claim(http)
    final = http.post(
        f"/api/external/attempts/{second['attempt_id']}/failed",
        json={"token": second["token"], "reason": "model refused again"},
    ).json()
    assert (final["status"], final["failure_reason"]) == ("failed", "model refused again")


def test_stale_or_wrong_tokens_are_refused_with_409(http: httpx.Client) -> None:
    http.post("/api/tasks", json={**EXTERNAL, "max_attempts": 2, "backoff": 0})
    (first,) = claim(http)
    attempt = first["attempt_id"]
    wrong = http.post(f"/api/external/attempts/{attempt}/succeeded", json={"token": "guess"})
    assert (wrong.status_code, wrong.json()["type"]) == (409, "StaleAttempt")
    http.post(
        f"/api/external/attempts/{attempt}/failed", json={"token": first["token"], "reason": "x"}
    )
    (second,) = claim(http)
    stale = http.post(f"/api/external/attempts/{attempt}/succeeded", json={"token": first["token"]})
    assert stale.status_code == 409
    assert "no longer current" in stale.json()["detail"]
    beat = http.post(f"/api/external/attempts/{attempt}/heartbeat", json={"token": first["token"]})
    assert beat.status_code == 409
    ok = http.post(
        f"/api/external/attempts/{second['attempt_id']}/succeeded", json={"token": second["token"]}
    )
    assert ok.json()["status"] == "succeeded"
    missing = http.post("/api/external/attempts/nope/heartbeat", json={"token": "x"})
    assert missing.status_code == 404


def test_heartbeat_tells_the_runner_to_stop(http: httpx.Client) -> None:
    task = http.post("/api/tasks", json=EXTERNAL).json()
    (claimed,) = claim(http)
    http.post(f"/api/tasks/{task['id']}/cancel")
    path = f"/api/external/attempts/{claimed['attempt_id']}"
    beat = http.post(f"{path}/heartbeat", json={"token": claimed["token"]}).json()
    assert beat["stop_requested"] == "cancel"
    ended = http.post(f"{path}/succeeded", json={"token": claimed["token"]}).json()
    assert ended["status"] == "cancelled"


def test_a_lapsed_lease_is_visible_to_the_reaper(server: Running, http: httpx.Client) -> None:
    http.post("/api/tasks", json=EXTERNAL)
    (claimed,) = claim(http, lease=5)
    attempt = server.store.attempt(claimed["attempt_id"])
    assert attempt.lease_expires_at is not None
    lapsed = server.store.live_attempts(None)
    assert lapsed == []
    server.store.renew_attempt(attempt.id, claimed["token"], lease=-1.0)
    assert [a.id for a in server.store.live_attempts(None)] == [attempt.id]


def test_only_admins_claim_and_owners_report(make_server: ServerFactory) -> None:
    # Users submit external tasks where the admin lets them (users.external).
    server = make_server(config=Config(users=UsersConfig(external=True)))
    admin = server.token("root", "admin")
    ann = server.token("ann", "user")
    with server.client(ann) as http:
        http.post("/api/tasks", json=EXTERNAL)
        assert http.post("/api/external/claim").status_code == 403
    with server.client(admin) as http:
        (claimed,) = claim(http)
    with server.client(server.token("bob", "user")) as http:
        response = http.post(
            f"/api/external/attempts/{claimed['attempt_id']}/succeeded",
            json={"token": claimed["token"]},
        )
        assert response.status_code == 404
    with server.client(ann) as http:
        response = http.post(
            f"/api/external/attempts/{claimed['attempt_id']}/succeeded",
            json={"token": claimed["token"]},
        )
        assert response.json()["status"] == "succeeded"
