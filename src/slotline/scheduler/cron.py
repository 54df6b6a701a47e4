"""Recurring schedules as values: when a cron expression ticks (in a time zone), and what a
tick does while the schedule's previous run is still going. Pure functions; the store
claims ticks and submits (store/schedules.py), a node asks it to when one is due.

Cron expressions are parsed by `cronsim`: five fields (minute hour day month weekday), or
six with seconds first; `L`, `W`, `#` and names (`MON`, `JAN`) work as cronsim documents.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any, Literal

from slotline.clock import iso
from slotline.errors import InvalidInput
from slotline.models import Status, Task

Overlap = Literal["skip", "queue", "replace"]
OVERLAPS: tuple[Overlap, ...] = ("skip", "queue", "replace")
# A schedule's name; the HTTP schema states the same pattern.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}$"
_NAME = re.compile(NAME_PATTERN)
MAX_CRON = 200


@dataclass(frozen=True, slots=True)
class Schedule:
    """A task submitted at each tick of `cron` (in time zone `tz`).

    `overlap` says what a tick does while a task of the previous ticks has not ended:
    `skip` it, `queue` another one, or `replace` (cancel the old, submit a new). `origin`
    is `config` for one declared in slotline.yaml (the file owns it), else `api`.
    """

    name: str
    cron: str
    tz: str
    overlap: Overlap
    spec: dict[str, Any]
    paused: bool
    origin: str
    next_at: float
    last_at: float | None = None
    last_task_id: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    # Filled by reads: the unfinished tasks the schedule submitted (ids).
    live: tuple[str, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of `schedule ls --json` and the HTTP API."""
        return {
            "name": self.name,
            "cron": self.cron,
            "tz": self.tz,
            "overlap": self.overlap,
            "task": dict(self.spec),
            "paused": self.paused,
            "origin": self.origin,
            "next_at": iso(self.next_at),
            "last_at": iso(self.last_at),
            "last_task_id": self.last_task_id,
            "live": list(self.live),
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Schedule:
        """A schedule from its JSON (`to_dict`), as the HTTP client reads it."""
        return cls(
            name=data["name"],
            cron=data["cron"],
            tz=data["tz"],
            overlap=check_overlap(data["overlap"]),
            spec=dict(data["task"]),
            paused=bool(data["paused"]),
            origin=data["origin"],
            next_at=_epoch(data["next_at"]) or 0.0,
            last_at=_epoch(data.get("last_at")),
            last_task_id=data.get("last_task_id"),
            created_at=_epoch(data.get("created_at")) or 0.0,
            updated_at=_epoch(data.get("updated_at")) or 0.0,
            live=tuple(data.get("live", ())),
        )


def _epoch(text: str | None) -> float | None:
    if text is None:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def check_name(name: str) -> str:
    """A schedule name: 1-128 letters, digits or `_ . : @ + -`, starting with a letter or
    digit.

    Raises:
        InvalidInput: otherwise.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidInput(
            f"schedule name {name!r}: use 1-128 letters, digits or _ . : @ + -, "
            "starting with a letter or digit"
        )
    return name


def check_overlap(value: str) -> Overlap:
    for overlap in OVERLAPS:
        if value == overlap:
            return overlap
    raise InvalidInput(f"overlap {value!r}: use skip, queue or replace")


def zone(name: str) -> tzinfo:
    """The time zone named `name` (`UTC`, `Europe/Paris`).

    Raises:
        InvalidInput: no such zone.
    """
    if name.upper() == "UTC":
        return UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # here, as cronsim: few commands tick

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput(
            f"unknown time zone {name[:64]!r}; use UTC or a name like Europe/Paris"
        ) from None


def check_cron(expr: str, tz: str = "UTC") -> str:
    """`expr`, normalized, if it is a cron expression that ticks at least once.

    Raises:
        InvalidInput: not a cron expression (cronsim's reason), or one that never ticks.
    """
    text = " ".join(str(expr).split())
    if not text or len(text) > MAX_CRON:
        raise InvalidInput(f"cron {expr!r}: give 5 fields (minute hour day month weekday)")
    next_tick(text, tz, datetime.now(UTC).timestamp())
    return text


def next_tick(expr: str, tz: str, after: float) -> float:
    """The first tick of `expr` in zone `tz` strictly after epoch time `after`.

    Raises:
        InvalidInput: `expr` is not a cron expression, or it never ticks.
    """
    from cronsim import CronSim, CronSimError

    start = datetime.fromtimestamp(after, zone(tz))
    try:
        return next(CronSim(expr, start)).timestamp()
    except CronSimError as exc:
        raise InvalidInput(f"cron {expr!r}: {exc}") from None
    except StopIteration:
        raise InvalidInput(f"cron {expr!r} never ticks") from None


def describe(expr: str) -> str:
    """The expression in words (`At 03:00 every day`), or itself if cronsim cannot say."""
    from cronsim import CronSim

    try:
        return str(CronSim(expr, datetime.now(UTC)).explain())
    except Exception:  # an explanation is a nicety; the expression was checked before
        return expr


@dataclass(frozen=True, slots=True)
class Tick:
    """What one tick of a schedule does: submit a task or not, after cancelling which
    tasks (`replace`), and why not (`skip`)."""

    submit: bool
    cancel: tuple[str, ...] = ()
    reason: str | None = None


def decide(overlap: Overlap, live: Sequence[Task]) -> Tick:
    """The tick's decision, given the schedule's tasks that have not ended.

    Missed ticks are never made up for: a schedule due several times over (no node ran)
    fires once, and its next tick is the first one after now.
    """
    going = [t for t in live if not t.status.terminal and t.status is not Status.BLOCKED]
    if not going or overlap == "queue":
        return Tick(submit=True)
    if overlap == "skip":
        ids = ", ".join(t.id[:8] for t in going)
        return Tick(submit=False, reason=f"the previous run is still going ({ids})")
    return Tick(submit=True, cancel=tuple(t.id for t in going))
