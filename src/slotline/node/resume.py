"""Resume instead of restart: whether an attempt continues an agent session, and the
command it runs then.

An attempt resumes when its task's previous run ended interrupted (`Attempt.resumable`:
its node died and its process is gone, its timeout, `terminate --resumable`) with a
session id read from its output, and its agent type (in this node's configuration)
declares `resume`: the resume template runs, filled with `resume_prompt` and that
session id, in the previous run's worktree (or workspace); once that run's branch was
merged (`slotline merge`), in a new worktree of its own from the commit it was merged
as: its work is landed, and its worktree and branch may be gone. A follow-up task
(`slotline followup`) always resumes, with its own prompt: the session of the run that
ended last, among those that printed one, of the task it follows and that task's earlier
follow-ups (a second follow-up continues where the first left off); without a session
or a template it fails with the reason, rather than start a new session that knows
nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slotline.config.agent_types import AgentType
from slotline.errors import InvalidInput
from slotline.models import Attempt, ResumedFrom, Task
from slotline.store import Store
from slotline.worktrees.isolation import Worktree


class ResumeRefused(Exception):
    """A follow-up cannot continue the session it follows; the message says why."""


@dataclass(frozen=True, slots=True)
class ResumePlan:
    """How an attempt continues a session: the command, the attempt whose session it
    continues (and that session), and that attempt's worktree to reopen (None: the
    workspace, or a new worktree from `start_from`, the commit that attempt's branch was
    merged as)."""

    argv: list[str]
    resumed_from: ResumedFrom
    worktree: Worktree | None
    start_from: str | None = None

    @property
    def session_id(self) -> str:
        session = self.resumed_from.session_id
        assert session is not None
        return session


async def plan_resume(
    store: Store, agents: Mapping[str, AgentType], task: Task, attempt: Attempt
) -> ResumePlan | None:
    """The resume plan of a claimed command attempt of an agent type, or None: it
    starts over (runs its own command).

    Raises:
        ResumeRefused: a follow-up whose session or resume template is missing.
    """
    assert task.agent is not None
    agent = agents.get(task.agent)
    followup = await asyncio.to_thread(store.followup_of, task.id)
    if followup is None:
        if agent is None or agent.resume is None:
            return None
        full = await asyncio.to_thread(store.get, task.id, estimate=False)
        earlier = _previous_run(full.attempts, attempt.number)
        if earlier is None or not earlier.resumable or earlier.session_id is None:
            return None
        return _plan(agent, task, earlier, full.id, agent.resume_prompt)
    if agent is None or agent.resume is None:
        raise ResumeRefused(
            f"follow-up of task {followup.follows[:8]}: agent type {task.agent!r} has no "
            "resume template on this node"
        )
    followed = await asyncio.to_thread(store.get, followup.follows, estimate=False)
    with_session = [a for a in followed.attempts if a.session_id is not None]
    if not with_session:
        raise ResumeRefused(
            f"follow-up of task {followed.id[:8]}: none of its runs printed a session id "
            f"that agent type {task.agent!r}'s usage rules read"
        )
    earlier = max(with_session, key=lambda a: a.number)
    # The session goes on through the chain: a later follow-up continues from the run
    # that ended last among the task's and its earlier follow-ups'.
    for chained in await asyncio.to_thread(_chain, store, followed.id):
        for ran in chained:
            if ran.session_id is None or ran.finished_at is None:
                continue
            if earlier.finished_at is None or ran.finished_at >= earlier.finished_at:
                earlier = ran
    return _plan(agent, task, earlier, earlier.task_id, followup.prompt)


def _chain(store: Store, task_id: str) -> list[Sequence[Attempt]]:
    """The attempts of each follow-up of `task_id`."""
    return [store.get(other, estimate=False).attempts for other in store.followups(task_id)]


def _previous_run(attempts: Sequence[Attempt], number: int) -> Attempt | None:
    """The latest attempt before `number` that ran its command. One put back in line
    before it ran, or refused by its provider, is skipped when it printed no session of
    its own or resumed an earlier run (its session id is the one it resumed): the run
    it resumed, in its worktree, is still the one to continue."""
    for earlier in sorted(attempts, key=lambda a: a.number, reverse=True):
        if earlier.number >= number:
            continue
        if earlier.outcome not in ("interrupted", "throttled"):
            return earlier
        if earlier.session_id is None:
            continue
        if not earlier.resumable and earlier.resumed_from is not None:
            continue
        return earlier
    return None


def _plan(agent: AgentType, task: Task, earlier: Attempt, task_id: str, prompt: str) -> ResumePlan:
    assert agent.resume is not None
    assert earlier.session_id is not None
    values = {
        "prompt": prompt,
        "workspace": task.workspace or "",
        "title": task.title or "",
        "user": task.user or "",
        "agent": task.agent or "",
        "session_id": earlier.session_id,
    }
    try:
        agent.check_options(task.agent or "", values, agent.resume)
    except InvalidInput as exc:
        raise ResumeRefused(f"resume: {exc}") from None
    worktree = earlier.worktree if task.isolation is not None else None
    # A merged run's work is landed: the session goes on from the merge, on a branch of
    # its own (the merged one is done, and a prune may have removed it).
    landed = None if worktree is None or worktree.merged is None else worktree.merged.commit
    return ResumePlan(
        argv=agent.argv(values, agent.resume),
        resumed_from=ResumedFrom(task_id, earlier.number, earlier.session_id),
        worktree=None if landed is not None else worktree,
        start_from=landed,
    )
