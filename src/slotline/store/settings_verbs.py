"""The queue-wide settings verbs: pause, resume, settings, exempt agents, per-key limits."""

from __future__ import annotations

from typing import Any

from slotline.errors import InvalidInput
from slotline.models import check_limit_key, utcnow
from slotline.store import ops
from slotline.store.core import StoreCore

# Settings a caller may change with `set_setting`, and how each is checked.
SETTING_RULES: dict[str, tuple[type, float | None]] = {
    "max_concurrent": (int, 0),
    "max_depth": (int, 0),
    "max_children": (int, 0),
    "max_queue_size": (int, 0),
    "aging_interval": (float, 1),
    "retry_backoff_max": (float, 0),
}


class SettingsVerbs(StoreCore):
    """Verbs that change store-wide settings and limits, not any one task."""

    def pause(self) -> None:
        """Stop starting tasks (running ones go on)."""
        self._set(paused=True)

    def resume(self) -> None:
        self._set(paused=False)

    def set_setting(self, name: str, value: Any) -> None:
        """Change a store-wide setting (max_concurrent, aging_interval, bounds…)."""
        self._set(**{name: value})

    def _set(self, **values: Any) -> None:
        checked = {name: _check_setting(name, value) for name, value in values.items()}
        with self._write() as tx:
            for name, value in checked.items():
                ops.write_setting(tx, name, value)
            ops.emit(tx, "settings", None, utcnow(), **checked)

    def set_exempt_agents(self, agents: list[str]) -> None:
        """Agent types that run outside the global pool (e.g. a supervising PM agent)."""
        with self._write() as tx:
            ops.write_setting(tx, "exempt_agents", sorted(set(agents)))
            ops.emit(tx, "settings", None, utcnow(), exempt_agents=sorted(set(agents)))

    def set_limit(self, key: str, value: str | None, max_running: int | None) -> None:
        """Cap running tasks per `key` (agent, workspace, user, label:NAME), for every
        value (value None) or one named value; `max_running` None removes the cap."""
        check_limit_key(key)
        if value is not None and not value:
            raise InvalidInput("a limit value must not be empty")
        if max_running is not None and max_running < 0:
            raise InvalidInput(f"a limit must be 0 or more, got {max_running}")
        with self._write() as tx:
            tx.run("limit_delete", key=key, value=value or "")
            if max_running is not None:
                tx.run("limit_insert", key=key, value=value or "", max_running=max_running)
            ops.emit(tx, "limit", None, utcnow(), key=key, value=value, max=max_running)


def _check_setting(name: str, value: Any) -> Any:
    if name == "paused":
        return bool(value)
    if name not in SETTING_RULES:
        known = ", ".join(sorted(SETTING_RULES))
        raise InvalidInput(f"unknown setting {name!r}; known: {known}")
    if value is None and name == "aging_interval":
        return None
    kind, minimum = SETTING_RULES[name]
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"{name} must be a number, got {value!r}") from None
    if isinstance(value, bool) or (kind is int and float(value) != number):
        raise InvalidInput(f"{name} must be a whole number, got {value!r}")
    if minimum is not None and number < minimum:
        raise InvalidInput(f"{name} must be at least {minimum:g}, got {value!r}")
    return number
