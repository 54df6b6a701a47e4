"""Output of an attempt: the whole log of a finished one, or a running one followed as it
grows (a chunked text response that ends when the attempt does)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, BinaryIO

from fastapi import APIRouter, Query, Request
from starlette.responses import StreamingResponse

from slotline.bounds import OFFSET, ORDINAL
from slotline.errors import NotFound
from slotline.models import Attempt, Task
from slotline.runlogs import why_no_log
from slotline.server.access import AccessWatch
from slotline.server.context import Reader, ServerState, State, presented_token
from slotline.server.errors import ERROR_RESPONSES
from slotline.server.fields import TaskRef
from slotline.server.flags import QueryFlag

CHUNK = 64 * 1024

log = logging.getLogger("slotline.server.logs")

router = APIRouter(tags=["tasks"])


def _pick(task: Task, number: int | None) -> Attempt | None:
    """The attempt numbered `number` (default: the last), or None while there is none."""
    if not task.attempts:
        return None
    if number is None:
        return task.attempts[-1]
    return next((a for a in task.attempts if a.number == number), None)


def _check_attempt(task: Task, number: int | None, follow: bool) -> None:
    """Refuse, before the response starts, an attempt that does not exist and cannot
    come: following waits at most for the task's next attempt, and only while it may
    still run.

    Raises:
        NotFound: no such attempt.
    """
    if number is None or _pick(task, number) is not None:
        return
    coming = len(task.attempts) + 1
    if not follow or task.status.terminal or number != coming:
        raise NotFound(f"task {task.id[:8]} has no attempt {number}", task_id=task.id)


def _read(handle: BinaryIO) -> bytes:
    return handle.read(CHUNK)


async def _follow(
    state: ServerState,
    task: Task,
    number: int | None,
    offset: int,
    follow: bool,
    token: str | None,
) -> AsyncIterator[bytes]:
    """Bytes of the attempt's log from `offset`; when following, as they are written,
    until the attempt has finished and everything it wrote was sent, or until `token`
    no longer grants access (revoked): then the stream ends early, and the client's next
    request is answered 401 with the reason."""
    watcher = state.store.watcher()
    handle: BinaryIO | None = None
    try:
        async with AccessWatch(state, token) as access:
            while True:
                attempt = _pick(task, number)
                if attempt is not None:
                    number = attempt.number  # a retry's new attempt is another log
                finished = not follow or task.status.terminal
                finished = finished or (attempt is not None and attempt.finished_at is not None)
                if handle is None and attempt is not None and attempt.log_path:
                    try:
                        handle = Path(attempt.log_path).open("rb")  # noqa: SIM115 - closed below
                        handle.seek(offset)
                    except FileNotFoundError:
                        handle = None
                while handle is not None and access.reason is None:
                    chunk = await asyncio.to_thread(_read, handle)
                    if not chunk:
                        break
                    yield chunk
                if finished or state.closing.is_set():
                    return
                if access.reason is not None:
                    log.info("ending a log follow: %s", access.reason, extra={"task_id": task.id})
                    return
                # Wake on any store change (the attempt ending) or after a short poll for
                # growth of the file, which the store is not told about.
                await watcher.wait(state.options.log_poll)
                task = await state.call(state.store.get, task.id)
    finally:
        watcher.close()
        if handle is not None:
            handle.close()


@router.get(
    "/api/tasks/{ref}/log",
    response_class=StreamingResponse,
    responses={**ERROR_RESPONSES, 200: {"content": {"text/plain": {}}, "description": "Log"}},
)
async def task_log(
    request: Request,
    state: State,
    who: Reader,
    ref: TaskRef,
    attempt: Annotated[
        int | None, Query(description="Attempt number; default last"), ORDINAL
    ] = None,
    follow: Annotated[QueryFlag, Query(description="Keep streaming while it runs")] = False,
    offset: Annotated[int, Query(description="Start at this byte"), OFFSET] = 0,
) -> StreamingResponse:
    """The output (stdout and stderr) of a task's attempt. With `follow=true` the response
    stays open and streams new output until the attempt ends; a task that has not started
    yet is waited for."""
    task = await state.visible_task(who, ref)
    _check_attempt(task, attempt, follow)
    chosen = _pick(task, attempt)
    # An attempt that ended without a log never will have one (it failed to start): even
    # a follow is answered with why.
    ended = chosen is not None and chosen.finished_at is not None
    if chosen is not None and not chosen.log_path and (ended or not follow):
        raise NotFound(why_no_log(task, chosen), task_id=task.id)
    if not follow:
        if chosen is None or not chosen.log_path:
            raise NotFound(f"task {task.id[:8]} has no log yet (it is {task.status})")
        path = Path(chosen.log_path)
        if not path.is_file():
            raise NotFound(f"the log of task {task.id[:8]} is gone ({path})")
    return StreamingResponse(
        _follow(state, task, attempt, offset, follow, presented_token(request)),
        media_type="text/plain; charset=utf-8",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
