"""The sync Python API, for scripts and notebooks: `slotline.open` gives a `SyncQueue`,
whose verbs run the async `Queue` coroutines to their end on a private loop in a thread
(one implementation of every verb)."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import sys
import threading
import warnings
from collections.abc import Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from slotline.api.queue import Queue, open_queue
from slotline.api.unserved import DEFERRED_WARNINGS
from slotline.models import Event, Task
from slotline.worktrees.diff import DIFF_MAX_BYTES, RunDiff
from slotline.worktrees.merge import MergeResult

if TYPE_CHECKING:
    from slotline.node.node import Node

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


async def _deferring(work: Coroutine[Any, Any, T], said: builtins.list[Warning]) -> T:
    DEFERRED_WARNINGS.set(said)  # this task's own context
    return await work


def _caller_level() -> int:
    """The `stacklevel` of the first frame outside slotline, for a warning given here."""
    level, frame = 2, sys._getframe(2)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("slotline"):
        frame, level = frame.f_back, level + 1
    return level


class _Sync(Generic[P, R]):
    """A verb of `SyncQueue`: the `Queue` coroutine of the same name, run to its end on
    the sync queue's private loop (so there is one implementation of every verb)."""

    def __init__(self, method: Callable[Concatenate[Queue, P], Coroutine[Any, Any, R]]) -> None:
        self.method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, owner: None, kind: type[SyncQueue]) -> _Sync[P, R]: ...
    @overload
    def __get__(self, owner: SyncQueue, kind: type[SyncQueue]) -> Callable[P, R]: ...
    def __get__(
        self, owner: SyncQueue | None, kind: type[SyncQueue]
    ) -> _Sync[P, R] | Callable[P, R]:
        if owner is None:
            return self
        method, queue = self.method, owner.queue

        @functools.wraps(method)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return owner.run(method(queue, *args, **kwargs))

        return call


class SyncQueue:
    """The same verbs as `Queue`, for scripts and notebooks: each call blocks until done,
    with no event loop in sight (the `Queue` coroutines run on a private loop in a
    thread, started on first use and stopped by `close`).

    Example:
        with slotline.open("slotline.db") as queue:
            task = queue.submit(["pytest", "-x"], priority="high")
            print(queue.wait(task.id).status)
    """

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.landing = SyncLanding(self)  # diff, merge, worktrees, prune (blocking)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on this queue's loop; returns its result (or raises its error)."""
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="slotline-sync", daemon=True
                )
                self._thread.start()
            loop = self._loop
        said: builtins.list[Warning] = []
        try:
            return asyncio.run_coroutine_threadsafe(_deferring(work, said), loop).result()
        finally:
            level = _caller_level()
            for warning in said:  # in the caller's thread, at the caller's line
                warnings.warn(warning, stacklevel=level)

    def __enter__(self) -> SyncQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the store and stop the private loop."""
        if self._loop is None:
            self.queue.store.close()
            return
        self.run(self.queue.close())
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()

    submit = _Sync(Queue.submit)
    submit_many = _Sync(Queue.submit_many)
    get = _Sync(Queue.get)
    list = _Sync(Queue.list)
    page = _Sync(Queue.page)
    status = _Sync(Queue.status)
    events = _Sync(Queue.events)
    wait = _Sync(Queue.wait)
    result = _Sync(Queue.result)
    settings = _Sync(Queue.settings)
    cancel = _Sync(Queue.cancel)
    terminate = _Sync(Queue.terminate)
    send_input = _Sync(Queue.send_input)
    followup = _Sync(Queue.followup)
    boost = _Sync(Queue.boost)
    bump = _Sync(Queue.bump)
    move = _Sync(Queue.move)
    set_priority = _Sync(Queue.set_priority)
    restart = _Sync(Queue.restart)
    hold = _Sync(Queue.hold)
    release = _Sync(Queue.release)
    pause = _Sync(Queue.pause)
    resume = _Sync(Queue.resume)
    clear = _Sync(Queue.clear)
    set_max_concurrent = _Sync(Queue.set_max_concurrent)
    set_limit = _Sync(Queue.set_limit)
    set_rate = _Sync(Queue.set_rate)
    set_budget = _Sync(Queue.set_budget)
    set_fairness = _Sync(Queue.set_fairness)
    set_backoff = _Sync(Queue.set_backoff)
    add_schedule = _Sync(Queue.add_schedule)
    schedules = _Sync(Queue.schedules)
    pause_schedule = _Sync(Queue.pause_schedule)
    resume_schedule = _Sync(Queue.resume_schedule)
    remove_schedule = _Sync(Queue.remove_schedule)

    def follow(self, since: int = 0) -> Iterator[Event]:
        """Every event after `since`, then live ones as they happen; never misses one."""
        events = self.queue.follow(since)
        try:
            while True:
                try:
                    yield self.run(events.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self.run(events.aclose())

    @contextlib.contextmanager
    def node(self, **options: Any) -> Iterator[Node]:
        """Run a node on this queue (on the private loop) for the duration of the block;
        the options of `Queue.node`."""
        running = self.queue.node(**options)
        node = self.run(running.__aenter__())
        try:
            yield node
        finally:
            self.run(running.__aexit__(None, None, None))


def open(url: str | Path | None = None) -> SyncQueue:
    """Open the queue stored at `url` for sync use (a file path, sqlite:///path,
    postgresql://…); None opens the default SQLite file. See `SyncQueue`."""
    return SyncQueue(open_queue(url))


class SyncLanding:
    """`Landing` for a `SyncQueue`: each call blocks until done."""

    def __init__(self, queue: SyncQueue) -> None:
        self._queue = queue

    def diff(self, ref: str, stat_only: bool = False, max_bytes: int = DIFF_MAX_BYTES) -> RunDiff:
        return self._queue.run(self._queue.queue.landing.diff(ref, stat_only, max_bytes))

    def merge(
        self, ref: str, into: str | None = None, squash: bool = False
    ) -> tuple[MergeResult, Task]:
        return self._queue.run(self._queue.queue.landing.merge(ref, into, squash))

    def worktrees(self) -> list[dict[str, Any]]:
        return self._queue.run(self._queue.queue.landing.worktrees())

    def prune(
        self,
        retain: str | float | None = None,
        max_disk: str | int | None = None,
        dry_run: bool = False,
        *,
        agent_retain: Mapping[str, str | float] | None = None,
        agent_max_disk: Mapping[str, str | int] | None = None,
    ) -> list[dict[str, Any]]:
        landing = self._queue.queue.landing
        return self._queue.run(
            landing.prune(
                retain, max_disk, dry_run, agent_retain=agent_retain, agent_max_disk=agent_max_disk
            )
        )
