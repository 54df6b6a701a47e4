"""What a run changed in its git worktree, read without writing anything: the diff stat
against its base commit (committed, staged, unstaged and new files) through a copy of
the worktree's index, and whether it holds uncommitted work. Blocking: it runs git."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING

from slotline.worktrees.git import GitFailed, branch_tip, git, git_env
from slotline.worktrees.isolation import DiffStat

if TYPE_CHECKING:
    from slotline.worktrees.isolation import Checkout

_STAT = re.compile(r"(\d+) (file|insertion|deletion)")


def measure(checkout: Checkout) -> DiffStat | None:
    """The changes of a run against its base commit: committed, staged, unstaged and new
    (untracked, not ignored) files, read through a copy of the worktree's index so the
    worktree itself is left as it is, and nothing is written to the repository (new
    files are compared from disk, never stored as objects). Without the worktree, what
    its branch holds; None when neither is left."""
    path = checkout.path
    try:
        if os.path.isdir(path):
            with scratch_index(path) as env:
                text = git(path, "diff", "--shortstat", checkout.base_commit, env=env)
        elif branch_tip(checkout.repo, checkout.branch) is not None:
            text = git(checkout.repo, "diff", "--shortstat", checkout.base_commit, checkout.branch)
        else:
            return None
    except GitFailed:
        return None
    counts = {kind: int(n) for n, kind in _STAT.findall(text)}
    return DiffStat(counts.get("file", 0), counts.get("insertion", 0), counts.get("deletion", 0))


@contextlib.contextmanager
def scratch_index(path: str) -> Iterator[dict[str, str]]:
    """The git environment of a temporary copy of a worktree's index, where its new
    files are added as intent-to-add: `git diff BASE` there shows committed, staged,
    unstaged and new work, and the worktree, its index and the repository's objects
    are left as they are.

    Raises:
        GitFailed: git cannot read the worktree.
    """
    with tempfile.TemporaryDirectory(prefix="slotline-index-") as scratch:
        index = os.path.join(scratch, "index")
        own = os.path.join(path, git(path, "rev-parse", "--git-path", "index"))
        if os.path.exists(own):
            shutil.copyfile(own, index)
        env = {**git_env(), "GIT_INDEX_FILE": index}
        # Intent-to-add records new files' paths in the copy without hashing them into
        # the repository's objects (a build output, a `.env`).
        git(path, "add", "--all", "--intent-to-add", env=env)
        yield env


def has_uncommitted(path: str) -> bool:
    """Whether a worktree holds changes not committed (new files included)."""
    try:
        return bool(git(path, "status", "--porcelain", "--untracked-files=normal"))
    except GitFailed:
        return os.path.isdir(path)  # unreadable: as if it held work
