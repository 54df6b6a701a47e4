"""`logs -f` on a task whose retry runs to its end between two of the follower's reads
(what a busy machine does): the follower still prints the retry's output."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from slotline.cli.logs import _follow, _local_copier
from slotline.models import Attempt, Task
from slotline.store import Store, open_store


def run_attempt(store: Store, tmp_path: Path, number: int, text: str, code: int) -> None:
    """Claim the task's next attempt, give it a log holding `text`, finish it with `code`."""
    (claim,) = store.claim("n").claims
    log = tmp_path / f"{number}.log"
    log.write_text(text)
    store.record_start(claim.attempt.id, claim.attempt.token, None, None, str(log))
    store.finish(claim.attempt.id, claim.attempt.token, code)


def test_a_retry_that_ran_meanwhile_is_followed_too(tmp_path: Path) -> None:
    with open_store(tmp_path / "s.db") as store:
        task = store.submit({"command": ["true"], "max_attempts": 2, "backoff": 0})
        (claim,) = store.claim("n").claims
        first_log = tmp_path / "1.log"
        first_log.write_text("one\n")
        store.record_start(claim.attempt.id, claim.attempt.token, None, None, str(first_log))
        out = io.BytesIO()
        local = _local_copier(out)
        calls = 0

        async def copy(seen: Task, attempt: Attempt, offset: int) -> int | None:
            # While the follower copies attempt 1 (still running when it looked), attempt 1
            # fails and the retry runs to its end, before the follower reads the task again.
            nonlocal calls
            calls += 1
            copied = await local(seen, attempt, offset)
            if calls == 1:
                first_log.write_text("one\ntwo\n")
                store.finish(claim.attempt.id, claim.attempt.token, 1)
                run_attempt(store, tmp_path, 2, "again\n", 0)
            return copied

        notes: list[str] = []
        running = store.get(task.id)
        asyncio.run(asyncio.wait_for(_follow(store, copy, False, running, None, notes.append), 30))
        assert out.getvalue() == b"one\ntwo\nagain\n"
        assert notes == [f"--- task {task.id[:8]}: attempt 2 ---"]
