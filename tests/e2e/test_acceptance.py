"""Acceptance: the real CLI driving a real `slotline serve` running real commands."""

from __future__ import annotations

import os
from typing import Any

import pytest

from overlap import peak
from waiting import until

from .conftest import Run, Serve, ok, submit


def show(cli: Run, task_id: str) -> dict[str, Any]:
    task: dict[str, Any] = ok(cli("--json", "show", task_id))
    return task


def status_of(cli: Run, task_id: str) -> str:
    return str(show(cli, task_id)["status"])


def iso_seconds(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def peak_concurrency(tasks: list[dict[str, Any]]) -> int:
    return peak(
        (iso_seconds(a["started_at"]), iso_seconds(a["finished_at"]))
        for task in tasks
        for a in task["attempts"]
    )


def test_the_limit_holds_and_every_task_runs(cli: Run, serve: Serve) -> None:
    serve("--max-concurrent", "2")
    # Paused while submitting, so that a slow machine cannot finish each task before
    # the next one is submitted.
    ok(cli("--json", "pause"))
    ids = [submit(cli, "--", "sleep", "0.3")["id"] for _ in range(5)]
    ok(cli("--json", "resume"))
    until(lambda: all(status_of(cli, i) == "succeeded" for i in ids))
    assert peak_concurrency([show(cli, i) for i in ids]) == 2


def test_higher_priority_starts_first(cli: Run, serve: Serve) -> None:
    ok(cli("--json", "pause"))
    low = submit(cli, "--priority", "low", "--", "sleep", "0.05")["id"]
    normal = submit(cli, "--", "sleep", "0.05")["id"]
    urgent = submit(cli, "--priority", "urgent", "--", "sleep", "0.05")["id"]
    serve("--max-concurrent", "1")
    queued = ok(cli("--json", "status"))["queued"]
    assert [t["id"] for t in queued] == [urgent, normal, low]
    ok(cli("--json", "resume"))
    until(lambda: status_of(cli, low) == "succeeded")
    starts = {i: show(cli, i)["started_at"] for i in (low, normal, urgent)}
    assert starts[urgent] < starts[normal] < starts[low]


def test_bump_runs_over_the_limit_and_holds_back_the_rest(cli: Run, serve: Serve) -> None:
    # (runs that last until cancelled: on a busy machine the CLI calls take many seconds)
    serve("--max-concurrent", "1")
    first = submit(cli, "--", "sleep", "600")["id"]
    until(lambda: status_of(cli, first) == "running")
    urgent = submit(cli, "--", "sleep", "600")["id"]
    later = submit(cli, "--", "true")["id"]

    ok(cli("--json", "bump", urgent))
    until(lambda: status_of(cli, urgent) == "running")
    assert show(cli, urgent)["attempts"][0]["over_limit"] is True
    status = ok(cli("--json", "status"))
    assert (status["active"], status["max_concurrent"], status["at_capacity"]) == (2, 1, True)
    assert [t["id"] for t in status["queued"]] == [later]

    ok(cli("--json", "cancel", urgent))
    until(lambda: status_of(cli, urgent) == "cancelled")
    assert status_of(cli, later) == "queued"  # back at the limit, not under it
    ok(cli("--json", "cancel", first))
    until(lambda: status_of(cli, later) == "succeeded")


def test_cancelling_a_running_process_frees_its_slot(cli: Run, serve: Serve) -> None:
    serve("--max-concurrent", "1")
    agent = submit(cli, "--", "sleep", "600")["id"]  # until cancelled
    nxt = submit(cli, "--", "true")["id"]
    until(lambda: show(cli, agent)["attempts"] and show(cli, agent)["attempts"][0]["pid"])
    pid = show(cli, agent)["attempts"][0]["pid"]

    ok(cli("--json", "cancel", agent))
    until(lambda: status_of(cli, nxt) == "succeeded")
    assert status_of(cli, agent) == "cancelled"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_failed_task_restarts_with_its_history(cli: Run, serve: Serve) -> None:
    serve()
    task = submit(cli, "--", "sh", "-c", "exit 3")["id"]
    until(lambda: status_of(cli, task) == "failed")
    failed = show(cli, task)
    assert (failed["exit_code"], failed["failure_reason"]) == (3, "exit code 3")

    ok(cli("--json", "restart", task))
    until(lambda: len(show(cli, task)["attempts"]) == 2 and status_of(cli, task) == "failed")
    assert [a["exit_code"] for a in show(cli, task)["attempts"]] == [3, 3]


def test_a_dependency_chain_runs_in_order_and_a_failure_blocks(cli: Run, serve: Serve) -> None:
    serve("--max-concurrent", "3")
    first = submit(cli, "--", "sleep", "0.2")["id"]
    second = submit(cli, "--after", first, "--", "true")["id"]
    third = submit(cli, "--after", second, "--", "true")["id"]
    broken = submit(cli, "--", "sh", "-c", "exit 1")["id"]
    blocked = submit(cli, "--after", broken, "--", "true")["id"]

    until(lambda: status_of(cli, third) == "succeeded")
    times = [show(cli, i) for i in (first, second, third)]
    assert times[0]["finished_at"] <= times[1]["started_at"]
    assert times[1]["finished_at"] <= times[2]["started_at"]
    until(lambda: status_of(cli, blocked) == "blocked")
    assert broken[:8] in show(cli, blocked)["status_reason"]


def test_a_task_not_started_within_its_ttl_expires(cli: Run, serve: Serve) -> None:
    serve()
    ok(cli("--json", "pause"))
    stale = submit(cli, "--ttl", "0.5", "--", "true")["id"]
    # The node is paused, so only its own timer can expire the task.
    until(lambda: status_of(cli, stale) == "expired")
    assert "TTL" in show(cli, stale)["failure_reason"]
