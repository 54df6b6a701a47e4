"""Budgets in the store: the rules (table budgets), the spend they count (the usage of
finished attempts, migration 0017), the budgets reached (table budgets_reached) and the
verb that changes the rules.

Exact across nodes: the claim reads the spend of each budgeted key's window under the
store's write lock (SQLite's `BEGIN IMMEDIATE`, PostgreSQL's advisory lock), and a
run's spend is written by the finish that commits its outcome under the same lock, so a
claim never starts a task whose budget a committed finish has reached.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, NamedTuple

from slotline.bounds import normalize_workspace
from slotline.errors import InvalidInput
from slotline.limits import limit_key_value
from slotline.models import Status, Task, iso
from slotline.scheduler.budgets import UNITS, Budget, BudgetBook, Spend, check_amount
from slotline.scheduler.rates import GLOBAL, check_rate_key, parse_period
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
        Budget(r["key"], r["value"] or None, float(r["amount"]), r["unit"], float(r["period"]))
        for r in rows
    )


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
    stored = {(r["key"], r["value"], r["unit"]): float(r["until"]) for r in rows}
    for pair in stored:
        if pair not in reached:
            key, value, unit = pair
            tx.run("budget_reached_delete", key=key, value=value, unit=unit)
            emit(tx, "budget_released", None, now, key=key, value=value or None, unit=unit)
    for pair, state in reached.items():
        key, value, unit = pair
        until = float(state["until"])
        if stored.get(pair) == until:
            continue
        tx.run("budget_reached_delete", key=key, value=value, unit=unit)
        tx.run("budget_reached_insert", key=key, value=value, unit=unit, until=until)
        if pair not in stored:
            emit(
                tx, "budget_reached", None, now, key=key, value=value or None, unit=unit,
                spent=state["spent"], budget=state["budget"], amount=state["amount"],
                until=until,
            )  # fmt: skip
    return [float(s["until"]) for s in reached.values()]


def annotate(book: BudgetBook | None, tasks: list[Task], now: float) -> list[Task]:
    """Queued tasks that a reached budget holds, with that as their `status_reason`
    (what `ls`, `show` and `status` say of them)."""
    if not book or not any(t.status is Status.QUEUED for t in tasks):
        return tasks
    reached = book.reached(now)
    if not reached:
        return tasks
    return [_held(book, reached, t, now) if t.status is Status.QUEUED else t for t in tasks]


def _held(
    book: BudgetBook, reached: Mapping[tuple[str, str, str], Any], task: Task, now: float
) -> Task:
    parts = []
    for key, value in book.counted(task):
        for rule in book.rules_for(key, value):
            state = reached.get((key, value, rule.unit))
            if state is not None:
                name = key if key == GLOBAL else f"{key}[{value}]"
                parts.append(
                    f"budget {name} {rule.budget} reached ({_spent(state)} spent); "
                    f"may start at {iso(state['until'])}"
                )
    return replace(task, status_reason="; ".join(parts)) if parts else task


def _spent(state: Mapping[str, Any]) -> str:
    if state["unit"] == "usd":
        return f"${state['spent']:.2f}"
    return f"{int(state['spent'])} tokens"


def check_budget(key: str, value: str | None, amount: object, period: object, unit: str) -> Budget:
    """A rule as every surface checks it.

    Raises:
        InvalidInput: an unknown key or unit, an empty value, an amount not more than 0
            (or not whole, of tokens) or a period not more than 0.
    """
    check_rate_key(key)
    value = _check_value(key, value)
    if isinstance(period, int | float | str):
        seconds = parse_period(period)
    else:
        raise InvalidInput(f"a budget's period must be like 1h or 1d, not {period!r}")
    return Budget(key, value, check_amount(amount, unit), unit, seconds)


def _check_value(key: str, value: str | None) -> str | None:
    if value is None:
        return None
    if not value or "\x00" in value:
        raise InvalidInput("a budget's value must not be empty nor hold NUL bytes")
    if key == GLOBAL:
        raise InvalidInput("the global budget takes no value")
    if key in ("workspace", "repo"):
        return normalize_workspace(value)  # the spelling tasks store
    return value


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
        value apart if None). `amount` None removes the budget of `unit` (of every unit
        if `unit` is None).

        Raises:
            InvalidInput: see `check_budget`.
        """
        if amount is None:
            check_rate_key(key)
            value = _check_value(key, value)
            if unit is not None and unit not in UNITS:
                raise InvalidInput(f"unknown budget unit {unit!r}; use usd or tok")
            rule = None
        else:
            rule = check_budget(key, value, amount, period, unit or "usd")
            value = rule.value
        with self._write() as tx:
            now = tx.now()
            for each in UNITS if unit is None else (unit,):
                tx.run("budget_delete", key=key, value=value or "", unit=each)
            if rule is not None:
                tx.run(
                    "budget_insert", key=key, value=value or "", unit=rule.unit,
                    amount=rule.amount, period=rule.period,
                )  # fmt: skip
            emit(
                tx, "budget", None, now, key=key, value=value, unit=unit,
                budget=None if rule is None else rule.budget,
            )  # fmt: skip
            sync_reached(tx, load_book(tx, rules(tx), now), now)

    def budgets(self, now: float | None = None) -> list[dict[str, Any]]:
        """Each budget in force and, for each value it counted lately, what its window
        holds (`spent`) and when enough ages out if it is reached (`until`, else None)."""
        with self._transaction(write=False) as tx:
            now = tx.now() if now is None else now
            book = load_book(tx, rules(tx), now)
            return [] if book is None else book.state(now)
