"""The dashboard in a real chromium against a real `slotline serve` running real commands:
what a person sees and does (issue 10, "What must be shown")."""

from __future__ import annotations

from typing import Any

import pytest

from slotline.models import Status, Usage
from slotline.store import Store

from .conftest import Login, Serve, is_phone, queue_ids, row_action, until

# One worker runs them all, one after the other, with one browser and one server.
pytestmark = pytest.mark.xdist_group("browser")

LONG = ["sleep", "120"]


def submit(store: Store, title: str, command: list[str] = LONG, **fields: Any) -> str:
    return store.submit({"command": command, "title": title, **fields}).id


def running_ids(store: Store) -> set[str]:
    return {t.id for t in store.status().running}


def line_ids(store: Store) -> list[str]:
    return [t.id for t in store.status().queued]


def fill_to_capacity(store: Store, queued: int) -> list[str]:
    """Two long runs (max_concurrent 2), then `queued` tasks in line; their ids. Each is
    expected to take ten minutes (with no run finished, nothing else says how long)."""
    first = [submit(store, f"run {i}", expected_duration=600) for i in range(2)]
    until(lambda: running_ids(store) == set(first), what="both runs started")
    return [submit(store, f"waiting {i}", expected_duration=600) for i in range(queued)]


def confirm(page: Any, reason: str | None = None) -> None:
    if reason is not None:
        page.fill(".modal input[name=reason]", reason)
    page.click(".modal [data-action=confirm]")


def row(page: Any, task_id: str, where: str = "#queue") -> Any:
    return page.locator(f'{where} [data-task-id="{task_id}"]')


def test_at_capacity_the_line_fills_with_positions_and_next_up(store: Store, login: Login) -> None:
    waiting = fill_to_capacity(store, 3)
    page = login()

    page.wait_for_selector("#utilization:has-text('2/2')")
    assert page.locator(".badge-full").inner_text() == "AT CAPACITY"
    until(lambda: queue_ids(page) == waiting, what="the line in queue order")
    assert row(page, waiting[0]).locator(".pos").inner_text() == "#1"
    assert row(page, waiting[2]).locator(".pos").inner_text() == "#3"
    assert row(page, waiting[0]).locator(".badge-next").inner_text() == "NEXT UP"
    assert page.locator("#queue .badge-next").count() == 1
    assert page.locator("#running [data-task-id]").count() == 2
    assert "pid" in page.locator("#running").inner_text()
    # Each task in line shows its estimated start, as the API computes it: roughly, with
    # the exact time and the basis of the estimate on hover.
    eta = row(page, waiting[0]).locator(".eta")
    basis = store.get(waiting[0]).eta_basis
    assert basis
    assert f"estimate based on {basis}" in eta.get_attribute("title")
    assert eta.inner_text().startswith("Starts ")
    assert eta.inner_text() != "Starts –"


def test_drag_to_the_top_and_keyboard_moves_change_the_store(store: Store, login: Login) -> None:
    a, b, c = fill_to_capacity(store, 3)
    page = login()
    until(lambda: queue_ids(page) == [a, b, c], what="the line")

    # Drop on the upper half of the first row: before it.
    row(page, c).drag_to(row(page, a), target_position={"x": 200, "y": 4})
    until(lambda: line_ids(store) == [c, a, b], what="c moved to the top in the store")
    until(lambda: queue_ids(page) == [c, a, b], what="the page showing the new order")

    row(page, c).focus()
    page.keyboard.press("Alt+ArrowDown")
    until(lambda: line_ids(store) == [a, c, b], what="c one down")
    until(lambda: queue_ids(page) == [a, c, b], what="the page showing c one down")
    # The moved row keeps focus through the live redraw: the same key moves it again.
    page.keyboard.press("Alt+ArrowDown")
    until(lambda: line_ids(store) == [a, b, c], what="c one more down")
    until(lambda: queue_ids(page) == [a, b, c], what="the page showing c last")
    row(page, b).focus()
    page.keyboard.press("Alt+Home")
    until(lambda: line_ids(store) == [b, a, c], what="b to the top by keyboard")
    until(lambda: queue_ids(page) == [b, a, c], what="the page following")

    row(page, b).focus()
    page.keyboard.press("h")
    until(lambda: store.get(b).status is Status.HELD, what="b held by keyboard")
    row(page, b).locator(".badge-held").wait_for()


def test_start_now_runs_over_the_limit_and_shows_it(
    store: Store, login: Login, screen: dict[str, Any]
) -> None:
    (task,) = fill_to_capacity(store, 1)
    page = login(screen=screen)

    row_action(page, task, "start-now")

    until(lambda: task in running_ids(store), what="the task started")
    row(page, task, "#running").locator(".badge-over").wait_for()
    page.wait_for_selector("#utilization:has-text('3/2')")
    assert page.locator(".capacity .badge-over").inner_text() == "OVER LIMIT"
    # One state of capacity at a time, as the CLI says it: over the limit, not also full.
    assert page.locator(".capacity .badge-full").count() == 0


def test_max_concurrent_zero_says_no_slots_not_at_capacity(store: Store, login: Login) -> None:
    store.set_setting("max_concurrent", 0)
    submit(store, "never starts")
    page = login()

    page.wait_for_selector("#utilization:has-text('0/0')")
    badge = page.locator(".capacity .badge-no-slots")
    assert badge.inner_text() == "NO SLOTS"
    assert "max_concurrent is 0" in (badge.get_attribute("title") or "")
    assert page.locator(".capacity .badge-full").count() == 0


def test_cancel_from_the_line_asks_first(
    store: Store, login: Login, screen: dict[str, Any]
) -> None:
    (task,) = fill_to_capacity(store, 1)
    page = login(screen=screen)

    row_action(page, task, "cancel")
    assert store.get(task).status is Status.QUEUED  # not before it is confirmed
    # Two buttons that cannot be mistaken for each other.
    assert page.locator(".modal [data-action=dismiss]").inner_text() == "Keep it"
    assert page.locator(".modal [data-action=confirm]").inner_text() == "Cancel task"
    confirm(page)

    until(lambda: store.get(task).status is Status.CANCELLED, what="cancelled")
    row(page, task).wait_for(state="detached")


def test_terminate_with_a_reason_and_follow_a_log(
    store: Store, login: Login, screen: dict[str, Any]
) -> None:
    script = "for i in 1 2 3; do echo line-$i; sleep 0.3; done; sleep 120"
    task = submit(store, "chatty", ["sh", "-c", script])
    until(lambda: task in running_ids(store), what="started")
    page = login(screen=screen)

    row_action(page, task, "view", "#running")
    page.wait_for_selector("#task-log:has-text('line-3')")
    page.locator("#task-panel [data-action=terminate]").click()
    page.fill(".modal input[name=reason]", "seen enough")
    # A live update redraws the page while the dialog is open: the typed reason stays.
    other = submit(store, "meanwhile", hold=True)
    page.wait_for_selector(f'[data-task-id="{other}"]', state="attached")
    confirm(page)

    until(lambda: store.get(task).status is Status.FAILED, what="terminated")
    assert store.get(task).failure_reason == "terminated: seen enough"
    row(page, task, "#running").wait_for(state="detached")


def test_restart_an_ended_task_from_its_view(store: Store, login: Login) -> None:
    task = submit(store, "quick", ["echo", "done"])
    until(lambda: store.get(task).status is Status.SUCCEEDED, what="finished")
    page = login()

    page.click("[data-view=history]")
    page.locator(f'.history [data-task-id="{task}"] button.link').click()
    page.wait_for_selector("#task-panel dd:has-text('succeeded')")
    page.locator("#task-panel [data-action=restart]").click()
    confirm(page)

    until(lambda: len(store.get(task).attempts) == 2, what="a second attempt")
    page.wait_for_selector("#task-panel .attempts tbody tr:nth-child(2)")


def test_bulk_cancel_by_filter(store: Store, login: Login) -> None:
    fill_to_capacity(store, 0)
    batch = [submit(store, f"batch job {i}") for i in range(4)]
    other = submit(store, "keep me")
    page = login()

    page.fill(".filters input[name=q]", "batch")
    until(lambda: queue_ids(page) == batch, what="the filtered line")
    page.click("[data-action=select-all]")
    page.wait_for_selector(".selected-count:has-text('all 4 matching tasks')")
    page.click("[data-action=bulk-cancel]")
    confirm(page)

    until(lambda: {store.get(t).status for t in batch} == {Status.CANCELLED}, what="cancelled")
    assert store.get(other).status is Status.QUEUED
    cancelled = [e for e in store.events(0) if e.kind == "cancelled" and e.task_id in batch]
    assert len(cancelled) == 4  # one event per task


def test_shift_click_selects_a_range_for_a_bulk_priority(store: Store, login: Login) -> None:
    tasks = fill_to_capacity(store, 4)
    page = login()
    until(lambda: queue_ids(page) == tasks, what="the line")

    row(page, tasks[1]).locator(".pick").click()
    row(page, tasks[3]).locator(".pick").click(modifiers=["Shift"])
    page.wait_for_selector(".selected-count:has-text('3 tasks')")
    page.click("[data-action=bulk-priority]")
    page.select_option(".modal select[name=choice]", "urgent")
    confirm(page, reason="hotfix")

    until(lambda: store.get(tasks[3]).priority.label == "urgent", what="priority set")
    assert [store.get(t).priority.label for t in tasks] == ["normal", "urgent", "urgent", "urgent"]


def test_emergency_stop_pauses_and_terminates_every_run(store: Store, login: Login) -> None:
    fill_to_capacity(store, 1)
    page = login()

    page.click("[data-action=emergency-stop]")
    confirm(page)

    until(lambda: not running_ids(store), what="every run ended")
    assert store.settings()["paused"]
    page.wait_for_selector(".badge-paused:has-text('PAUSED')")
    assert store.status().queued  # paused: the queued task did not start
    page.click("[data-action=resume]")
    until(lambda: not store.settings()["paused"], what="resumed")


def test_a_title_is_text_never_markup(store: Store, login: Login, screen: dict[str, Any]) -> None:
    fill_to_capacity(store, 0)
    title = "<img src=x onerror=alert(1)><script>alert(2)</script>"
    task = submit(store, title)
    page = login(screen=screen)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))

    assert row(page, task).locator(".title").inner_text() == title
    assert page.locator("#queue img, #queue script").count() == 0
    row_action(page, task, "view")
    page.wait_for_selector(f"#task-title:text-is('{title}')")
    assert page.locator("#task-panel img").count() == 0
    assert dialogs == []


def test_a_viewer_sees_no_controls(
    store: Store, login: Login, served: Serve, screen: dict[str, Any]
) -> None:
    (task,) = fill_to_capacity(store, 1)
    page = login(served.viewer, screen=screen)

    if is_phone(page):  # a phone: the row's sheet offers View only
        row(page, task).locator("[data-action=more]").tap()
        names = page.locator("#task-sheet .sheet-actions [data-action]")
        assert names.evaluate_all("bs => bs.map(b => b.dataset.action)") == ["view"]
        page.locator("#task-sheet [data-action=close-sheet]").tap()
    else:
        row(page, task).hover()
        row(page, task).locator("[data-action=view]").wait_for()
    for where in ("#queue", "#running", ".capacity"):
        actions = page.locator(f"{where} [data-action]:not([data-action=view], [data-action=more])")
        assert actions.count() == 0, where
    assert page.locator("#queue input[type=checkbox], [data-view=submit]").count() == 0
    assert page.locator("#queue [draggable=true]").count() == 0
    # The server refuses anyway, whatever a page sends.
    answer = page.request.post(
        f"{served.url}/api/tasks/{task}/cancel",
        headers={"Authorization": f"Bearer {served.viewer}"},
    )
    assert answer.status == 403
    assert store.get(task).status is Status.QUEUED


def test_narrow_window_still_shows_the_line(store: Store, login: Login) -> None:
    waiting = fill_to_capacity(store, 2)
    page = login(width=420)
    until(lambda: queue_ids(page) == waiting, what="the line")
    assert page.locator("#queue").bounding_box()["width"] <= 420
    page.keyboard.press("Tab")  # focus reaches the page's controls by keyboard


def test_view_brings_the_task_into_sight_when_it_opens_below_the_line(
    store: Store, login: Login
) -> None:
    # A window too narrow for the task beside the line, too wide for a phone's overlay.
    fill_to_capacity(store, 4)
    page = login(width=900)
    run = sorted(running_ids(store))[0]
    page.set_viewport_size({"width": 900, "height": 500})

    row(page, run, "#running").locator("[data-action=view]").click()
    title = page.locator("#task-title")
    title.wait_for()
    until(
        lambda: 0 <= title.bounding_box()["y"] <= 500 - title.bounding_box()["height"],
        what="the task's title in sight",
    )


def test_a_dropped_stream_catches_up_on_what_changed_meanwhile(
    store: Store, login: Login, served: Serve
) -> None:
    (task,) = fill_to_capacity(store, 1)
    page = login()
    until(lambda: queue_ids(page) == [task], what="the line")

    served.stop()
    page.wait_for_selector("#connection:has-text('reconnecting')")
    # Changes made while the page cannot hear: they are in the store's event log.
    store.cancel(task)
    added = submit(store, "added while away")
    served.start()

    page.wait_for_selector("#connection:has-text('live')", timeout=30_000)
    until(lambda: queue_ids(page) == [added], what="the line caught up")
    page.click("[data-view=events]")
    page.wait_for_selector("#events li:has-text('added while away')")
    page.wait_for_selector("#events li:has-text('cancelled')")


def test_submit_a_raw_command_from_the_form(store: Store, login: Login) -> None:
    page = login()

    page.click("[data-view=submit]")
    page.check("input[name=kind][value=command]")
    page.fill("textarea[name=command]", "echo\nfrom the form")
    page.fill("input[name=title]", "typed in a browser")
    page.select_option("select[name=priority]", "high")
    page.click("[data-action=submit]")

    task = until(
        lambda: next((t for t in store.list_tasks() if t.title == "typed in a browser"), None),
        what="the task submitted",
    )
    assert list(task.command) == ["echo", "from the form"]
    assert task.priority.label == "high"


def test_dead_letters_are_found_and_redriven(store: Store, login: Login) -> None:
    failed = submit(store, "broken build", ["sh", "-c", "exit 4"])
    fine = submit(store, "fine build", ["true"])
    until(lambda: store.get(failed).status is Status.FAILED, what="failed")
    until(lambda: store.get(fine).status is Status.SUCCEEDED, what="succeeded")
    page = login()

    page.click("[data-view=history]")
    page.select_option("select[name=status]", "failed")
    page.fill(".filters input[name=q]", "build")
    page.locator(f'.history [data-task-id="{fine}"]').wait_for(state="detached")
    page.wait_for_selector(f'.history [data-task-id="{failed}"]')
    page.click("[data-action=redrive]")
    confirm(page)

    until(lambda: len(store.get(failed).attempts) == 2, what="redriven: a second attempt")
    assert len(store.get(fine).attempts) == 1


def test_task_page_shows_each_attempts_cost_and_tokens(store: Store, login: Login) -> None:
    # Given a run that reported what it spent and its session (an external runner's,
    # finished with the usage a node reads from an agent's output),
    task = store.submit({"kind": "external", "title": "spent", "agent": "claude"}).id
    claims = store.claim("external:runner", kinds=frozenset({"external"})).claims
    (claim,) = [c for c in claims if c.task.id == task]
    store.finish(
        claim.attempt.id, claim.attempt.token, 0, None,
        usage=Usage(0.1234, 12345, 678), session_id="sess-b",
    )  # fmt: skip
    page = login()
    # When its page is opened,
    page.click("[data-view=history]")
    page.locator(f'.history [data-task-id="{task}"] button.link').click()
    # Then the attempt shows its cost and tokens.
    cell = page.wait_for_selector("#task-panel .attempts td.spent")
    assert cell.inner_text() == "$0.12 · 12,345 in · 678 out"
    assert cell.get_attribute("title") == "session sess-b"
