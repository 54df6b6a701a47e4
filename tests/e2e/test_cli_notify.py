"""`slotline notify log`: recent deliveries and failures, from the store or a server."""

from __future__ import annotations

from slotline.store import Delivery, Store

from .conftest import Run, ok


def test_notify_log_shows_deliveries_and_failures_newest_first(cli: Run, store: Store) -> None:
    assert cli("notify", "log").out.strip() == "no deliveries yet"
    for attempt, ok_, status, error in ((1, False, 502, "answered HTTP 502"), (2, True, 200, None)):
        store.log_notify(
            Delivery(at=100.0 + attempt, hook="https://hooks.example.com/in", event="task.failed",
                     seq=7, task_id="0" * 32, node_id="n1", attempt=attempt, ok=ok_,
                     status=status, error=error, took=0.25)
        )  # fmt: skip
    shown = ok(cli("notify", "log", "--json"))
    assert [(d["attempt"], d["ok"], d["status"]) for d in shown] == [
        (2, True, 200),
        (1, False, 502),
    ]
    assert shown[1]["error"] == "answered HTTP 502"
    assert shown[0]["event"] == "task.failed"
    assert shown[0]["seq"] == 7
    lines = cli("notify", "log", "--limit", "1").out.splitlines()
    assert len(lines) == 2
    assert "ok 200" in lines[1]
    assert "task.failed" in lines[1]
    failed = cli("notify", "log").out.splitlines()[2]
    assert "FAILED: answered HTTP 502" in failed
