"""An agent refused its tools on the dashboard (issue 26): the run succeeded (its agent
exited 0) but its row in the history and its task page say REFUSED TOOLS, with why."""

from __future__ import annotations

import pytest

from slotline.store import Store

from .conftest import Login

pytestmark = pytest.mark.xdist_group("browser")


def test_a_run_refused_its_tools_shows_a_badge_in_the_history_and_on_its_page(
    store: Store, login: Login
) -> None:
    # Given a run whose agent was refused two tool uses (an external runner's, finished
    # with what a node reads from Claude Code's result), and one refused nothing
    refused = store.submit({"kind": "external", "title": "no edits", "agent": "claude"}).id
    plain = store.submit({"kind": "external", "title": "edits", "agent": "claude"}).id
    claims = store.claim("external:runner", kinds=frozenset({"external"})).claims
    for claim in claims:
        denied = ("Write", "Edit") if claim.task.id == refused else ()
        store.finish(claim.attempt.id, claim.attempt.token, 0, None, denied=denied)
    page = login()

    # When the history is opened
    page.click("[data-view=history]")

    # Then the refused run carries the badge, with why, and the other none
    badge = page.wait_for_selector(f'.history [data-task-id="{refused}"] .badge-refused')
    assert badge.inner_text() == "REFUSED TOOLS"
    assert (badge.get_attribute("title") or "").startswith("agent was refused 2 tool uses")
    page.wait_for_selector(f'.history [data-task-id="{plain}"]')
    assert page.locator(f'.history [data-task-id="{plain}"] .badge-refused').count() == 0
    # and so do its page and its attempt
    page.locator(f'.history [data-task-id="{refused}"] button.link').click()
    page.wait_for_selector("#task-title .badge-refused")
    cell = page.wait_for_selector("#task-panel .attempts .badge-refused")
    assert cell.inner_text() == "REFUSED 2 tool uses"
    assert cell.get_attribute("title") == "Write, Edit"
