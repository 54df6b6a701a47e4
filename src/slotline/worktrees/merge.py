"""Landing a run's branch on a target branch: the merge is made in a temporary worktree
of the target (detached at its tip), so a conflict changes nothing; then the target
moves to it by compare-and-set (`git update-ref REF NEW OLD`), or, when a checkout has
the target (the user's `main`), by `git merge --ff-only` in that clean checkout
(`checkout.py`), for a caller allowed to change that checkout's files (the local CLI,
an admin over HTTP or MCP). A target that moved meanwhile is refused, never clobbered."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotline.errors import InvalidInput, InvalidTransition, MergeConflict
from slotline.models import Attempt, Status, Task
from slotline.worktrees import removal, repolock
from slotline.worktrees.changes import has_uncommitted
from slotline.worktrees.checkout import check_clean, checked_out_at, fast_forward
from slotline.worktrees.diff import latest_run
from slotline.worktrees.git import GitFailed, branch_tip, git

# The repository's hooks are for its owner's own commits: a merge slotline makes in a
# temporary worktree runs none (a pre-commit hook could take minutes, or prompt).
_NO_HOOKS = ("-c", "core.hooksPath=/dev/null")
# Used only when the repository has no identity of its own configured.
_IDENTITY = ("-c", "user.name=slotline", "-c", "user.email=slotline@localhost")


# Where else the target branch is given (the messages name the CLI's option first).
_INTO_ELSEWHERE = "`into` over HTTP, MCP and Python"


@dataclass(frozen=True, slots=True)
class MergeResult:
    """A run's branch landed on `into`: the target moved from `old` to `commit`
    (`already`: the target held every commit of the branch; nothing moved), and with it
    the files of the `checkout` that has it, if one does."""

    task_id: str
    attempt: int
    branch: str
    into: str
    old: str
    commit: str
    squash: bool
    already: bool
    checkout: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "attempt": self.attempt,
            "branch": self.branch,
            "into": self.into,
            "old": self.old,
            "commit": self.commit,
            "squash": self.squash,
            "already": self.already,
            "checkout": self.checkout,
        }


def merge_run(
    task: Task,
    into: str | None = None,
    squash: bool = False,
    busy: Callable[[str], str | None] | None = None,
    into_checkout: bool = True,
) -> MergeResult:
    """Merge the branch of the latest run of `task` into `into` (default: the branch the
    task started from), as `git merge` would (a fast-forward when the target has not
    moved; with `squash`, one new commit); a checkout that has the target moves with it,
    files and index. Blocking: it runs git.

    Raises:
        InvalidInput: no target branch (a run started from a detached HEAD or a tag
            needs `into`), or `into` names no branch.
        InvalidTransition: the task is still running; the run committed nothing; the
            target is checked out in a worktree and `into_checkout` is false, or that
            worktree has uncommitted changes to tracked files or a merge or rebase in
            progress (`details["files"]`: the changed files); or the target moved while
            merging. Nothing was changed but,
            when the run's worktree held uncommitted changes, their commit on the run's
            branch (made before the merge, as slotline; a checkout off its branch, or
            a commit git refuses, is refused instead).
        MergeConflict: the branch does not merge cleanly (`details["files"]`); nothing
            was changed.

    `busy(path)` says which run works in the worktree at `path` now (a follow-up or a
    resumed attempt took it over), or None; asked holding the repository's lock, under
    which a run takes a folder over: its half-finished work is never merged.
    `into_checkout`: whether the caller may change the files of a checkout that has the
    target (the CLI on the store may; over HTTP and MCP only an admin, since a user
    picks both the repository and the target and could reach any checkout).
    """
    attempt, checkout = latest_run(task)
    short = task.id[:8]
    if task.status in (Status.RUNNING,) or attempt.finished_at is None:
        raise InvalidTransition(
            f"task {short} is {task.status.value}: merge it once its run has ended",
            status=task.status.value,
        )
    repo, branch = checkout.repo, checkout.branch
    target = _target(task, into, repo)
    old = branch_tip(repo, target)
    if old is None:
        raise InvalidInput(f"into: no branch {target!r} in {repo}")
    tip = branch_tip(repo, branch)
    if tip is None:
        raise InvalidTransition(f"the branch {branch} of task {short} is gone: nothing to merge")
    holder = checked_out_at(repo, target)
    if holder is not None:
        if not into_checkout:
            raise InvalidTransition(
                f"branch {target} is checked out in {holder}, and only an admin may merge "
                "into a branch a checkout has over HTTP or MCP (it changes that checkout's "
                "files); nothing was changed. Either ask an admin, or run slotline merge "
                f"{short} with the store itself (not through the server); or merge into a "
                f"branch no checkout has: slotline merge {short} --into BRANCH "
                f"({_INTO_ELSEWHERE})"
            )
        check_clean(holder, target, old)
    root = Path(checkout.path).parent.parent  # the node's worktree root: its lock files
    # No root here: no run can be working in the folder on this machine.
    with repolock.repo_lock(root, repo) if root.is_dir() else contextlib.nullcontext():
        working = None if busy is None else busy(checkout.path)
        if working is not None:
            raise InvalidTransition(
                f"the worktree of task {short} ({checkout.path}) was taken over: {working}; "
                "its work is not finished: merge once that run has ended"
            )
        if os.path.isdir(checkout.path) and has_uncommitted(checkout.path):
            tip = _commit_left_work(task, attempt, checkout.path, branch)
    if tip == checkout.base_commit:
        raise InvalidTransition(f"nothing to merge: task {short} committed nothing on {branch}")
    if _contains(repo, old, tip):
        return MergeResult(task.id, attempt.number, branch, target, old, old, squash, True)
    title = task.title or " ".join(task.command or ()) or short
    message = f"Merge slotline run {short}: {title}"[:200]
    with _scratch(repo, old) as place:
        new = _merged(place, tip, branch, squash, message)
    if holder is not None:
        fast_forward(holder, target, old, new, _NO_HOOKS)
        return MergeResult(task.id, attempt.number, branch, target, old, new, squash, False, holder)
    try:
        git(repo, "update-ref", "-m", f"slotline merge {branch}", f"refs/heads/{target}", new, old)
    except GitFailed:
        raise InvalidTransition(
            f"branch {target} moved while merging (it was at {old[:12]}); nothing was "
            "changed: merge again"
        ) from None
    return MergeResult(task.id, attempt.number, branch, target, old, new, squash, False)


def _commit_left_work(task: Task, attempt: Attempt, path: str, branch: str) -> str:
    """What the ended run left uncommitted in its worktree is part of its work (its diff
    shows it): commit it on the run's branch before merging; the branch's new tip."""
    off = removal.off_branch(path, branch)
    if off is not None:
        raise InvalidTransition(
            f"the worktree of task {task.id[:8]} ({path}) holds uncommitted changes and "
            f"{off}: commit them on {branch} there (or discard them), then merge again"
        )
    try:
        return removal.commit_left_work(task, attempt, path, f"{path}, before its merge")
    except GitFailed as exc:
        raise InvalidTransition(
            f"the uncommitted changes in the worktree of task {task.id[:8]} ({path}) could "
            f"not be committed on {branch} ({exc}); commit them there, then merge again"
        ) from None


def _target(task: Task, into: str | None, repo: str) -> str:
    target = into if into is not None else (task.isolation.base if task.isolation else None)
    if target is None:
        raise InvalidInput(
            f"task {task.id[:8]} started from a detached HEAD: give the branch to merge "
            f"into (--into BRANCH; {_INTO_ELSEWHERE})"
        )
    target = target.removeprefix("refs/heads/")
    if not plain_branch(repo, target):
        if into is not None:
            raise InvalidInput(
                f"into: {into!r} is not a branch name (a revision such as main~2 or "
                "main@{1} is not accepted): give the name of a local branch"
            )
        raise InvalidInput(
            f"task {task.id[:8]} started from {target!r}, which is not a branch: give the "
            f"branch to merge into (--into BRANCH; {_INTO_ELSEWHERE})"
        )
    if into is None and branch_tip(repo, target) is None:
        raise InvalidInput(
            f"task {task.id[:8]} started from {target!r}, which is not a branch: give the "
            f"branch to merge into (--into BRANCH; {_INTO_ELSEWHERE})"
        )
    return target


def plain_branch(repo: str, name: str) -> bool:
    """Whether `name` is a plain branch name (what `git check-ref-format` accepts under
    refs/heads/, not HEAD, not an option): no revision syntax (`main~2`, `main@{1}`,
    `main^`), which would name a commit rather than the branch slotline moves."""
    if not name or name.startswith("-") or name == "HEAD" or "@{" in name:
        return False
    try:
        git(repo, "check-ref-format", f"refs/heads/{name}")
    except GitFailed:
        return False
    return True


def _contains(repo: str, target: str, commit: str) -> bool:
    try:
        git(repo, "merge-base", "--is-ancestor", commit, target)
    except GitFailed:
        return False
    return True


@contextlib.contextmanager
def _scratch(repo: str, commit: str) -> Iterator[str]:
    """A temporary worktree of `repo` detached at `commit`, removed afterwards whatever
    happened (its registration too)."""
    folder = tempfile.mkdtemp(prefix="slotline-merge-")
    place = os.path.join(folder, "tree")
    try:
        try:
            repolock.retried(
                lambda: git(repo, "worktree", "add", "--quiet", "--detach", place, commit)
            )
        except GitFailed as exc:
            raise InvalidTransition(f"could not make a worktree to merge in: {exc}") from None
        yield place
    finally:
        with contextlib.suppress(GitFailed):
            repolock.retried(lambda: git(repo, "worktree", "remove", "--force", "--force", place))
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(GitFailed):
            if f"worktree {os.path.realpath(place)}" in git(
                repo, "worktree", "list", "--porcelain"
            ):
                repolock.retried(lambda: git(repo, "worktree", "prune"))


def _merged(place: str, tip: str, branch: str, squash: bool, message: str) -> str:
    """Merge `tip` into the scratch worktree's HEAD; the resulting commit.

    Raises:
        MergeConflict: the files that conflict.
    """
    config = [*_NO_HOOKS]
    if not _has_identity(place):
        config.extend(_IDENTITY)
    try:
        if squash:
            git(place, *config, "merge", "--squash", tip)
            git(place, *config, "commit", "--quiet", "--no-verify", "-m", message)
        else:
            git(place, *config, "merge", "--no-edit", "-m", message, tip)
    except GitFailed as exc:
        conflicted = git(place, "diff", "--name-only", "--diff-filter=U").splitlines()
        if conflicted:
            names = ", ".join(conflicted)
            raise MergeConflict(
                f"{branch} conflicts with the target in {names}: nothing was changed "
                "(rebase the branch, or merge it yourself and resolve them)",
                files=conflicted,
            ) from None
        raise InvalidTransition(f"git merge failed: {exc}; nothing was changed") from None
    return git(place, "rev-parse", "HEAD")


def _has_identity(place: str) -> bool:
    try:
        return bool(git(place, "config", "user.email")) and bool(git(place, "config", "user.name"))
    except GitFailed:
        return False
