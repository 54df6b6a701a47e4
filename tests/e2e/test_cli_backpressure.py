"""Backpressure on the command line: a full queue exits 75 saying when to retry,
`submit --wait-for-room` waits for a place instead, and `status --mine` shows a run's
own subtree with estimates."""

from __future__ import annotations

import json

from slotline.store import Store

from .conftest import Lines, Run, Spawn, ok, submit

EXIT_FULL = 75


def test_a_full_queue_exits_75_with_when_to_retry(cli: Run, store: Store) -> None:
    store.set_setting("max_queue_size", 1)
    submit(cli)
    refused = cli("submit", "--", "true")
    assert refused.code == EXIT_FULL
    line = refused.error_line()
    assert line.startswith("error: queue is full: 1 tasks wait, max_queue_size is 1; try again")
    assert line.endswith("or submit with --wait-for-room")
    as_json = cli("--json", "submit", "--", "true")
    assert as_json.code == EXIT_FULL
    assert json.loads(as_json.error_line())["type"] == "BoundExceeded"


def test_wait_for_room_submits_once_a_place_frees(cli: Run, store: Store, spawn: Spawn) -> None:
    # Given a full queue
    store.set_setting("max_queue_size", 1)
    first = submit(cli)
    # When a submit waits for room, and the task in line is then cancelled
    waiting = spawn("submit", "--wait-for-room", "--title", "late", "--", "true")
    assert Lines(waiting.stderr).next().startswith("waiting for room: queue is full")
    ok(cli("--json", "cancel", first["id"]))
    # Then it is submitted
    out, _ = waiting.communicate(timeout=30)
    assert waiting.returncode == 0
    assert out.startswith("submitted ")
    assert [t.title for t in store.list_tasks()] == [first["title"], "late"]


def test_wait_for_room_gives_up_after_its_timeout(cli: Run, store: Store) -> None:
    store.set_setting("max_queue_size", 0)
    result = cli("submit", "--wait-for-room", "--room-timeout", "0.5", "--", "true")
    assert result.code == EXIT_FULL
    assert "queue is full" in result.err


def test_status_mine_is_the_subtree_of_the_run(cli: Run) -> None:
    parent = submit(cli, "--hold", "--title", "pm")
    child = submit(cli, "--parent", parent["id"], "--expected-duration", "90")
    other = submit(cli, "--title", "someone else's")
    mine = ok(cli("--json", "status", "--mine", env={"SLOTLINE_TASK_ID": parent["id"]}))["mine"]
    assert {t["id"] for t in mine} == {parent["id"], child["id"]}
    (shown,) = [t for t in mine if t["id"] == child["id"]]
    assert shown["eta_start"] is not None
    assert shown["eta_basis"] == "expected_duration"
    assert other["id"] not in {t["id"] for t in mine}
    human = cli("status", "--mine", env={"SLOTLINE_TASK_ID": parent["id"]})
    assert "MINE (2)" in human.out
    alone = cli("status", "--mine", env={"SLOTLINE_TASK_ID": None})
    assert alone.code == 2
    assert "SLOTLINE_TASK_ID" in alone.err
