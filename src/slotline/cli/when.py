"""Times typed on the command line: `submit --at` (when a delayed task may start)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import click

_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")


def parse_at(text: str, now: datetime | None = None) -> float:
    """A start time as epoch seconds, from:

    - ISO 8601 with an offset or `Z`: `2026-11-24T15:00:00Z`, `2026-11-24 15:00+01:00`;
    - ISO 8601 without one, in this machine's local time: `2026-11-24 15:00`;
    - a time of day in local time, `HH:MM` or `HH:MM:SS`: its next occurrence (today,
      or tomorrow once it has passed).

    Raises:
        ValueError: none of these (the message shows the forms).
    """
    now = now or datetime.now().astimezone()
    given = text.strip()
    clock = _CLOCK.match(given)
    if clock:
        hour, minute, second = (int(g or 0) for g in clock.groups())
        if hour > 23 or minute > 59 or second > 59:
            raise ValueError(f"{text!r} is not a time of day")
        at = now.replace(hour=hour, minute=minute, second=second, microsecond=0)
        if at <= now:
            at += timedelta(days=1)
        return at.timestamp()
    try:
        when = datetime.fromisoformat(given.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: give HH:MM (next occurrence, local time), "
            "2026-11-24T15:00 (local time) or 2026-11-24T15:00:00Z (UTC, or any +HH:MM)"
        ) from None
    if when.tzinfo is None:
        when = when.astimezone()  # a naive time is this machine's local time
    return when.timestamp()


def at_option(_ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """A click callback for `--at`."""
    if value is None:
        return None
    try:
        return parse_at(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from None
