"""REST routes to review and land a worktree run's work: its diff, merging its branch,
and the worktrees on disk with the retention policy applied on demand. Git runs on the
server's machine, where the node's repositories and worktrees are."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, ConfigDict, Field

from slotline.bounds import Range
from slotline.clock import utcnow
from slotline.reach import bounded, check_merge
from slotline.server.context import Admin, Reader, State, Writer
from slotline.server.errors import ERROR_RESPONSES
from slotline.server.fields import TaskRef
from slotline.server.flags import Flag, QueryFlag
from slotline.server.schemas import task_json
from slotline.worktrees import verbs
from slotline.worktrees.diff import DIFF_MAX_BYTES
from slotline.worktrees.gitpool import run_git

router = APIRouter(prefix="/api", tags=["worktrees"], responses=ERROR_RESPONSES)


class MergeBody(BaseModel):
    """Where to merge a run's branch (default: the branch its task started from), and
    whether to squash its commits into one."""

    model_config = ConfigDict(extra="forbid", strict=True)

    into: str | None = Field(None, min_length=1, max_length=255)
    squash: Flag = False


class PruneBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    dry_run: Flag = False


@router.get("/tasks/{ref}/diff")
async def task_diff(
    state: State,
    who: Reader,
    ref: TaskRef,
    stat: Annotated[QueryFlag, Query(description="Only the stat, no patch")] = False,
    max_bytes: Annotated[
        int, Query(), Range(1, DIFF_MAX_BYTES, whole=True, unit="bytes")
    ] = DIFF_MAX_BYTES,
) -> dict[str, Any]:
    """The changes of the task's latest worktree run against its base commit (committed
    and uncommitted work in its worktree, else on its branch): `stat`, and the patch as
    `text`, cut at `max_bytes` at a line end (`truncated`)."""
    task = await state.visible_task(who, ref, estimate=False)
    found = await run_git(verbs.diff, state.store, task.id, stat, max_bytes)
    return found.to_dict()


@router.post("/tasks/{ref}/merge")
async def task_merge(
    state: State, who: Writer, ref: TaskRef, body: MergeBody | None = None
) -> dict[str, Any]:
    """Merge the branch of the task's latest run into `into` in a temporary worktree,
    then move the target by compare-and-set, or by `git merge --ff-only` in the clean
    checkout that has it (`checkout`); for an admin or the task's owner. Only an admin
    may merge into a branch a checkout has (a user picks the repository and the target,
    and must not change the files of any checkout on this machine). A conflict (409
    `MergeConflict`, with `files`), a checkout of the target with uncommitted changes
    (409, with `files`), a checkout of it and a caller not an admin (409) or a target
    moved meanwhile (409) change nothing. A user merges only into the branches
    `users.merge_into` lists for the task's repository (403 otherwise)."""
    task = await state.visible_task(who, ref, estimate=False)
    if not who.steers(task):
        raise HTTPException(403, f"token {who.name!r} cannot change task {task.id[:8]}")
    body = body or MergeBody(into=None)
    if bounded(who.role) and task.repo is not None:
        base = task.isolation.base if task.isolation else None
        target = body.into if body.into is not None else base
        if target is not None:  # none: the merge itself refuses, asking for `into`
            check_merge(state.config.users, task.repo, target.removeprefix("refs/heads/"))
    result, fresh = await run_git(
        verbs.merge, state.store, task.id, body.into, body.squash, who.is_admin
    )
    return {**result.to_dict(), "task": task_json(fresh)}


@router.get("/worktrees")
async def list_worktrees(state: State, who: Reader) -> dict[str, Any]:
    """The worktrees on disk (active and kept), oldest first, with task, branch, state,
    keep policy, age and size in bytes (null, and `remote`, for another machine's); a
    user token sees only its own tasks'."""
    return {"worktrees": await run_git(verbs.worktrees, state.store, utcnow(), who.sees)}


@router.post("/worktrees/prune")
async def prune_worktrees(
    state: State, who: Admin, body: PruneBody | None = None
) -> dict[str, Any]:
    """Apply the retention policy of slotline.yaml now to this machine's worktrees
    (admins), orphaned folders included: what was removed or kept (or would be, with
    `dry_run`), why, and what became of each folder and branch."""
    dry_run = body.dry_run if body else False
    policy = state.config.worktree_policy()
    pruned = await run_git(verbs.prune, state.store, policy, utcnow(), dry_run)
    return {"pruned": pruned, "dry_run": dry_run}
