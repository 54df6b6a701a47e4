"""REST routes on tasks: submit (one or a batch), list, get, and every steering verb."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Response

from slotline.bounds import OFFSET, Range
from slotline.config.templates import followup_fields
from slotline.models import Priority, Task
from slotline.reach import bounded
from slotline.runner import terminal_input
from slotline.server.auth import Principal
from slotline.server.bodies import (
    BatchBody,
    CancelBody,
    FollowupBody,
    InputBody,
    MoveBody,
    PriorityBody,
    RestartBody,
    SubmitBody,
    TerminateBody,
)
from slotline.server.context import Reader, ServerState, State, Writer, hidden
from slotline.server.errors import ERROR_RESPONSES
from slotline.server.fields import TASK_ID, TaskRef
from slotline.server.filters import filter_query
from slotline.server.flags import QueryFlag
from slotline.server.schemas import EventList, MovedOut, SubmittedOut, TaskList, TaskOut, task_json
from slotline.server.submission import checked_specs
from slotline.store.readback import read_back
from slotline.taskfilter import MAX_PAGE, ListQuery, TaskFilter

router = APIRouter(prefix="/api/tasks", tags=["tasks"], responses=ERROR_RESPONSES)


async def _steerable(state: ServerState, who: Principal, ref: str) -> Task:
    task = await state.visible_task(who, ref)
    if not who.steers(task):
        raise HTTPException(403, f"token {who.name!r} cannot change task {task.id[:8]}")
    return task


async def _steer(
    state: ServerState, who: Principal, verb: str, ref: str, *args: Any, **options: Any
) -> tuple[Task, dict[str, Any]]:
    """A steering request in one store transaction: the task `ref` names, if `who` may
    steer it (as `_steerable`), changed by `verb`, and read back as the answer shows it.
    Returns the task before the change and the answer."""

    def seen(task: Task, named: str) -> None:
        if not who.sees(task):
            raise hidden(named)

    def allowed(task: Task, named: str) -> None:
        seen(task, named)
        if not who.steers(task):
            raise HTTPException(403, f"token {who.name!r} cannot change task {task.id[:8]}")

    was, now = await state.call(
        state.store.steer, verb, ref, *args,
        user=who.prefix_owner, allowed=allowed, seen=seen, **options,
    )  # fmt: skip
    return was, task_json(now)


async def _fresh(state: ServerState, written: Task) -> dict[str, Any]:
    """The task a write changed as it is now, with its attempts and position (or as the
    write returned it if that read fails: `read_back`)."""
    return task_json(await state.call(read_back, state.store.get, written))


async def submit_one(state: ServerState, who: Principal, body: SubmitBody) -> dict[str, Any]:
    """Submit one task (the route and the MCP tool): the task, and `deduplicated`."""
    (spec,) = await checked_specs(state, who, [body])
    task = await state.call(state.store.submit, spec, within=who.task_id)
    return await _submitted(state, task)


async def _submitted(state: ServerState, task: Task) -> dict[str, Any]:
    """A submitted task as the answer shows it. Keys are scoped per owner, so a user token
    only ever gets its own task back; a task token submits as its task's user, and the
    store refuses (409, the whole batch) a key of that user held outside its subtree."""
    return {**await _fresh(state, task), "deduplicated": task.deduplicated}


@router.post(
    "",
    status_code=201,
    response_model=SubmittedOut,
    responses={200: {"model": SubmittedOut, "description": "The task of the key, which exists"}},
)
async def submit(state: State, who: Writer, body: SubmitBody, response: Response) -> dict[str, Any]:
    """Submit one task. It is queued, waiting on dependencies, held, or blocked; with a
    start time (`run_at`, `delay`) it waits in line until then. With a `key` that an
    unfinished task has, nothing is created: that task is returned (200, not 201) with
    `deduplicated: true`."""
    data = await submit_one(state, who, body)
    if data["deduplicated"]:
        response.status_code = 200
    return data


@router.post("/batch", status_code=201, response_model=list[SubmittedOut])
async def submit_batch(state: State, who: Writer, body: BatchBody) -> list[dict[str, Any]]:
    """Submit several tasks in one transaction: all are created, or none. A task whose
    key names an existing task is that task, with `deduplicated: true`."""
    specs = await checked_specs(state, who, body.tasks)
    created = await state.call(state.store.submit_many, specs, within=who.task_id)
    return [await _submitted(state, t) for t in created]


@router.get("", response_model=TaskList)
async def list_tasks(
    state: State,
    who: Reader,
    wanted: Annotated[TaskFilter, Depends(filter_query)],
    parent: Annotated[
        str | None, TASK_ID, Query(description="Only subtasks of this task id")
    ] = None,
    newest: Annotated[QueryFlag, Query(description="Newest first")] = False,
    ended: Annotated[
        QueryFlag, Query(description="Only ended tasks, the last to end first (beats `newest`)")
    ] = False,
    limit: Annotated[int, Query(), Range(1, MAX_PAGE, whole=True)] = 100,
    after: Annotated[
        str | None,
        TASK_ID,
        Query(
            description="Continue after this task id: `next_after` of the page before",
        ),
    ] = None,
    offset: Annotated[int, Query(), OFFSET] = 0,
    count: Annotated[QueryFlag, Query(description="Count every match (`total`)")] = True,
) -> dict[str, Any]:
    """Tasks in submission order (or newest first, or `ended`: ended ones, the last to end
    first), filtered, a page at a time: the next
    page is `after=` the `next_after` of this one (null on the last page); `total`
    counts all matches (unless `count=false`). A user token sees only its own tasks."""
    parent_id = None if parent is None else (await state.visible_task(who, parent, False)).id
    after_id = None if after is None else (await state.visible_task(who, after, False)).id
    page = await state.call(
        state.store.list_page,
        ListQuery(
            wanted, owner=who.scope[0], root=who.scope[1], parent_id=parent_id, newest=newest,
            ended=ended, limit=limit, after=after_id, offset=offset, count=count,
        ),
    )  # fmt: skip
    return {
        "tasks": [task_json(t) for t in page.tasks],
        "next_after": page.next_after,
        "total": page.total,
        "limit": limit,
        "offset": offset,
    }


@router.get("/{ref}", response_model=TaskOut)
async def get_task(state: State, who: Reader, ref: TaskRef) -> dict[str, Any]:
    """One task by id or unique id prefix, with its attempts and (if queued) position."""
    return task_json(await state.visible_task(who, ref))


@router.get("/{ref}/events", response_model=EventList)
async def task_events(
    state: State,
    who: Reader,
    ref: TaskRef,
    limit: Annotated[int, Query(), Range(1, 1000, whole=True)] = 200,
) -> dict[str, Any]:
    """The last `limit` events of one task, oldest first, and the last seq of the log."""
    task = await state.visible_task(who, ref)
    found = await state.call(state.store.task_events, task.id, limit)
    last = await state.call(state.store.last_seq)
    return {"events": [e.to_dict() for e in found], "last_seq": last}


@router.get("/{ref}/dependents", response_model=list[TaskOut])
async def dependents(state: State, who: Reader, ref: TaskRef) -> list[dict[str, Any]]:
    """The tasks that wait for (depend on) this one, that the caller may see."""
    task = await state.visible_task(who, ref)
    found = await state.call(state.store.dependents, task.id)
    return [task_json(t) for t in found if who.sees(t)]


@router.post("/{ref}/cancel", response_model=TaskOut)
async def cancel(
    state: State, who: Writer, ref: TaskRef, body: CancelBody | None = None
) -> dict[str, Any]:
    """Cancel a task; a running one is stopped and ends when its process is gone.
    `cascade` cancels its subtasks too."""
    return (await _steer(state, who, "cancel", ref, body.cascade if body else False))[1]


@router.post("/{ref}/terminate", response_model=TaskOut)
async def terminate(
    state: State, who: Writer, ref: TaskRef, body: TerminateBody | None = None
) -> dict[str, Any]:
    """Stop a running task; it fails with "terminated: REASON" and its slot frees."""
    body = body or TerminateBody()
    return (await _steer(state, who, "terminate", ref, body.reason, body.resumable))[1]


@router.post("/{ref}/input", response_model=TaskOut)
async def send_input(state: State, who: Writer, ref: TaskRef, body: InputBody) -> dict[str, Any]:
    """Type `text` into an interactive task's run, then Enter (unless `enter` is false):
    a supervising agent answers the run's question without a terminal. The run must be
    running on this server's machine; the caller must be allowed to steer the task."""
    task = await _steerable(state, who, ref)
    await state.call(terminal_input.send_input, task, body.text, body.enter, state.store)
    return task_json(task)


@router.post("/{ref}/followup", response_model=TaskOut, status_code=201)
async def followup(state: State, who: Writer, ref: TaskRef, body: FollowupBody) -> dict[str, Any]:
    """Queue a follow-up of a task (one the caller may steer): after it, in its worktree
    and agent session, through the agent type's `resume` template with `prompt`."""
    task = await _steerable(state, who, ref)
    user = who.name if who.role == "user" else who.owner if who.role == "task" else None
    fields = followup_fields(state.config, task, body.prompt, user)
    created = await state.call(state.store.submit_followup, task.id, body.prompt, fields)
    return await _fresh(state, created)


@router.post("/{ref}/boost", response_model=TaskOut)
async def boost(state: State, who: Writer, ref: TaskRef) -> dict[str, Any]:
    """Start next: position 1, limits still apply."""
    return (await _steer(state, who, "boost", ref))[1]


@router.post("/{ref}/bump", response_model=TaskOut)
async def bump(state: State, who: Writer, ref: TaskRef) -> dict[str, Any]:
    """Start now, even over the limit (the attempt is marked over-limit). A user starts
    over the limit only within `users.start_now` of slotline.yaml (403 past it)."""
    return (await _steer(state, who, "bump", ref, start_now_allowance(state, who)))[1]


def start_now_allowance(state: ServerState, who: Principal) -> int | None:
    """How many runs `who` may have started over the limit at once: a user's, and a task
    token's (an agent's, counted against its task's user: no sandbox bounds a quota), by
    `users.start_now`; None (no bound) for an admin."""
    return state.config.users.start_now if bounded(who.role) or who.role == "task" else None


@router.post("/{ref}/move", response_model=MovedOut)
async def move(state: State, who: Writer, ref: TaskRef, body: MoveBody) -> dict[str, Any]:
    """Move a queued task to position `to`, or just before/after another queued task
    (one the caller may see: for a user token, another of its own). It takes the band of
    its new neighbours: `priority_before` and `boosted_before` say what it had."""
    task, answer = await _steer(
        state, who, "move", ref, to=body.to, before=body.before, after=body.after
    )
    was = {"priority_before": task.priority.label, "boosted_before": task.boosted}
    return {**answer, **was}


@router.post("/{ref}/priority", response_model=TaskOut)
async def set_priority(
    state: State, who: Writer, ref: TaskRef, body: PriorityBody
) -> dict[str, Any]:
    """Change the priority of a task that has not started."""
    priority = Priority.parse(body.priority)
    return (await _steer(state, who, "set_priority", ref, priority, body.reason))[1]


@router.post("/{ref}/restart", response_model=TaskOut)
async def restart(
    state: State, who: Writer, ref: TaskRef, body: RestartBody | None = None
) -> dict[str, Any]:
    """Queue an ended or blocked task again (a new attempt; history kept). A running
    task needs `force`: it is stopped first, then queued."""
    return (await _steer(state, who, "restart", ref, body.force if body else False))[1]


@router.post("/{ref}/hold", response_model=TaskOut)
async def hold(state: State, who: Writer, ref: TaskRef) -> dict[str, Any]:
    """Keep a queued task out of dispatch until released."""
    return (await _steer(state, who, "hold", ref))[1]


@router.post("/{ref}/release", response_model=TaskOut)
async def release(state: State, who: Writer, ref: TaskRef) -> dict[str, Any]:
    """Return a held task to its place in line."""
    return (await _steer(state, who, "release", ref))[1]
