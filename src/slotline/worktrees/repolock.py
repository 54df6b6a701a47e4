"""The lock on a repository's worktree list, per worktree root: operations that change
it (`git worktree add`, a removal, a prune's or a sweep's) are serialized by a lock file
beside the repository's worktree folder (across threads and processes), and retried
when the repository is locked by a git command of someone else's. A run that takes
over an existing folder records it holding this lock, and a removal reads the store
again holding it: neither acts on what the other changed meanwhile."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from slotline.worktrees.git import GitFailed

# A repository busy with another git command: worth a retry, a moment later.
_LOCKED = ("lock", "busy")
RETRIES = 6


def repo_folder(root: Path, repo: str) -> Path:
    """The folder under `root` of the worktrees of `repo` (named after it, with a hash
    of its path); its lock file is beside it."""
    digest = hashlib.sha256(repo.encode()).hexdigest()[:10]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(repo).name)[:40] or "repo"
    return root / f"{name}-{digest}"


@contextlib.contextmanager
def repo_lock(root: Path, repo: str) -> Iterator[None]:
    """Hold the lock on `repo`'s worktree list (across threads and processes). Not
    reentrant: code holding it calls the `_locked` variants below."""
    lock = RepoLock(root, repo)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


class RepoLock:
    """`repo_lock` as an object, for a holder that takes it in one worker thread and
    lets it go in another (a node holds it across a store call made from async code)."""

    def __init__(self, root: Path, repo: str) -> None:
        self._path = repo_folder(root, repo).with_suffix(".lock")
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        """Take it (blocking)."""
        self._path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = open(self._path, "a")  # noqa: SIM115 - closed by release()
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
        except BaseException:
            lock.close()
            raise
        self._file = lock

    def release(self) -> None:
        """Let it go."""
        lock, self._file = self._file, None
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_UN)
            lock.close()


def retried(action: Callable[[], str]) -> str:
    """Run a git action again while the repository is locked by another git command."""
    delay = 0.1
    for attempt in range(RETRIES):
        try:
            return action()
        except GitFailed as exc:
            if attempt == RETRIES - 1 or not any(word in str(exc).lower() for word in _LOCKED):
                raise
        time.sleep(delay)  # a worker thread waiting for another process's git command
        delay *= 2
    raise AssertionError("unreachable")
