"""Provider back-off in the store: the rules per agent type (setting `backoff`), the
state of each type backing off (table agent_backoff), and the steps the finish of a run
takes on them, inside the transaction that commits the outcome (so every node sees the
same state, and a restart keeps it)."""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Any

from slotline.errors import InvalidInput
from slotline.models import Attempt, Task
from slotline.pacing.backoff import BackoffRule, Throttle, normal_cap, on_success, on_throttled
from slotline.pacing.resets import parse_reset
from slotline.store.core import StoreCore
from slotline.store.events import emit
from slotline.store.queries import Tx
from slotline.store.settings import read_settings, write_setting

log = logging.getLogger("slotline.backoff")


def rules(tx: Tx) -> dict[str, BackoffRule]:
    """The back-off rule of each agent type that has one."""
    stored: Mapping[str, Any] = read_settings(tx)["backoff"] or {}
    return {agent: BackoffRule.from_dict(data) for agent, data in stored.items()}


def throttles(tx: Tx) -> list[Throttle]:
    """Every agent type backing off now (see `Tx.kept`)."""
    return list(tx.kept("throttles", lambda: tuple(map(_throttle, tx.rows("backoff_all")))))


def _throttle(row: Mapping[str, Any]) -> Throttle:
    return Throttle(
        agent=str(row["agent"]),
        level=int(row["level"]),
        cap=int(row["cap"]),
        not_before=float(row["not_before"]),
        successes=int(row["successes"]),
        since=float(row["since"]),
        reason=row["reason"],
        reset_at=None if row["reset_at"] is None else float(row["reset_at"]),
    )


def matching_rule(
    tx: Tx, agent: str | None, exit_code: int | None, output: str | None
) -> tuple[BackoffRule, str] | None:
    """The rule of `agent` and what matched it (`exit code N`, or the matched line), if
    a failed run's exit code or output matches it."""
    if agent is None:
        return None
    rule = rules(tx).get(agent)
    refusal = None if rule is None else rule.refusal(exit_code, output)
    if rule is None or refusal is None:
        return None
    return rule, refusal


def throttled(
    tx: Tx,
    rule: BackoffRule,
    agent: str,
    started_at: float,
    now: float,
    reason: str | None,
    output: str | None = None,
) -> Throttle:
    """Step `agent` down after a run its provider refused (holding it until the reset
    its `output` names, if the rule's pattern captures one); emits `backoff`."""
    row = tx.one("backoff_get", agent=agent)
    current = None if row is None else _throttle(row)
    normal = normal_cap(read_settings(tx).limits, agent)
    jitter = random.uniform(0.5, 1.5)
    reset_at = _reset_at(rule, agent, output, now)
    new = on_throttled(rule, current, agent, normal, started_at, now, jitter, reason, reset_at)
    if new != current:
        _put(tx, new)
        emit(tx, "backoff", None, now, **new.to_dict(), normal=normal)
    return new


def refused(
    tx: Tx,
    task: Task,
    attempt: Attempt,
    outcome: str,
    exit_code: int | None,
    said: tuple[str | None, str | None],
    now: float,
) -> tuple[str, bool] | None:
    """Whether a failed run was refused by its agent type's provider (its back-off rule
    matches the exit code, or what it `said`: its output and its reason); if so, step the
    type down, and return what matched (`exit code N`, or the matched line) and whether
    the task goes back in line uncounted (it has requeues left)."""
    if outcome != "failed" or task.agent is None:
        return None
    text = "\n".join(part for part in said if part)
    matched = matching_rule(tx, task.agent, exit_code, text)
    if matched is None:
        return None
    rule, refusal = matched
    throttled(tx, rule, task.agent, attempt.started_at, now, refusal, text)
    # The refusals in a row just before this one: any other end (a failure, a success
    # before a restart) starts the budget afresh.
    requeued = 0
    for row in sorted(tx.rows("attempts_of", task_id=task.id), key=lambda r: r["number"]):
        if row["id"] != attempt.id:
            requeued = requeued + 1 if row["outcome"] == "throttled" else 0
    return refusal, requeued < rule.max_requeues


def _reset_at(rule: BackoffRule, agent: str, output: str | None, now: float) -> float | None:
    """When the provider said its limit resets; None if the pattern captured nothing, or
    something no reading of `parse_reset` takes (logged: the blind back-off applies)."""
    text = rule.reset_text(output)
    if text is None:
        return None
    at = parse_reset(text, now)
    if at is None:
        log.warning(
            "backoff: cannot read when the limit of %s resets from %r; backing off blindly",
            agent, text[:200], extra={"agent": agent, "reset_text": text[:200]},
        )  # fmt: skip
    return at


def succeeded(tx: Tx, agent: str | None, started_at: float, now: float) -> None:
    """Count a successful run of `agent` towards its recovery; emits `backoff` at each
    step up, `backoff_recovered` once back to normal."""
    if agent is None:
        return
    # Through every throttle (one cached read on PostgreSQL, see `ConfigCache`), not
    # `backoff_get`: this runs for every success a claim commits.
    row = next((r for r in tx.rows("backoff_all") if r["agent"] == agent), None)
    if row is None:
        return
    current = _throttle(row)
    rule = rules(tx).get(agent)
    if rule is None:  # its rule was removed: back to normal at once
        new = None
    else:
        new = on_success(rule, current, normal_cap(read_settings(tx).limits, agent), started_at)
    if new == current:
        return
    if new is None:
        tx.run("backoff_delete", agent=agent)
        emit(tx, "backoff_recovered", None, now, agent=agent)
    else:
        _put(tx, new)
        if new.level != current.level:
            emit(tx, "backoff", None, now, **new.to_dict())


def _put(tx: Tx, throttle: Throttle) -> None:
    tx.run("backoff_delete", agent=throttle.agent)
    tx.run("backoff_insert", **throttle.to_dict())


class BackoffVerbs(StoreCore):
    """The verbs that set an agent type's back-off rule and read the throttles."""

    def set_backoff(self, agent: str, rule: Mapping[str, Any] | BackoffRule | None) -> None:
        """Back `agent` off its provider by `rule` (a `BackoffRule` or its JSON); None
        removes the rule, and ends any back-off in force for the type.

        Raises:
            InvalidInput: an empty agent name or a bad rule (unknown field, bad regex…).
        """
        if not agent or "\x00" in agent:
            raise InvalidInput("backoff: name the agent type")
        if rule is None or isinstance(rule, BackoffRule):
            checked = rule
        else:
            checked = BackoffRule.from_dict(rule)
        with self._write() as tx:
            stored = dict(read_settings(tx)["backoff"] or {})
            if checked is None:
                stored.pop(agent, None)
                if tx.one("backoff_get", agent=agent) is not None:
                    tx.run("backoff_delete", agent=agent)
                    emit(tx, "backoff_recovered", None, tx.now(), agent=agent, reason="removed")
            else:
                stored[agent] = checked.to_dict()
            write_setting(tx, "backoff", stored)
            emit(tx, "settings", None, tx.now(), backoff={agent: stored.get(agent)})

    def throttles(self) -> list[Throttle]:
        """The agent types backing off from their provider now."""
        with self._transaction(write=False) as tx:
            return throttles(tx)
