"""The REST API through a real server: each route, its answers and its errors."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from slotline.server import ServerOptions
from slotline.store import Store

from .conftest import Running, ServerFactory

ECHO = ["echo", "hi"]


def submit(http: httpx.Client, title: str = "task", **fields: Any) -> dict[str, Any]:
    fields.setdefault("command", ECHO)
    response = http.post("/api/tasks", json={"title": title, **fields})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def titles(tasks: list[dict[str, Any]]) -> list[str]:
    return [t["title"] for t in tasks]


def test_submit_returns_the_task_with_status_and_position(http: httpx.Client) -> None:
    first = submit(http, "first", priority="high", agent="claude", labels={"team": "infra"})
    second = submit(http, "second")
    assert first["status"] == "queued"
    assert first["priority"] == "high"
    assert (first["position"], second["position"]) == (1, 2)
    assert first["labels"] == {"team": "infra"}
    assert first["attempts"] == []


def test_batch_is_all_or_nothing(http: httpx.Client) -> None:
    good = {"command": ECHO, "title": "ok"}
    bad = {"command": ECHO, "title": "bad", "depends_on": ["ffffffff"]}
    refused = http.post("/api/tasks/batch", json={"tasks": [good, bad]})
    assert refused.status_code == 422
    assert http.get("/api/tasks").json()["total"] == 0
    created = http.post("/api/tasks/batch", json={"tasks": [good, {**good, "title": "two"}]})
    assert created.status_code == 201
    assert titles(created.json()) == ["ok", "two"]


def test_get_accepts_a_prefix_and_shows_position(http: httpx.Client) -> None:
    task = submit(http, "only")
    found = http.get(f"/api/tasks/{task['id'][:8]}").json()
    assert found["id"] == task["id"]
    assert found["position"] == 1


def test_list_filters_and_pages(http: httpx.Client) -> None:
    parent = submit(http, "parent", user="ann")
    submit(http, "a", agent="claude", user="ann", labels={"team": "infra"})
    submit(http, "b", agent="aider", workspace="/w", labels={"team": "web"})
    submit(http, "c", agent="claude", parent_id=parent["id"])
    http.post(f"/api/tasks/{parent['id']}/hold")

    def listed(**params: Any) -> list[str]:
        return titles(http.get("/api/tasks", params=params).json()["tasks"])

    assert listed(agent="claude") == ["a", "c"]
    assert listed(user="ann") == ["parent", "a"]
    assert listed(workspace="/w") == ["b"]
    assert listed(label="team=infra") == ["a"]
    assert listed(label="team") == ["a", "b"]
    assert listed(parent=parent["id"][:8]) == ["c"]
    assert listed(status="held") == ["parent"]
    page = http.get("/api/tasks", params={"limit": 2, "offset": 1}).json()
    assert (titles(page["tasks"]), page["total"]) == (["a", "b"], 4)


def test_list_pages_follow_next_after_to_the_end(http: httpx.Client) -> None:
    for name in "abcde":
        submit(http, name)
    seen, after = [], None
    while True:
        params: dict[str, Any] = {"limit": 2, "newest": "true", "count": "false"}
        page = http.get("/api/tasks", params={**params, **({"after": after} if after else {})})
        body = page.json()
        assert body["total"] is None
        seen += titles(body["tasks"])
        submit(http, "meanwhile")  # newer than every page: never listed newest-first here
        after = body["next_after"]
        if after is None:
            break
        assert after == body["tasks"][-1]["id"]
    assert seen == ["e", "d", "c", "b", "a"]


def test_list_refuses_bad_paging_values_with_what_is_wrong(http: httpx.Client) -> None:
    submit(http, "a")
    for params in ({"limit": 1001}, {"offset": -1}, {"newest": "maybe"}, {"after": "x" * 65}):
        response = http.get("/api/tasks", params=params)
        assert response.status_code == 422, params
        assert next(iter(params)) in response.text
    unknown = http.get("/api/tasks", params={"after": "f" * 32})
    assert unknown.status_code == 404
    assert "f" * 8 in unknown.json()["detail"]
    assert http.get("/api/tasks", params={"after": "not-an-id"}).status_code == 422


def test_steering_verbs_change_the_line(http: httpx.Client) -> None:
    a, b, c = (submit(http, name) for name in "abc")

    def line() -> list[str]:
        return titles(http.get("/api/status").json()["queued"])

    assert http.post(f"/api/tasks/{c['id']}/boost").json()["position"] == 1
    assert line() == ["c", "a", "b"]
    assert http.post(f"/api/tasks/{a['id']}/move", json={"to": 3}).status_code == 200
    assert line() == ["c", "b", "a"]
    http.post(f"/api/tasks/{a['id']}/move", json={"before": b["id"]})
    assert line() == ["c", "a", "b"]
    moved = http.post(f"/api/tasks/{b['id']}/priority", json={"priority": "urgent"}).json()
    assert moved["priority"] == "urgent"
    assert line() == ["c", "b", "a"]
    assert http.post(f"/api/tasks/{b['id']}/hold").json()["status"] == "held"
    assert line() == ["c", "a"]
    assert http.post(f"/api/tasks/{b['id']}/release").json()["status"] == "queued"
    bumped = http.post(f"/api/tasks/{a['id']}/bump").json()
    assert bumped["start_now"] is True
    assert line()[0] == "a"
    assert http.post(f"/api/tasks/{c['id']}/cancel").json()["status"] == "cancelled"
    restarted = http.post(f"/api/tasks/{c['id']}/restart", json={"force": False}).json()
    assert restarted["status"] == "queued"


def test_terminate_and_forced_restart_of_a_running_task(
    server: Running, http: httpx.Client
) -> None:
    task = submit(http, "runs")
    server.store.claim("elsewhere")
    stopped = http.post(f"/api/tasks/{task['id']}/terminate", json={"reason": "stuck"}).json()
    assert (stopped["status"], stopped["stop_requested"]) == ("running", "terminate:stuck")
    refused = http.post(f"/api/tasks/{task['id']}/restart")
    assert refused.status_code == 409
    forced = http.post(f"/api/tasks/{task['id']}/restart", json={"force": True}).json()
    assert forced["stop_requested"] == "restart"


def test_unknown_task_is_404(http: httpx.Client) -> None:
    for method, path in [
        ("GET", "/api/tasks/abcdef12"),
        ("POST", "/api/tasks/abcdef12/cancel"),
        ("POST", "/api/tasks/abcdef12/boost"),
        ("GET", "/api/tasks/abcdef12/log"),
    ]:
        response = http.request(method, path)
        assert response.status_code == 404, path
        assert response.json()["type"] == "NotFound"
        assert "abcdef12" in response.json()["detail"]


def test_illegal_transition_is_409_naming_the_state(http: httpx.Client) -> None:
    task = submit(http, "t")
    http.post(f"/api/tasks/{task['id']}/cancel")
    response = http.post(f"/api/tasks/{task['id']}/hold")
    assert response.status_code == 409
    body = response.json()
    assert (body["type"], body["status"]) == ("InvalidTransition", "cancelled")
    assert "it is cancelled" in body["detail"]
    terminate = http.post(f"/api/tasks/{submit(http, 'q')['id']}/terminate")
    assert terminate.status_code == 409
    assert "queued" in terminate.json()["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"command": ECHO, "max_attempts": 0}, "max_attempts"),
        ({"command": ECHO, "priority": "soon"}, "priority"),
        ({"command": ECHO, "env": {"1BAD": "x"}}, "env"),
        ({"command": "echo hi"}, "command"),
        ({"command": ECHO, "colour": "red"}, "colour"),
        ({"title": "no command"}, "command"),
        ({"command": ECHO, "depends_on": ["beef"]}, "beef"),
    ],
)
def test_invalid_input_is_422_naming_the_field(
    http: httpx.Client, body: dict[str, Any], field: str
) -> None:
    response = http.post("/api/tasks", json=body)
    assert response.status_code == 422, response.text
    assert field in response.json()["detail"]


def test_a_move_that_changes_the_band_says_what_it_was(http: httpx.Client) -> None:
    # Given two high tasks and a low one behind them,
    high = [submit(http, f"high {n}", priority="high") for n in range(2)]
    low = submit(http, "low", priority="low")
    # When the low one is moved to #2, between the two high ones,
    moved = http.post(f"/api/tasks/{low['id']}/move", json={"to": 2}).json()
    # Then it is high now, and the answer says it was low.
    assert (moved["position"], moved["priority"], moved["priority_before"]) == (2, "high", "low")
    assert moved["boosted_before"] is False
    again = http.post(f"/api/tasks/{high[1]['id']}/move", json={"to": 1}).json()
    assert (again["priority"], again["priority_before"]) == ("high", "high")


def test_bad_query_and_move_arguments_are_422(http: httpx.Client) -> None:
    task = submit(http, "t")
    assert http.get("/api/tasks", params={"limit": 0}).status_code == 422
    assert "limit" in http.get("/api/tasks", params={"limit": 0}).json()["detail"]
    assert http.get("/api/tasks", params={"status": "nope"}).status_code == 422
    both = http.post(f"/api/tasks/{task['id']}/move", json={"to": 1, "after": task["id"]})
    assert both.status_code == 422
    assert http.get("/api/tasks/not-hex").status_code == 422


def test_ambiguous_prefix_is_422(http: httpx.Client) -> None:
    # Seventeen ids, sixteen hex digits: two of them start alike.
    ids = [submit(http, str(n))["id"] for n in range(17)]
    shared = next(c for c in "0123456789abcdef" if sum(i.startswith(c) for i in ids) > 1)
    response = http.get(f"/api/tasks/{shared}")
    assert (response.status_code, response.json()["type"]) == (422, "AmbiguousId")


def test_queue_bound_is_429_with_the_limit(http: httpx.Client) -> None:
    http.post("/api/limits", json={"settings": {"max_queue_size": 1}})
    submit(http, "fits")
    response = http.post("/api/tasks", json={"command": ECHO})
    assert response.status_code == 429
    body = response.json()
    assert (body["limit"], body["max"]) == ("max_queue_size", 1)
    assert "max_queue_size is 1" in body["detail"]


def test_retry_after_is_when_the_next_task_in_line_should_start(
    server: Running, http: httpx.Client
) -> None:
    # Given one slot, taken by a task expected to run 100 s, and one task in line
    http.post("/api/limits", json={"settings": {"max_concurrent": 1, "max_queue_size": 1}})
    http.post("/api/tasks", json={"command": ECHO, "expected_duration": 100.0})
    server.store.claim("external:test")
    http.post("/api/tasks", json={"command": ECHO})
    # When a third is submitted, the queue is full until the second starts, in ~100 s
    response = http.post("/api/tasks", json={"command": ECHO})
    assert response.status_code == 429
    wait = int(response.headers["Retry-After"])
    assert 90 <= wait <= 101
    assert response.json()["retry_after"] == wait


def test_a_user_past_max_queued_per_user_gets_429_with_when_to_retry(
    server: Running, http: httpx.Client
) -> None:
    # Given one slot, taken by a task expected to run 100 s, and one task of ann's in line
    http.post("/api/limits", json={"settings": {"max_concurrent": 1, "max_queued_per_user": 1}})
    http.post("/api/tasks", json={"command": ECHO, "expected_duration": 100.0})
    server.store.claim("external:test")
    http.post("/api/tasks", json={"command": ECHO, "user": "ann"})
    # When ann submits another, she waits until hers starts; bob does not wait at all
    response = http.post("/api/tasks", json={"command": ECHO, "user": "ann"})
    assert response.status_code == 429
    assert response.json()["limit"] == "max_queued_per_user"
    assert 90 <= int(response.headers["Retry-After"]) <= 101
    assert http.post("/api/tasks", json={"command": ECHO, "user": "bob"}).status_code == 201
    limits = http.post("/api/limits", json={"settings": {"max_queued_per_user": None}}).json()
    assert limits["max_queued_per_user"] is None


def test_malformed_json_is_400_and_oversized_body_413(make_server: ServerFactory) -> None:
    server = make_server(options=ServerOptions(max_body_bytes=4096))
    with server.client() as http:
        broken = http.post(
            "/api/tasks", content=b'{"command": [', headers={"content-type": "application/json"}
        )
        assert (broken.status_code, broken.json()["type"]) == (400, "MalformedJSON")
        big = http.post("/api/tasks", json={"command": ["echo", "x" * 10_000]})
        assert (big.status_code, big.json()["type"]) == (413, "PayloadTooLarge")

        def chunks() -> Any:
            for _ in range(10):
                yield b" " * 1000

        streamed = http.post(
            "/api/tasks", content=chunks(), headers={"content-type": "application/json"}
        )
        assert streamed.status_code == 413
        assert http.post("/api/tasks", json=["not", "an", "object"]).status_code == 422


def test_limits_read_and_update(http: httpx.Client) -> None:
    limits = http.get("/api/limits").json()
    assert limits["max_concurrent"] == 3
    changed = http.post(
        "/api/limits",
        json={
            "settings": {"max_concurrent": 5},
            "limits": [{"key": "agent", "value": "claude", "max": 2}],
            "exempt_agents": ["pm"],
        },
    ).json()
    assert changed["max_concurrent"] == 5
    assert changed["limits"] == [{"key": "agent", "value": "claude", "max": 2}]
    assert changed["exempt_agents"] == ["pm"]
    removed = http.post(
        "/api/limits", json={"limits": [{"key": "agent", "value": "claude", "max": None}]}
    )
    assert removed.json()["limits"] == []
    bad_key = http.post("/api/limits", json={"limits": [{"key": "colour", "max": 1}]})
    assert bad_key.status_code == 422
    assert "colour" in bad_key.json()["detail"]
    bad_setting = http.post("/api/limits", json={"settings": {"speed": 1}})
    assert bad_setting.status_code == 422
    assert "speed" in bad_setting.json()["detail"]


def test_pause_resume_clear_and_status(http: httpx.Client) -> None:
    submit(http, "a")
    submit(http, "b", hold=True)
    assert http.post("/api/pause").json()["paused"] is True
    assert http.get("/api/status").json()["paused"] is True
    assert http.post("/api/resume").json()["paused"] is False
    status = http.get("/api/status").json()
    assert (status["active"], status["max_concurrent"], status["slots_available"]) == (0, 3, 3)
    assert status["next_up"] == status["queued"][0]["id"]
    assert http.post("/api/clear").json() == {"cancelled": 2}


def test_stats_counts_every_status(server: Running, http: httpx.Client) -> None:
    submit(http, "a", agent="claude")
    submit(http, "b")
    submit(http, "c", hold=True)
    server.store.claim("elsewhere")
    stats = http.get("/api/stats").json()
    assert stats["counts"] == {"running": 2, "held": 1}
    assert stats["running_by_agent"] == {"claude": 1, "": 1}
    assert (stats["total"], stats["active"], stats["queue_depth"]) == (3, 2, 0)


def test_export_and_config(http: httpx.Client) -> None:
    submit(http, "a")
    exported = http.get("/api/export").json()
    assert titles(exported["tasks"]) == ["a"]
    assert exported["settings"]["max_concurrent"] == 3
    assert exported["last_seq"] >= 1
    config = http.get("/api/config").json()
    assert config["max_concurrent"] == 3


def test_events_list_pages_from_a_seq(http: httpx.Client) -> None:
    task = submit(http, "a")
    http.post(f"/api/tasks/{task['id']}/hold")
    page = http.get("/api/events", params={"since": 0}).json()
    kinds = [e["kind"] for e in page["events"]]
    assert kinds == ["submitted", "held"]
    later = http.get("/api/events", params={"since": page["events"][0]["seq"]}).json()
    assert [e["kind"] for e in later["events"]] == ["held"]
    assert later["last_seq"] == page["events"][-1]["seq"]


def test_health_ready_metrics_and_docs(
    server: Running, http: httpx.Client, store_handle: Store
) -> None:
    assert http.get("/healthz").json()["status"] == "ok"
    assert http.get("/readyz").json()["status"] == "ready"
    submit(http, "a", agent="claude")
    submit(http, "b")
    claimed = store_handle.claim("elsewhere").claims
    store_handle.finish(claimed[1].attempt.id, claimed[1].attempt.token, 3)
    text = http.get("/metrics").text
    assert 'slotline_tasks{state="running"} 1.0' in text
    assert 'slotline_tasks{state="failed"} 1.0' in text
    assert 'slotline_running{key="agent",value="claude"} 1.0' in text
    assert "slotline_queue_depth 0.0" in text
    assert "slotline_wait_seconds_count 2.0" in text
    assert "slotline_run_seconds_count 1.0" in text
    assert 'slotline_claims_total{over_limit="false"} 2.0' in text
    assert "slotline_failures_total 1.0" in text
    assert http.get("/docs").status_code == 200
    assert "/api/queue_status" in http.get("/openapi.json").json()["paths"]


@pytest.fixture
def store_handle(server: Running) -> Store:
    return server.store
