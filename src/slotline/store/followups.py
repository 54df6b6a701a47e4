"""Follow-up tasks: a task that runs after another one and continues its agent session
with a prompt of its own (`slotline followup`). The session and the worktree are found
when the follow-up starts (`node/resume.py`), not at submit: the followed task may not
have run yet."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slotline.errors import InvalidInput
from slotline.models import Task, Usage
from slotline.pacing.spend import NO_VALUE, Spent, SpentRun
from slotline.store.core import Serial, StoreCore
from slotline.store.events import emit
from slotline.store.statements import Where
from slotline.store.submit import create_tasks
from slotline.store.tasks import resolve

if TYPE_CHECKING:  # imported when used, as in `submit.py`
    from slotline.spec import TaskSpec


@dataclass(frozen=True, slots=True)
class Followup:
    """What a follow-up task continues: the task it follows, and its own prompt."""

    follows: str
    prompt: str


class FollowupVerbs(StoreCore):
    """submit_followup, followup_of and followups; and what runs spent: spend_by_agent (for
    `/metrics`) and spent_runs (for `/api/stats`)."""

    def spent_runs(self, owner: str | None = None) -> list[SpentRun]:
        """The runs that reported what they spent (only `owner`'s tasks' when given):
        one light row each, not the tasks with all their attempts."""
        where = Where() if owner is None else Where().all("tasks_where_owner", owner=owner)
        with self._transaction(write=False) as tx:
            rows = tx.select("spent_runs", where)
        return [_spent_run(row) for row in rows]

    def spend_by_agent(self) -> list[Spent]:
        """Cost and tokens of every attempt that reported any, summed per agent type
        (`-` for tasks without one)."""
        with self._transaction(write=False) as tx:
            rows = tx.rows("spend_by_agent")
        return [
            Spent(
                row["agent"] or NO_VALUE,
                int(row["runs"]),
                None if row["cost_usd"] is None else float(row["cost_usd"]),
                None if row["input_tokens"] is None else int(row["input_tokens"]),
                None if row["output_tokens"] is None else int(row["output_tokens"]),
            )
            for row in rows
        ]

    def submit_followup(self, ref: str, prompt: str, spec: TaskSpec | dict[str, Any]) -> Task:
        """Create `spec` as a follow-up of the task `ref` names, in one transaction: it
        depends on that task (it runs once it succeeded) and records what it follows
        and its prompt; a `followup` event says so.

        Raises:
            NotFound: no task matches `ref`.
            InvalidInput: the followed task has no agent type, the prompt is empty, or
                the spec is malformed.
        """
        from slotline.spec import parse_spec
        from slotline.worktrees.pinning import pin

        if not prompt.strip():
            raise InvalidInput("prompt: give the follow-up's prompt")
        parsed = pin(parse_spec(spec))
        # Serialized with submits too (it creates a task: the queue bounds stay exact).
        with self._write(Serial.BOTH) as tx:
            now = tx.now()
            followed = resolve(tx, ref)
            if followed.agent is None:
                raise InvalidInput(
                    f"task {followed.id[:8]} has no agent type: only an agent's session "
                    "can be followed up"
                )
            # After the task and after its last open follow-up: one at a time in its
            # worktree and session.
            last = tx.one("task_last_open_followup", follows=followed.id)
            after = [followed.id] + ([] if last is None else [str(last["id"])])
            wanted = [*parsed.depends_on, *(d for d in after if d not in parsed.depends_on)]
            parsed = parsed.model_copy(update={"depends_on": wanted})
            task = create_tasks(tx, [parsed], now)[0]
            tx.run("task_set_followup", id=task.id, follows=followed.id, follow_prompt=prompt)
            emit(tx, "followup", task.id, now, follows=followed.id)
            return task

    def followups(self, task_id: str) -> list[str]:
        """The ids of the task's follow-ups, oldest first."""
        with self._transaction(write=False) as tx:
            return [str(row["id"]) for row in tx.rows("task_followups", follows=task_id)]

    def followup_of(self, task_id: str) -> Followup | None:
        """What the task continues, if it is a follow-up."""
        with self._transaction(write=False) as tx:
            row = tx.one("task_followup", id=task_id)
        if row is None or row["follows"] is None:
            return None
        return Followup(row["follows"], row["follow_prompt"] or "")


def _spent_run(row: Any) -> SpentRun:
    def number(name: str, kind: type[float] | type[int]) -> Any:
        return None if row[name] is None else kind(row[name])

    usage = Usage(
        number("cost_usd", float), number("input_tokens", int), number("output_tokens", int)
    )
    spent = usage if usage != Usage() else None
    at = float(row["at"])
    return SpentRun(row["agent"], row["owner"], row["workspace"], at, spent, bool(row["denied"]))


def _spent(row: Any) -> Spent:
    def number(name: str, kind: type[float] | type[int]) -> Any:
        return None if row[name] is None else kind(row[name])

    return Spent(
        row["agent"] or NO_VALUE, int(row["runs"]), number("cost_usd", float),
        number("input_tokens", int), number("output_tokens", int),
    )  # fmt: skip
