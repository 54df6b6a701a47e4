"""The stalled badge on the dashboard (issue 15 §5): a running task whose run went quiet
shows STALLED in the running list and on its task page, live, and loses it once the run
prints again."""

from __future__ import annotations

import pytest

from slotline.store import Store

from .conftest import Login, until

pytestmark = pytest.mark.xdist_group("browser")


def test_a_stalled_run_shows_its_badge_in_the_list_and_on_its_page(
    store: Store, login: Login
) -> None:
    task = store.submit({"command": ["sleep", "120"], "title": "quiet agent"}).id
    until(lambda: store.get(task).current_attempt and store.get(task).attempts, what="started")
    attempt = store.get(task).current_attempt
    assert attempt is not None
    page = login()
    running = page.locator(f'#running [data-task-id="{task}"]')
    running.wait_for()
    assert running.locator(".badge-stalled").count() == 0

    # When the node marks its run stalled (as its stall watch does), the badge appears live
    store.mark_stalled(task, attempt, "printed nothing for 600s")
    running.locator(".badge-stalled").wait_for()
    assert running.locator(".badge-stalled").inner_text() == "STALLED"
    running.locator("[data-action=view]").click()
    page.wait_for_selector("#task-title .badge-stalled")
    page.wait_for_selector("#task-panel [data-field=stalled_at] dt:has-text('Stalled since')")

    # and goes once the run prints again.
    store.clear_stalled(task, attempt)
    running.locator(".badge-stalled").wait_for(state="detached")
    page.wait_for_selector("#task-title .badge-stalled", state="detached")


def test_a_run_that_needs_input_shows_its_badge_and_why(store: Store, login: Login) -> None:
    task = store.submit({"command": ["sleep", "120"], "title": "asking agent"}).id
    until(lambda: store.get(task).current_attempt and store.get(task).attempts, what="started")
    attempt = store.get(task).current_attempt
    assert attempt is not None
    page = login()
    running = page.locator(f'#running [data-task-id="{task}"]')
    running.wait_for()
    assert running.locator(".badge-needs").count() == 0

    # Marked by the node's watch (here, as it does), with its slot given back:
    store.mark_needs_input(task, attempt, "its terminal printed nothing for 30s", release=True)
    badge = running.locator(".badge-needs")
    badge.wait_for()
    assert badge.inner_text() == "NEEDS INPUT"
    assert "its slot given back meanwhile" in (badge.get_attribute("title") or "")
    running.locator("[data-action=view]").click()
    page.wait_for_selector("#task-title .badge-needs")
    page.wait_for_selector(
        "#task-panel [data-field=needs_input_at] dt:has-text('Needs input since')"
    )
    page.wait_for_selector("#task-panel :text('gave its slot back')")

    # and it goes once its terminal prints again.
    store.clear_needs_input(task, attempt)
    badge.wait_for(state="detached")
    page.wait_for_selector("#task-title .badge-needs", state="detached")
