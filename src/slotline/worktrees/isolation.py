"""Worktree isolation: the values a task and its attempts record, `git` run as an argv
list, and the check at submit that pins a task's repository and base commit.

A task with `isolation: worktree` runs each attempt in a git worktree of its repository,
on a branch of its own, created from the commit the task was pinned to at submit (a
recurring schedule's task: from its base as it is when its first attempt starts;
`worktrees/worktree.py` creates, measures and removes them).
"""

from __future__ import annotations

import enum
import os
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from slotline.errors import InvalidInput

if TYPE_CHECKING:
    from slotline.spec import TaskSpec

# A git command that takes longer than this is taken as hung.
GIT_TIMEOUT = 300.0


class WorktreeState(enum.StrEnum):
    """Where a run's worktree is: in use (or its run's end not applied yet), kept on disk
    after the run, or removed (its branch stays when it holds commits)."""

    ACTIVE = "active"
    KEPT = "kept"
    REMOVED = "removed"


class KeepPolicy(enum.StrEnum):
    """What happens to a run's worktree when the run ends (docs/config.md). Whatever
    it is, a prune removes a finished run's folder past `retain` or over `max_disk`,
    keeping its work on its branch (`worktrees/removal.py`)."""

    # Kept after a failed run (for a look at what went wrong); removed after a success
    # without uncommitted changes, or a cancel.
    ON_FAILURE = "on_failure"
    ALWAYS = "always"
    # Kept after the run (removed after a cancel) until its branch is merged
    # (`slotline merge`); then the next prune removes it.
    UNTIL_MERGED = "until_merged"
    # Removed whatever the outcome, uncommitted changes with it, and its branch with
    # it: the one policy that drops a run's committed work.
    NEVER = "never"


@dataclass(frozen=True, slots=True)
class Isolation:
    """How a task is isolated: in a worktree of `Task.repo`, from `base_commit` (pinned
    at submit); `base` is the ref it was given as, or the branch checked out then. A
    recurring schedule's task has no `base_commit`: its first attempt's worktree records
    the commit `base` (or HEAD) named when it started, and later attempts reuse it."""

    base: str | None
    base_commit: str | None
    keep: KeepPolicy = KeepPolicy.ON_FAILURE

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "worktree",
            "base": self.base,
            "base_commit": self.base_commit,
            "keep": self.keep.value,
        }


@dataclass(frozen=True, slots=True)
class DiffStat:
    """A run's changes against its base commit: committed and uncommitted work, new
    files included."""

    files: int
    insertions: int
    deletions: int

    def to_dict(self) -> dict[str, int]:
        return {"files": self.files, "insertions": self.insertions, "deletions": self.deletions}


@dataclass(frozen=True, slots=True)
class Merged:
    """A run's branch merged into `into` (`slotline merge`): the commit the target was
    moved to, when, and whether the run's commits were squashed into one."""

    into: str
    commit: str
    at: float
    squash: bool

    def to_dict(self) -> dict[str, Any]:
        at = datetime.fromtimestamp(self.at, UTC).isoformat().replace("+00:00", "Z")
        return {"into": self.into, "commit": self.commit, "at": at, "squash": self.squash}


@dataclass(frozen=True, slots=True)
class Worktree:
    """An attempt's worktree: its folder, its branch, the commit it started from, its
    state, once the run ended its diff stat, and once landed its merge."""

    path: str
    branch: str
    base_commit: str
    state: WorktreeState
    diff: DiffStat | None = None
    merged: Merged | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "branch": self.branch,
            "base_commit": self.base_commit,
            "state": self.state.value,
            "diff": None if self.diff is None else self.diff.to_dict(),
            "merged": None if self.merged is None else self.merged.to_dict(),
        }


class GitFailed(Exception):
    """A git command failed; the message is git's own last line of error."""


def git_env() -> dict[str, str]:
    """The environment git runs with: none of the caller's GIT_* variables (a GIT_DIR or
    GIT_INDEX_FILE would point it elsewhere), no prompt, messages in English."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return env


def git(where: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run `git -C where ARGS…` (an argv list, never a shell); its stdout, stripped.

    Raises:
        GitFailed: git is missing, timed out or exited non-zero (its error message).
    """
    try:
        done = subprocess.run(
            ["git", "-C", where, *args],
            capture_output=True,
            text=True,
            env=env or git_env(),
            timeout=GIT_TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        raise GitFailed("git is not installed (or not on PATH)") from None
    except subprocess.TimeoutExpired:
        raise GitFailed(f"git {args[0]} took longer than {GIT_TIMEOUT:g}s") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        raise GitFailed(lines[-1] if lines else f"git {args[0]} exited {done.returncode}")
    return done.stdout.strip()


def commit_of(repo: str, ref: str) -> str:
    """The commit id `ref` names in `repo`.

    Raises:
        GitFailed: `ref` names no commit there.
    """
    return git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")


def branch_tip(repo: str, branch: str) -> str | None:
    """The commit `refs/heads/BRANCH` points at in `repo`, or None."""
    # show-ref matches the ref by name only: revision syntax (`main~2`, `main@{1}`) in
    # `branch` names no ref, where rev-parse would resolve it to a commit.
    try:
        return git(repo, "show-ref", "--verify", "--hash", f"refs/heads/{branch}") or None
    except GitFailed:
        return None


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
