"""The per-key limits, rate limits and budgets slotline.yaml declares, owned by the file.

Each rule has an origin: `config` for one the file declares, `api` for one set at run
time (`slotline limits --set`, HTTP, Python). At `slotline serve` the file's rules are
written as `config` and every `config` rule it no longer declares goes; `api` rules stay.
A rule set at run time in place of a declared one becomes `api` (it stays when the file
drops it); the file declaring it again takes it back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from slotline.limits import Limit
from slotline.pacing.budgets import Budget
from slotline.pacing.rates import RateLimit
from slotline.store import budgets, rates
from slotline.store.core import StoreCore
from slotline.store.events import emit
from slotline.store.queries import Tx
from slotline.store.settings import write_limit

CONFIG = "config"


class DeclaredVerbs(StoreCore):
    """The verb that makes the store's declared limits, rates and budgets what the file
    says."""

    def sync_declared(
        self,
        declared_rates: Iterable[RateLimit],
        declared_budgets: Iterable[Budget],
        declared_limits: Iterable[Limit],
    ) -> None:
        """Make the `config` rate limits, budgets and per-key limits exactly the declared
        ones (checked rules, as `check_rate`, `check_budget` and `check_limit` make them):
        write each that is new or changed, remove each `config` one not declared, in one
        transaction. An event (`rate`, `budget`, `limit`) tells each change, none when
        nothing changed."""
        with self._write() as tx:
            now = tx.now()
            _sync_limits(tx, [replace(lim, origin=CONFIG) for lim in declared_limits], now)
            _sync_rates(tx, [replace(r, origin=CONFIG) for r in declared_rates], now)
            _sync_budgets(tx, [replace(b, origin=CONFIG) for b in declared_budgets], now)
            budgets.sync_reached(tx, budgets.load_book(tx, budgets.rules(tx), now), now)


def _sync_limits(tx: Tx, declared: list[Limit], now: float) -> None:
    wanted = {(lim.key, lim.value or ""): lim for lim in declared}
    for row in tx.rows("limits_all"):
        pair = (row["key"], row["value"])
        stored = (row["origin"], int(row["max_running"]))
        rule = wanted.get(pair)
        if rule is None and row["origin"] == CONFIG:
            write_limit(tx, None, row["key"], row["value"])
            emit(tx, "limit", None, now, key=row["key"], value=row["value"] or None, max=None)
        if rule is not None and stored == (CONFIG, rule.max):
            del wanted[pair]
    for rule in wanted.values():
        write_limit(tx, rule, rule.key, rule.value)
        emit(tx, "limit", None, now, key=rule.key, value=rule.value, max=rule.max)


def _sync_rates(tx: Tx, declared: list[RateLimit], now: float) -> None:
    def ident(rule: RateLimit) -> tuple[str, str]:
        return rule.key, rule.value or ""

    wanted = {ident(rule): rule for rule in declared}
    for row in tx.rows("rate_limits_all"):
        pair = (row["key"], row["value"])
        if row["origin"] == CONFIG and pair not in wanted:
            tx.run("rate_limit_delete", key=row["key"], value=row["value"])
            rates.forget_unrated(tx, row["key"])
            emit(tx, "rate", None, now, key=row["key"], value=row["value"] or None, rate=None)
    stored = {
        (r["key"], r["value"]): (r["origin"], int(r["max_starts"]), float(r["period"]))
        for r in tx.rows("rate_limits_all")
    }
    for pair, rule in wanted.items():
        if stored.get(pair) == (CONFIG, rule.max_starts, rule.period):
            continue
        rates.write_rule(tx, rule)
        emit(tx, "rate", None, now, key=rule.key, value=rule.value, rate=rule.rate)


def _sync_budgets(tx: Tx, declared: list[Budget], now: float) -> None:
    def ident(rule: Budget) -> tuple[str, str, str, float]:
        return rule.key, rule.value or "", rule.unit, rule.period

    wanted = {ident(rule): rule for rule in declared}
    stored = {ident(rule): rule for rule in budgets.rules(tx)}
    for one, rule in stored.items():
        if rule.origin == CONFIG and one not in wanted:
            key, value, unit, period = one
            tx.run("budget_delete", key=key, value=value, unit=unit, period=period)
            emit(
                tx, "budget", None, now, key=key, value=value or None, unit=unit,
                period=period, budget=None,
            )  # fmt: skip
    for one, rule in wanted.items():
        old = stored.get(one)
        if old is not None and old.origin == CONFIG and old.amount == rule.amount:
            continue
        budgets.write_rule(tx, rule)
        emit(
            tx, "budget", None, now, key=rule.key, value=rule.value, unit=rule.unit,
            period=rule.period, budget=rule.budget,
        )  # fmt: skip
