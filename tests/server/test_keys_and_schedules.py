"""Idempotency keys, delayed tasks and schedules over HTTP and through SlotlineClient."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from slotline.client.http import SlotlineClient
from slotline.errors import InvalidInput, NotFound
from slotline.runner.env import build_env
from slotline.server import ServerOptions

from .conftest import Running

ECHO = ["echo", "hi"]
NIGHTLY = {"name": "nightly", "cron": "0 3 * * *", "task": {"command": ECHO, "title": "n"}}


def post(http: httpx.Client, path: str, body: dict[str, Any], status: int) -> Any:
    response = http.post(path, json=body)
    assert response.status_code == status, response.text
    return response.json()


# -- keys and start times -------------------------------------------------------------------


def test_a_new_task_is_201_and_the_task_of_its_key_is_200(http: httpx.Client) -> None:
    created = post(http, "/api/tasks", {"command": ECHO, "key": "fix-7"}, 201)
    again = post(http, "/api/tasks", {"command": ["other"], "key": "fix-7"}, 200)

    assert (created["deduplicated"], again["deduplicated"]) == (False, True)
    assert again["id"] == created["id"]
    assert again["command"] == ECHO
    assert again["key"] == "fix-7"


def test_a_batch_respects_keys(http: httpx.Client) -> None:
    post(http, "/api/tasks", {"command": ECHO, "key": "a", "title": "old"}, 201)
    tasks = [
        {"command": ECHO, "key": "a", "title": "again"},
        {"command": ECHO, "key": "b", "title": "new"},
        {"command": ECHO, "key": "b", "title": "new again"},
    ]

    batch = post(http, "/api/tasks/batch", {"tasks": tasks}, 201)

    assert [t["title"] for t in batch] == ["old", "new", "new"]
    assert [t["deduplicated"] for t in batch] == [True, False, True]
    assert http.get("/api/tasks").json()["total"] == 2


def test_start_times_by_delay_or_iso_time(http: httpx.Client) -> None:
    later = post(http, "/api/tasks", {"command": ECHO, "delay": 600}, 201)
    at = post(http, "/api/tasks", {"command": ECHO, "run_at": "2999-01-01T00:00:00Z"}, 201)
    bad = post(http, "/api/tasks", {"command": ECHO, "run_at": "soon"}, 422)
    naive = post(http, "/api/tasks", {"command": ECHO, "run_at": "2999-01-01T00:00:00"}, 422)
    past = post(http, "/api/tasks", {"command": ECHO, "run_at": 1_000_000_000}, 422)

    assert later["run_at"] is not None
    assert later["eta_start"] >= later["run_at"]
    assert at["run_at"] == "2999-01-01T00:00:00Z"
    assert "ISO 8601" in bad["detail"]
    assert "has no UTC offset" in naive["detail"]
    assert http.get("/api/tasks").json()["total"] == 2
    assert "in the past" in past["detail"]


def test_keys_are_per_user_so_one_user_cannot_squat_anothers(make_server: Any) -> None:
    server: Running = make_server(options=ServerOptions(raw_commands_admin_only=False))
    admin, ann = server.token("root", "admin"), server.token("ann", "user")
    with server.client(admin) as as_admin, server.client(ann) as as_ann:
        bobs = post(as_admin, "/api/tasks", {"command": ECHO, "key": "shared", "user": "bob"}, 201)

        anns = post(as_ann, "/api/tasks", {"command": ECHO, "key": "shared"}, 201)
        retry = post(as_ann, "/api/tasks", {"command": ECHO, "key": "shared"}, 200)
        batch = post(
            as_ann,
            "/api/tasks/batch",
            {"tasks": [{"command": ECHO, "key": "shared"}, {"command": ECHO, "key": "other"}]},
            201,
        )
        bobs_retry = post(
            as_admin, "/api/tasks", {"command": ECHO, "key": "shared", "user": "bob"}, 200
        )

    assert anns["id"] != bobs["id"]
    assert (anns["user"], anns["deduplicated"]) == ("ann", False)
    assert (retry["id"], retry["deduplicated"]) == (anns["id"], True)
    assert batch[0]["id"] == anns["id"]
    assert [t["deduplicated"] for t in batch] == [True, False]
    assert (bobs_retry["id"], bobs_retry["user"]) == (bobs["id"], "bob")


def test_a_task_tokens_key_held_outside_its_subtree_refuses_the_whole_batch(
    make_server: Any,
) -> None:
    # Given ann's task holding key "k", and a running task of ann with its own token
    server: Running = make_server()
    store = server.store
    with server.client(server.token("root", "admin")) as as_admin:
        parent = post(as_admin, "/api/tasks", {"command": ["true"], "user": "ann"}, 201)
        (claim,) = store.claim("external:test", limit=1).claims
        assert claim.task.id == parent["id"]
        held = post(as_admin, "/api/tasks", {"command": ECHO, "user": "ann", "key": "k"}, 201)
    token = build_env(claim.task, claim.attempt, "", api_url=server.url)["SLOTLINE_TOKEN"]
    seq = store.last_seq()

    # When the task submits a batch with that key and another task
    with server.client(token) as as_task:
        tasks = [{"command": ["true"], "title": "new"}, {"command": ["true"], "key": "k"}]
        refused = post(as_task, "/api/tasks/batch", {"tasks": tasks}, 409)
        own = post(as_task, "/api/tasks", {"command": ["true"], "key": "mine"}, 201)
        again = post(as_task, "/api/tasks", {"command": ["true"], "key": "mine"}, 200)

    # Then nothing of the batch was created or logged, and the held task is not shown
    assert "outside the subtree" in refused["detail"]
    assert held["id"] not in refused["detail"]
    assert again["id"] == own["id"]
    assert {t.id for t in store.list_tasks()} == {parent["id"], held["id"], own["id"]}
    kinds = [(e.kind, e.task_id) for e in store.events(since=seq) if e.task_id == held["id"]]
    assert kinds == []


# -- schedules ------------------------------------------------------------------------------


def test_schedule_routes(http: httpx.Client) -> None:
    added = post(http, "/api/schedules", {**NIGHTLY, "overlap": "replace"}, 201)
    assert (added["name"], added["overlap"], added["origin"]) == ("nightly", "replace", "api")
    assert added["task"]["command"] == ECHO
    assert added["next_at"].endswith("T03:00:00Z")

    assert [s["name"] for s in http.get("/api/schedules").json()["schedules"]] == ["nightly"]
    assert http.get("/api/schedules/nightly").json()["cron"] == "0 3 * * *"
    assert post(http, "/api/schedules/nightly/pause", {}, 200)["paused"] is True
    assert post(http, "/api/schedules/nightly/resume", {}, 200)["paused"] is False
    assert http.delete("/api/schedules/nightly").json()["name"] == "nightly"
    assert http.get("/api/schedules/nightly").status_code == 404


@pytest.mark.parametrize(
    ("change", "status", "message"),
    [
        ({"cron": "every day"}, 422, "cron"),
        ({"tz": "Nowhere/Land"}, 422, "time zone"),
        ({"overlap": "pile"}, 422, "overlap"),
        ({"task": {"command": ECHO, "key": "k"}}, 422, "key"),
        ({"task": {"command": []}}, 422, "command"),
        ({"name": "has space"}, 422, "schedule name"),
    ],
)
def test_bad_schedules_are_refused(
    http: httpx.Client, change: dict[str, Any], status: int, message: str
) -> None:
    refused = post(http, "/api/schedules", {**NIGHTLY, **change}, status)

    assert message in str(refused["detail"])
    assert http.get("/api/schedules").json()["schedules"] == []


def test_only_admins_change_schedules_and_users_see_their_own(make_server: Any) -> None:
    server: Running = make_server()
    admin, ann = server.token("root", "admin"), server.token("ann", "user")
    with server.client(admin) as as_admin, server.client(ann) as as_ann:
        post(as_admin, "/api/schedules", NIGHTLY, 201)
        mine = {**NIGHTLY, "name": "anns", "task": {**NIGHTLY["task"], "user": "ann"}}
        post(as_admin, "/api/schedules", mine, 201)

        assert as_ann.post("/api/schedules", json={**NIGHTLY, "name": "x"}).status_code == 403
        assert as_ann.post("/api/schedules/nightly/pause").status_code == 403
        visible = as_ann.get("/api/schedules").json()["schedules"]
        assert [s["name"] for s in visible] == ["anns"]
        assert as_ann.get("/api/schedules/nightly").status_code == 404


def test_the_client_has_the_schedule_verbs_and_the_dedup_flag(server: Running) -> None:
    with SlotlineClient(server.url) as client:
        first = client.submit({"command": ECHO, "key": "k"})
        again = client.submit({"command": ECHO, "key": "k"})
        added = client.add_schedule("s", "*/5 * * * *", {"command": ECHO}, overlap="queue")
        paused = client.pause_schedule("s")
        resumed = client.resume_schedule("s")
        listed = client.schedules()
        removed = client.remove_schedule("s")
        with pytest.raises(NotFound):
            client.schedule("s")
        with pytest.raises(InvalidInput, match="cron"):
            client.add_schedule("t", "nope", {"command": ECHO})

    assert (first.deduplicated, again.deduplicated, again.id) == (False, True, first.id)
    assert (added.overlap, paused.paused, resumed.paused) == ("queue", True, False)
    assert [s.name for s in listed] == ["s"]
    assert removed.name == "s"


def test_the_client_sends_a_datetime_start_time_as_epoch_seconds(server: Running) -> None:
    # A naive datetime is this machine's local time; the server could not know that zone
    at = datetime.now().replace(microsecond=0) + timedelta(hours=1)

    with SlotlineClient(server.url) as client:
        task = client.submit({"command": ECHO, "run_at": at})

    assert task.run_at == at.timestamp()
