"""Ctrl-C around a command's event loop: it stops the loop cleanly, whenever it comes."""

from __future__ import annotations

import asyncio
import os
import signal

from slotline.cli.interrupt import run_until_interrupted


def ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def test_without_ctrl_c_the_result_comes_back_and_the_handler_is_restored() -> None:
    before = signal.getsignal(signal.SIGINT)

    async def main() -> int:
        return 42

    assert run_until_interrupted(main) == (42, False)
    assert signal.getsignal(signal.SIGINT) is before


def test_ctrl_c_before_the_loop_runs_counts_and_main_never_starts() -> None:
    started: list[bool] = []

    async def main() -> int:
        started.append(True)
        return 42

    assert run_until_interrupted(main, first=ctrl_c) == (None, True)
    assert started == []


def test_ctrl_c_while_running_cancels_main_and_its_cleanup_runs() -> None:
    cleaned: list[bool] = []

    async def main() -> int:
        asyncio.get_running_loop().call_soon(ctrl_c)
        try:
            await asyncio.Event().wait()  # until cancelled
        finally:
            cleaned.append(True)
        return 42

    assert run_until_interrupted(main) == (None, True)
    assert cleaned == [True]
