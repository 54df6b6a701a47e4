"""Rates, fairness and provider back-off over HTTP: /api/limits changes them (checked
all before any is made), /api/status shows them, the client speaks both."""

from __future__ import annotations

import httpx
import pytest

from slotline.client.http import SlotlineClient as Client
from slotline.errors import InvalidInput

from .conftest import Running


def test_limits_set_and_show_rates_fairness_and_backoff(http: httpx.Client) -> None:
    body = {
        "rates": [{"key": "agent", "value": "claude", "max": 20, "period": "1m"}],
        "fairness": {"key": "user", "weights": {"alice": 2}},
        "backoff": [{"agent": "claude", "rule": {"exit_codes": [75], "pattern": "429"}}],
    }
    changed = http.post("/api/limits", json=body)
    assert changed.status_code == 200, changed.text
    data = changed.json()
    assert data["rates"] == [
        {
            "key": "agent", "value": "claude", "max": 20, "period": 60.0, "rate": "20/1m",
            "origin": "api",
        }
    ]  # fmt: skip
    assert data["fairness"] == {"key": "user", "weights": {"alice": 2.0}}
    assert data["backoff"]["claude"]["exit_codes"] == [75]
    # Absent fields are left as they are; null fairness turns it off.
    assert http.post("/api/limits", json={}).json()["fairness"] is not None
    off = http.post("/api/limits", json={"fairness": None}).json()
    assert off["fairness"] is None
    assert off["rates"] == data["rates"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"rates": [{"key": "agent", "max": 20, "period": "0s"}]}, "more than 0s"),
        ({"rates": [{"key": "colour", "max": 20, "period": "1m"}]}, "unknown rate key"),
        ({"fairness": {"key": "colour"}}, "unknown fairness key"),
        ({"backoff": [{"agent": "claude", "rule": {"pattern": "(x"}}]}, "not a valid regex"),
    ],
)
def test_bad_pacing_is_refused_and_nothing_is_changed(
    http: httpx.Client, body: dict[str, object], message: str
) -> None:
    good = {"rates": [{"key": "user", "max": 1, "period": 60}]}
    refused = http.post("/api/limits", json={**good, **body})
    assert refused.status_code == 422
    assert message in refused.text
    assert http.get("/api/limits").json()["rates"] == []


def test_status_shows_the_rate_in_force_and_the_next_start(
    http: httpx.Client, server: Running
) -> None:
    with Client(server.url) as client:
        client.set_rate("agent", "claude", 1, "1h")
        for title in ("first", "second"):
            http.post("/api/tasks", json={"title": title, "command": ["true"], "agent": "claude"})
        (started,) = server.store.claim("a-node").claims  # as a node would

        status = http.get("/api/status").json()

        assert started.task.title == "first"
        (rate,) = status["rates"]
        assert (rate["value"], rate["rate"], rate["used"]) == ("claude", "1/1h", 1)
        assert rate["next_start_at"] is not None
        assert [t["title"] for t in status["queued"]] == ["second"]
        assert status["queued"][0]["eta_start"] is not None
        assert status["backoff"] == []
        assert client.settings().rates[0].rate == "1/1h"
        assert client.status().rates == status["rates"]


def test_the_client_sets_fairness_and_backoff_and_reads_the_throttles(server: Running) -> None:
    with Client(server.url) as client:
        _fairness_and_backoff(client)


def _fairness_and_backoff(client: Client) -> None:
    client.set_fairness("workspace", {"/w": 3})
    client.set_backoff("claude", {"exit_codes": [75]})

    settings = client.settings()
    assert settings["fairness"] == {"key": "workspace", "weights": {"/w": 3.0}}
    assert settings["backoff"]["claude"]["exit_codes"] == [75]
    with pytest.raises(InvalidInput, match="unknown field"):
        client.set_backoff("claude", {"exit_codes": [75], "colour": 1})
    client.set_backoff("claude", None)
    assert client.settings()["backoff"] == {}


def test_the_mcp_queue_status_says_which_rates_hold_starts_back(
    http: httpx.Client, server: Running
) -> None:
    from slotline.mcp.calls import status_summary

    http.post(
        "/api/limits",
        json={"rates": [{"key": "agent", "value": "claude", "max": 1, "period": "1h"},
                        {"key": "user", "max": 5, "period": "1m"}]},
    )  # fmt: skip
    http.post("/api/tasks", json={"title": "a", "command": ["true"], "agent": "claude"})
    server.store.claim("a-node")

    summary = status_summary(http.get("/api/status").json(), [], [])

    assert [(r["key"], r["value"]) for r in summary["rates"]] == [("agent", "claude")]
    assert summary["backoff"] == []


def test_a_request_refused_by_its_last_part_changes_nothing(http: httpx.Client) -> None:
    # Given the settings as they are,
    before = http.get("/api/limits").json()
    # when one request changes the global limit and, last, a limit of a value with a NUL
    # byte (which only the store's own check refuses),
    body = {
        "settings": {"max_concurrent": 9},
        "limits": [
            {"key": "agent", "value": "claude", "max": 1},
            {"key": "agent", "value": "a\x00b", "max": 1},
        ],
    }
    refused = http.post("/api/limits", json=body)
    # then it is refused whole: what it changed first was not changed either.
    assert refused.status_code == 422, refused.text
    assert "NUL" in refused.text
    assert http.get("/api/limits").json() == before
