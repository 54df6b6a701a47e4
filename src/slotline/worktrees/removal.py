"""A prune's removal of one finished run's worktree folder, without losing its work:
changes left uncommitted in it are first committed on its branch (a commit by slotline
that says so), and the branch stays while it holds commits merged nowhere (only `keep:
never` deletes it). What became of the folder and the branch is recorded on the
attempt's `worktree` event and returned (`Fate`). Blocking: it runs git."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotline.errors import NotFound
from slotline.models import Attempt, Task
from slotline.store import Store
from slotline.worktrees import repolock, worktree
from slotline.worktrees.changes import has_uncommitted
from slotline.worktrees.git import GitFailed, branch_tip, git, git_env
from slotline.worktrees.isolation import Checkout, KeepPolicy, Worktree, WorktreeState

log = logging.getLogger("slotline.worktrees")

# Who commits the work a run left uncommitted, when a prune removes its folder.
IDENTITY = {"name": "slotline", "email": "slotline@localhost"}


@dataclass(frozen=True, slots=True)
class Fate:
    """What a prune did (or would do) to a run's worktree: its folder `removed` or
    `kept` (`note` says why), its branch `deleted` or `kept`, and the commit slotline
    made of the changes it held uncommitted (`uncommitted`: it held some)."""

    folder: str
    branch: str
    uncommitted: bool = False
    commit: str | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder_fate": self.folder,
            "branch_fate": self.branch,
            "uncommitted": self.uncommitted,
            "saved_commit": self.commit,
            "note": self.note,
        }


def remove_folder(
    store: Store, task: Task, attempt: Attempt, keep: KeepPolicy, reason: str, dry_run: bool
) -> Fate:
    """Remove the folder of a finished run's worktree for a prune (`reason`), keeping
    its work (see the module's docstring), and record it as removed. The folder stays
    when its work cannot be kept: its checkout is off its branch, or git cannot commit;
    and when a run has taken it over since the prune read the store (a resumed attempt
    or a follow-up works in it): that is checked again holding the repository's lock,
    under which a run takes a folder over (`Isolator.reopen`), and the removal is
    recorded only from `kept` (`Store.remove_kept_worktree`)."""
    tree = attempt.worktree
    assert tree is not None
    assert task.repo is not None
    root = Path(tree.path).parent.parent  # the lock files sit in the node's worktree root
    with repolock.repo_lock(root, task.repo):
        taken = taken_over(store, attempt)
        if taken is not None:
            return _kept(task, tree, taken)
        return _remove_locked(store, task, attempt, keep, reason, dry_run)


def _remove_locked(
    store: Store, task: Task, attempt: Attempt, keep: KeepPolicy, reason: str, dry_run: bool
) -> Fate:
    tree = attempt.worktree
    assert tree is not None
    assert task.repo is not None
    never = keep is KeepPolicy.NEVER
    uncommitted = os.path.isdir(tree.path) and has_uncommitted(tree.path)
    if os.path.isdir(tree.path) and not never:
        off = off_branch(tree.path, tree.branch)
        if off is not None:
            return _kept(task, tree, off)
    if dry_run:
        branch = "kept" if uncommitted and not never else _branch_fate(task.repo, tree, never)
        return Fate("removed", branch, uncommitted)
    commit = None
    if uncommitted and not never:
        why = f"{tree.path}, which a prune removed ({reason})"
        try:
            commit = commit_left_work(task, attempt, tree.path, why)
        except GitFailed as exc:
            return _kept(task, tree, f"its uncommitted changes could not be committed ({exc})")
    fate = _branch_fate(task.repo, tree, never)
    worktree.remove_locked(Checkout(task.repo, tree.path, tree.branch, tree.base_commit))
    tip = branch_tip(task.repo, tree.branch) if os.path.isdir(task.repo) else None
    if fate == "deleted" and tip is not None:
        gone = worktree.delete_branch_locked(task.repo, tree.branch, tip)
        fate = "deleted" if gone else "kept"
    done = Fate("removed", fate, uncommitted, commit)
    if not store.remove_kept_worktree(attempt.id, {"pruned": reason, **done.to_dict()}):
        log.warning(
            "pruned the worktree %s, which its attempt no longer records as kept", tree.path,
            extra={"task_id": task.id, "path": tree.path},
        )  # fmt: skip
    log.info(
        "pruned a worktree",
        extra={"task_id": task.id, "path": tree.path, "branch": fate, "saved_commit": commit},
    )
    return done


def taken_over(store: Store, attempt: Attempt) -> str | None:
    """Why a prune must leave the worktree of an ended `attempt` after all, read from
    the store now: its attempt no longer keeps it (a resumed attempt or a follow-up
    took it over), or a run records it active. None: it may go."""
    tree = attempt.worktree
    assert tree is not None
    working = busy(store, tree.path, attempt.id)
    if working is not None:
        return working
    try:
        task = store.get(attempt.task_id, estimate=False)
    except NotFound:
        return "its task was deleted meanwhile"
    now = next((a for a in task.attempts if a.id == attempt.id), None)
    if now is None or now.worktree is None or now.worktree.state is not WorktreeState.KEPT:
        state = "gone" if now is None or now.worktree is None else now.worktree.state.value
        return f"its attempt no longer keeps it (now {state}): another run took it over"
    return None


def busy(store: Store, path: str, own: str | None = None) -> str | None:
    """Which run, other than attempt `own`, records the worktree at `path` as active
    (it works in it, or its end is yet to be recorded), as a reason; None if none."""
    for other in store.working_in(path):
        if other.id != own:
            state = "running" if other.finished_at is None else "ending"
            return f"task {other.task_id[:8]} ({state}, attempt {other.number}) is working in it"
    return None


def _kept(task: Task, tree: Worktree, why: str) -> Fate:
    log.warning(
        "not pruning the worktree %s: %s", tree.path, why,
        extra={"task_id": task.id, "path": tree.path, "reason": why},
    )  # fmt: skip
    return Fate("kept", "kept", note=why)


def off_branch(path: str, branch: str) -> str | None:
    """Why committing in the worktree at `path` would not land on its run's `branch`,
    or None."""
    try:
        head = git(path, "symbolic-ref", "--quiet", "--short", "HEAD")
    except GitFailed:
        head = None
    if head != branch:
        where = "a detached HEAD" if head is None else f"branch {head}"
        return f"its checkout is on {where}, not on its run's branch {branch}"
    return None


def commit_left_work(task: Task, attempt: Attempt, path: str, where: str) -> str:
    """Commit everything a run left uncommitted in its worktree at `path` (new files
    included, ignored ones not) on its branch, as slotline, with no hook run; the new
    commit. `where` ends the message's sentence "…left uncommitted in": what is done
    with the folder, and why."""
    env = git_env()
    for role in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{role}_NAME"], env[f"GIT_{role}_EMAIL"] = IDENTITY["name"], IDENTITY["email"]
    message = (
        f"slotline: uncommitted work of task {task.id[:8]} (attempt {attempt.number})\n\n"
        f"Committed by slotline, not by the run: these changes were left uncommitted in "
        f"{where}; they are kept on this branch."
    )
    git(path, "add", "--all", env=env)
    git(
        path, "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false", "commit",
        "--quiet", "--no-verify", "-m", message, env=env,
    )  # fmt: skip
    return git(path, "rev-parse", "HEAD")


def _branch_fate(repo: str, tree: Worktree, never: bool) -> str:
    """Whether the run's branch goes with its folder: under `keep: never`, or when no
    commit of it would be lost (none of its own; merged as recorded, nothing since; or
    held by another local branch)."""
    if never:
        return "deleted"
    tip = branch_tip(repo, tree.branch) if os.path.isdir(repo) else None
    if tip is None or tip == tree.base_commit:
        return "deleted"
    into = None if tree.merged is None else tree.merged.into
    # A target recorded by name only: one recorded before names were checked could be
    # revision syntax (`main@{1}`), whose commits only a reflog holds.
    if into is not None and branch_tip(repo, into) is not None and _contains(repo, into, tip):
        return "deleted"  # merged, and nothing committed on it since (a follow-up's)
    try:
        holders = git(
            repo, "for-each-ref", "--contains", tip, "--format=%(refname)", "refs/heads"
        ).split()
    except GitFailed:
        return "kept"
    return "deleted" if any(ref != f"refs/heads/{tree.branch}" for ref in holders) else "kept"


def _contains(repo: str, branch: str, commit: str) -> bool:
    """Whether `branch` holds `commit`."""
    try:
        git(repo, "merge-base", "--is-ancestor", commit, f"refs/heads/{branch}")
    except GitFailed:
        return False
    return True
