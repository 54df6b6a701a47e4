"""A run's git worktree, as git operations: created before the command starts, measured
(`changes`) and kept or removed when it ends, removed when nothing owns it any more.

Every function here blocks (it runs git): the supervisor calls them in a worker thread.
Worktrees live under a folder of slotline's own (`<data dir>/worktrees/store-<hash>/
<repo>-<hash>/<task id>-<attempt>`), outside the repository, so they never show in its `git status`;
each is on its own branch, `slotline/<task id>-<attempt>`. Operations that change a
repository's worktree list are serialized per repository by a lock file beside that
folder (`repolock`: `git worktree add` locks the repository, and a second one at once
can fail) and retried when the repository is locked by someone else.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from slotline.worktrees.changes import has_uncommitted, measure
from slotline.worktrees.git import GitFailed, branch_tip, commit_of, git
from slotline.worktrees.isolation import Checkout, DiffStat, KeepPolicy, WorktreeState
from slotline.worktrees.repolock import repo_folder, repo_lock, retried

BRANCH_PREFIX = "slotline/"
# `<task id>-<attempt number>`: the name of a worktree's folder (and its branch's tail).
_NAME = re.compile(r"^(?P<task>[0-9a-f]{32})-(?P<number>[0-9]+)$")


class WorktreeError(Exception):
    """A worktree could not be created; the attempt fails with this reason."""


def place(root: Path, repo: str, task_id: str, number: int) -> tuple[Path, str]:
    """The folder and branch of attempt `number` of a task working on `repo`."""
    folder = repo_folder(root, repo)
    return folder / f"{task_id}-{number}", f"{BRANCH_PREFIX}{task_id}-{number}"


def parse_name(folder: Path) -> tuple[str, int] | None:
    """(task id, attempt number) of a worktree folder slotline made, else None."""
    found = _NAME.match(folder.name)
    return None if found is None else (found["task"], int(found["number"]))


def workdir(checkout: Checkout, workspace: str | None) -> str:
    """Where the command runs: the worktree, or the same subfolder of it as the task's
    workspace is of its repository (when that folder exists in the worktree)."""
    if workspace:
        inside = os.path.relpath(os.path.realpath(workspace), os.path.realpath(checkout.repo))
        if inside != "." and not inside.startswith(".."):
            sub = os.path.join(checkout.path, inside)
            if os.path.isdir(sub):
                return sub
    return checkout.path


def create(root: Path, repo: str, base: str, task_id: str, number: int) -> Checkout:
    """Create (or, after a crash, find again) the worktree of attempt `number`: a new
    branch at `base` (a commit id or a ref), checked out in a folder under `root`.

    Raises:
        WorktreeError: the repository is gone or not a git repository, the base names
            no commit, or git refused (the message says which).
    """
    if not os.path.isdir(repo):
        raise WorktreeError(f"repository {repo} does not exist")
    try:
        git(repo, "rev-parse", "--show-toplevel")
    except GitFailed as exc:
        raise WorktreeError(f"{repo} is not a git repository ({exc})") from None
    try:
        commit = commit_of(repo, base)
    except GitFailed:
        raise WorktreeError(f"base {base!r} names no commit in {repo}") from None
    path, branch = place(root, repo, task_id, number)
    checkout = Checkout(repo, str(path), branch, commit)
    with repo_lock(root, repo):
        if path.exists():
            if _branch_of(path) == branch:  # made by this attempt before its node died
                return checkout
            raise WorktreeError(f"{path} is in the way and is not this run's worktree")
        try:
            if branch_tip(repo, branch) is None:
                add = ["worktree", "add", "--quiet", "-b", branch, str(path), commit]
            else:  # the branch outlived a worktree removed by hand: carry on with it
                add = ["worktree", "add", "--quiet", str(path), branch]
            try:
                retried(lambda: git(repo, *add))
            except GitFailed:
                if not _stale_registration(repo, path):
                    raise
                _prune(repo)  # a crash left this path registered: clear it, once
                retried(lambda: git(repo, *add))
        except GitFailed as exc:
            raise WorktreeError(f"git worktree add failed: {exc}") from None
    return checkout


def reopen(root: Path, checkout: Checkout) -> Checkout:
    """The worktree of an earlier run, for a run that resumes its session: as it is if
    its folder is still on its branch, else checked out again from its branch.

    Raises:
        WorktreeError: its folder is in the way, or its branch is gone.
    """
    with repo_lock(root, checkout.repo):
        return reopen_locked(checkout)


def reopen_locked(checkout: Checkout) -> Checkout:
    """`reopen`, for a caller holding `repo_lock` (it records the run in the folder
    before letting the lock go: a prune or a sweep then sees the folder held)."""
    path = Path(checkout.path)
    if path.exists():
        if _branch_of(path) == checkout.branch:
            return checkout
        raise WorktreeError(f"{path} is in the way and is not the resumed run's worktree")
    if branch_tip(checkout.repo, checkout.branch) is None:
        raise WorktreeError(
            f"the resumed run's worktree {path} and its branch {checkout.branch} are gone, "
            "and its work was never merged: there is nothing to continue in; submit a new "
            "task instead"
        )
    add = ["worktree", "add", "--quiet", str(path), checkout.branch]
    try:
        retried(lambda: git(checkout.repo, *add))
    except GitFailed as exc:
        raise WorktreeError(f"git worktree add failed: {exc}") from None
    return checkout


def should_remove(keep: KeepPolicy, ended: str, uncommitted: bool) -> bool:
    """The policy, as one decision: remove the worktree of a run that `ended`
    (succeeded, failed or cancelled)?"""
    if keep is KeepPolicy.ALWAYS:
        return False
    if keep is KeepPolicy.NEVER or ended == "cancelled":
        return True
    if keep is KeepPolicy.UNTIL_MERGED:
        return False  # a prune removes it once its branch is merged
    return ended == "succeeded" and not uncommitted


def settle(
    root: Path,
    checkout: Checkout,
    keep: KeepPolicy,
    ended: str,
    unless: Callable[[], bool] | None = None,
) -> tuple[WorktreeState, DiffStat | None]:
    """At a run's end: measure its changes, then keep or remove its worktree by `keep`.
    A branch is deleted only when it holds no commit of its own, or with its folder when
    `keep` is `never` (the one policy that drops the run's work). `unless`: as for
    `remove` (true: the worktree is left, and said kept)."""
    diff = measure(checkout)
    if not os.path.isdir(checkout.path):
        remove(root, checkout, unless)  # its registration and an empty branch
        return WorktreeState.REMOVED, diff
    if should_remove(keep, ended, has_uncommitted(checkout.path)):
        if not remove(root, checkout, unless):
            return WorktreeState.KEPT, diff
        if keep is KeepPolicy.NEVER:
            delete_branch(root, checkout.repo, checkout.branch)
        return WorktreeState.REMOVED, diff
    return WorktreeState.KEPT, diff


def delete_branch(root: Path, repo: str, branch: str, expected: str | None = None) -> bool:
    """Delete `branch` of `repo` (its commits with it, unless another ref holds them),
    unless it is checked out in a worktree or (given `expected`) has moved from there;
    whether it is gone. Never fails."""
    with repo_lock(root, repo):
        return delete_branch_locked(repo, branch, expected)


def delete_branch_locked(repo: str, branch: str, expected: str | None = None) -> bool:
    """`delete_branch`, for a caller holding `repo_lock`."""
    tip = branch_tip(repo, branch)
    if tip is None:
        return True
    if expected is not None and tip != expected:
        return False
    with contextlib.suppress(GitFailed):
        listed = git(repo, "worktree", "list", "--porcelain").splitlines()
        if f"branch refs/heads/{branch}" in listed:
            return False
        retried(lambda: git(repo, "update-ref", "-d", f"refs/heads/{branch}", tip))
        return True
    return False


def here(checkout: Checkout) -> bool:
    """Whether a run's worktree is on this machine: its folder is here, or (its folder
    removed) its repository here holds its branch. Another machine's worktree, at the
    same path under the same data folder layout, has neither: its branch was made in
    that machine's clone."""
    if os.path.isdir(checkout.path):
        return True
    return os.path.isdir(checkout.repo) and branch_tip(checkout.repo, checkout.branch) is not None


def remove(root: Path, checkout: Checkout, unless: Callable[[], bool] | None = None) -> bool:
    """Remove a worktree (uncommitted changes with it) and its branch if that holds no
    commit of its own (its tip is the base commit); whether it did. Never fails: what
    is left is left. `unless`, asked once the repository's lock is held, leaves it all
    as it is when true (a run has taken the folder over meanwhile)."""
    with repo_lock(root, checkout.repo):
        if unless is not None and unless():
            return False
        remove_locked(checkout)
        return True


def remove_locked(checkout: Checkout, empty_branch: bool = True) -> None:
    """`remove`, for a caller holding `repo_lock`; the branch is left when not
    `empty_branch`."""
    repo, path = checkout.repo, checkout.path
    if not os.path.isdir(repo):  # the repository is gone: only the folder is left
        shutil.rmtree(path, ignore_errors=True)
        return
    if os.path.isdir(path):
        with contextlib.suppress(GitFailed):
            retried(lambda: git(repo, "worktree", "remove", "--force", "--force", path))
        shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(GitFailed):
        if _stale_registration(repo, path):  # git could not remove it: rmtree did
            _prune(repo)
        if empty_branch and branch_tip(repo, checkout.branch) == checkout.base_commit:
            # Deleted only if it still points there (git checks, atomically).
            ref = f"refs/heads/{checkout.branch}"
            retried(lambda: git(repo, "update-ref", "-d", ref, checkout.base_commit))


def remove_orphan(
    root: Path, folder: Path, unless: Callable[[], str | None] | None = None
) -> str | None:
    """Remove a worktree folder nothing in the store owns (its task is gone), through its
    repository, unless it holds work: uncommitted changes (new files included), commits
    of a detached HEAD that no branch or tag holds, or anything git cannot read. Its
    branch is deleted only if another branch or tag holds every commit of it.

    `unless`, asked once the repository's lock is held, says why to leave it (a run
    has taken the folder over meanwhile), or None.

    Returns:
        None when it was removed, else why it was kept (for the log).
    """
    path = str(folder)
    try:
        common = os.path.join(folder, git(path, "rev-parse", "--git-common-dir"))
    except GitFailed as exc:
        return _unreadable(exc)
    branch = _branch_of(folder)  # None: a detached HEAD
    common = os.path.realpath(common)
    repo = str(Path(common).parent) if Path(common).name == ".git" else common
    with repo_lock(root, repo):
        kept = None if unless is None else unless()
        kept = kept or _work_in(path)
        if kept is not None:
            return kept
        tip = None if branch is None else branch_tip(repo, branch)
        with contextlib.suppress(GitFailed):
            retried(lambda: git(repo, "worktree", "remove", "--force", path))
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(GitFailed):
            if _stale_registration(repo, path):
                _prune(repo)
            if branch is not None and tip is not None and branch.startswith(BRANCH_PREFIX):
                holders = git(
                    repo, "for-each-ref", "--contains", tip, "--format=%(refname)",
                    "refs/heads", "refs/tags",
                ).split()  # fmt: skip
                if any(ref != f"refs/heads/{branch}" for ref in holders):
                    retried(lambda: git(repo, "update-ref", "-d", f"refs/heads/{branch}", tip))
    return None


def orphan_work(folder: Path) -> str | None:
    """What `remove_orphan` would keep the folder for (see there), or None: it would
    remove it. Reads only."""
    try:
        git(str(folder), "rev-parse", "--git-common-dir")
    except GitFailed as exc:
        return _unreadable(exc)
    return _work_in(str(folder))


def _unreadable(exc: GitFailed) -> str:
    return f"git cannot read it ({exc})"


def _work_in(path: str) -> str | None:
    """What of a worktree's work removing it would lose, or None."""
    if has_uncommitted(path):
        return "it holds uncommitted changes"
    try:
        stray = git(path, "rev-list", "--max-count=1", "HEAD", "--not", "--branches", "--tags")
    except GitFailed as exc:
        return f"git cannot read its commits ({exc})"
    if stray:
        return "its HEAD holds commits on no branch or tag"
    return None


def _stale_registration(repo: str, path: str | Path) -> bool:
    """Whether `repo` still lists a worktree at `path` whose folder is gone."""
    listed = git(repo, "worktree", "list", "--porcelain").splitlines()
    return f"worktree {os.path.realpath(path)}" in listed and not os.path.isdir(path)


def _prune(repo: str) -> None:
    # `git worktree prune` forgets every worktree of the repository whose folder is
    # missing, the user's too (one on an unmounted drive): run only when a folder of
    # slotline's own was removed without git, so its registration must go.
    retried(lambda: git(repo, "worktree", "prune"))


def _branch_of(path: Path) -> str | None:
    try:
        return git(str(path), "symbolic-ref", "--quiet", "--short", "HEAD")
    except GitFailed:
        return None
