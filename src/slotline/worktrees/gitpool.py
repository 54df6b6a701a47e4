"""A small pool of threads of its own for the git work of landing and worktree upkeep
(a diff, a merge, a prune, the worktrees listed with their sizes, a node's sweep): each
call may take up to GIT_TIMEOUT, and on asyncio's default pool (`asyncio.to_thread`) a
few of them at once would leave no thread to a node's heartbeat and claims, so that a
PostgreSQL node would be taken for dead. Here at most `WORKERS` run at once, the rest
wait their turn, and the default pool always has room.

The worktrees of runs (made before a command starts, settled when it ends) have a pool
of their own too, `run_worktree`: several runs start at once, each a checkout of the whole
tree, and a landing's work must not wait behind them, nor they behind it.

What holds a worktree lock that git work here waits for (`worktree.RepoLock`) must let
it go outside these pools, never queued behind that work.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

# Git calls of landing and upkeep that run at once in one process.
WORKERS = 2
# Worktrees of runs made or settled at once in one process.
WORKTREE_WORKERS = 4

# Their threads are started on first use, and end with the process.
_POOL = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="slotline-git")
_WORKTREES = ThreadPoolExecutor(max_workers=WORKTREE_WORKERS, thread_name_prefix="slotline-wt")


def executor() -> ThreadPoolExecutor:
    """The process's pool for git work."""
    return _POOL


async def run_git(function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`asyncio.to_thread`, on the pool for git work: call `function` there (with the
    caller's context variables) and wait for it."""
    return await _run_on(executor(), function, *args, **kwargs)


async def run_worktree(function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`run_git`, on the pool for the worktrees of runs."""
    return await _run_on(_WORKTREES, function, *args, **kwargs)


async def _run_on(
    pool: ThreadPoolExecutor, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs
) -> R:
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, function, *args, **kwargs)
    return await loop.run_in_executor(pool, call)
