"""The claim's common case: a global limit, priorities and boosts, nothing else configured.

A node's claim decides on a snapshot of the line with `policy.plan`, which knows every
rule (per-key limits, exempt agent types, aging, fairness, rates, budgets, back-off,
"start now"). When none of them is in force, the plan only fills the free slots with the
first tasks in line that the node runs and that may start yet; this module does that
without the snapshot: it counts the slots taken, reads the head of the line a few
columns a row, and starts what it picked in one `UPDATE … RETURNING` (its attempt rows
in one more statement). `tests/property/test_head_claim.py` holds it to the plan: on
random lines and settings, both start the same tasks and wake at the same time.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from slotline.models import Attempt, Kind, Task
from slotline.pacing.budgets import BudgetBook
from slotline.pacing.rates import RateBook
from slotline.runlogs import log_file
from slotline.scheduler import policy
from slotline.scheduler.fairness import Fairness
from slotline.store.events import emit
from slotline.store.queries import Tx
from slotline.store.rows import task_from_row
from slotline.store.statements import Ids
from slotline.store.tasks import count_of


@dataclass(frozen=True, slots=True)
class Rules:
    """What is in force at a claim, of what the common case cannot follow."""

    limits: policy.Limits
    paused: bool
    aging_interval: float | None
    rates: RateBook | None
    budgets: BudgetBook | None
    fairness: Fairness | None
    holds: Mapping[str, float]

    def common(self) -> bool:
        """Whether only the global limit, priorities and boosts decide."""
        limits = self.limits
        return not (
            limits.per_key
            or limits.exempt_agents
            or self.paused
            or self.aging_interval
            or self.rates is not None
            or self.budgets is not None
            or self.fairness is not None
            or self.holds
        )


@dataclass(frozen=True, slots=True)
class HeadClaim:
    """What the common case started, and what the claim says of the line after it."""

    # (task, attempt) pairs, in line order.
    started: list[tuple[Task, Attempt]]
    # When a task the walk passed over (not yet due) may start: as `Plan.next_wake`.
    next_wake: float | None
    # The running tasks that hold a slot, before these starts.
    running: int


def claim_head(
    tx: Tx,
    rules: Rules,
    node_id: str,
    now: float,
    lease: float,
    runnable: tuple[frozenset[str], frozenset[str] | None],
    node_free: int | None,
    log_dir: Path | None,
) -> HeadClaim | None:
    """Start the first tasks in line that fit, as `policy.plan` would with `rules`
    (`Rules.common`). None when the plan must decide after all: a "start now" task
    waits, or the node's own slots (`node_free`) are fewer than the store's."""
    if tx.rows("tasks_start_now"):
        return None
    running = count_of(tx, "count_holding_slots")
    free = rules.limits.max_concurrent - running
    if free <= 0:
        return HeadClaim([], None, running)
    if node_free is not None and node_free < free:
        return None  # the node's slots cut the plan short: its wake is the plan's
    kinds, functions = runnable
    picked: list[str] = []
    wake: float | None = None
    for row in tx.iter_rows("line_head"):
        kind, name = row["kind"], row["callable"]
        if kind == Kind.CALLABLE and functions is not None:
            if name not in functions:
                continue
        elif kind not in kinds:
            continue
        not_before = row["not_before"]
        if not_before is not None and not_before > now:
            wake = not_before if wake is None else min(wake, not_before)
            continue
        picked.append(row["id"])
        if len(picked) == free:
            break
    return HeadClaim(_start(tx, picked, node_id, now, lease, log_dir), wake, running)


def _start(
    tx: Tx, ids: list[str], node_id: str, now: float, lease: float, log_dir: Path | None
) -> list[tuple[Task, Attempt]]:
    """Start `ids` (queued, read in this transaction) in one statement, then write their
    attempts and events, as `claim._start` does for one."""
    if not ids:
        return []
    rows = {row["id"]: row for row in tx.rows("tasks_claim_ids", ids=Ids(ids), now=now)}
    started, attempts = [], []
    for task_id in ids:
        task = task_from_row(rows[task_id])
        number = task.attempt_count
        log_path = None
        if log_dir is not None and task.kind is Kind.CALLABLE:
            log_path = log_file(log_dir, task.id, number)
        attempt = Attempt(
            id=str(task.current_attempt),
            task_id=task.id,
            number=number,
            token=secrets.token_urlsafe(24),
            node_id=node_id,
            pid=None,
            pid_started=None,
            started_at=now,
            finished_at=None,
            exit_code=None,
            outcome=None,
            reason=None,
            over_limit=False,
            lease_expires_at=now + lease,
            log_path=log_path,
        )
        attempts.append(
            {
                "id": attempt.id,
                "task_id": task.id,
                "number": number,
                "token": attempt.token,
                "node_id": node_id,
                "now": now,
                "over_limit": False,
                "lease_expires_at": attempt.lease_expires_at,
                "log_path": log_path,
            }
        )
        changed = {"from": "queued", "to": "running", "attempt": attempt.id, "number": number}
        emit(tx, "claimed", task.id, now, **changed, node=node_id, over_limit=False)
        if log_path is not None:
            # A callable starts with its claim; its log path went in with the attempt's row.
            emit(tx, "started", task.id, now, attempt=attempt.id, pid=None)
        started.append((task, attempt))
    tx.run_many("attempt_insert", attempts)
    return started
