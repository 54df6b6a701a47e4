"""What a whole slotline.yaml declares of per-key limits, rates and budgets (in its own
lists and as agent types' own), checked for a rule given two values, and as the store
takes them (`Store.sync_declared`)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from slotline.bounds import normalize_workspace
from slotline.errors import InvalidInput
from slotline.limits import check_limit
from slotline.pacing import rates
from slotline.pacing.budgets import check_budget, parse_budget
from slotline.pacing.rates import check_rate, parse_rate

if TYPE_CHECKING:
    from slotline.limits import Limit
    from slotline.pacing.budgets import Budget
    from slotline.pacing.rates import RateLimit


class Declaring(Protocol):
    """A configuration's rules (`config.file.Config` is one): its lists of limits, rates
    and budgets, and its agent types, each with its own `max_concurrent`, `rate`, `budget`."""

    @property
    def limits(self) -> Sequence[Any]: ...

    @property
    def rates(self) -> Sequence[Any]: ...

    @property
    def budgets(self) -> Sequence[Any]: ...

    @property
    def agents(self) -> Mapping[str, Any]: ...


def _declared(config: Declaring, what: str) -> list[tuple[str, str, str | None, str]]:
    """What the file declares of `what` (`limit`, `rate`, `budget`), in its own list and as
    agent types' own, each as (where in the file, key, value, as written)."""
    lists: dict[str, Sequence[Any]] = {
        "limit": config.limits,
        "rate": config.rates,
        "budget": config.budgets,
    }
    listed = lists[what]
    found = [
        (
            f"{what}s[{i}]",
            rule.key,
            rule.value,
            str(getattr(rule, "max" if what == "limit" else what)),
        )
        for i, rule in enumerate(listed)
    ]
    field = "max_concurrent" if what == "limit" else what
    for name, agent in config.agents.items():
        given = getattr(agent, field)
        if given is None:
            continue
        if isinstance(given, list):  # several budget windows
            found += [
                (f"agents.{name}.{field}[{i}]", "agent", name, g) for i, g in enumerate(given)
            ]
        else:
            found.append((f"agents.{name}.{field}", "agent", name, str(given)))
    return found


def declared_rates(config: Declaring) -> list[RateLimit]:
    """The rate limits the file declares: `rates:` and each agent type's `rate:`."""
    return [check_rate(k, v, *parse_rate(rate)) for _, k, v, rate in _declared(config, "rate")]


def declared_limits(config: Declaring) -> list[Limit]:
    """The per-key limits the file declares: `limits:` and each agent type's
    `max_concurrent`."""
    return [check_limit(k, v, int(most)) for _, k, v, most in _declared(config, "limit")]


def declared_budgets(config: Declaring) -> list[Budget]:
    """The budgets the file declares: `budgets:` and each agent type's `budget:` (one,
    or a list of several windows and units)."""
    declared = []
    for _, key, value, budget in _declared(config, "budget"):
        amount, unit, period = parse_budget(budget)
        declared.append(check_budget(key, value, amount, period, unit))
    return declared


def check_declared_once(config: Declaring) -> None:
    """Refuse a per-key limit, rate or budget window that the file gives two values (in
    its own list, or there and as an agent type's own): one of the two would be left
    unused without a word. The same value twice is no conflict.

    Raises:
        ValueError: what disagrees, and where (the loader adds the file).
    """
    for what in ("limit", "rate", "budget"):
        first: dict[tuple[str, ...], tuple[str, str]] = {}
        for where, key, value, given in _declared(config, what):
            ident: tuple[str, ...] = (key, _spelled(key, value))
            if what == "budget":
                ident += _window(given)
            earlier = first.setdefault(ident, (where, given))
            if _amount(what, earlier[1]) != _amount(what, given):
                of = ident[1] or "each value"
                raise ValueError(
                    f"{earlier[0]} and {where} give the {what} of {key}={of}{_window_text(ident)}"
                    f" two values ({earlier[1]} and {given}); keep one"
                )


def _spelled(key: str, value: str | None) -> str:
    """A rule's value as the store keeps it (`/w/ws/` and `/w/ws` are one workspace), ""
    for every value; one the store would refuse stays as written (`serve` says why)."""
    if key in ("workspace", "repo") and value:
        with contextlib.suppress(InvalidInput):
            return normalize_workspace(value)
    return value or ""


def _window(budget: str) -> tuple[str, str]:
    """A budget's unit and period, as the identity of its window."""
    _, unit, period = parse_budget(budget)
    return unit, rates.format_period(period)


def _window_text(ident: tuple[str, ...]) -> str:
    return f" in {ident[2]} per {ident[3]}" if len(ident) == 4 else ""


def _amount(what: str, value: str) -> object:
    """A declared value as it is compared: `20/1m` and `20/60s` are one rate."""
    if what == "rate":
        return rates.parse_rate(value)
    if what == "budget":
        return parse_budget(value)[0]
    return value
