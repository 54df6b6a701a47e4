"""What a hostile user sends over HTTP: options hidden in prompts, odd workspaces, numbers
JSON should not hold, loose types, NUL bytes, and ids of other users' tasks and runs."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from slotline.config.file import load_config
from slotline.models import Status

from .conftest import Running, ServerFactory

ECHO = ["echo", "hi"]
AGENTS = """\
agents:
  gitlog:
    command: [git, -C, /nonexistent, log, "{prompt}"]
  safe:
    command: [echo, --, "{prompt}"]
  flag:
    command: [echo, "--grep={prompt}"]
  opted:
    command: [echo, "{prompt}"]
    prompt_may_start_with_dash: true
"""


def post_raw(http: httpx.Client, path: str, body: str) -> httpx.Response:
    return http.post(path, content=body, headers={"Content-Type": "application/json"})


def test_a_prompt_that_would_become_an_option_is_refused(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    (tmp_path / "slotline.yaml").write_text(AGENTS)
    server = make_server(config=load_config(tmp_path / "slotline.yaml"))
    with server.client(server.token("ann", "user")) as http:
        refused = http.post("/api/tasks", json={"agent": "gitlog", "prompt": "--output=/tmp/x"})
        assert refused.status_code == 422
        assert "prompt" in refused.json()["detail"]
        assert "'--'" in refused.json()["detail"]
        for agent in ("safe", "flag", "opted"):
            ok = http.post("/api/tasks", json={"agent": agent, "prompt": "--output=/tmp/x"})
            assert ok.status_code == 201, (agent, ok.text)
        fine = http.post("/api/tasks", json={"agent": "gitlog", "prompt": "a -b"})
        assert fine.status_code == 201
        commands = [t["command"] for t in http.get("/api/tasks").json()["tasks"]]
    assert ["echo", "--", "--output=/tmp/x"] in commands
    assert ["echo", "--grep=--output=/tmp/x"] in commands
    assert all("--output=/tmp/x" not in c for c in commands if c[0] == "git")


def test_workspaces_are_normalised_and_relative_ones_refused(
    server: Running, http: httpx.Client
) -> None:
    a = http.post("/api/tasks", json={"command": ECHO, "workspace": "/w/ws/"}).json()
    b = http.post("/api/tasks", json={"command": ECHO, "workspace": "/w/./x/../ws"}).json()
    assert a["workspace"] == b["workspace"] == "/w/ws"
    for bad in ("../../../../etc", "ws", ""):
        refused = http.post("/api/tasks", json={"command": ECHO, "workspace": bad})
        assert refused.status_code == 422, bad
        assert "absolute" in refused.json()["detail"]
    limits = http.post(
        "/api/limits", json={"limits": [{"key": "workspace", "value": "/w/ws/", "max": 1}]}
    ).json()
    assert limits["limits"] == [{"key": "workspace", "value": "/w/ws", "max": 1}]
    for spelling in ("/w/ws", "/w/ws/", "/w/./ws"):
        found = http.get("/api/tasks", params={"workspace": spelling}).json()["tasks"]
        assert [t["workspace"] for t in found] == ["/w/ws", "/w/ws"], spelling
        line = http.get("/api/line", params={"workspace": spelling}).json()
        assert line["queued_total"] == 2, spelling


@pytest.mark.parametrize(
    "body",
    [
        '{"command": ["echo"], "timeout": 1e999}',
        '{"command": ["echo"], "queue_ttl": Infinity}',
        '{"command": ["echo"], "expected_duration": NaN}',
        '{"command": ["echo"], "timeout": 1e300}',
        '{"command": ["echo"], "max_attempts": "3"}',
        '{"command": ["echo"], "hold": "yes"}',
        '{"command": ["echo"], "title": "a\\u0000b"}',
        '{"command": ["echo"], "workspace": "/w/a\\u0000b"}',
        '{"command": ["echo"], "labels": {"team": "' + "x" * 5000 + '"}}',
    ],
    ids=[
        "1e999",
        "Infinity",
        "NaN",
        "1e300",
        "str-int",
        "str-bool",
        "nul-title",
        "nul-ws",
        "label",
    ],
)
def test_bad_submits_are_refused_with_422(http: httpx.Client, body: str) -> None:
    refused = post_raw(http, "/api/tasks", body)
    assert refused.status_code == 422, refused.text
    assert http.get("/api/tasks").json()["total"] == 0


@pytest.mark.parametrize(
    "body",
    [
        '{"settings": {"aging_interval": 1e309}}',
        '{"settings": {"max_concurrent": 9223372036854775808}}',
        '{"settings": {"max_concurrent": 1e300}}',
        '{"limits": [{"key": "agent", "value": "a", "max": 9223372036854775808}]}',
    ],
)
def test_settings_out_of_bounds_are_refused_with_422(http: httpx.Client, body: str) -> None:
    before = http.get("/api/limits").json()
    refused = post_raw(http, "/api/limits", body)
    assert refused.status_code == 422, refused.text
    assert http.get("/api/limits").json() == before


def test_a_dashed_uuid_is_an_id_on_every_route(server: Running, http: httpx.Client) -> None:
    task = http.post("/api/tasks", json={"command": ECHO}).json()
    dashed = str(uuid.UUID(task["id"]))
    assert http.get(f"/api/tasks/{dashed}").json()["id"] == task["id"]
    assert http.post(f"/api/tasks/{dashed}/hold").json()["status"] == "held"
    cancelled = http.post("/api/cancel_queued_task", json={"task_id": dashed})
    assert cancelled.json()["success"] is True
    external = http.post("/api/tasks", json={"kind": "external"}).json()
    (claim,) = http.post("/api/external/claim").json()["claims"]
    attempt = str(uuid.UUID(claim["attempt_id"]))
    beat = http.post(f"/api/external/attempts/{attempt}/heartbeat", json={"token": claim["token"]})
    assert beat.status_code == 200, beat.text
    ended = http.post("/api/terminate_agent", json={"agent_id": attempt})
    assert ended.json()["success"] is True
    assert server.store.get(external["id"]).kill_request is not None


def _users(make_server: ServerFactory) -> tuple[Running, str, str, str]:
    from slotline.config.file import Config
    from slotline.reach import UsersConfig

    users = UsersConfig(workspaces=["/secret"])
    server = make_server(config=Config(raw_commands="all", users=users))
    admin = server.token("root", "admin")
    return server, admin, server.token("ann", "user"), server.token("bob", "user")


def test_another_users_task_is_answered_like_an_unknown_id(make_server: ServerFactory) -> None:
    server, _, ann, bob = _users(make_server)
    with server.client(ann) as http:
        secret = http.post("/api/tasks", json={"command": ECHO, "title": "ann's"}).json()
        http.post(f"/api/tasks/{secret['id']}/hold")
    with server.client(bob) as http:
        mine = http.post("/api/tasks", json={"command": ECHO}).json()
        unknown = "0" * 32
        for where in ("before", "after"):
            hidden = http.post(f"/api/tasks/{mine['id']}/move", json={where: secret["id"]})
            absent = http.post(f"/api/tasks/{mine['id']}/move", json={where: unknown})
            assert hidden.status_code == absent.status_code == 404
            assert hidden.json()["detail"] == absent.json()["detail"].replace(unknown, secret["id"])
            assert "held" not in hidden.text


def test_a_prefix_matches_only_the_users_own_tasks(make_server: ServerFactory) -> None:
    server, admin, ann, _ = _users(make_server)
    with server.client(ann) as http:
        own = http.post("/api/tasks", json={"command": ECHO}).json()
    # Tasks of bob until one shares the first digit of ann's id.
    while not any(t.id[0] == own["id"][0] for t in server.store.list_tasks() if t.user == "bob"):
        server.store.submit({"command": ECHO, "user": "bob"})
    with server.client(admin) as http:
        assert http.get(f"/api/tasks/{own['id'][0]}").status_code == 422  # ambiguous for all
    with server.client(ann) as http:
        found = http.get(f"/api/tasks/{own['id'][0]}")
        assert found.status_code == 200, found.text
        assert found.json()["id"] == own["id"]


def _running_external(server: Running, admin: str, owner: str) -> dict[str, Any]:
    with server.client(owner) as http:
        task = http.post(
            "/api/tasks", json={"kind": "external", "workspace": "/secret/ws", "agent": "spy"}
        ).json()
    with server.client(admin) as http:
        (claim,) = http.post("/api/external/claim").json()["claims"]
    assert claim["task"]["id"] == task["id"]
    return claim


def test_another_users_attempt_is_answered_like_an_unknown_one(
    make_server: ServerFactory,
) -> None:
    server, admin, ann, bob = _users(make_server)
    claim = _running_external(server, admin, ann)
    unknown = "0" * 32
    with server.client(bob) as http:
        for route in ("heartbeat", "succeeded", "failed"):
            hidden = http.post(
                f"/api/external/attempts/{claim['attempt_id']}/{route}",
                json={"token": claim["token"]},
            )
            absent = http.post(
                f"/api/external/attempts/{unknown}/{route}", json={"token": claim["token"]}
            )
            assert hidden.status_code == absent.status_code == 404
            assert claim["task"]["id"] not in hidden.text
            assert hidden.json()["detail"] == absent.json()["detail"].replace(
                unknown, claim["attempt_id"]
            )
        hidden = http.post("/api/terminate_agent", json={"agent_id": claim["attempt_id"]})
        absent = http.post("/api/terminate_agent", json={"agent_id": unknown})
        assert hidden.status_code == absent.status_code == 404
        assert claim["task"]["id"] not in hidden.text
    assert server.store.get(claim["task"]["id"]).status is Status.RUNNING


def test_metrics_shared_with_a_user_name_no_other_users(make_server: ServerFactory) -> None:
    from slotline.config.file import Config
    from slotline.reach import UsersConfig

    users = UsersConfig(workspaces=["/secret"])
    server = make_server(config=Config(raw_commands="all", share_totals=True, users=users))
    admin = server.token("root", "admin")
    ann, bob = server.token("ann", "user"), server.token("bob", "user")
    _running_external(server, admin, ann)
    with server.client(admin) as http:
        full = http.get("/metrics").text
    assert 'value="ann"' in full
    assert "/secret/ws" in full
    with server.client(bob) as http:
        seen = http.get("/metrics")
    assert seen.status_code == 200
    for secret in ("ann", "/secret/ws", "spy"):
        assert secret not in seen.text
    assert "slotline_active 1.0" in seen.text


def test_following_an_attempt_that_never_exists_ends_cleanly(
    http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    task = http.post("/api/tasks", json={"kind": "external"}).json()
    (claim,) = http.post("/api/external/claim").json()["claims"]
    failed = f"/api/external/attempts/{claim['attempt_id']}/failed"
    http.post(failed, json={"token": claim["token"]})
    for number in (2, 99):
        with http.stream(
            "GET", f"/api/tasks/{task['id']}/log", params={"follow": "true", "attempt": number}
        ) as response:
            response.read()
        assert response.status_code == 404
        assert f"no attempt {number}" in response.json()["detail"]
    queued = http.post("/api/tasks", json={"kind": "external"}).json()
    with http.stream(
        "GET", f"/api/tasks/{queued['id']}/log", params={"follow": "true", "attempt": 7}
    ) as response:
        response.read()
    assert response.status_code == 404
    assert "Exception in ASGI application" not in caplog.text


def test_a_filter_naming_statuses_twice_or_too_many_labels_is_a_clear_answer(
    http: httpx.Client,
) -> None:
    every_status = [s.value for s in Status] * 2
    for route in ("/api/tasks", "/api/line"):
        twice = http.get(route, params={"status": every_status})
        assert twice.status_code == 200, (route, twice.text)
        many = http.get(route, params={"label": [f"k{n}" for n in range(21)]})
        assert many.status_code == 422, (route, many.text)
        assert "label" in many.text
