"""What runs spent, summed: cost and tokens of ended attempts per agent type, user,
workspace and day (UTC), as `stats` shows them, and how many of the runs had their
agent refused tool uses. A value no run reported stays None (unknown), never 0."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from slotline.models import Task, Usage

NO_VALUE = "-"
BY = ("agent", "user", "workspace", "day")


@dataclass(frozen=True, slots=True)
class Spent:
    """The sums over some runs: cost in US dollars, tokens in and out, how many runs
    reported any of them, and how many had their agent refused tool uses (`denied`)."""

    key: str
    runs: int = 0
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    denied: int = 0

    def add(self, usage: Usage | None, denied: bool = False) -> Spent:
        if usage is None:
            return replace(self, denied=self.denied + 1) if denied else self
        return Spent(
            self.key,
            self.runs + 1,
            _plus(self.cost_usd, usage.cost_usd),
            _plus(self.input_tokens, usage.input_tokens),
            _plus(self.output_tokens, usage.output_tokens),
            self.denied + denied,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "runs": self.runs,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "denied": self.denied,
        }


def _plus(total: Any, value: Any) -> Any:
    if value is None:
        return total
    return value if total is None else total + value


@dataclass(frozen=True, slots=True)
class Spend:
    """Every run's spend: the total, and the sums per agent type, user, workspace, day."""

    total: Spent
    groups: dict[str, list[Spent]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total.to_dict(),
            **{by: [s.to_dict() for s in rows] for by, rows in self.groups.items()},
        }


@dataclass(frozen=True, slots=True)
class SpentRun:
    """One run that reported what it spent (or that its agent was refused tool uses),
    with what its spend is summed by."""

    agent: str | None
    user: str | None
    workspace: str | None
    at: float  # when it ended (or started)
    usage: Usage | None
    denied: bool = False


def runs_of(tasks: Iterable[Task]) -> Iterator[SpentRun]:
    """The runs of `tasks` that reported usage (`Attempt.usage`) or refusals."""
    for task in tasks:
        for attempt in task.attempts:
            if attempt.usage is not None or attempt.denied_tools:
                at = attempt.finished_at or attempt.started_at
                yield SpentRun(
                    task.agent, task.user, task.workspace, at, attempt.usage,
                    bool(attempt.denied_tools),
                )  # fmt: skip


_KEYS: dict[str, Callable[[SpentRun], str]] = {
    "agent": lambda run: run.agent or NO_VALUE,
    "user": lambda run: run.user or NO_VALUE,
    "workspace": lambda run: run.workspace or NO_VALUE,
    "day": lambda run: datetime.fromtimestamp(run.at, UTC).date().isoformat(),
}


def sum_spend(runs: Iterable[SpentRun]) -> Spend:
    """The spend of `runs`: the total, and per agent type, user, workspace and day."""
    total = Spent("total")
    groups: dict[str, dict[str, Spent]] = {by: {} for by in BY}
    for run in runs:
        total = total.add(run.usage, run.denied)
        for by, key_of in _KEYS.items():
            key = key_of(run)
            rows = groups[by]
            rows[key] = rows.get(key, Spent(key)).add(run.usage, run.denied)
    return Spend(total, {by: [rows[k] for k in sorted(rows)] for by, rows in groups.items()})


def describe(cost_usd: float | None, tokens_in: int | None, tokens_out: int | None) -> str:
    """What a run (or runs) spent in words: `$0.12, 1,234 in, 56 out` (`-`: unknown)."""
    parts = []
    if cost_usd is not None:
        parts.append(
            f"${cost_usd:,.2f}" if cost_usd >= 0.01 or cost_usd == 0 else f"${cost_usd:.4f}"
        )
    if tokens_in is not None:
        parts.append(f"{tokens_in:,} in")
    if tokens_out is not None:
        parts.append(f"{tokens_out:,} out")
    return ", ".join(parts) or NO_VALUE


def run_share(session_total: float, before: float | None) -> tuple[float, str | None]:
    """What a run that continued a session spent of one value (its cost, or its tokens in
    or out): the session's running total it printed less the total recorded before it
    (`before`; None: none was, the run's total is its own). Integers (tokens) stay
    integers. A total lower than before (a session restarted elsewhere, an agent that
    prints its own figure after all) is taken whole, never as a negative amount: then
    also why.
    """
    if before is None:
        return session_total, None
    if session_total < before:
        return session_total, (
            f"the session's total {session_total:g} is less than the {before:g} recorded "
            "before this run: taken as this run's own"
        )
    return round(session_total - before, 10), None
