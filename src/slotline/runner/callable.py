"""The callable runner: registered Python functions, sync (in a thread) or async."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from slotline.errors import InvalidInput
from slotline.runner.files import append_private
from slotline.runner.process import Outcome

TaskFunction = Callable[..., Any]


class Registry:
    """Names a node can run as callable tasks."""

    def __init__(self, functions: Mapping[str, TaskFunction] | None = None) -> None:
        self._functions: dict[str, TaskFunction] = dict(functions or {})

    def register(self, name: str, function: TaskFunction) -> None:
        if not name:
            raise InvalidInput("a callable needs a name")
        self._functions[name] = function

    def __contains__(self, name: object) -> bool:
        return name in self._functions

    def names(self) -> frozenset[str]:
        return frozenset(self._functions)

    def get(self, name: str) -> TaskFunction | None:
        return self._functions.get(name)


async def run_callable(
    function: TaskFunction, args: dict[str, Any], timeout: float | None, log_path: Path
) -> Outcome:
    """Call `function(**args)`; an exception fails the attempt, its traceback goes to the log.

    An async function is cancelled by a timeout or a stop request. A sync one runs in a
    thread, which cannot be interrupted: the attempt (and its slot) lasts until the
    function returns, so a limit is never exceeded by threads still working."""
    try:
        if inspect.iscoroutinefunction(function):
            await asyncio.wait_for(function(**args), timeout)
        else:
            await _in_thread(function, args, timeout)
    except TimeoutError:
        return Outcome(None, f"timed out after {timeout:g}s")
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        append_private(log_path, traceback.format_exc())
        return Outcome(1, f"{type(exc).__name__}: {exc}")
    return Outcome(0)


async def _in_thread(function: TaskFunction, args: dict[str, Any], timeout: float | None) -> None:
    work = asyncio.ensure_future(asyncio.to_thread(function, **args))
    try:
        await asyncio.wait_for(asyncio.shield(work), timeout)
    except (TimeoutError, asyncio.CancelledError):
        # Too late or stopped: the thread goes on regardless, so wait for it before the
        # attempt may end; then report the timeout or the stop.
        await asyncio.wait([work])
        raise


def start_in_thread(function: TaskFunction, args: dict[str, Any]) -> asyncio.Future[Any]:
    """Start sync `function(**args)` in the loop's worker threads (as `asyncio.to_thread`
    does); its future, with no task around it: the caller reacts to its end."""
    call = functools.partial(contextvars.copy_context().run, function, **args)
    return asyncio.get_running_loop().run_in_executor(None, call)


def thread_outcome(
    work: asyncio.Future[Any], stopped: str | None, log_path: Callable[[], Path]
) -> Outcome:
    """The outcome of a sync callable whose thread has ended (see `start_in_thread`): the
    reason it was `stopped` (a timeout, a stop request: the thread could not be
    interrupted, so its slot was held until now), else its success or its exception,
    whose traceback goes to the log (`log_path()`)."""
    error = None if work.cancelled() else work.exception()  # retrieved in every case
    if stopped is not None:
        return Outcome(None, stopped)
    if work.cancelled():
        return Outcome(None, "stopped by request")
    if error is None:
        return Outcome(0)
    append_private(log_path(), "".join(traceback.format_exception(error)))
    return Outcome(1, f"{type(error).__name__}: {error}")
