"""Run a command's event loop so that Ctrl-C stops it cleanly, whenever it comes."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_until_interrupted(
    main: Callable[[], Coroutine[Any, Any, T]], first: Callable[[], None] | None = None
) -> tuple[T | None, bool]:
    """Call `first()`, then run `main()` in a new event loop; Ctrl-C (SIGINT) cancels it.

    Returns (its result, False), or (None, True) if interrupted. Unlike `asyncio.run`
    alone, a Ctrl-C that lands while the loop starts or closes never raises
    KeyboardInterrupt halfway through, which would leave the loop and its sockets unclosed;
    one that lands during `first()` (e.g. right after a line a caller waits for) counts.
    """
    interrupted = False

    def note(_signum: int, _frame: object) -> None:
        nonlocal interrupted
        interrupted = True

    async def guarded() -> T | None:
        nonlocal interrupted
        loop = asyncio.get_running_loop()
        current = asyncio.current_task()
        assert current is not None
        loop.add_signal_handler(signal.SIGINT, current.cancel)
        try:
            if interrupted:  # came before the handler above was in place
                return None
            return await main()
        except asyncio.CancelledError:
            interrupted = True
            return None
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            signal.signal(signal.SIGINT, note)  # until the loop is closed

    previous = signal.signal(signal.SIGINT, note)
    try:
        if first is not None:
            first()
        result = asyncio.run(guarded())
    finally:
        signal.signal(signal.SIGINT, previous)
    return (None, True) if interrupted else (result, False)
