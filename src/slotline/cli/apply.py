"""slotline.yaml applied to a store: the settings, limits, rates, budgets, back-off rules,
fairness and schedules the file declares, written where every node and client reads them
(`slotline serve` does it at start)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from slotline.store import SettingsChange

if TYPE_CHECKING:
    from slotline.config.file import Config
    from slotline.store import Store


def apply_config(store: Store, config: Config) -> str | None:
    """Write the configuration's settings and limits into the store, in one transaction;
    returns the file used.

    What the file (or SLOTLINE_* / flags) sets wins over what the store holds; its per-key
    limits, rates and budgets are its own: a limit, rate or budget it declared and no
    longer does goes (those set at run time with `slotline limits` stay), as a type's
    back-off rule left out of the file does. A node started without a file leaves the
    declared ones alone.
    """
    store.apply_settings(declared_change(store, config))
    if "schedules" in config.model_fields_set:  # a file without the key leaves them alone
        from slotline.config.templates import declared_schedules

        store.sync_schedules(declared_schedules(config))
    return config.source


def declared_change(store: Store, config: Config) -> SettingsChange:
    """What applying `config` changes: its settings, the agent types outside the pool,
    its limits, rates and budgets, back-off rules and fairness."""
    from slotline.config import settings as table
    from slotline.config.declared import declared_budgets, declared_limits, declared_rates

    given = config.model_fields_set
    exempt = sorted(name for name, agent in config.agents.items() if not agent.global_pool)
    wanted = {
        name: agent.backoff.model_dump() for name, agent in config.agents.items() if agent.backoff
    }
    backoff: list[tuple[str, dict[str, Any] | None]] = list(wanted.items())
    if "agents" in given:
        gone = set(store.settings()["backoff"] or {}) - set(wanted)
        backoff = [(name, None) for name in sorted(gone)] + backoff
    fair = config.fairness
    return SettingsChange(
        settings={s.name: getattr(config, s.name) for s in table.QUEUE if s.name in given},
        exempt_agents=exempt if exempt or "agents" in given else None,
        declared=None
        if config.source is None
        else (declared_rates(config), declared_budgets(config), declared_limits(config)),
        backoff=backoff,
        fairness_given=fair is not None,
        fairness=None if fair is None else (fair.key, fair.weights),
    )
