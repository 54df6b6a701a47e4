"""A function run stopped while its worker process is being started: the worker starts
regardless (the start goes on in a thread), and must then be stopped, never left running
unsupervised past its attempt."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from slotline.runner.functions import FunctionRef, ProcessRun, run_in_process
from slotline.runner.process import ProcessHandle


def nap(seconds: float) -> None:
    time.sleep(seconds)


def test_a_run_cancelled_while_its_worker_starts_stops_the_worker(tmp_path: Path) -> None:
    started: list[ProcessHandle] = []
    run = ProcessRun(
        env=dict(os.environ), log_path=tmp_path / "logs" / "1.log", timeout=None,
        kill_grace=2.0, log_max_bytes=1_000_000, started=started.append,
    )  # fmt: skip

    async def cancel_at_once() -> None:
        work = asyncio.ensure_future(run_in_process(FunctionRef.of(nap), {"seconds": 60}, run))
        await asyncio.sleep(0)  # it has asked for the worker; the start goes on in a thread
        work.cancel()
        with pytest.raises(asyncio.CancelledError):
            await work

    asyncio.run(cancel_at_once())
    assert len(started) == 1, "the worker that started was handed over"
    assert not started[0].alive()
