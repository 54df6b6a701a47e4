"""The callable runner: registered Python functions, async (on the node's loop) or sync (in
a thread; see `runner/functions.py` for those run in a worker process)."""

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
from slotline.runner.functions import (
    FunctionRef,
    describe_exception,
    encode_result,
    split_arguments,
)
from slotline.runner.process import Outcome

TaskFunction = Callable[..., Any]
# What a node runs under a name: a function it calls itself, or one a worker process runs.
Entry = TaskFunction | FunctionRef


class Registry:
    """Names a node can run as callable tasks."""

    def __init__(self, functions: Mapping[str, Entry] | None = None) -> None:
        self._functions: dict[str, Entry] = dict(functions or {})

    def register(self, name: str, function: Entry) -> None:
        if not name:
            raise InvalidInput("a callable needs a name")
        self._functions[name] = function

    def __contains__(self, name: object) -> bool:
        return name in self._functions

    def names(self) -> frozenset[str]:
        return frozenset(self._functions)

    def get(self, name: str) -> Entry | None:
        return self._functions.get(name)


async def run_callable(
    function: TaskFunction, args: dict[str, Any], timeout: float | None, log_path: Path
) -> Outcome:
    """Call `function` with the stored `args`; what it returns (as JSON) is the outcome's
    `result`; an exception fails the attempt, its traceback goes to the log.

    An async function is cancelled by a timeout or a stop request. A sync one runs in a
    thread, which cannot be interrupted: the attempt (and its slot) lasts until the
    function returns, so a limit is never exceeded by threads still working."""
    positional, keywords = split_arguments(function, args)
    try:
        if inspect.iscoroutinefunction(function):
            value = await asyncio.wait_for(function(*positional, **keywords), timeout)
        else:
            value = await _in_thread(function, positional, keywords, timeout)
        result = encode_result(value)
    except TimeoutError:
        return Outcome(None, f"timed out after {timeout:g}s")
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        append_private(log_path, traceback.format_exc())
        return Outcome(1, describe_exception(exc))
    return Outcome(0, None, result)


async def _in_thread(
    function: TaskFunction,
    positional: list[Any],
    keywords: dict[str, Any],
    timeout: float | None,
) -> Any:
    work = asyncio.ensure_future(asyncio.to_thread(function, *positional, **keywords))
    try:
        return await asyncio.wait_for(asyncio.shield(work), timeout)
    except (TimeoutError, asyncio.CancelledError):
        # Too late or stopped: the thread goes on regardless, so wait for it before the
        # attempt may end; then report the timeout or the stop.
        await asyncio.wait([work])
        raise


def start_in_thread(
    function: TaskFunction, args: dict[str, Any], then: Callable[[Any], None] | None = None
) -> asyncio.Future[Any]:
    """Start sync `function` with the stored `args` in the loop's worker threads (as
    `asyncio.to_thread` does); its future, with no task around it: the caller reacts to
    its end. `then` is called in that thread with what the function returned, before the
    future is done (it must not raise)."""
    positional, keywords = split_arguments(function, args)
    target = functools.partial(function, *positional, **keywords)
    if then is not None:
        target = functools.partial(_then, target, then)
    call = functools.partial(contextvars.copy_context().run, target)
    return asyncio.get_running_loop().run_in_executor(None, call)


def _then(target: Callable[[], Any], then: Callable[[Any], None]) -> Any:
    value = target()
    then(value)
    return value


def thread_outcome(
    work: asyncio.Future[Any], stopped: str | None, log_path: Callable[[], Path]
) -> Outcome:
    """The outcome of a sync callable whose thread has ended (see `start_in_thread`): the
    reason it was `stopped` (a timeout, a stop request: the thread could not be
    interrupted, so its slot was held until now), else its success with what it returned
    (as JSON), or its exception, whose traceback goes to the log (`log_path()`), as
    `run_callable` reports them."""
    error = None if work.cancelled() else work.exception()  # retrieved in every case
    if stopped is not None:
        return Outcome(None, stopped)
    if work.cancelled():
        return Outcome(None, "stopped by request")
    if error is None:
        try:
            return Outcome(0, None, encode_result(work.result()))
        except (TypeError, ValueError) as exc:
            error = exc
    append_private(log_path(), "".join(traceback.format_exception(error)))
    return Outcome(1, describe_exception(error))
