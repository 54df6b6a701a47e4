"""slotline.yaml applied to a store: the settings, limits, rates, budgets, back-off rules,
fairness and schedules the file declares, written where every node and client reads them
(`slotline serve` does it at start)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slotline.config.file import Config
    from slotline.store import Store


def apply_config(store: Store, config: Config) -> str | None:
    """Write the configuration's settings and limits into the store; returns the file used.

    What the file (or SLOTLINE_* / flags) sets wins over what the store holds; its per-key
    limits, rates and budgets are its own (`apply_rates_and_backoff`).
    """
    given = config.model_fields_set
    settings = (
        "max_concurrent",
        "aging_interval",
        "max_depth",
        "max_children",
        "max_queue_size",
        "max_queued_per_user",
    )
    for name in settings:
        if name in given:
            store.set_setting(name, getattr(config, name))
    exempt = sorted(name for name, agent in config.agents.items() if not agent.global_pool)
    if exempt or "agents" in given:
        store.set_exempt_agents(exempt)
    apply_rates_and_backoff(store, config)
    if "schedules" in given:  # a file without the key leaves the declared ones alone
        from slotline.config.templates import declared_schedules

        store.sync_schedules(declared_schedules(config))
    return config.source


def apply_rates_and_backoff(store: Store, config: Config) -> None:
    """Write the file's per-key limits, rate limits, budgets, back-off rules and fairness
    into the store. The file owns what it declares: a limit, rate or budget it declared
    and no longer does goes (those set at run time with `slotline limits` stay), as a
    type's back-off rule left out of the file does. A node started without a file leaves
    the declared ones alone."""
    if config.source is not None:
        from slotline.config.declared import declared_budgets, declared_limits, declared_rates

        store.sync_declared(
            declared_rates(config), declared_budgets(config), declared_limits(config)
        )
    wanted = {
        name: agent.backoff.model_dump() for name, agent in config.agents.items() if agent.backoff
    }
    if "agents" in config.model_fields_set:
        for name in set(store.settings()["backoff"] or {}) - set(wanted):
            store.set_backoff(name, None)
    for name, rule in wanted.items():
        store.set_backoff(name, rule)
    if config.fairness is not None:
        store.set_fairness(config.fairness.key, config.fairness.weights)
