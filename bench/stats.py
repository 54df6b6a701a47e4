"""Small statistics for the runner: medians, percentiles, gaps between intervals."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable, Sequence


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linearly interpolated between the closest ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def gaps_between(intervals: Iterable[tuple[float, float]]) -> list[float]:
    """For (start, end) intervals run one after another: each next start minus the end before."""
    ordered = sorted(intervals)
    return [nxt[0] - prev[1] for prev, nxt in itertools.pairwise(ordered)]
