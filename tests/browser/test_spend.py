"""The dashboard's Spend view (issue 15 §2): what runs cost, summed in total and per agent
type, user, workspace and day, as `GET /api/stats` sums it, and kept live as runs end."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from slotline.models import Usage
from slotline.store import Store

from .conftest import Login

pytestmark = pytest.mark.xdist_group("browser")

DAY = 86400.0


def spend_run(
    store: Store, agent: str, usage: Usage, *, workspace: str | None = None, at: float | None = None
) -> str:
    """A run of an external runner that ended (at `at`) reporting what it spent, as a node
    does when it reads an agent's output; returns the day (UTC) it is summed under."""
    spec: dict[str, Any] = {"kind": "external", "title": f"{agent} run", "agent": agent}
    if workspace is not None:
        spec["workspace"] = workspace
    task = store.submit(spec).id
    # A lease longer than the time gone back, so that the node never reaps the claim.
    lease = 3 * DAY if at is not None else 600.0
    claims = store.claim("external:runner", now=at, kinds=frozenset({"external"}), lease=lease)
    (claim,) = [c for c in claims.claims if c.task.id == task]
    store.finish(claim.attempt.id, claim.attempt.token, 0, None, now=at, usage=usage)
    ended = store.get(task).attempts[-1].finished_at
    assert ended is not None
    return datetime.fromtimestamp(ended, UTC).date().isoformat()


def cells(page: Any, table: str, key: str) -> list[str]:
    """The cells of the row `key` of the spend table `table`, its key first."""
    row = page.locator(f'#spend-{table} tbody tr[data-key="{key}"]')
    texts: list[str] = row.locator("th, td").all_inner_texts()
    return texts


def test_spend_view_sums_runs_per_agent_and_follows_runs_ending(store: Store, login: Login) -> None:
    # Given two runs that reported what they spent, days apart, one without its tokens,
    # one in a workspace whose name is markup,
    earlier = spend_run(store, "claude", Usage(0.1234, 12345, 678), at=time.time() - 2 * DAY)
    today = spend_run(store, "codex", Usage(1.5), workspace="/srv/<b>team</b>")
    page = login()

    # when the Spend tab is opened,
    page.click("[data-view=spend]")
    total = page.locator("#spend-total")
    total.wait_for()

    # then it shows the total, with the tokens known of the one run that reported them,
    assert total.locator("[data-field=runs]").inner_text() == "2"
    assert total.locator("[data-field=cost]").inner_text() == "$1.62"
    assert total.locator("[data-field=input_tokens]").inner_text() == "12,345"
    assert total.locator("[data-field=output_tokens]").inner_text() == "678"
    # a row per agent type with its dollar sum, unknown tokens as "-" (never 0),
    assert cells(page, "agent", "claude") == ["claude", "1", "$0.12", "12,345", "678"]
    assert cells(page, "agent", "codex") == ["codex", "1", "$1.50", "-", "-"]
    assert page.locator("#spend-agent caption").inner_text() == "Per agent type"
    assert page.locator("#spend-agent thead th[scope=col]").count() == 5
    # the days newest first, and a workspace's name as text, never markup.
    assert page.locator("#spend-day tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.key)"
    ) == [today, earlier]
    assert cells(page, "workspace", "/srv/<b>team</b>")[0] == "/srv/<b>team</b>"
    assert page.locator("#spend b").count() == 0

    # When another run ends while the view is open, the sums follow without a reload.
    spend_run(store, "claude", Usage(2.0, 1000, 22))
    page.wait_for_selector("#spend-total [data-field=cost]:text-is('$3.62')")
    assert total.locator("[data-field=runs]").inner_text() == "3"
    assert total.locator("[data-field=input_tokens]").inner_text() == "13,345"
    assert cells(page, "agent", "claude") == ["claude", "2", "$2.12", "13,345", "700"]


def test_a_budget_reached_is_shown_above_the_line_and_on_the_tasks_it_holds(
    store: Store, login: Login
) -> None:
    # Given a run of claude that spent $2, and a budget of $1 an hour for claude,
    spend_run(store, "claude", Usage(2.0))
    store.set_budget("agent", "claude", 1.0, "1h")
    # and a claude task in line behind it,
    held = store.submit({"kind": "external", "agent": "claude", "title": "held by <b>it</b>"})
    page = login()
    try:
        shown_and_gone(page, store, held.id)
    finally:
        store.set_budget("agent", "claude", None)


def shown_and_gone(page: Any, store: Store, held: str) -> None:
    # then the header names the budget, what was spent and when starts go on,
    hold = page.locator(".pacing li[data-hold=budget]")
    hold.wait_for()
    text = hold.inner_text()
    assert "BUDGET agent[claude]" in text
    # (earlier tests of this module spent on claude within the hour too)
    assert re.search(r"1usd/1h: \$[0-9.]+ spent; starts again at \S", text), text
    # and the task's row says why it waits, as text.
    why = page.locator(f'li[data-task-id="{held}"] .why')
    why.wait_for()
    assert why.inner_text().startswith("budget agent[claude] 1usd/1h reached")
    assert page.locator(f'li[data-task-id="{held}"] b').count() == 0

    # When the budget is removed, the header no longer shows it.
    store.set_budget("agent", "claude", None)
    hold.wait_for(state="detached")
