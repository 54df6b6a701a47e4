"""Landing's git work runs on a small pool of its own: however many diffs, merges or
listings are slow at once, asyncio's default pool (a node's heartbeat and claims) keeps
room."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from gitrepos import make_repo
from slotline.api.queue import open_queue
from slotline.worktrees import gitpool, inventory, worktree
from slotline.worktrees.orphans import store_root
from waiting import until_async


def test_slow_git_work_leaves_the_default_pool_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(_slow_git_work(tmp_path, monkeypatch))


async def _slow_git_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path / "repo")
    release = threading.Event()
    inside: list[int] = []

    def stuck(path: str) -> int:  # a disk walk (or git) that takes its time
        inside.append(1)
        release.wait(60)
        return 0

    async with open_queue(tmp_path / "store.db") as queue:
        task = await queue.submit(["true"], isolation="worktree", repo=str(repo))
        store = queue.store
        (claim,) = store.claim("elsewhere").claims
        root = store_root(tmp_path / "data" / "worktrees", store.url)
        made = worktree.create(root, str(repo), "HEAD", task.id, 1)
        store.record_worktree(
            claim.attempt.id, claim.attempt.token, made.path, made.branch, made.base_commit
        )
        monkeypatch.setattr(inventory, "disk_usage", stuck)
        # Given many more slow listings at once than the default pool has threads,
        calls = [asyncio.ensure_future(queue.landing.worktrees()) for _ in range(40)]
        try:
            await until_async(lambda: len(inside) >= gitpool.WORKERS, what="git work started")
            # a call on the default pool (a heartbeat) still runs at once,
            assert await asyncio.wait_for(asyncio.to_thread(time.time), 10) > 0
            # and no more git work than the pool's runs at once.
            assert len(inside) == gitpool.WORKERS
        finally:
            release.set()
            done = await asyncio.gather(*calls)
        assert all(len(found) == 1 for found in done)
