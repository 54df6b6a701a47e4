"""Output of an attempt: the whole log of a finished one, or a running one followed as it
grows (a chunked text response that ends when the attempt does)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, BinaryIO

from fastapi import APIRouter, Query
from starlette.responses import StreamingResponse

from slotline.errors import NotFound
from slotline.models import Attempt, Task
from slotline.server.context import ServerState, State, StreamReader
from slotline.server.errors import ERROR_RESPONSES
from slotline.server.schemas import MAX_SEQ

CHUNK = 64 * 1024

router = APIRouter(tags=["tasks"])


def _pick(task: Task, number: int | None) -> Attempt | None:
    if not task.attempts:
        return None
    if number is None:
        return task.attempts[-1]
    for attempt in task.attempts:
        if attempt.number == number:
            return attempt
    raise NotFound(f"task {task.id[:8]} has no attempt {number}", task_id=task.id)


def _read(handle: BinaryIO) -> bytes:
    return handle.read(CHUNK)


async def _follow(
    state: ServerState, task: Task, number: int | None, offset: int, follow: bool
) -> AsyncIterator[bytes]:
    """Bytes of the attempt's log from `offset`; when following, as they are written,
    until the attempt has finished and everything it wrote was sent."""
    watcher = state.store.watcher()
    handle: BinaryIO | None = None
    try:
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
            while handle is not None:
                chunk = await asyncio.to_thread(_read, handle)
                if not chunk:
                    break
                yield chunk
            if finished or state.closing.is_set():
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
    state: State,
    who: StreamReader,
    ref: str,
    attempt: Annotated[
        int | None, Query(ge=1, le=MAX_SEQ, description="Attempt number; default last")
    ] = None,
    follow: Annotated[bool, Query(description="Keep streaming while it runs")] = False,
    offset: Annotated[int, Query(ge=0, le=MAX_SEQ, description="Start at this byte")] = 0,
) -> StreamingResponse:
    """The output (stdout and stderr) of a task's attempt. With `follow=true` the response
    stays open and streams new output until the attempt ends; a task that has not started
    yet is waited for."""
    task = await state.visible_task(who, ref)
    chosen = _pick(task, attempt)
    if not follow:
        if chosen is None or not chosen.log_path:
            raise NotFound(f"task {task.id[:8]} has no log yet (it is {task.status})")
        path = Path(chosen.log_path)
        if not path.is_file():
            raise NotFound(f"the log of task {task.id[:8]} is gone ({path})")
    return StreamingResponse(
        _follow(state, task, attempt, offset, follow),
        media_type="text/plain; charset=utf-8",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
