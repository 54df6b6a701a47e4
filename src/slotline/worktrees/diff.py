"""A run's changes as a patch: committed and uncommitted work in its worktree (or on its
branch once the worktree is gone) against the commit it started from, capped in size."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

from slotline.errors import InvalidInput, InvalidTransition
from slotline.models import Attempt, Task
from slotline.worktrees import changes
from slotline.worktrees.git import GIT_TIMEOUT, GitFailed, branch_tip, git_env
from slotline.worktrees.isolation import Checkout, DiffStat

# A patch longer than this is cut (at a line end) and marked truncated: a dashboard page
# or an API answer stays small whatever an agent wrote (a vendored tree, a lock file).
DIFF_MAX_BYTES = 1_000_000


@dataclass(frozen=True, slots=True)
class RunDiff:
    """The changes of a task's latest run with a worktree: where they were read
    (`worktree`, or `branch` once the worktree is gone, or `recorded`: a run that changed
    nothing, whose worktree and empty branch went when it ended), their stat, and the patch
    (empty with `stat` only; `truncated` when cut at `max_bytes`)."""

    task_id: str
    attempt: int
    branch: str
    base_commit: str
    source: str
    stat: DiffStat
    text: str
    truncated: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "attempt": self.attempt,
            "branch": self.branch,
            "base_commit": self.base_commit,
            "source": self.source,
            "stat": self.stat.to_dict(),
            "text": self.text,
            "truncated": self.truncated,
        }


def latest_run(task: Task) -> tuple[Attempt, Checkout]:
    """The latest attempt of `task` that recorded a worktree, as a checkout.

    Raises:
        InvalidInput: the task does not run in worktrees.
        InvalidTransition: no run of it has made a worktree yet.
    """
    if task.isolation is None or task.repo is None:
        raise InvalidInput(
            f"task {task.id[:8]} does not run in a worktree (submit it with --worktree, or "
            "an agent type with isolation: worktree): it has no branch to diff or merge"
        )
    recorded = [a for a in task.attempts if a.worktree is not None]
    if not recorded:
        raise InvalidTransition(
            f"task {task.id[:8]} is {task.status.value} and no run of it has made its worktree yet",
            status=task.status.value,
        )
    attempt = max(recorded, key=lambda a: a.number)
    tree = attempt.worktree
    assert tree is not None
    return attempt, Checkout(task.repo, tree.path, tree.branch, tree.base_commit)


def run_diff(task: Task, stat_only: bool = False, max_bytes: int = DIFF_MAX_BYTES) -> RunDiff:
    """What the latest run of `task` changed against its base commit: in its worktree
    (committed, staged, unstaged and new files; nothing is written to the worktree or
    the repository), else on its branch.

    Raises:
        InvalidInput, InvalidTransition: as `latest_run`; also when neither the run's
            worktree nor its branch is left.
    """
    attempt, checkout = latest_run(task)
    in_worktree = os.path.isdir(checkout.path)
    if not in_worktree and branch_tip(checkout.repo, checkout.branch) is None:
        recorded = attempt.worktree.diff if attempt.worktree is not None else None
        if recorded is not None and recorded.files == 0:
            # The run changed nothing: its worktree went, and its branch with no commit
            # of its own, when it ended. The stat measured then is the whole diff.
            return RunDiff(
                task.id, attempt.number, checkout.branch, checkout.base_commit,
                "recorded", recorded, "", False,
            )  # fmt: skip
        raise InvalidTransition(
            f"the worktree and the branch {checkout.branch} of task {task.id[:8]} are both "
            "gone: nothing is left to diff"
        )
    stat = changes.measure(checkout) or DiffStat(0, 0, 0)
    text, truncated = "", False
    if not stat_only:
        try:
            text, truncated = _patch(checkout, in_worktree, max_bytes)
        except GitFailed as exc:
            raise InvalidTransition(f"git could not diff {checkout.branch}: {exc}") from None
    return RunDiff(
        task.id, attempt.number, checkout.branch, checkout.base_commit,
        "worktree" if in_worktree else "branch", stat, text, truncated,
    )  # fmt: skip


def _patch(checkout: Checkout, in_worktree: bool, max_bytes: int) -> tuple[str, bool]:
    args = ["diff", "--no-color", "--no-ext-diff", "--no-textconv", checkout.base_commit]
    if not in_worktree:
        return _capped(checkout.repo, [*args, checkout.branch], git_env(), max_bytes)
    with changes.scratch_index(checkout.path) as env:
        return _capped(checkout.path, args, env, max_bytes)


def _capped(
    where: str,
    args: list[str],
    env: dict[str, str],
    max_bytes: int,
    deadline: float = GIT_TIMEOUT,
) -> tuple[str, bool]:
    """git's output, at most `max_bytes` of it (cut at the last line end), and whether
    it was cut; git is stopped once that much is read. Its stderr goes to a temporary
    file (a pipe nobody reads would block git once full: a repository's warnings), and
    git (with whatever it started) is killed at `deadline` seconds.

    Raises:
        GitFailed: git failed (its last line of error), or took longer than `deadline`.
    """
    late = threading.Event()
    with (
        tempfile.TemporaryFile() as errors,
        subprocess.Popen(
            ["git", "-C", where, *args],
            stdout=subprocess.PIPE,
            stderr=errors,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # its own process group: killed with what it started
        ) as proc,
    ):
        assert proc.stdout is not None

        def kill() -> None:
            late.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(deadline, kill)
        timer.start()
        try:
            data = proc.stdout.read(max_bytes + 1)
            truncated = len(data) > max_bytes
            if truncated:
                kill()
            proc.wait()
        finally:
            timer.cancel()
        if truncated:
            data = data[:max_bytes]
            data = data[: data.rfind(b"\n") + 1] or data
            return data.decode("utf-8", errors="replace"), True
        if late.is_set():
            raise GitFailed(f"git {args[0]} took longer than {deadline:g}s")
        if proc.returncode != 0:
            errors.seek(max(0, errors.seek(0, os.SEEK_END) - 4096))  # its last words
            lines = errors.read().decode(errors="replace").strip().splitlines()
            raise GitFailed(lines[-1] if lines else f"git diff exited {proc.returncode}")
    return data.decode("utf-8", errors="replace"), False
