"""Store-wide settings and per-key limits: what they are, how they are read and written
inside a transaction, the one check every surface applies, and the verbs that change them."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from slotline.bounds import check_number
from slotline.config import settings as table
from slotline.errors import InvalidInput
from slotline.limits import Limit, check_limit
from slotline.pacing.budgets import Budget
from slotline.pacing.rates import RateLimit
from slotline.scheduler import policy
from slotline.store import budgets as budget_rules
from slotline.store.core import StoreCore
from slotline.store.events import emit
from slotline.store.queries import Tx
from slotline.store.rows import dumps

# How long a node's attempts stay its own without a heartbeat; another node of the store
# reaps them after that (a setting: `serve --lease`, `lease:` in slotline.yaml).
LEASE_SECONDS: float = table.default("lease")

# The queue's settings of the table, with those a table row cannot say (they are set by
# their own verbs: pause, exempt agents, back-off rules, fairness).
DEFAULT_SETTINGS: dict[str, Any] = {
    **{setting.name: setting.default for setting in table.QUEUE},
    "paused": False,
    "exempt_agents": [],
    # Provider back-off per agent type ({agent: BackoffRule.to_dict()}), store/backoff.py.
    "backoff": {},
    # Fair dispatch within a priority level ({"key": …, "weights": {…}}), or None.
    "fairness": None,
}


@dataclass(frozen=True, slots=True)
class Settings:
    """Store-wide settings and limits, as persisted."""

    values: dict[str, Any]
    per_key: tuple[Limit, ...]
    rates: tuple[RateLimit, ...] = ()
    budgets: tuple[Budget, ...] = ()

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def limits(self) -> policy.Limits:
        return policy.Limits(
            max_concurrent=int(self.values["max_concurrent"]),
            per_key=self.per_key,
            exempt_agents=frozenset(self.values["exempt_agents"]),
        )

    def copy(self) -> Settings:
        """A copy whose values (and theirs) are the caller's own to change."""
        return replace(self, values=copy.deepcopy(self.values))

    def to_dict(self) -> dict[str, Any]:
        return {
            **copy.deepcopy(self.values),
            "limits": [
                {"key": lim.key, "value": lim.value, "max": lim.max, "origin": lim.origin}
                for lim in self.per_key
            ],
            "rates": [rate.to_dict() for rate in self.rates],
            "budgets": [budget.to_dict() for budget in self.budgets],
        }


def read_settings(tx: Tx) -> Settings:
    """The settings, limits and pacing rules in force, built once per version of the
    configuration (`Tx.kept`): the store's own, which no caller may change; a verb
    hands its callers a copy (`Settings.copy`)."""
    return tx.kept("settings", lambda: _read_settings(tx))


def _read_settings(tx: Tx) -> Settings:
    values = dict(DEFAULT_SETTINGS)
    for row in tx.rows("settings_all"):
        values[row["name"]] = json.loads(row["value"])
    per_key = tuple(
        Limit(row["key"], row["value"] or None, int(row["max_running"]), row["origin"])
        for row in tx.rows("limits_all")
    )
    rates = tuple(
        RateLimit(
            row["key"],
            row["value"] or None,
            int(row["max_starts"]),
            float(row["period"]),
            row["origin"],
        )
        for row in tx.rows("rate_limits_all")
    )
    return Settings(values, per_key, rates, budget_rules.rules(tx))


def write_setting(tx: Tx, name: str, value: Any) -> None:
    tx.run("setting_delete", name=name)
    tx.run("setting_insert", name=name, value=dumps(value))


# Settings a caller may change with `set_setting`: (type, minimum, maximum).
SETTING_RULES: dict[str, tuple[type, float, float]] = {
    s.name: (s.kind, table.bounds(s.name).minimum, table.bounds(s.name).maximum)
    for s in table.QUEUE
}

# Settings that `none` turns off.
NONE_MEANS_NO_BOUND = frozenset(s.name for s in table.QUEUE if s.optional)


@dataclass(frozen=True, slots=True)
class SettingsChange:
    """Settings, limits and pacing rules to change together (`Store.apply_settings`): an
    HTTP request's, or what slotline.yaml declares when a node starts. Each part is what
    its own verb takes; an empty part changes nothing."""

    settings: Mapping[str, Any] = field(default_factory=dict)
    # (key, value, max); max None removes the limit.
    limits: Sequence[tuple[str, str | None, int | None]] = ()
    exempt_agents: Sequence[str] | None = None
    # (key, value, max starts, period); max None removes the rate.
    rates: Sequence[tuple[str, str | None, int | None, float | str | None]] = ()
    # (key, value, amount, period, unit); amount None removes budgets.
    budgets: Sequence[tuple[str, str | None, float | None, float | str | None, str | None]] = ()
    # Whether fairness changes, and to what: (key, weights), or None to turn it off.
    fairness_given: bool = False
    fairness: tuple[str, Mapping[str, object] | None] | None = None
    # (agent type, rule as JSON); rule None removes the type's rule.
    backoff: Sequence[tuple[str, Mapping[str, Any] | None]] = ()
    # What a file declares (rates, budgets, limits): it replaces what the file declared.
    declared: tuple[Sequence[RateLimit], Sequence[Budget], Sequence[Limit]] | None = None


class SettingsVerbs(StoreCore):
    """Verbs that change store-wide settings and limits, not any one task."""

    def settings(self) -> Settings:
        with self._transaction(write=False) as tx:
            return read_settings(tx).copy()

    def pause(self) -> None:
        """Stop starting tasks (running ones go on)."""
        self._set(paused=True)

    def resume(self) -> None:
        self._set(paused=False)

    def set_setting(self, name: str, value: Any) -> None:
        """Change a store-wide setting (max_concurrent, aging_interval, bounds…)."""
        self._set(**{name: value})

    def _set(self, **values: Any) -> None:
        checked = {name: check_setting(name, value) for name, value in values.items()}
        with self._write() as tx:
            for name, value in checked.items():
                write_setting(tx, name, value)
            emit(tx, "settings", None, tx.now(), **checked)

    def set_exempt_agents(self, agents: list[str]) -> None:
        """Agent types that run outside the global pool (e.g. a supervising PM agent)."""
        with self._write() as tx:
            write_setting(tx, "exempt_agents", sorted(set(agents)))
            emit(tx, "settings", None, tx.now(), exempt_agents=sorted(set(agents)))

    def set_limit(self, key: str, value: str | None, max_running: int | None) -> None:
        """Cap running tasks per `key` (agent, workspace, user, repo, label:NAME), for
        every value (value None) or one named value; `max_running` None removes the cap."""
        limit = check_limit(key, value, 0 if max_running is None else max_running)
        with self._write() as tx:
            write_limit(tx, limit if max_running is not None else None, limit.key, limit.value)
            given = None if max_running is None else limit.max
            emit(tx, "limit", None, tx.now(), key=limit.key, value=limit.value, max=given)


def write_limit(tx: Tx, limit: Limit | None, key: str, value: str | None) -> None:
    """Make the limit of (`key`, `value`) `limit`, or remove it (None)."""
    tx.run("limit_delete", key=key, value=value or "")
    if limit is not None:
        tx.run(
            "limit_insert", key=key, value=value or "", max_running=limit.max,
            origin=limit.origin,
        )  # fmt: skip


def check_setting(name: str, value: Any) -> Any:
    """`value` as the setting `name` stores it: the one check of every surface.

    Raises:
        InvalidInput: an unknown setting, or a value of the wrong type or out of range.
    """
    if name == "paused":
        if not isinstance(value, bool):
            raise InvalidInput(f"paused must be true or false, got {value!r}")
        return value
    if name not in SETTING_RULES:
        known = ", ".join(sorted(SETTING_RULES))
        raise InvalidInput(f"unknown setting {name!r}; known: {known}")
    if value is None and name in NONE_MEANS_NO_BOUND:
        return None
    kind, minimum, maximum = SETTING_RULES[name]
    return check_number(name, value, whole=kind is int, minimum=minimum, maximum=maximum)
