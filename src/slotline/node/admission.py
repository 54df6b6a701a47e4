"""The resource guard: hold new starts while the machine is past its CPU or memory limits.

A node samples the system every few seconds. Past a threshold, nothing new starts (a bumped
task still does) and the status says why; with `adaptive`, the effective limit instead
shrinks by one per pressured sample and grows back by one per calm interval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import psutil

from slotline.config.file import Admission


@dataclass(frozen=True, slots=True)
class Sample:
    """One reading of the machine."""

    cpu_percent: float
    available_mb: float


def read_system() -> Sample:
    """CPU use since the previous call (all cores) and memory available to new processes."""
    return Sample(
        cpu_percent=psutil.cpu_percent(interval=None),
        available_mb=psutil.virtual_memory().available / (1024 * 1024),
    )


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the guard decided: why the machine is pressed (if it is), whether to hold new
    starts, and a lower limit to apply instead of max_concurrent (adaptive mode)."""

    reason: str | None = None
    hold: bool = False
    limit: int | None = None


class Guard:
    """Admission decisions from successive samples; `now` is passed in, never read."""

    def __init__(
        self,
        thresholds: Admission,
        sampler: Callable[[], Sample] = read_system,
        recover_after: float = 30.0,
    ) -> None:
        self.thresholds = thresholds
        self.sampler = sampler
        self.recover_after = recover_after
        self._limit: int | None = None
        self._calm_since: float | None = None

    @property
    def enabled(self) -> bool:
        t = self.thresholds
        return t.max_cpu_percent is not None or t.min_available_mb is not None

    def pressure(self, sample: Sample) -> str | None:
        """Why the machine is under pressure, or None."""
        t = self.thresholds
        if t.max_cpu_percent is not None and sample.cpu_percent > t.max_cpu_percent:
            return f"CPU at {sample.cpu_percent:.0f}% (limit {t.max_cpu_percent:g}%)"
        if t.min_available_mb is not None and sample.available_mb < t.min_available_mb:
            return (
                f"{sample.available_mb:.0f} MB of memory available "
                f"(minimum {t.min_available_mb} MB)"
            )
        return None

    def check(self, configured: int, running: int, now: float) -> Verdict:
        """Take a sample and decide. `configured` is max_concurrent, `running` the count."""
        if not self.enabled:
            return Verdict()
        reason = self.pressure(self.sampler())
        if not self.thresholds.adaptive:
            return Verdict(reason, hold=reason is not None)
        if reason is not None:
            # Shrink one below what runs now (never below 1); each pressed sample again.
            ceiling = configured if self._limit is None else self._limit
            self._limit = max(1, min(ceiling, running) - 1)
            self._calm_since = None
            return Verdict(reason, limit=self._limit)
        if self._limit is None:
            return Verdict()
        # Calm: grow back one step per `recover_after` seconds until the configured limit.
        if self._calm_since is None:
            self._calm_since = now
        elif now - self._calm_since >= self.recover_after:
            self._limit += 1
            self._calm_since = now
        if self._limit >= configured:
            self._limit = None
        return Verdict(limit=self._limit)
