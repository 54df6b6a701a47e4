"""The pacing verbs of the async Python API: limits, rates, budgets, fairness, back-off."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slotline.api import Queue


async def set_max_concurrent(queue: Queue, value: int) -> None:
    """Change the global limit at runtime."""
    await asyncio.to_thread(queue.store.set_setting, "max_concurrent", value)


async def set_limit(queue: Queue, key: str, value: str | None, max_running: int | None) -> None:
    """Cap running tasks per agent/workspace/user/label:NAME (None removes the cap)."""
    await asyncio.to_thread(queue.store.set_limit, key, value, max_running)


async def set_rate(
    queue: Queue,
    key: str,
    value: str | None,
    max_starts: int | None,
    period: float | str | None = None,
) -> None:
    """At most `max_starts` starts per `period` (seconds, or "30s", "1m", "2h", "1d")
    of the tasks whose `key` (global, agent, workspace, user, label:NAME) is `value`
    (each value apart if None); `max_starts` None removes the rate.

    Raises:
        InvalidInput: an unknown key, a count below 1, a period not more than 0.
    """
    await asyncio.to_thread(queue.store.set_rate, key, value, max_starts, period)


async def set_budget(
    queue: Queue,
    key: str,
    value: str | None,
    amount: float | None,
    period: float | str | None = None,
    unit: str | None = "usd",
) -> None:
    """At most `amount` spent (`unit` "usd": dollars; "tok": tokens in and out) by
    the runs that finished in the last `period` (seconds, or "1h", "1d") of the tasks
    whose `key` (global, agent, workspace, user, repo, label:NAME) is `value` (each
    value apart if None). Once reached, no new task of it starts until enough spend
    ages out. A budget is one window: a key may hold several of one unit (10 dollars an
    hour and 100 a day, both enforced); setting one replaces only the budget of that
    key, value, unit and `period`. `amount` None removes budgets: of `unit` (of every
    unit if None) and of the window `period` (of every window if None).

    Raises:
        InvalidInput: an unknown key or unit, an amount not more than 0 (or not a
            whole number of tokens), a period not more than 0.
    """
    await asyncio.to_thread(queue.store.set_budget, key, value, amount, period, unit)


async def set_fairness(
    queue: Queue, key: str | None, weights: Mapping[str, float] | None = None
) -> None:
    """Take turns between the values of `key` (user, workspace, agent, parent,
    label:NAME) within each priority level, a value's share its weight (1 if not
    named); None turns fairness off.

    Raises:
        InvalidInput: an unknown key or a weight not in (0, 1000].
    """
    await asyncio.to_thread(queue.store.set_fairness, key, weights)


async def set_backoff(queue: Queue, agent: str, rule: Mapping[str, Any] | None) -> None:
    """Back agent type `agent` off its provider when its runs fail with one of
    `rule["exit_codes"]` or output matching `rule["pattern"]` (see docs/config.md);
    None removes the rule and ends a back-off in force.

    Raises:
        InvalidInput: an unknown field, a bad regex, a number out of range.
    """
    await asyncio.to_thread(queue.store.set_backoff, agent, rule)
