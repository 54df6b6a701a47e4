"""Landing on a branch someone has checked out (the user's `main`): as `git merge` there,
only into a clean checkout still where it was checked, so that git moves the branch and
updates the files and the index together; anything else is refused, changing nothing."""

from __future__ import annotations

import os

from slotline.errors import InvalidTransition
from slotline.worktrees.git import GitFailed, git

# What git leaves in a checkout's git folder while an operation waits for its user.
_IN_PROGRESS = {
    "MERGE_HEAD": "a merge",
    "CHERRY_PICK_HEAD": "a cherry-pick",
    "REVERT_HEAD": "a revert",
    "rebase-merge": "a rebase",
    "rebase-apply": "a rebase (or git am)",
}
# A refusal names at most this many changed files (`details["files"]` holds them all).
_MAX_NAMED = 10


def checked_out_at(repo: str, branch: str) -> str | None:
    """The folder of a worktree (the main checkout included) that has `branch` checked
    out, or None."""
    folder = None
    for line in git(repo, "worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree "):
            folder = line.removeprefix("worktree ")
        elif line == f"branch refs/heads/{branch}":
            return folder
    return None


def check_clean(folder: str, branch: str, commit: str) -> None:
    """That the checkout at `folder` still has `branch` checked out at `commit`, with no
    uncommitted change to a tracked file (staged or not) and no merge or rebase waiting
    (untracked files are fine, as for `git merge`).

    Raises:
        InvalidTransition: it is not; the message names the changed files.
    """
    if not os.path.isdir(folder):
        raise InvalidTransition(
            f"branch {branch} is checked out in {folder}, which is missing; nothing was "
            "changed: remove its registration (git worktree prune), then merge again"
        )
    head: str | None
    try:
        head, at = git(folder, "symbolic-ref", "--quiet", "HEAD"), git(folder, "rev-parse", "HEAD")
    except GitFailed:
        head = at = None
    if head != f"refs/heads/{branch}" or at != commit:
        raise InvalidTransition(
            f"branch {branch} moved in {folder} while merging (it was at {commit[:12]}); "
            "nothing was changed: merge again"
        )
    asked = [arg for marker in _IN_PROGRESS for arg in ("--git-path", marker)]
    paths = git(folder, "rev-parse", *asked).splitlines()
    for operation, path in zip(_IN_PROGRESS.values(), paths, strict=True):
        if os.path.exists(os.path.join(folder, path)):
            raise InvalidTransition(
                f"branch {branch} is checked out in {folder}, where {operation} is in "
                "progress; nothing was changed: finish or abort it there, then merge again"
            )
    changed = sorted(
        {
            *git(folder, "diff", "--name-only", "--no-renames").splitlines(),
            *git(folder, "diff", "--cached", "--name-only", "--no-renames").splitlines(),
        }
    )
    if changed:
        named = ", ".join(changed[:_MAX_NAMED])
        more = f" and {len(changed) - _MAX_NAMED} more" if len(changed) > _MAX_NAMED else ""
        raise InvalidTransition(
            f"branch {branch} is checked out in {folder}, which has uncommitted changes in "
            f"{named}{more}; nothing was changed: commit or stash them there, then merge "
            "again",
            files=changed,
        )


def fast_forward(folder: str, branch: str, old: str, new: str, hooks_off: tuple[str, ...]) -> None:
    """Move the checkout at `folder` from `old` to `new` (a merge already made, whose
    first parent line leads to `old`) with `git merge --ff-only` there: the branch, the
    index and the files move together, or nothing does (git refuses before writing,
    e.g. an untracked file would be overwritten).

    Raises:
        InvalidTransition: the checkout moved or was changed since it was checked, or
            git refused; nothing was changed.
    """
    check_clean(folder, branch, old)
    try:
        git(folder, *hooks_off, "merge", "--ff-only", "--quiet", new)
    except GitFailed as exc:
        raise InvalidTransition(
            f"git merge in {folder} refused to move {branch} ({exc}); nothing was changed"
        ) from None
