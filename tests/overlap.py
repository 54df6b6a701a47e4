"""Auditing concurrency from recorded start and end times (shared by the tests)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


def peaks(intervals: Iterable[tuple[float, float, str | None]]) -> tuple[int, Counter[str]]:
    """The most intervals open at once, overall and per label; an interval that ends
    at the instant another starts does not overlap it."""
    points = []
    for start, end, label in intervals:
        points += [(start, 1, label), (end, -1, label)]
    points.sort(key=lambda p: (p[0], p[1]))
    now, most = 0, 0
    per: Counter[str] = Counter()
    per_most: Counter[str] = Counter()
    for _, delta, label in points:
        now += delta
        most = max(most, now)
        if label is not None:
            per[label] += delta
            per_most[label] = max(per_most[label], per[label])
    return most, per_most


def peak(intervals: Iterable[tuple[float, float]]) -> int:
    """The most intervals open at once."""
    return peaks((start, end, None) for start, end in intervals)[0]
