"""The end of a run in its common case, committed by a claim without building its task.

`runs.end` knows every end: a stop request, a requeue, a failure (its retry, its
provider's back-off), what the run spent and its session, refused tools, dependents to
queue. Most ends a claim commits are none of these: a function or a command that
succeeded, reported as it ended with nothing beside its exit code, whose task nobody
asked to stop and no task depends on. Such an end reads one row (the attempt, joined
with what it checks of the task) where `runs.end` reads the attempt, the task and its
dependents and builds the task and the attempt, and writes what `runs.end` writes: the
attempt's end, the task's, the `succeeded` event, the agent's step out of a back-off and
the run's time. Any other end, or one that this read finds is not plain after all (a
stale report, a task someone asked to stop), goes to `runs.end`, this having written
nothing. `tests/contract/test_plain_end.py` holds it to `runs.end`: on random runs and
reports, both leave the store the same.

On a store with a server the claim has read every report's attempt, task and dependents
ahead, in one round trip for them all (`read_ahead`): there the plain end takes its row
from those, and gives them back for `runs.end` to take when the end is not plain.
"""

from __future__ import annotations

from typing import Any

from slotline.bounds import parse_id
from slotline.errors import InvalidInput
from slotline.models import Kind, Status
from slotline.store import backoff
from slotline.store.events import emit
from slotline.store.queries import Tx
from slotline.store.runs import Report, after_end
from slotline.store.runs import end as any_end
from slotline.tasktoken import same_token


def end(tx: Tx, report: Report, now: float, runs: list[tuple[str | None, float]]) -> str:
    """`runs.end` of `report` at `now` (its run's time appended to `runs`), in one read
    when the end is plain; returns the task's id."""
    attempt_id = _plain_id(report)
    row = None if attempt_id is None else _plain_row(tx, attempt_id, report.token)
    if attempt_id is None or row is None:
        return any_end(tx, report, now, None, runs)
    task_id, agent = row["task_id"], row["agent"]
    tx.run(
        "attempt_end", id=attempt_id, now=now, exit_code=0, outcome="succeeded", reason=None,
        cost_usd=None, input_tokens=None, output_tokens=None, session_totals=None,
        session_id=None, denied_tools=None,
    )  # fmt: skip
    started_at = float(row["started_at"])
    backoff.succeeded(tx, agent, started_at, now)
    tx.run(
        "task_end", id=task_id, status=Status.SUCCEEDED.value, status_reason=None, now=now,
        exit_code=0, failure_reason=None,
    )  # fmt: skip
    moved = {"from": Status.RUNNING.value, "to": Status.SUCCEEDED.value}
    emit(tx, "succeeded", task_id, now, **moved, attempt=attempt_id, exit_code=0, reason=None)
    if row["kind"] == Kind.CALLABLE or row["pid"] is not None:  # it ran (`runs._ran`)
        runs.append((agent, now - started_at))
    after_end(tx, task_id, now)
    return str(task_id)


def _plain_id(report: Report) -> str | None:
    """The attempt id of `report` as stored, if the report is plain and its id is one
    (else `runs.end` says what is wrong with it)."""
    if not _plain(report):
        return None
    try:
        return parse_id(report.attempt_id)
    except InvalidInput:
        return None


def _plain_row(tx: Tx, attempt_id: str, token: str) -> dict[str, Any] | None:
    """What the plain end of the run of `attempt_id` needs (its report's `token`), or
    None when its end is not plain."""
    if tx.reads_ahead:
        return _read_ahead_row(tx, attempt_id, token)
    row = tx.one("plain_end_of", id=attempt_id)
    return row if row is not None and _is_plain(row, attempt_id, token) else None


# What `plain_end_of` reads of the attempt and of its task.
_OF_ATTEMPT = ("task_id", "token", "finished_at", "started_at", "pid")
_OF_TASK = ("kind", "agent", "status", "current_attempt", "kill_request")


def _read_ahead_row(tx: Tx, attempt_id: str, token: str) -> dict[str, Any] | None:
    """The same row from what the claim read ahead for its reports (no round trip): the
    attempt, its task and their dependents; given back if the end is not plain after
    all, for `runs.end` to read as it would have."""
    reads: list[tuple[str, dict[str, Any], list[dict[str, Any]]]] = []

    def read(query: str, **params: Any) -> list[dict[str, Any]]:
        rows = tx.rows(query, **params)
        reads.append((query, params, rows))
        return rows

    attempt = read("attempt_get", id=attempt_id)
    if attempt:
        task_id = attempt[0]["task_id"]
        task, depended = read("task_get", id=task_id), read("dependents_of", dep_id=task_id)
        if task:
            row = {name: attempt[0][name] for name in _OF_ATTEMPT}
            row |= {name: task[0][name] for name in _OF_TASK}
            row["depended_on"] = bool(depended)
            if _is_plain(row, attempt_id, token):
                return row
    for query, params, rows in reads:
        tx.preload(query, params, rows)
    return None


def _is_plain(row: dict[str, Any], attempt_id: str, token: str) -> bool:
    """Whether the run `row` says, of `attempt_id` reported with `token`, ends plainly."""
    if not same_token(row["token"], token):
        return False
    current = row["finished_at"] is None and row["current_attempt"] == attempt_id
    asked = row["kill_request"] is not None
    return current and not asked and row["status"] == Status.RUNNING and not row["depended_on"]


def _plain(report: Report) -> bool:
    """Whether `report` says nothing but that its run succeeded, just now."""
    return (
        report.exit_code == 0
        and report.reason is None
        and not report.requeue
        and report.usage is None
        and report.session_id is None
        and not report.resumable
        and not report.denied
        and report.ended_ago is None
    )
