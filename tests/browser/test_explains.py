"""The dashboard says what is happening and why (issue 27): a move that changes a
priority says so, the task page speaks in words and one local time format, History sorts
by its column, ETAs are rough with their basis on hover, and why a task waits."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from slotline.models import Status
from slotline.store import Store

from .conftest import DESKTOP, PHONE, Login, queue_ids, until
from .test_dashboard import fill_to_capacity, row, running_ids, submit

pytestmark = pytest.mark.xdist_group("browser")

TOKYO = "Asia/Tokyo"


def test_a_drag_that_raises_the_priority_says_so(store: Store, login: Login) -> None:
    # Given two high tasks in line and a low one behind them,
    fill_to_capacity(store, 0)
    high = [submit(store, f"high {n}", priority="high") for n in range(2)]
    low = submit(store, "low", priority="low")
    page = login()
    until(lambda: queue_ids(page) == [*high, low], what="the line")
    # When the low one is dropped on the lower half of the first: #2,
    row(page, low).drag_to(row(page, high[0]), target_position={"x": 200, "y": 40})
    # Then it took the band of its neighbours, and the page says so.
    until(lambda: store.get(low).priority.label == "high", what="raised in the store")
    notice = page.locator(".notice")
    notice.wait_for()
    assert notice.inner_text().startswith(f"moved {low[:8]} to #2; priority raised to high")


def local(iso_seconds: float, zone: str) -> str:
    """An instant as the page shows it in en-US: "Nov 28, 08:52:03 AM"."""
    at = datetime.fromtimestamp(iso_seconds, UTC).astimezone(ZoneInfo(zone))
    return f"{at:%b} {at.day}, {at:%I:%M:%S %p}"


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_task_page_speaks_to_people(store: Store, login: Login, size: str) -> None:
    failed = submit(store, "broken build", ["sh", "-c", "exit 1"])
    until(lambda: store.get(failed).status is Status.FAILED, what="failed")
    screen = {**(PHONE if size == "phone" else DESKTOP), "locale": "en-US", "timezone_id": TOKYO}
    page = login(screen=screen)
    page.click("[data-view=history]")
    page.locator(f'.history [data-task-id="{failed}"] button.link').click()
    panel = page.locator("#task-panel")
    panel.locator(".task-events li").last.wait_for()

    # Labels, not field names; times in one local format.
    labels = panel.locator(".fields dt").all_inner_texts()
    assert {"Created", "Finished", "Exit code", "Failure"} <= set(labels)
    assert not [label for label in labels if "_" in label]
    task = store.get(failed)
    assert task.created_at is not None
    created = panel.locator("[data-field=created_at] dd").inner_text()
    assert created == local(task.created_at, TOKYO)
    # The id on one line, whole.
    shown_id = panel.locator("[data-field=id] dd")
    assert shown_id.inner_text() == failed
    assert shown_id.bounding_box()["height"] < 30
    # Events as sentences; the JSON behind a toggle.
    said = panel.locator(".task-events .said").all_inner_texts()
    assert "Started on node dash" in [re.sub(r" \(pid \d+\)$", "", s) for s in said]
    assert "Failed: exit code 1" in said
    raw = panel.locator(".task-events li").last.locator(".raw code")
    assert not raw.is_visible()
    panel.locator(".task-events li").last.locator(".raw summary").click()
    assert json.loads(raw.inner_text())["kind"] == "failed"


def test_the_three_ways_to_stop_a_run_are_explained_beside_them(store: Store, login: Login) -> None:
    fill_to_capacity(store, 0)
    run = sorted(running_ids(store))[0]
    page = login()
    row(page, run, "#running").locator("[data-action=view]").click()
    buttons = page.locator("#task-panel .task-actions [data-action]")
    buttons.first.wait_for()
    assert buttons.evaluate_all("bs => bs.map(b => b.dataset.action)") == [
        "terminate", "restart", "cancel",
    ]  # fmt: skip
    help_text = page.locator("#stop-help").inner_text()
    assert "Terminate stops the run and ends it as failed" in help_text
    assert "Restart stops it and queues it again" in help_text
    assert "Cancel stops it and ends it as cancelled" in help_text


def test_history_sorts_by_when_a_task_ended(store: Store, login: Login) -> None:
    # Given a slow task submitted first and a quick one after it, which ends first,
    slow = submit(store, "slow", ["sleep", "1.5"])
    quick = submit(store, "quick", ["true"])
    until(lambda: store.get(slow).status is Status.SUCCEEDED, what="both ended")
    assert store.get(quick).finished_at < store.get(slow).finished_at  # type: ignore[operator]
    page = login()
    # When History is shown,
    page.click("[data-view=history]")
    page.wait_for_selector(f'.history [data-task-id="{slow}"]')
    # Then its sorted column says so, and the last to end comes first.
    assert page.locator(".history th[aria-sort=descending]").inner_text().startswith("Ended")
    shown = page.eval_on_selector_all(
        ".history tbody tr", "rows => rows.map(r => r.dataset.taskId)"
    )
    assert shown.index(slow) < shown.index(quick)


def test_etas_are_rough_with_their_basis_and_waiting_reasons_show(
    store: Store, login: Login
) -> None:
    # Given a line answer with what the server may say of each task (its estimate, none,
    # why one waits, a run past its estimate, which one is next up),
    first, second = fill_to_capacity(store, 2)
    page = login()
    until(lambda: queue_ids(page) == [first, second], what="the line")

    def dress(route: Any) -> None:
        line = route.fetch().json()
        now = datetime.fromisoformat(line["now"].replace("Z", "+00:00"))
        soon = (now + timedelta(minutes=5, seconds=10)).isoformat()
        queued = {t["id"]: t for t in line["queued"]}
        queued[first].update(eta_start=soon, eta_basis="median of 3 runs", waiting_reason=None)
        queued[second].update(
            eta_start=None,
            eta_unavailable="no run of this agent type has ended yet",
            waiting_reason={
                "kind": "limit",
                "text": "agent=claude: 2/2 running",
                "until": (now + timedelta(minutes=3, seconds=10)).isoformat(),
            },
        )
        line["next_up"] = second
        line["running"][0]["eta_overdue"] = True
        route.fulfill(json=line)

    def dress_task(route: Any) -> None:
        task = route.fetch().json()
        task["waiting_reason"] = {"kind": "hold", "text": "held by a budget", "until": None}
        route.fulfill(json=task)

    page.route(re.compile(r"/api/line(\?|$)"), dress)
    page.route(re.compile(rf"/api/tasks/{second}$"), dress_task)
    page.reload()
    page.wait_for_selector("#connection:has-text('live')")

    eta = row(page, first).locator(".eta")
    eta.wait_for()
    assert eta.inner_text() == "Starts in ~5 min"
    assert "estimate based on median of 3 runs" in eta.get_attribute("title")
    unknown = row(page, second).locator(".eta")
    assert unknown.inner_text() == "Starts unknown"
    assert unknown.get_attribute("title") == "no run of this agent type has ended yet"
    why = row(page, second).locator(".why")
    assert why.inner_text() == "agent=claude: 2/2 running · frees in ~3 min"
    assert "frees at" in why.get_attribute("title")
    assert row(page, first).locator(".why").count() == 0
    # NEXT UP is the task the server names, not the first row.
    assert row(page, second).locator(".badge-next").count() == 1
    assert page.locator("#queue .badge-next").count() == 1
    assert page.locator("#running .ends.overdue").first.inner_text() == "past its estimate"
    assert page.get_by_text("ENDS now", exact=True).count() == 0
    # The task page says why it waits, too.
    row(page, second).hover()
    row(page, second).locator("[data-action=view]").click()
    reason = page.locator("#task-panel [data-field=waiting_reason] dd")
    reason.wait_for()
    assert reason.inner_text() == "held by a budget"
