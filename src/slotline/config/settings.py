"""The settings, stated once: each one's name, type, default, bounds and meaning, and
where it lives (the queue's, in the store, shared by every node and changed at run
time; or one node's own).

Everything that lists settings derives from this table: slotline.yaml's fields and
their bounds (`config.file.Config`), the SLOTLINE_* variables, the store's defaults and
checks (`store.settings`), the policy's default limit (`scheduler.policy.Limits`), the
CLI's `limits --set` and `serve` options, and the HTTP body of `/api/limits`.
`tests/unit/test_settings_table.py` checks each against it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from slotline.bounds import COUNT, MAX_SECONDS, Range


class Scope(enum.StrEnum):
    """Where a setting lives."""

    QUEUE = "queue"  # in the store: every node and client reads it; `limits --set` changes it
    NODE = "node"  # one node's own, from its file, SLOTLINE_* or `serve`'s options


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: `none` turns it off (or lifts its bound) when `optional`."""

    name: str
    kind: type[int] | type[float] | type[bool]
    default: int | float | bool | None
    scope: Scope
    meaning: str
    bounds: Range | None = None
    optional: bool = False


SECONDS_FROM_1 = Range(1, MAX_SECONDS, unit="seconds")
SECONDS_FROM_0 = Range(0, MAX_SECONDS, unit="seconds")

SETTINGS: tuple[Setting, ...] = (
    Setting("max_concurrent", int, 3, Scope.QUEUE, "the global limit: how many run at once", COUNT),
    Setting(
        "aging_interval", float, None, Scope.QUEUE,
        "seconds of waiting that raise a task one priority level", SECONDS_FROM_1, optional=True,
    ),
    Setting("max_depth", int, 5, Scope.QUEUE, "how deep subtasks may nest", COUNT),
    Setting("max_children", int, 100, Scope.QUEUE, "active children per parent task", COUNT),
    Setting("max_queue_size", int, 10_000, Scope.QUEUE, "tasks waiting in all", COUNT),
    Setting(
        "max_queued_per_user", int, None, Scope.QUEUE, "tasks waiting of any one user",
        COUNT, optional=True,
    ),
    Setting(
        "retry_backoff_max", float, 3600.0, Scope.QUEUE,
        "the longest wait between a task's retries, in seconds", SECONDS_FROM_0,
    ),
    Setting(
        "kill_grace", float, 10.0, Scope.NODE,
        "seconds between TERM and KILL when a run is stopped", SECONDS_FROM_0,
    ),
    Setting(
        "lease", float, 30.0, Scope.NODE,
        "how long this node's runs stay its own without a heartbeat",
        Range(1, 86_400, unit="seconds"),
    ),
    Setting(
        "slots", int, None, Scope.NODE, "at most this many runs on this node",
        Range(0, 100_000, whole=True), optional=True,
    ),
    Setting(
        "log_max_bytes", int, 50 * 1024 * 1024, Scope.NODE, "where a run's log is cut",
        Range(1024, 2**50, whole=True, unit="bytes"),
    ),
    Setting("keep_awake", bool, True, Scope.NODE, "keep the machine awake while runs go on"),
)  # fmt: skip

BY_NAME = {setting.name: setting for setting in SETTINGS}
QUEUE = tuple(s for s in SETTINGS if s.scope is Scope.QUEUE)
# The settings a file, a SLOTLINE_* variable or a flag may set (retry_backoff_max is the
# store's alone, set at run time with `limits --set`).
FROM_FILE = tuple(s for s in SETTINGS if s.name != "retry_backoff_max")
assert all(s.bounds is not None or s.kind is bool for s in SETTINGS)


def default(name: str) -> Any:
    """The default of the setting `name`."""
    return BY_NAME[name].default


def bounds(name: str) -> Range:
    """The bounds of the number setting `name`."""
    found = BY_NAME[name].bounds
    assert found is not None, name
    return found
