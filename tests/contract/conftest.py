"""Factories for the contract tests: submit, claim, finish and read the line in one call.

Every fixture here builds on the `store` fixture, so each test runs on every backend.
Time is a parameter: the `clock` fixture is passed as `now=` to every verb that takes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from slotline.clock import utcnow
from slotline.models import Task
from slotline.store import Claim, Store

NODE = "node-1"


class Clock:
    """A fake clock the tests move by hand."""

    def __init__(self) -> None:
        self.now = float(int(utcnow()))

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


SubmitFn = Callable[..., Task]
ClaimFn = Callable[..., list[Claim]]
FinishFn = Callable[..., Task]
LineFn = Callable[[], list[str]]


def titles(items: list[Claim] | list[Task]) -> list[str]:
    """The titles of tasks or of the tasks of claims, in the given order."""
    return [item.task.title if isinstance(item, Claim) else item.title for item in items]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def submit(store: Store, clock: Clock) -> SubmitFn:
    """submit("a", priority="high", agent="claude") -> Task; the command echoes the title."""

    def _submit(title: str = "task", **fields: Any) -> Task:
        fields.setdefault("command", ["echo", title])
        return store.submit({"title": title, **fields}, now=clock.now)

    return _submit


@pytest.fixture
def claim(store: Store, clock: Clock) -> ClaimFn:
    """One dispatch pass at the clock's time; returns the claims made."""

    def _claim(node: str = NODE) -> list[Claim]:
        return store.claim(node, now=clock.now).claims

    return _claim


@pytest.fixture
def finish(store: Store, clock: Clock) -> FinishFn:
    """Report that a claimed attempt's process exited."""

    def _finish(claimed: Claim, exit_code: int | None = 0, reason: str | None = None) -> Task:
        attempt = claimed.attempt
        return store.finish(attempt.id, attempt.token, exit_code, reason, now=clock.now)

    return _finish


@pytest.fixture
def line(store: Store, clock: Clock) -> LineFn:
    """The titles of the queued tasks, in queue order."""

    def _line() -> list[str]:
        return titles(store.status(now=clock.now, all=True).queued)

    return _line
