"""Rate limits in the store: the rules (table rate_limits), the starts they count (table
rate_starts), and the verb that changes them.

Exact across nodes: the claim reads each rated key's window and records the starts it
makes in the same transaction, under the store's write lock (SQLite's `BEGIN
IMMEDIATE`, PostgreSQL's advisory lock), so no two claims see the same window.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from slotline.bounds import normalize_workspace
from slotline.pacing.rates import (
    RateBook,
    RateLimit,
    check_rate,
    check_rate_key,
    windows,
)
from slotline.store.core import StoreCore
from slotline.store.events import emit
from slotline.store.queries import Tx


def load_book(tx: Tx, rules: Iterable[RateLimit], now: float) -> RateBook:
    """The rules with every start their windows hold at `now`: one index range per
    rated key, which holds only that window's starts (older ones are pruned)."""
    rules = tuple(rules)
    starts: dict[tuple[str, str], list[float]] = {}
    for key, period in windows(rules).items():
        for row in tx.rows("rate_starts_of_key", key=key, since=now - period):
            starts.setdefault((key, str(row["value"])), []).append(float(row["at"]))
    return RateBook(rules, starts)


def record_starts(tx: Tx, book: RateBook, tasks: Iterable[Any], now: float) -> None:
    """Count the starts made at `now` of `tasks`, and prune what left the windows."""
    rows = [
        {"key": key, "value": value, "at": now}
        for task in tasks
        for key, value in book.counted(task)
    ]
    if not rows:
        return
    tx.run_many("rate_start_insert", rows)
    for key, period in windows(book.rules).items():
        tx.run("rate_starts_prune", key=key, before=now - period)


def write_rule(tx: Tx, rule: RateLimit) -> None:
    """Store `rule`, in place of the rate of its key and value."""
    tx.run("rate_limit_delete", key=rule.key, value=rule.value or "")
    tx.run(
        "rate_limit_insert", key=rule.key, value=rule.value or "", max_starts=rule.max_starts,
        period=rule.period, origin=rule.origin,
    )  # fmt: skip


def forget_unrated(tx: Tx, key: str) -> None:
    """Drop the starts counted for `key` once no rate counts it any more."""
    if not any(r["key"] == key for r in tx.rows("rate_limits_all")):
        tx.run("rate_starts_forget_key", key=key)


class RateVerbs(StoreCore):
    """The verb that sets or removes a rate limit."""

    def set_rate(
        self, key: str, value: str | None, max_starts: int | None, period: float | str | None = None
    ) -> None:
        """At most `max_starts` starts per `period` (seconds, or `1m`) of the tasks whose
        `key` (global, agent, workspace, user, label:NAME) is `value` (each value apart if
        None); `max_starts` None removes the rule.

        Raises:
            InvalidInput: see `check_rate`.
        """
        if max_starts is None:
            check_rate_key(key)
            rule = None
            if key == "workspace" and value is not None:
                value = normalize_workspace(value)
        else:
            rule = check_rate(key, value, max_starts, period)
            value = rule.value
        with self._write() as tx:
            if rule is None:
                tx.run("rate_limit_delete", key=key, value=value or "")
                forget_unrated(tx, key)
            else:
                write_rule(tx, rule)
            emit(
                tx, "rate", None, tx.now(), key=key, value=value,
                rate=None if rule is None else rule.rate,
            )  # fmt: skip
