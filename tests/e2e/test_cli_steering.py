"""The `slotline` steering commands: each verb's effect, and its one-line refusal (exit 1)."""

from __future__ import annotations

from slotline.stops import CANCEL, RESTART
from slotline.store import Store

from .conftest import Run, claim_one, ok, submit


def test_cancel_queued_then_again_is_refused(cli: Run) -> None:
    task = submit(cli)
    result = cli("cancel", task["id"][:6])
    assert result.out == f"cancelled {task['id'][:8]}\n"
    assert ok(cli("--json", "show", task["id"]))["status"] == "cancelled"
    again = cli("cancel", task["id"])
    assert again.code == 1
    assert again.error_line() == (
        f"error: cannot cancel task {task['id'][:8]}: it is cancelled; "
        "it has ended; restart it first"
    )


def test_cancel_cascade_cancels_subtasks(cli: Run) -> None:
    parent = submit(cli)
    child = submit(cli, "--parent", parent["id"])
    grandchild = submit(cli, "--parent", child["id"])
    bystander = submit(cli)
    cancelled = ok(cli("--json", "cancel", "--cascade", parent["id"]))
    assert cancelled["status"] == "cancelled"
    states = {t["id"]: t["status"] for t in ok(cli("--json", "ls"))}
    assert states[child["id"]] == states[grandchild["id"]] == "cancelled"
    assert states[bystander["id"]] == "queued"


def test_cancel_running_asks_its_node_to_stop_it(cli: Run, store: Store) -> None:
    task = submit(cli)
    claim_one(store)
    result = cli("cancel", task["id"])
    assert result.code == 0
    assert result.out.startswith(f"cancelling {task['id'][:8]}")
    # Still running (and holding its slot) until the node sees its process exit.
    assert ok(cli("--json", "show", task["id"]))["status"] == "running"
    assert store.kill_requests("test-node")[0].request == CANCEL


def test_terminate_running_and_refused_when_queued(cli: Run, store: Store) -> None:
    task = submit(cli)
    waiting = submit(cli)
    claim_one(store)
    result = ok(cli("--json", "terminate", task["id"], "--reason", "stuck in a loop"))
    assert result["status"] == "running"
    assert str(store.kill_requests("test-node")[0].request) == "terminate:stuck in a loop"
    event = ok(cli("--json", "events", "--limit", "1"))[0]
    assert event["kind"] == "terminate_requested"
    assert event["data"]["reason"] == "stuck in a loop"
    refused = cli("terminate", waiting["id"])
    assert refused.code == 1
    assert refused.error_line() == (
        f"error: cannot terminate task {waiting['id'][:8]}: it is queued; "
        "use cancel for a task that has not started"
    )


def test_boost_moves_to_position_one(cli: Run, store: Store) -> None:
    submit(cli, "-p", "urgent")
    last = submit(cli, "-p", "low")
    result = cli("boost", last["id"])
    assert result.out.startswith(f"boosted {last['id'][:8]}: queued, position 1 (NEXT UP)")
    task = ok(cli("--json", "show", last["id"]))
    assert task["boosted"] is True
    assert task["position"] == 1
    claim_one(store)
    refused = cli("boost", last["id"])
    assert refused.code == 1
    assert "it is running; it is already running" in refused.error_line()


def test_bump_starts_over_the_limit(cli: Run, store: Store) -> None:
    submit(cli)
    later = submit(cli)
    claim_one(store)
    bumped = ok(cli("--json", "bump", later["id"]))
    assert bumped["position"] == 1
    assert claim_one(store) == later["id"]
    status = ok(cli("--json", "status"))
    assert status["active"] == 2
    assert status["over_limit"] is True
    over = next(t for t in status["running"] if t["id"] == later["id"])
    assert over["attempts"][0]["over_limit"] is True
    assert "OVER LIMIT" in cli("status").out
    refused = cli("bump", later["id"])
    assert refused.code == 1
    assert refused.error_line().startswith(f"error: cannot bump task {later['id'][:8]}")


def test_move_to_before_after(cli: Run, store: Store) -> None:
    a, b, c = submit(cli), submit(cli), submit(cli)

    def order() -> list[str]:
        return [t["id"] for t in ok(cli("--json", "status"))["queued"]]

    assert ok(cli("--json", "move", c["id"], "--to", "1"))["position"] == 1
    assert order() == [c["id"], a["id"], b["id"]]
    assert cli("move", a["id"][:6], "--after", b["id"][:6]).out.startswith(
        f"moved {a['id'][:8]}: queued, position 3"
    )
    assert order() == [c["id"], b["id"], a["id"]]
    ok(cli("--json", "move", a["id"], "--before", c["id"]))
    assert order() == [a["id"], c["id"], b["id"]]

    both = cli("move", a["id"], "--to", "1", "--before", b["id"])
    assert both.code == 2
    assert "exactly one of" in both.error_line()
    claim_one(store)
    refused = cli("move", a["id"], "--to", "2")
    assert refused.code == 1
    assert refused.error_line().startswith(f"error: cannot move task {a['id'][:8]}: it is running")


def test_priority_changes_order_and_is_refused_after_start(cli: Run, store: Store) -> None:
    first = submit(cli)
    second = submit(cli)
    changed = ok(cli("--json", "priority", second["id"], "P0"))
    assert changed["priority"] == "urgent"
    assert changed["position"] == 1
    assert ok(cli("--json", "show", first["id"]))["position"] == 2
    assert cli("priority", first["id"], "someday").code == 2
    claim_one(store)
    refused = cli("priority", second["id"], "low")
    assert refused.code == 1
    assert f"task {second['id'][:8]}: it is running" in refused.error_line()


def test_restart_running_needs_force(cli: Run, store: Store) -> None:
    task = submit(cli)
    claim_one(store)
    refused = cli("restart", task["id"][:7])
    assert refused.code == 1
    assert refused.error_line() == (
        f"error: cannot restart task {task['id'][:8]}: it is running; "
        "cancel it first or use --force"
    )
    forced = ok(cli("--json", "restart", "--force", task["id"]))
    assert forced["status"] == "running"
    assert store.kill_requests("test-node")[0].request == RESTART


def test_restart_an_ended_task_queues_it_again(cli: Run) -> None:
    task = submit(cli)
    ok(cli("--json", "cancel", task["id"]))
    result = cli("restart", task["id"])
    assert result.out.startswith(f"restarted {task['id'][:8]}: queued, position 1 (NEXT UP)")
    again = cli("restart", task["id"])
    assert again.code == 1
    assert "it is queued; it is already queued" in again.error_line()


def test_hold_and_release(cli: Run) -> None:
    first = submit(cli)
    second = submit(cli)
    held = ok(cli("--json", "hold", first["id"]))
    assert held["status"] == "held"
    assert held["position"] is None
    assert ok(cli("--json", "show", second["id"]))["position"] == 1
    assert cli("hold", first["id"]).code == 1
    released = cli("release", first["id"])
    assert released.out.startswith(f"released {first['id'][:8]}: queued, position 1 (NEXT UP)")
    refused = cli("release", first["id"])
    assert refused.code == 1
    assert "it is not held" in refused.error_line()


def test_pause_and_resume(cli: Run) -> None:
    assert ok(cli("--json", "pause")) == {"paused": True}
    assert ok(cli("--json", "status"))["paused"] is True
    assert "PAUSED" in cli("status").out
    assert cli("resume").code == 0
    assert ok(cli("--json", "status"))["paused"] is False


def test_clear_refuses_without_force(cli: Run) -> None:
    tasks = [submit(cli), submit(cli), submit(cli, "--hold")]
    refused = cli("clear")
    assert refused.code == 1
    assert refused.error_line() == (
        "error: clear would cancel 3 tasks that have not started; "
        "run `slotline clear --force` to do it"
    )
    assert all(t["status"] != "cancelled" for t in ok(cli("--json", "ls")))
    assert ok(cli("--json", "clear", "--force")) == {"cancelled": 3}
    states = [t["status"] for t in ok(cli("--json", "ls"))]
    assert states == ["cancelled"] * len(tasks)
