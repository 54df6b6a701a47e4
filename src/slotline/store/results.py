"""What a run's result says beyond its outcome, applied when its end is committed: the
run's own cost and tokens when its agent printed its session's running totals, and the
tool uses its agent was refused, flagged where no one can miss them."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any

from slotline.models import Attempt, ResumedFrom, Task, Usage
from slotline.pacing.spend import run_share
from slotline.store.events import emit
from slotline.store.queries import Tx

log = logging.getLogger("slotline.store")


def own_usage(tx: Tx, attempt: Attempt, usage: Usage | None) -> Usage | None:
    """`usage` with what the run alone spent: when the run continued a session, each
    value printed as the session's running total (`session_totals`) less the total
    recorded for the same key before it."""
    if usage is None or not usage.session_totals or attempt.resumed_from is None:
        return usage
    own: dict[str, Any] = {}  # tokens stay int: an int total less an int is one
    for key, total in usage.session_totals.items():
        own[key], why = run_share(total, _total_before(tx, attempt.resumed_from, key))
        if why is not None:
            log.warning(
                "attempt %s: %s: %s", attempt.id[:8], key, why, extra={"task_id": attempt.task_id}
            )
    return replace(usage, **own)


def _total_before(tx: Tx, resumed: ResumedFrom | None, key: str) -> float | None:
    """The session's running total of `key` after the run `resumed` names: its recorded
    total, or its value (the first run of a session, or one recorded before totals were
    kept), or, for a run cut short before it printed any, the total before that one."""
    seen: set[tuple[str, int]] = set()
    while resumed is not None and (resumed.task_id, resumed.attempt) not in seen:
        seen.add((resumed.task_id, resumed.attempt))
        row = tx.one("attempt_of_number", task_id=resumed.task_id, number=resumed.attempt)
        if row is None:
            return None
        value: float | None = json.loads(row["session_totals"] or "{}").get(key, row[key])
        if value is not None:
            return value
        if row["resumed_task"] is None:
            return None
        resumed = ResumedFrom(row["resumed_task"], int(row["resumed_attempt"]))
    return None


def totals_column(usage: Usage | None) -> str | None:
    """The session totals a run printed as the store keeps them (JSON), or None."""
    if usage is None or not usage.session_totals:
        return None
    return json.dumps(usage.session_totals, sort_keys=True)


def denied_column(denied: tuple[str, ...]) -> str | None:
    """The tools an agent was refused as the store keeps them (JSON), or None."""
    return json.dumps(list(denied)) if denied else None


def flag_denied(tx: Tx, task: Task, attempt: Attempt, denied: tuple[str, ...], now: float) -> None:
    """Log a `denied` event for a run whose agent was refused tool uses: how many, and
    which tools."""
    if denied:
        tools = list(dict.fromkeys(denied))
        emit(tx, "denied", task.id, now, attempt=attempt.id, count=len(denied), tools=tools)
