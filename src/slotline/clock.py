"""The clock every stored time is read from: epoch seconds in UTC, and their ISO form."""

from __future__ import annotations

import functools
import math
import os
from datetime import UTC, datetime

from slotline.errors import InvalidInput


@functools.cache
def _clock_offset() -> float:
    # For tests only: SLOTLINE_CLOCK_OFFSET=SECONDS shifts this process's clock, to prove
    # that the nodes of a PostgreSQL store go by the database's clock, not their own.
    given = os.environ.get("SLOTLINE_CLOCK_OFFSET", "").strip()
    try:
        offset = float(given or 0)
    except ValueError:
        raise InvalidInput(f"SLOTLINE_CLOCK_OFFSET={given!r} is not a number of seconds") from None
    if not math.isfinite(offset):
        raise InvalidInput("SLOTLINE_CLOCK_OFFSET must be a finite number of seconds")
    return offset


def utcnow() -> float:
    """Wall clock in epoch seconds; the unit every stored time uses."""
    return datetime.now(UTC).timestamp() + _clock_offset()


def iso(ts: float | None) -> str | None:
    """An epoch time as ISO 8601 UTC, or None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")
