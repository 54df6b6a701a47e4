"""When a provider's limit resets, read from the text its refusal printed (what a back-off
pattern's `reset` group captured), as an instant: a pure function of the text, `now`
and a time zone.

Read are: a time of day ("3pm", "3:30 pm", "15:00", "15:00:30", optionally followed by a
zone such as "(Europe/Paris)" or "UTC"; the node's local time without one; its next
occurrence, or `now` if it passed at most JUST_PASSED ago: already reset), a delay
("59 minutes", "in 2h", "1h 30m", "30 seconds"; a bare number is seconds, as HTTP's
Retry-After), an epoch (seconds, or milliseconds past 10^11) and an ISO 8601 time
("2025-06-01T15:00:00Z"; local without an offset). Anything else is None: the caller
falls back to the blind back-off.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, tzinfo

# A reset further ahead than this is not believed (a misread number, a wrong unit).
MAX_AHEAD = 31 * 86400.0
# A time of day at most this far in the past has just passed (the refusal was printed
# before it, or the clocks differ a little): the limit has reset, not tomorrow's.
JUST_PASSED = 3600.0
_UNITS = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
}  # fmt: skip
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
_DELAY = re.compile(r"^(?:\d+(?:\.\d+)?\s*[a-z]+(?:\s*,\s*|\s+and\s+|\s*))+$")
_CLOCK = re.compile(
    r"^(?P<h>\d{1,2})(?::(?P<m>\d{2}))?(?::(?P<s>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)?"
    r"(?:\s*\(?\s*(?P<zone>[A-Za-z][A-Za-z0-9_/+\-]*)\s*\)?)?$",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")


def parse_reset(text: str, now: float, zone: tzinfo | None = None) -> float | None:
    """The instant (epoch seconds) `text` says a limit resets at, read at `now`; None if
    it says nothing this reads, or an instant more than MAX_AHEAD away.

    Args:
        zone: the zone of a time of day or an ISO time given without one (None: the
            node's local time).
    """
    cleaned = text.strip().strip(".,;!\"'`").strip()
    lowered = re.sub(r"^(?:at|in|after)\s+", "", cleaned.lower())
    at = (
        _epoch_or_seconds(lowered, now)
        or _delay(lowered, now)
        or _clock(re.sub(r"^(?:at|in|after)\s+", "", cleaned, flags=re.IGNORECASE), now, zone)
        or _iso(cleaned, zone)
    )
    if at is None or not math.isfinite(at) or abs(at - now) > MAX_AHEAD:
        return None
    return at


def _epoch_or_seconds(text: str, now: float) -> float | None:
    if not _NUMBER.match(text):
        return None
    number = float(text)
    if number >= 1e11:
        return number / 1000.0  # milliseconds since the epoch
    if number >= 1e9:
        return number  # seconds since the epoch
    return now + number  # a delay in seconds (HTTP's Retry-After)


def _delay(text: str, now: float) -> float | None:
    if not _DELAY.match(text):
        return None
    total = 0.0
    for number, unit in _PART.findall(text):
        if unit not in _UNITS:
            return None
        total += float(number) * _UNITS[unit]
    return now + total


def _clock(text: str, now: float, zone: tzinfo | None) -> float | None:
    match = _CLOCK.match(text.strip())
    if match is None:
        return None
    hour, minute, second = int(match["h"]), int(match["m"] or 0), int(match["s"] or 0)
    ampm = (match["ampm"] or "").replace(".", "").lower()
    if not ampm and match["m"] is None:
        return None  # a bare number is not a time of day
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    if hour > 23 or minute > 59 or second > 59:
        return None
    if match["zone"]:
        zone = _zone(match["zone"])
        if zone is None:
            return None
    if zone is None:
        # Naive local time: `timestamp()` applies the local rules (daylight saving) of
        # the day it lands on.
        local = datetime.fromtimestamp(now).replace(hour=hour, minute=minute, second=second)
        at = local.replace(microsecond=0)
        if at.timestamp() <= now - JUST_PASSED:
            at += timedelta(days=1)
        return max(at.timestamp(), now)
    aware = datetime.fromtimestamp(now, zone).replace(
        hour=hour, minute=minute, second=second, microsecond=0
    )
    if aware.timestamp() <= now - JUST_PASSED:
        aware += timedelta(days=1)  # wall-clock arithmetic in the zone
    return max(aware.timestamp(), now)


def _zone(name: str) -> tzinfo | None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # here: it reads sysconfig

    if name.upper() in ("UTC", "GMT", "Z"):
        return ZoneInfo("UTC")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _iso(text: str, zone: tzinfo | None) -> float | None:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None and zone is not None:
        when = when.replace(tzinfo=zone)
    return when.timestamp()  # naive: the node's local time
