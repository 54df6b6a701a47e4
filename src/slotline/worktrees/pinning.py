"""The check at submit that pins a worktree task's repository and base commit, made by
the submit verb before its transaction (a recurring schedule's task is located, not
pinned: it starts from its base as it is when each run starts)."""

from __future__ import annotations

import os

from slotline.errors import InvalidInput
from slotline.spec import TaskSpec
from slotline.worktrees.git import GitFailed, commit_of, git


def pin(spec: TaskSpec) -> TaskSpec:
    """`spec` with its repository as its top-level folder and, for worktree isolation,
    its base pinned to a commit id: the given ref's, else HEAD's (then `base` names the
    branch checked out, if any). Runs git only for tasks with isolation.

    Raises:
        InvalidInput: the repository is missing or not a git repository, or the base
            names no commit (the message says which, and what to do).
    """
    return _checked(spec, pinned=True)


def locate(spec: TaskSpec) -> TaskSpec:
    """`spec` checked as `pin` checks it, with its repository as its top-level folder,
    but its base left as given (a recurring schedule's task starts from its base as it
    is when each run starts; a `base_commit` given is kept, as a full commit id).

    Raises:
        InvalidInput: as `pin`.
    """
    return _checked(spec, pinned=False)


def _checked(spec: TaskSpec, pinned: bool) -> TaskSpec:
    if spec.isolation is None or spec.repo is None:
        return spec
    repo = spec.repo
    if not os.path.isdir(repo):
        raise InvalidInput(f"repo: {repo} does not exist (give an existing git repository)")
    try:
        top = git(repo, "rev-parse", "--show-toplevel")
    except GitFailed as exc:
        raise InvalidInput(f"repo: {repo} is not a git repository ({exc})") from None
    base = spec.base
    try:
        if spec.base_commit is not None:
            commit: str | None = commit_of(top, spec.base_commit)
        elif base is not None:
            commit = commit_of(top, base)
        else:
            commit = commit_of(top, "HEAD")
            if pinned:
                try:
                    base = git(top, "symbolic-ref", "--quiet", "--short", "HEAD")
                except GitFailed:
                    base = None  # a detached HEAD: the commit says it all
    except GitFailed:
        given = spec.base_commit or base or "HEAD"
        if given == "HEAD":
            raise InvalidInput(
                f"repo: {top} has no commit yet; commit something first, it is what a "
                "worktree starts from"
            ) from None
        raise InvalidInput(f"base: {given!r} names no commit in {top}") from None
    if not pinned and spec.base_commit is None:
        commit = None
    return spec.model_copy(update={"repo": top, "base": base, "base_commit": commit})
