"""Budgets in the store: the rules (table budgets, one per key, value, unit and window),
the spend they count (the usage of finished attempts, migration 0017), the budgets
reached (table budgets_reached) and the verb that changes the rules.

Exact across nodes: the claim reads the spend of each budgeted key's window under the
store's write lock (SQLite's `BEGIN IMMEDIATE`, PostgreSQL's advisory lock), and a
run's spend is written by the finish that commits its outcome under the same lock, so a
claim never starts a task whose budget a committed finish has reached.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from slotline.clock import iso
from slotline.errors import InvalidInput
from slotline.limits import GLOBAL, limit_key_value
from slotline.models import Status, Task, copy_task
from slotline.pacing.budgets import (
    UNITS,
    Budget,
    BudgetBook,
    Reached,
    Spend,
    check_budget,
    check_budget_value,
    check_period,
)
from slotline.pacing.rates import check_rate_key
from slotline.store.core import StoreCore
from slotline.store.events import emit
from slotline.store.queries import Tx


class _Spender(NamedTuple):
    """The keys of the task a spend row belongs to (what `limit_key_value` reads)."""

    agent: str | None
    workspace: str | None
    user: str | None
    repo: str | None
    labels: Mapping[str, str]

    def key_value(self, key: str) -> str | None:
        return limit_key_value(self, key)


def rules(tx: Tx) -> tuple[Budget, ...]:
    """Every budget in force."""
    rows = tx.rows("budgets_all")
    return tuple(
        Budget(
            r["key"], r["value"] or None, float(r["amount"]), r["unit"], float(r["period"]),
            r["origin"],
        )
        for r in rows
    )  # fmt: skip


def load_book(tx: Tx, budgets: Iterable[Budget], now: float) -> BudgetBook | None:
    """The budgets with the spend of every run that finished in their windows at `now`
    (None without budgets): one range of the finished attempts, as long as the longest
    period."""
    budgets = tuple(budgets)
    if not budgets:
        return None
    since = now - max(b.period for b in budgets)
    runs = []
    for row in tx.rows("budget_spend_since", since=since):
        labels = row["labels"]
        task = _Spender(
            row["agent"], row["workspace"], row["owner"], row["repo"],
            json.loads(labels) if labels != "{}" else {},
        )  # fmt: skip
        tokens = int(row["input_tokens"] or 0) + int(row["output_tokens"] or 0)
        runs.append((task, Spend(float(row["finished_at"]), float(row["cost_usd"] or 0), tokens)))
    return BudgetBook.of_runs(budgets, runs)


def sync_reached(tx: Tx, book: BudgetBook | None, now: float) -> list[float]:
    """Record which budgets are reached at `now`: `budget_reached` for each one newly
    reached, `budget_released` for each one free again (or removed). Returns when each
    reached one frees, for the claim to wake then (so the release is told on time)."""
    reached = {} if book is None else book.reached(now)
    rows = tx.rows("budgets_reached_all")
    stored = {
        Reached(r["key"], r["value"], r["unit"], float(r["period"])): float(r["until"])
        for r in rows
    }
    for one in stored:
        if one not in reached:
            tx.run("budget_reached_delete", **one._asdict())
            emit(
                tx, "budget_released", None, now, key=one.key, value=one.value or None,
                unit=one.unit, period=one.period,
            )  # fmt: skip
    for one, state in reached.items():
        until = float(state["until"])
        if stored.get(one) == until:
            continue
        tx.run("budget_reached_delete", **one._asdict())
        tx.run("budget_reached_insert", **one._asdict(), until=until)
        if one not in stored:
            emit(
                tx, "budget_reached", None, now, key=one.key, value=one.value or None,
                unit=one.unit, period=one.period, spent=state["spent"],
                budget=state["budget"], amount=state["amount"], until=until,
            )  # fmt: skip
    return [float(s["until"]) for s in reached.values()]


def annotate(book: BudgetBook | None, tasks: list[Task], now: float) -> list[Task]:
    """Queued tasks that a reached budget holds, with that as their `status_reason`
    (what `ls`, `show` and `status` say of them) and the moment every budget holding
    them has room again as their `budget_until`."""
    if not book or not any(t.status is Status.QUEUED for t in tasks):
        return tasks
    reached = book.reached(now)
    if not reached:
        return tasks
    return [_held(book, reached, t, now) if t.status is Status.QUEUED else t for t in tasks]


def _held(book: BudgetBook, reached: Mapping[Reached, Any], task: Task, now: float) -> Task:
    parts = []
    for key, value in book.counted(task):
        for rule in book.rules_for(key, value):
            state = reached.get(Reached(key, value, rule.unit, rule.period))
            if state is not None:
                name = key if key == GLOBAL else f"{key}[{value}]"
                parts.append(
                    f"budget {name} {rule.budget} reached ({_spent(state)} spent); "
                    f"may start at {iso(math.ceil(state['until']))}"
                )
    if not parts:
        return task
    return copy_task(task, status_reason="; ".join(parts), budget_until=book.held_until(task, now))


def _spent(state: Mapping[str, Any]) -> str:
    if state["unit"] == "usd":
        return f"${state['spent']:.2f}"
    return f"{int(state['spent'])} tokens"


def write_rule(tx: Tx, rule: Budget) -> None:
    """Store `rule`, in place of the budget of its key, value, unit and window."""
    where = {"key": rule.key, "value": rule.value or "", "unit": rule.unit, "period": rule.period}
    tx.run("budget_delete", **where)
    tx.run("budget_insert", **where, amount=rule.amount, origin=rule.origin)


class BudgetVerbs(StoreCore):
    """The verb that sets or removes a budget."""

    def set_budget(
        self,
        key: str,
        value: str | None,
        amount: float | None,
        period: float | str | None = None,
        unit: str | None = "usd",
    ) -> None:
        """At most `amount` spent (`unit`: "usd" dollars, or "tok" tokens in and out)
        by the runs that finished in the last `period` (seconds, or `1d`) of the tasks
        whose `key` (global, agent, workspace, user, repo, label:NAME) is `value` (each
        value apart if None). A budget is one window: setting `10usd/1h` replaces the
        `1h` dollar budget of that key and value and keeps its others (`100usd/1d`).

        `amount` None removes budgets: of `unit` (of every unit if None), of the window
        `period` (of every window if None).

        Raises:
            InvalidInput: see `check_budget`.
        """
        if amount is None:
            check_rate_key(key)
            value = check_budget_value(key, value)
            if unit is not None and unit not in UNITS:
                raise InvalidInput(f"unknown budget unit {unit!r}; use usd or tok")
            seconds = None if period is None else check_period(period)
            with self._write() as tx:
                now = tx.now()
                for each in UNITS if unit is None else (unit,):
                    if seconds is None:
                        tx.run("budget_delete_unit", key=key, value=value or "", unit=each)
                    else:
                        tx.run(
                            "budget_delete", key=key, value=value or "", unit=each,
                            period=seconds,
                        )  # fmt: skip
                emit(
                    tx, "budget", None, now, key=key, value=value, unit=unit, period=seconds,
                    budget=None,
                )  # fmt: skip
                sync_reached(tx, load_book(tx, rules(tx), now), now)
            return
        rule = check_budget(key, value, amount, period, unit or "usd")
        with self._write() as tx:
            now = tx.now()
            write_rule(tx, rule)
            emit(
                tx, "budget", None, now, key=key, value=rule.value, unit=rule.unit,
                period=rule.period, budget=rule.budget,
            )  # fmt: skip
            sync_reached(tx, load_book(tx, rules(tx), now), now)

    def budgets(self, now: float | None = None) -> list[dict[str, Any]]:
        """Each budget in force and, for each value it counted lately, what its window
        holds (`spent`) and when enough ages out if it is reached (`until`, else None)."""
        with self._transaction(write=False) as tx:
            now = tx.now() if now is None else now
            book = load_book(tx, rules(tx), now)
            return [] if book is None else book.state(now)
