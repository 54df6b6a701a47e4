"""Waiting for a state, never for a time: poll a condition until it holds or a deadline.

The deadlines are generous on purpose (a busy CI machine is slow); a test waits only as
long as the state it needs takes to arrive.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")

TIMEOUT = 30.0
POLL = 0.02


def _rounds(timeout: float, what: str) -> Iterator[None]:
    """One round per poll until the deadline; then the failure, naming what was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() <= deadline:
        yield
    raise AssertionError(f"{what} not reached within {timeout:g}s")


def until(predicate: Callable[[], T], timeout: float = TIMEOUT, what: str = "condition") -> T:
    """Poll `predicate` until it returns something truthy, and return that.

    Raises:
        AssertionError: it did not within `timeout` seconds (naming `what`).
    """
    for _ in _rounds(timeout, what):
        if value := predicate():
            return value
        time.sleep(POLL)
    raise AssertionError("unreachable")


async def until_async(
    predicate: Callable[[], T], timeout: float = TIMEOUT, what: str = "condition"
) -> T:
    """`until` for a test running on an event loop: the loop goes on between polls."""
    for _ in _rounds(timeout, what):
        if value := predicate():
            return value
        await asyncio.sleep(POLL)
    raise AssertionError("unreachable")
