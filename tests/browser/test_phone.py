"""The dashboard on a phone (360 by 740, a touch screen): a tap never changes a task, every
action of a row is within reach of a thumb, the task view opens in sight, the line is on
the first screen, times and agent types show whole (issue 27)."""

from __future__ import annotations

from typing import Any

import pytest

from slotline.models import Status
from slotline.store import Store

from .conftest import PHONE, Login, queue_ids, until
from .test_dashboard import confirm, fill_to_capacity, row, running_ids, submit

pytestmark = pytest.mark.xdist_group("browser")

WIDTH, HEIGHT = PHONE["viewport"]["width"], PHONE["viewport"]["height"]


def facts(store: Store, ids: list[str]) -> list[tuple[Any, ...]]:
    """What a tap could change of each task: status, priority, boost, place in line."""
    line = [t.id for t in store.status().queued]
    found = [store.get(i) for i in ids]
    place = {task_id: i for i, task_id in enumerate(line)}
    return [(t.status, t.priority, t.boosted, place.get(t.id)) for t in found]


def in_view(page: Any, locator: Any) -> bool:
    """Whether the element is whole inside the phone's screen as it is scrolled now."""
    box = locator.bounding_box()
    return (
        bool(box)
        and box["x"] >= 0
        and box["y"] >= 0
        and (box["x"] + box["width"] <= WIDTH and box["y"] + box["height"] <= HEIGHT)
    )


def nothing_open(page: Any) -> bool:
    return page.locator(".modal, #task-sheet").count() == 0


def test_taps_anywhere_on_a_row_change_nothing(store: Store, login: Login) -> None:
    waiting = fill_to_capacity(store, 3)
    page = login(screen=PHONE)
    until(lambda: queue_ids(page) == waiting, what="the line")
    before = facts(store, waiting)

    def tap(x: float, y: float, what: str) -> None:
        page.touchscreen.tap(x, y)
        page.wait_for_timeout(150)  # what a tap starts shows at once: look for it
        assert nothing_open(page), f"a tap on {what} opened a dialog"
        assert facts(store, waiting) == before, f"a tap on {what} changed a task"

    for task in waiting:
        row(page, task).scroll_into_view_if_needed()
        box = row(page, task).bounding_box()
        more = row(page, task).locator("[data-action=more]")
        # Everywhere on the row but its explicit actions button and checkbox: from the
        # position to the right edge (where actions appeared on hover before).
        end = more.bounding_box()["x"] if more.count() else box["x"] + box["width"]
        start = box["x"] + 40
        for step in range(8):
            x = start + (end - start - 24) * step / 7
            tap(x, box["y"] + box["height"] / 2, f"x={x:.0f} of a row")
        for part in (".title", ".pos"):
            part_box = row(page, task).locator(part).bounding_box()
            tap(part_box["x"] + 4, part_box["y"] + part_box["height"] / 2, part)

    page.reload()  # anything a tap sent has been answered by now
    page.wait_for_selector("#connection:has-text('live')")
    assert facts(store, waiting) == before
    assert nothing_open(page)


def test_every_action_of_a_task_in_line_is_in_reach_and_works(store: Store, login: Login) -> None:
    first, second = fill_to_capacity(store, 2)
    page = login(screen=PHONE)
    until(lambda: queue_ids(page) == [first, second], what="the line")

    row(page, second).locator("[data-action=more]").tap()
    sheet = page.locator("#task-sheet")
    offered = sheet.locator(".sheet-actions [data-action]")
    names = offered.evaluate_all("buttons => buttons.map(b => b.dataset.action)")
    moves = ["up", "down", "top"]
    assert names == ["view", "start-now", "boost", *moves, "hold", "priority", "cancel"]
    for i in range(offered.count()):
        assert in_view(page, offered.nth(i)), names[i]
    # Move to the top, from the sheet: the store follows.
    sheet.locator("[data-action=top]").tap()
    until(lambda: [t.id for t in store.status().queued] == [second, first], what="moved to #1")

    row(page, second).locator("[data-action=more]").tap()
    page.locator("#task-sheet [data-action=hold]").tap()
    until(lambda: store.get(second).status is Status.HELD, what="held from the sheet")
    page.wait_for_selector(f'#queue [data-task-id="{second}"][data-status=held]')
    row(page, second).locator("[data-action=more]").tap()
    page.locator("#task-sheet [data-action=release]").tap()
    until(lambda: store.get(second).status is Status.QUEUED, what="released")
    page.wait_for_selector(f'#queue [data-task-id="{second}"][data-status=queued]')

    row(page, second).locator("[data-action=more]").tap()
    page.locator("#task-sheet [data-action=priority]").tap()
    page.select_option(".modal select[name=choice]", "urgent")
    confirm(page)
    until(lambda: store.get(second).priority.label == "urgent", what="priority set")

    # Cancel asks first, with two buttons that cannot be mistaken, both in reach.
    row(page, first).locator("[data-action=more]").tap()
    page.locator("#task-sheet [data-action=cancel]").tap()
    keep = page.locator(".modal [data-action=dismiss]")
    cancel = page.locator(".modal [data-action=confirm]")
    assert (keep.inner_text(), cancel.inner_text()) == ("Keep it", "Cancel task")
    assert in_view(page, keep)
    assert in_view(page, cancel)
    keep.tap()
    assert store.get(first).status is Status.QUEUED
    row(page, first).locator("[data-action=more]").tap()
    page.locator("#task-sheet [data-action=cancel]").tap()
    page.locator(".modal [data-action=confirm]").tap()
    until(lambda: store.get(first).status is Status.CANCELLED, what="cancelled")

    row(page, second).locator("[data-action=more]").tap()
    page.locator("#task-sheet [data-action=start-now]").tap()
    until(lambda: second in running_ids(store), what="started now")


def test_every_action_of_a_run_is_in_reach_and_works(store: Store, login: Login) -> None:
    fill_to_capacity(store, 0)
    running = sorted(running_ids(store))
    page = login(screen=PHONE)
    page.wait_for_selector(f'#running [data-task-id="{running[1]}"]')

    for task in running:
        buttons = row(page, task, "#running").locator("[data-action]")
        names = buttons.evaluate_all("bs => bs.map(b => b.dataset.action)")
        assert names == ["view", "terminate", "restart"]
        for i in range(buttons.count()):
            buttons.nth(i).scroll_into_view_if_needed()
            assert in_view(page, buttons.nth(i))
    row(page, running[0], "#running").locator("[data-action=restart]").tap()
    confirm(page)
    until(lambda: len(store.get(running[0]).attempts) == 2, what="restarted: a second attempt")
    row(page, running[1], "#running").locator("[data-action=terminate]").tap()
    confirm(page, reason="from a phone")
    until(lambda: store.get(running[1]).status is Status.FAILED, what="terminated")


def test_view_opens_the_task_in_sight(store: Store, login: Login) -> None:
    (queued,) = fill_to_capacity(store, 1)
    page = login(screen=PHONE)
    run = sorted(running_ids(store))[0]

    row(page, run, "#running").locator("[data-action=view]").tap()
    title = page.locator("#task-title")
    title.wait_for()
    until(lambda: in_view(page, title), what="the task's title in sight")
    assert in_view(page, page.locator("#task-panel [data-action=close]"))
    page.locator("#task-panel [data-action=close]").tap()

    row(page, queued).locator("[data-action=more]").tap()
    page.locator("#task-sheet [data-action=view]").tap()
    page.wait_for_selector("#task-title:text-is('waiting 0')")
    until(lambda: in_view(page, page.locator("#task-title")), what="the queued task in sight")


def test_the_line_is_on_the_first_screen(store: Store, login: Login) -> None:
    waiting = fill_to_capacity(store, 3)
    page = login(screen=PHONE)
    until(lambda: queue_ids(page) == waiting, what="the line")

    assert page.evaluate("window.scrollY") == 0
    assert in_view(page, page.locator("#line-title"))
    assert in_view(page, row(page, waiting[0]))


def test_times_and_agent_types_show_whole(store: Store, login: Login) -> None:
    fill_to_capacity(store, 0)
    task = submit(store, "fix the flaky test in test_scheduler", agent="claude")
    page = login(screen=PHONE)
    page.wait_for_selector(f'#queue [data-task-id="{task}"] .eta')

    for part in (".badge-agent", ".eta", ".waited", ".badge-pri-normal", ".title"):
        shown = row(page, task).locator(part)
        assert in_view(page, shown), part
        whole = shown.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
        assert whole or part == ".title", f"{part} is cut: {shown.inner_text()!r}"
    assert row(page, task).locator(".eta").inner_text().startswith("Starts")
