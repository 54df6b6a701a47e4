"""Budgets over HTTP: /api/limits sets and removes them (admins only, checked all before
any is made), /api/status shows them and the tasks they hold, the client speaks both."""

from __future__ import annotations

import httpx
import pytest

from slotline.client.http import SlotlineClient as Client
from slotline.errors import InvalidInput
from slotline.models import Usage

from .conftest import Running, ServerFactory


def test_limits_set_show_and_remove_budgets(http: httpx.Client) -> None:
    body = {
        "budgets": [
            {"key": "agent", "value": "claude", "amount": 50, "period": "1d"},
            {"key": "user", "amount": 2_000_000, "unit": "tok", "period": "1h"},
        ]
    }
    changed = http.post("/api/limits", json=body)
    assert changed.status_code == 200, changed.text
    assert {(b["key"], b["value"], b["budget"]) for b in changed.json()["budgets"]} == {
        ("agent", "claude", "50usd/1d"),
        ("user", None, "2Mtok/1h"),
    }
    removed = http.post(
        "/api/limits", json={"budgets": [{"key": "user", "amount": None, "unit": None}]}
    ).json()
    assert [b["budget"] for b in removed["budgets"]] == ["50usd/1d"]


def test_limits_keep_several_windows_and_remove_one_by_its_period(http: httpx.Client) -> None:
    hour = {"key": "agent", "value": "claude", "amount": 10, "period": "1h"}
    day = {"key": "agent", "value": "claude", "amount": 100, "period": "1d"}
    both = http.post("/api/limits", json={"budgets": [hour, day]}).json()
    assert sorted(b["budget"] for b in both["budgets"]) == ["100usd/1d", "10usd/1h"]
    assert {b["origin"] for b in both["budgets"]} == {"api"}  # set at run time

    gone = {"key": "agent", "value": "claude", "amount": None, "period": "1h"}
    left = http.post("/api/limits", json={"budgets": [gone]}).json()
    assert [b["budget"] for b in left["budgets"]] == ["100usd/1d"]


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({"key": "colour", "amount": 5, "period": "1d"}, "unknown rate key"),
        ({"key": "agent", "amount": 5, "period": "0s"}, "more than 0s"),
        ({"key": "agent", "amount": 0, "period": "1d"}, "greater than 0"),
        ({"key": "agent", "amount": 1.5, "unit": "tok", "period": "1d"}, "whole number"),
        ({"key": "agent", "amount": 5, "unit": "eur", "period": "1d"}, "unit"),
    ],
)
def test_a_bad_budget_is_refused_and_nothing_is_changed(
    http: httpx.Client, budget: dict[str, object], message: str
) -> None:
    good = {"key": "user", "amount": 1, "period": 60}
    refused = http.post("/api/limits", json={"budgets": [good, budget]})
    assert refused.status_code == 422
    assert message in refused.text
    assert http.get("/api/limits").json()["budgets"] == []


def test_status_shows_a_reached_budget_and_the_task_it_holds(
    http: httpx.Client, server: Running
) -> None:
    with Client(server.url) as client:
        client.set_budget("agent", "claude", 1, "1h")
        client.set_setting("max_concurrent", 1)
        for title in ("first", "second"):
            http.post("/api/tasks", json={"title": title, "command": ["true"], "agent": "claude"})
        (started,) = server.store.claim("a-node").claims
        attempt = started.attempt
        server.store.finish(attempt.id, attempt.token, 0, usage=Usage(cost_usd=1.25))
        server.store.claim("a-node")

        status = http.get("/api/status").json()

        (budget,) = status["budgets"]
        assert (budget["value"], budget["budget"], budget["spent"]) == ("claude", "1usd/1h", 1.25)
        assert budget["until"] is not None
        (held,) = status["queued"]
        assert held["title"] == "second"
        assert held["status_reason"].startswith("budget agent[claude] 1usd/1h reached ($1.25")
        assert held["eta_start"] is not None
        assert client.status().budgets == status["budgets"]
        assert client.settings().budgets[0].budget == "1usd/1h"
        shown = http.get(f"/api/tasks/{held['id']}").json()
        assert shown["status_reason"] == held["status_reason"]
        with pytest.raises(InvalidInput, match="more than 0"):
            client.set_budget("agent", "claude", 5, "0s")


def test_only_an_admin_sets_a_budget(make_server: ServerFactory) -> None:
    server = make_server()
    admin, user = server.token("root", "admin"), server.token("alice", "user")
    body = {"budgets": [{"key": "user", "value": "alice", "amount": 1000, "period": "1d"}]}
    with server.client(user) as http:
        assert http.post("/api/limits", json=body).status_code == 403
    with server.client(admin) as http:
        assert http.post("/api/limits", json=body).status_code == 200
    assert [b.budget for b in server.store.settings().budgets] == ["1000usd/1d"]
