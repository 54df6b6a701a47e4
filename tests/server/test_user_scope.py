"""What a user token reads of what is not one task: no other user's schedules, budgets,
limits, rates or fairness weights in the events (list and stream), the status and the
limits; no queue-wide totals in /api/stats, /metrics and /api/charts unless the admin
shares them (`share_totals: true`)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from slotline.config.file import Config
from slotline.models import Usage

from .conftest import Running, ServerFactory


def _streamed(http: httpx.Client) -> list[dict[str, Any]]:
    """The events an SSE stream from the start sends before it is caught up (its first
    heartbeat, once the log is read)."""
    events = []
    with http.stream("GET", "/api/events/stream", params={"since": 0}) as sse:
        for line in sse.iter_lines():
            if line == ": heartbeat":
                return events
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: ") :]))
    raise AssertionError("the stream ended before it caught up")


def _names_ann(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if "ann" in json.dumps(e["data"])]


def test_a_user_reads_no_other_users_schedules_budgets_or_limits(
    make_server: ServerFactory,
) -> None:
    # Given an admin who schedules work for ann and for bob, and sets a budget, a limit,
    # a rate and fairness weights for ann
    server = make_server()
    admin, bob = server.token("root", "admin"), server.token("bob", "user")
    with server.client(admin) as http:
        for user in ("ann", "bob"):
            added = http.post("/api/schedules", json={
                "name": f"nightly-{user}", "cron": "0 3 * * *",
                "task": {"command": ["true"], "user": user},
            })  # fmt: skip
            assert added.status_code == 201, added.text
        assert http.post("/api/schedules/nightly-ann/pause").status_code == 200
        changed = http.post("/api/limits", json={
            "limits": [{"key": "user", "value": "ann", "max": 2}],
            "rates": [{"key": "user", "value": "ann", "max": 5, "period": "1m"}],
            "budgets": [{"key": "user", "value": "ann", "amount": 10, "period": "1d"}],
            "fairness": {"key": "user", "weights": {"ann": 3, "bob": 1}},
        })  # fmt: skip
        assert changed.status_code == 200, changed.text
        assert len(_names_ann(http.get("/api/events").json()["events"])) >= 6

    with server.client(bob) as http:
        # When bob reads the events, the stream, the limits
        listed = http.get("/api/events").json()["events"]
        streamed = _streamed(http)
        limits = http.get("/api/limits").json()

        # Then he sees his own schedule, and nothing that names ann
        assert http.get("/api/schedules/nightly-ann").status_code == 404
        for events in (listed, streamed):
            assert _names_ann(events) == []
            kinds = {(e["kind"], e["data"].get("name")) for e in events}
            assert ("schedule_added", "nightly-bob") in kinds
            (fairness,) = [e for e in events if "fairness" in e["data"]]
            assert fairness["data"]["fairness"] == {"key": "user", "weights": {"bob": 1}}
        assert (limits["limits"], limits["rates"], limits["budgets"]) == ([], [], [])
        assert limits["fairness"] == {"key": "user", "weights": {"bob": 1}}


def test_a_user_sees_no_other_users_spend_in_the_status_budgets(
    make_server: ServerFactory,
) -> None:
    # Given a budget per user, and a run of ann's that spent $2
    server = make_server()
    admin, bob = server.token("root", "admin"), server.token("bob", "user")
    with server.client(admin) as http:
        budget = {"key": "user", "amount": 100, "period": "1d"}
        assert http.post("/api/limits", json={"budgets": [budget]}).status_code == 200
        http.post("/api/tasks", json={"command": ["true"], "user": "ann"})
        (started,) = server.store.claim("a-node").claims
        attempt = started.attempt
        server.store.finish(attempt.id, attempt.token, 0, usage=Usage(cost_usd=2.0))
        assert [b["value"] for b in http.get("/api/status").json()["budgets"]] == ["ann"]
    # When bob reads the status, then ann's spend is not in it
    with server.client(bob) as http:
        assert http.get("/api/status").json()["budgets"] == []


def _two_users(server: Running) -> tuple[str, str]:
    """Tokens of an admin and of bob, with two tasks of ann's and one of bob's."""
    admin, bob = server.token("root", "admin"), server.token("bob", "user")
    with server.client(admin) as http:
        for user in ("ann", "ann", "bob"):
            answer = http.post("/api/tasks", json={"command": ["true"], "user": user})
            assert answer.status_code == 201, answer.text
    return admin, bob


def test_a_user_reads_totals_of_their_own_tasks_only(make_server: ServerFactory) -> None:
    # Given tasks of ann and bob on a server that shares no totals (the default)
    server = make_server()
    admin, bob = _two_users(server)
    with server.client(admin) as http:
        assert http.get("/api/stats").json()["total"] == 3
        assert http.get("/metrics").status_code == 200
        assert http.get("/api/charts").json()["samples_withheld"] is None

    # When bob reads stats, metrics and charts
    with server.client(bob) as http:
        stats = http.get("/api/stats").json()
        metrics = http.get("/metrics")
        charts = http.get("/api/charts").json()

    # Then the stats count his own task, metrics are refused naming the setting that
    # would share them, and the charts carry no queue-wide samples, saying why
    assert (stats["total"], stats["counts"]) == (1, {"queued": 1})
    assert stats["queue_depth"] == 3  # the line's length, as /api/status shows it
    assert metrics.status_code == 403
    assert "share_totals: true" in metrics.json()["detail"]
    assert charts["samples"] == []
    assert "share_totals: true" in charts["samples_withheld"]


def test_an_admin_may_share_the_totals_with_users(make_server: ServerFactory) -> None:
    # Given a server whose slotline.yaml says `share_totals: true`
    server = make_server(config=Config(share_totals=True))
    _admin, bob = _two_users(server)
    # When bob reads stats, metrics and charts, then he gets the totals, still without
    # a label naming another user
    with server.client(bob) as http:
        assert http.get("/api/stats").json()["total"] == 3
        metrics = http.get("/metrics")
        assert metrics.status_code == 200
        assert 'slotline_tasks{state="queued"} 3.0' in metrics.text
        assert "ann" not in metrics.text
        assert http.get("/api/charts").json()["samples_withheld"] is None


def test_a_user_reads_no_other_users_schedules_or_limits_in_the_configuration(
    make_server: ServerFactory,
) -> None:
    # Given a slotline.yaml with a schedule and a limit for ann, and a schedule for bob
    nightly = {"cron": "0 3 * * *", "task": {"command": ["true"]}}
    config = Config.model_validate({
        "schedules": {
            "nightly-ann": {**nightly, "task": {"command": ["true"], "user": "ann"}},
            "nightly-bob": {**nightly, "task": {"command": ["true"], "user": "bob"}},
        },
        "limits": [{"key": "user", "value": "ann", "max": 1}],
    })  # fmt: skip
    server = make_server(config=config)
    admin, bob = server.token("root", "admin"), server.token("bob", "user")
    server.store.set_limit("user", "ann", 1)
    with server.client(admin) as http:
        assert set(http.get("/api/config").json()["schedules"]) == {"nightly-ann", "nightly-bob"}
    # When bob reads the configuration and an export, then neither names ann
    with server.client(bob) as http:
        shown = http.get("/api/config").json()
        exported = http.get("/api/export").json()
    assert set(shown["schedules"]) == {"nightly-bob"}
    assert shown["limits"] == []
    assert exported["settings"]["limits"] == []


def test_a_drained_queue_names_no_other_users_task(make_server: ServerFactory) -> None:
    # Given ann's run, the last one, ending with nothing in line
    server = make_server()
    admin, bob = server.token("root", "admin"), server.token("bob", "user")
    task = server.store.submit({"command": ["true"], "user": "ann"})
    (started,) = server.store.claim("a-node").claims
    server.store.finish(started.attempt.id, started.attempt.token, 0)
    with server.client(admin) as http:
        (drained,) = [e for e in http.get("/api/events").json()["events"] if e["kind"] == "drained"]
        assert drained["data"]["last_task"] == task.id
    # When bob reads the events, then the queue drained, without naming ann's task
    with server.client(bob) as http:
        for events in (http.get("/api/events").json()["events"], _streamed(http)):
            (drained,) = [e for e in events if e["kind"] == "drained"]
            assert drained["data"]["last_task"] is None
