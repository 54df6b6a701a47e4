"""`slotline limits --set` for the pacing of starts: rates (`rate:agent[claude]=20/1m`),
budgets (`budget:agent[claude]=50usd/1d`), fairness (`fairness=user`,
`fairness[alice]=2`) and provider back-off (`backoff[claude]={"exit_codes": [75]}`), and
how `limits` and `status` show them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from slotline.clock import utcnow
from slotline.errors import InvalidInput
from slotline.limits import GLOBAL
from slotline.pacing.backoff import BackoffRule
from slotline.pacing.budgets import format_amount, parse_budget
from slotline.pacing.rates import check_rate_key, parse_period, parse_rate
from slotline.scheduler.fairness import check_fairness

if TYPE_CHECKING:
    from rich.console import RenderableType

    from slotline.client.backend import Backend
    from slotline.store import QueueStatus, Settings


@dataclass(frozen=True, slots=True)
class RateAssignment:
    key: str
    value: str | None
    rate: tuple[int, float] | None

    def apply(self, store: Backend) -> None:
        if self.rate is None:
            store.set_rate(self.key, self.value, None)
        else:
            store.set_rate(self.key, self.value, *self.rate)


@dataclass(frozen=True, slots=True)
class BudgetAssignment:
    key: str
    value: str | None
    budget: tuple[float, str, float] | None  # amount, unit, period; None: remove
    window: float | None = None  # the window removed (`none/1h`); None: every one

    def apply(self, store: Backend) -> None:
        if self.budget is None:
            store.set_budget(self.key, self.value, None, self.window, unit=None)
        else:
            amount, unit, period = self.budget
            store.set_budget(self.key, self.value, amount, period, unit)


@dataclass(frozen=True, slots=True)
class FairnessAssignment:
    key: str | None  # None: turn off (or, with `value`, set a weight)
    value: str | None = None
    weight: float | None = None

    def apply(self, store: Backend) -> None:
        if self.value is None:
            store.set_fairness(self.key)
            return
        current = store.settings()["fairness"]
        if not current:
            raise click.UsageError(
                f"fairness[{self.value}]: turn fairness on first (--set fairness=user)"
            )
        weights = dict(current.get("weights") or {})
        if self.weight is None:
            weights.pop(self.value, None)
        else:
            weights[self.value] = self.weight
        store.set_fairness(current["key"], weights)


@dataclass(frozen=True, slots=True)
class BackoffAssignment:
    agent: str
    rule: dict[str, Any] | None

    def apply(self, store: Backend) -> None:
        store.set_backoff(self.agent, self.rule)


Pacing = RateAssignment | BudgetAssignment | FairnessAssignment | BackoffAssignment


def parse_pacing(text: str) -> Pacing | None:
    """A `--set` of a rate, the fairness or a back-off rule; None for any other key.

    Raises:
        click.BadParameter: a bad rate, key, weight or rule (checked as the store would).
    """
    text = text.strip()
    try:
        if text.startswith("backoff["):
            return _backoff(text)
        name, _, given = text.partition("=")
        key, _, bracket = name.strip().partition("[")
        value = bracket.removesuffix("]") if bracket else None
        given = given.strip()
        if key.startswith("rate:"):
            return _rate(text, key.removeprefix("rate:"), value, given)
        if key.startswith("budget:"):
            return _budget(key.removeprefix("budget:"), value, given)
        if key == "fairness":
            return _fairness(value, given)
    except InvalidInput as exc:
        raise click.BadParameter(f"{text!r}: {exc}", param_hint="--set") from None
    return None


def _rate(text: str, key: str, value: str | None, given: str) -> RateAssignment:
    check_rate_key(key)
    if value is not None and not value.strip():
        raise InvalidInput("empty value in brackets")
    if key == GLOBAL and value is not None:
        raise InvalidInput("the global rate takes no [VALUE]")
    if key == "workspace" and value is not None:
        value = str(Path(value).expanduser().resolve())
    if given.lower() == "none":
        return RateAssignment(key, value, None)
    return RateAssignment(key, value, parse_rate(given))


def _budget(key: str, value: str | None, given: str) -> BudgetAssignment:
    check_rate_key(key)
    if value is not None and not value.strip():
        raise InvalidInput("empty value in brackets")
    if key == GLOBAL and value is not None:
        raise InvalidInput("the global budget takes no [VALUE]")
    if key in ("workspace", "repo") and value is not None:
        value = str(Path(value).expanduser().resolve())
    amount, _, window = given.partition("/")
    if amount.strip().lower() == "none":  # none: every window; none/1h: that one
        return BudgetAssignment(key, value, None, parse_period(window.strip()) if window else None)
    return BudgetAssignment(key, value, parse_budget(given))


def _fairness(value: str | None, given: str) -> FairnessAssignment:
    if value is None:
        if given.lower() == "none":
            return FairnessAssignment(None)
        return FairnessAssignment(check_fairness(given).key)
    if given.lower() == "none":
        return FairnessAssignment(None, value, None)
    weight = check_fairness("user", {value: given}).weights[value]
    return FairnessAssignment(None, value, weight)


def _backoff(text: str) -> BackoffAssignment:
    agent, sep, given = text.removeprefix("backoff[").partition("]=")
    if not sep or not agent:
        raise InvalidInput("use backoff[AGENT]=JSON or backoff[AGENT]=none")
    if given.strip().lower() == "none":
        return BackoffAssignment(agent, None)
    try:
        rule = json.loads(given)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"the rule is not JSON: {exc}") from None
    if not isinstance(rule, dict):
        raise InvalidInput('the rule is a JSON object: {"exit_codes": [75]}')
    return BackoffAssignment(agent, BackoffRule.from_dict(rule).to_dict())


# -- showing them ------------------------------------------------------------------------


def _when(at: float | None, now: float) -> str:
    if at is None:
        return "now"
    left = max(0.0, at - now)
    if left < 120:
        return f"in {left:.0f}s"
    return f"in {left / 60:.0f}m" if left < 7200 else f"in {left / 3600:.1f}h"


_FROM_FILE = "; from slotline.yaml"


def limits_lines(settings: Settings) -> list[str]:
    """The rates, fairness and back-off rules, one line each, for `slotline limits`."""
    lines = []
    for rate in settings.rates:
        who = "every task" if rate.key == GLOBAL else f"each {rate.key}"
        if rate.value is not None:
            who = f"{rate.key} {rate.value}"
        lines.append(
            f"rate:{_name(rate.key, rate.value)} = {rate.rate}  (starts of {who}"
            f"{_FROM_FILE if rate.origin == 'config' else ''})"
        )
    for budget in settings.budgets:
        who = "all runs" if budget.key == GLOBAL else f"the runs of each {budget.key}"
        if budget.value is not None:
            who = f"the runs of {budget.key} {budget.value}"
        unit = "dollars" if budget.unit == "usd" else "tokens in and out"
        lines.append(
            f"budget:{_name(budget.key, budget.value)} = {budget.budget}  "
            f"({unit} spent by {who} finished in the window"
            f"{_FROM_FILE if budget.origin == 'config' else ''})"
        )
    fairness = settings.values.get("fairness")  # a server of an older version has none
    if fairness:
        weights = ", ".join(f"{v}={w:g}" for v, w in sorted(fairness["weights"].items()))
        extra = f" (weights: {weights})" if weights else ""
        lines.append(f"fairness: turns between values of {fairness['key']}{extra}")
    for agent, rule in sorted((settings.values.get("backoff") or {}).items()):
        what = [f"exit codes {rule['exit_codes']}"] if rule["exit_codes"] else []
        if rule["pattern"]:
            what.append(f"output matching {rule['pattern']!r}")
        lines.append(
            f"backoff[{agent}]: on {' or '.join(what)}, hold {rule['delay']:g}s "
            f"(up to {rule['max_delay']:g}s), halve concurrency"
        )
    return lines


def _name(key: str, value: str | None) -> str:
    return key if value is None else f"{key}[{value}]"


def status_lines(status: QueueStatus, now: float | None = None) -> list[RenderableType]:
    """Rates in force and agent types backing off, for `slotline status`."""
    from rich.text import Text

    now = utcnow() if now is None else now
    lines: list[RenderableType] = []
    for rate in status.rates:
        name = _name(rate["key"], rate["value"])
        when = _when(rate["next_start_at"], now)
        style = "yellow" if rate["next_start_at"] is not None else "dim"
        lines.append(
            Text(f"rate {name} {rate['rate']}: {rate['used']} used · next start {when}", style)
        )
    for budget in status.budgets:
        name = _name(budget["key"], budget["value"])
        spent = format_amount(budget["spent"], budget["unit"])
        if budget["unit"] == "usd":
            spent = f"${budget['spent']:.2f}"
        if budget["until"] is None:
            lines.append(Text(f"budget {name} {budget['budget']}: {spent} spent", style="dim"))
        else:
            lines.append(
                Text(
                    f"BUDGET REACHED {name} {budget['budget']}: {spent} spent · "
                    f"starts again {_when(budget['until'], now)}",
                    style="bold yellow",
                )
            )
    for throttle in status.backoff:
        hold = f"held {_when(throttle['not_before'], now)}" if throttle["holding"] else "not held"
        if throttle.get("reset_at") is not None:  # the provider said when its limit resets
            hold = f"its limit resets {_when(throttle['reset_at'], now)}, then one run probes"
        lines.append(
            Text(
                f"BACKING OFF {throttle['agent']}: at most {throttle['cap']} running, {hold} "
                f"(step {throttle['level']}; {throttle['reason'] or 'provider refused'})",
                style="bold yellow",
            )
        )
    return lines
