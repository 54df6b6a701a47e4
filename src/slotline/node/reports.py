"""What a node reports when a run ends: a function's result (before its end), its
outcome, the end of a failed run's output (for provider back-off), what the run spent
and its session id (its agent type's `usage` rules, read from the end of its log),
whether its next attempt resumes it, and that its keeper fenced it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path

from slotline.config.agent_types import AgentType
from slotline.errors import InvalidInput, SlotlineError, StaleAttempt
from slotline.models import Kind
from slotline.node.outbox import Outbox
from slotline.node.run import Run
from slotline.pacing.usage import Reading, read_log
from slotline.runner.files import output_tail
from slotline.runner.process import Outcome
from slotline.store import Report, Store

log = logging.getLogger("slotline.node")


async def read_spent(agents: Mapping[str, AgentType], run: Run, log_path: Path) -> Reading:
    """What the run's log says it spent, and its session id (the one it resumed, if its
    output names none). Never raises: a run's end must reach the store."""
    agent = agents.get(run.task.agent or "")
    reading = Reading()
    if agent is not None and agent.usage is not None and run.task.kind is Kind.COMMAND:
        try:
            terminal = run.task.interactive
            reading = await asyncio.to_thread(read_log, agent.usage, log_path, terminal)
        except Exception:
            log.exception("reading what a run spent failed", extra={"task_id": run.task.id})
    if reading.session_id is None and run.resumed_session is not None:
        reading = Reading(reading.usage, run.resumed_session, reading.denied)
    return reading


async def resumable(store: Store, run: Run) -> bool:
    """Whether the run's next attempt resumes it: cut short by its timeout (the node
    knows), or terminated with `--resumable` (the store knows). Never raises."""
    if run.resumable:
        return True
    try:
        attempt = await asyncio.to_thread(store.attempt, run.attempt.id)
    except SlotlineError:
        return False
    return attempt.resumable


def end_report(
    run: Run, outcome: Outcome, requeue: bool, reading: Reading | None, log_path: Path
) -> Report:
    """The report that commits a run's end (a run put back in line is not resumable: it
    never ran)."""
    attempt = run.attempt
    output = None
    if run.task.agent is not None and (outcome.exit_code != 0 or outcome.reason):
        # The store matches it against the agent type's back-off pattern.
        output = output_tail(log_path)
    reading = reading or Reading()
    return Report(
        attempt.id, attempt.token, outcome.exit_code, outcome.reason, requeue, output,
        reading.usage, reading.session_id, run.resumable and not requeue, reading.denied,
        outcome.ended_ago,
    )  # fmt: skip


async def note_fenced(
    store: Store, node_id: str, run: Run, outcome: Outcome, reclaimed: bool
) -> None:
    """Record that the run's keeper fenced it (its end was recorded, or another node had
    already `reclaimed` it), so that `events` say why its process ended. Never raises."""
    log.warning("run fenced by its keeper: %s", outcome.reason, extra={"task_id": run.task.id})
    try:
        await asyncio.to_thread(
            store.note_fenced,
            run.task.id,
            run.attempt.id,
            node_id,
            outcome.reason or "fenced",
            reclaimed,
        )
    except SlotlineError:
        log.exception("fenced run not noted", extra={"task_id": run.task.id})


async def keep_result(outbox: Outbox, run: Run, outcome: Outcome) -> Outcome:
    """Store what a function returned before its end is reported (the end makes it the
    task's result); a result the store refuses fails the attempt. None (JSON null) is
    what a task without a result shows: nothing is written for it."""
    if outcome.result in (None, "null"):
        return outcome
    try:
        await outbox.with_retries(
            outbox.store.put_result, run.attempt.id, run.attempt.token, outcome.result
        )
    except InvalidInput as exc:
        return Outcome(1, str(exc))
    except StaleAttempt as exc:
        log.warning("result not kept: %s", exc, extra={"task_id": run.task.id})
    return outcome
