"""The MCP tools: a supervising agent sees capacity, submits, waits and steers.

Written once over `Calls`, which each transport provides: `slotline mcp` on stdio over a
store or a server (`BackendCalls`, calls.py), and `/mcp` on `slotline serve` over the
HTTP routes with the caller's token (`slotline.server.mcp_mount`). Results are the JSON of the CLI's
`--json`; refusals are tool errors whose text says what to do (a full queue: when to retry).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from pydantic import Field, StrictBool, ValidationError

from slotline import __version__
from slotline.bounds import OFFSET, ORDINAL, SECONDS, Range
from slotline.errors import AccessDenied, BoundExceeded, SlotlineError
from slotline.mcp.calls import Calls
from slotline.models import Priority, Status
from slotline.runner.terminal_input import MAX_INPUT

R = TypeVar("R")
TaskId = Annotated[str, Field(description="A task id, or a unique prefix of one")]
MAX_LOG_TAIL = 64 * 1024
MAX_DIFF = 1024 * 1024
# How often wait_for_task reports progress; it looks again at once when the store changes.
WAIT_TICK = 1.0
# How long one wait_for_task call may wait: up to an hour (call again to wait longer).
WAIT = Range(0, 3600, unit="seconds", above=True)

INSTRUCTIONS = """\
slotline runs tasks (coding agents, commands) on this machine under a concurrency limit:
at most `max_concurrent` run at once, the rest wait in line by priority. Before spawning
work, call queue_status to see free slots and where your own tasks stand (position, ETA).
Submit with submit_task; when the queue is full you get an error saying when to retry:
wait that long instead of retrying at once. wait_for_task blocks until a task ends.
Times are ISO 8601 UTC; eta_start/eta_finish are estimates (null when unknown, and
eta_unavailable says why). A task in line that does not start now says why in
waiting_reason {kind, text, until}."""


STATUS_NAMES = tuple(s.value for s in Status)


def refusal(exc: SlotlineError) -> ToolError:
    """A slotline error as a tool error a model can act on."""
    if isinstance(exc, BoundExceeded):
        if exc.details.get("limit") == "max_depth":
            return ToolError(f"{exc}. Waiting will not help: do the work yourself instead.")
        hint = exc.details.get("retry_after")
        seconds = 30 if hint is None else max(1, round(float(hint)))
        return ToolError(
            f"{exc}. The queue is full: nothing was created. Retry in about {seconds} "
            f"seconds (retry_after_seconds={seconds}), or wait for one of your tasks to "
            "finish (wait_for_task) before submitting more."
        )
    if isinstance(exc, AccessDenied):
        return ToolError(f"not allowed: {exc}")
    return ToolError(f"{exc} ({type(exc).__name__})")


def build_server(calls_for: Callable[[Context[Any, Any, Any]], Calls], **settings: Any) -> FastMCP:
    """The MCP server with slotline's tools; `calls_for` gives each call the queue as its
    caller may use it."""
    server = FastMCP("slotline", instructions=INSTRUCTIONS, **settings)
    # FastMCP takes no version and would answer `initialize` with the MCP library's own;
    # the low-level server it wraps is where the name and version are kept.
    server._mcp_server.version = __version__

    async def call(ctx: Context[Any, Any, Any], step: Callable[[Calls], Awaitable[R]]) -> R:
        try:
            return await step(calls_for(ctx))
        except SlotlineError as exc:
            raise refusal(exc) from exc
        except ValidationError as exc:  # arguments the API's own schemas refuse
            raise ToolError(f"invalid arguments: {exc.errors()[0]['msg']}") from None

    @server.tool()
    async def queue_status(ctx: Context[Any, Any, Any]) -> dict[str, Any]:
        """Capacity and your place in line. Call this before submitting work.

        Returns active/max_concurrent running tasks, slots_available, at_capacity, capacity, paused,
        limits (each per-key limit, e.g. agent=claude max 2, with its running count per
        value in `used`), queue_length (tasks waiting to start), next_up (the task expected to start
        first), the running tasks, and `mine`: your own tasks that have not ended (as a
        running task: your subtree), each with status, position in line, eta_start and
        eta_finish (ISO 8601 UTC estimates, null when unknown, e.g. while paused or held,
        or when no run of its agent type has finished yet: eta_unavailable says why),
        eta_basis (where the run times came from), eta_overdue (running past its
        estimate) and waiting_reason (why it does not start now: kind, text, until;
        null when it would); `rates`, the rate limits used up now (with next_start_at,
        epoch seconds), and `backoff`, agent types backing off from their provider (cap,
        not_before)."""
        return await call(ctx, lambda c: c.status())

    @server.tool()
    async def submit_task(
        ctx: Context[Any, Any, Any],
        agent: Annotated[
            str | None, Field(description="Agent type from slotline.yaml (e.g. claude)")
        ] = None,
        prompt: Annotated[
            str | None, Field(description="The prompt for the agent type's command")
        ] = None,
        command: Annotated[
            list[str] | None,
            Field(description="A raw argv list (no shell), where your role allows it"),
        ] = None,
        title: str | None = None,
        priority: Annotated[str, Field(description="urgent, high, normal or low")] = "normal",
        workspace: Annotated[str | None, Field(description="Working directory of the run")] = None,
        after: Annotated[
            list[str] | None, Field(description="Start only after these task ids succeed")
        ] = None,
        parent: Annotated[
            str | None, Field(description="Parent task id (default: your own task)")
        ] = None,
        expected_duration: Annotated[
            float | None, Field(description="Expected run time in seconds, for ETAs"), SECONDS
        ] = None,
        key: Annotated[
            str | None,
            Field(
                description="Idempotency key (your user's): while a task of yours with it "
                "has not finished, you get that task back (deduplicated: true) instead of a "
                "second one. Use one per piece of work, so that retrying a call that timed "
                "out is safe."
            ),
        ] = None,
        delay: Annotated[
            float | None,
            Field(description="Start no earlier than this many seconds from now"),
            SECONDS,
        ] = None,
        run_at: Annotated[
            str | None,
            Field(
                description="Start no earlier than this time: ISO 8601 with an offset, "
                "e.g. 2026-11-24T15:00:00Z (UTC) or 2026-11-24T15:00:00+01:00"
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Queue a task: an agent type with a prompt (preferred), or a raw command.

        Returns the task (id, status, position, eta_start…). It starts when a slot is
        free (or at its start time, with delay or run_at); use wait_for_task to block
        until it ends. If the queue or your number of
        subtasks is at its bound, nothing is created and the error says in how many
        seconds to retry: wait that long (or for one of your tasks to end) first."""
        fields: dict[str, Any] = {
            "agent": agent,
            "prompt": prompt,
            "command": command,
            "title": title,
            "priority": priority,
            "workspace": workspace,
            "depends_on": after,
            "parent_id": parent,
            "expected_duration": expected_duration,
            "key": key,
            "delay": delay,
            "run_at": run_at,
        }
        fields = {k: v for k, v in fields.items() if v is not None}
        return await call(ctx, lambda c: c.submit(fields))

    @server.tool()
    async def get_task(ctx: Context[Any, Any, Any], task_id: TaskId) -> dict[str, Any]:
        """One task in full: status, position, ETA, attempts, exit code, failure reason."""
        return await call(ctx, lambda c: c.get(task_id))

    @server.tool()
    async def list_tasks(
        ctx: Context[Any, Any, Any],
        status: Annotated[
            str | None,
            Field(
                description="waiting, queued, held, running, succeeded, failed, "
                "cancelled, expired or blocked"
            ),
        ] = None,
        agent: str | None = None,
        parent: Annotated[str | None, Field(description="Only subtasks of this task id")] = None,
        limit: Annotated[int, Range(1, 500, whole=True)] = 50,
        offset: Annotated[int, OFFSET] = 0,
        after: Annotated[
            str | None, Field(description="Continue after this task id: next_after of a page")
        ] = None,
    ) -> dict[str, Any]:
        """Tasks you may see, oldest first, filtered, a page at a time:
        {tasks, total, next_after}; the next page is after=next_after (null: the last)."""
        if status is not None and status not in STATUS_NAMES:
            raise ToolError(f"unknown status {status!r}: one of {', '.join(STATUS_NAMES)}")
        filters = {"status": status, "agent": agent, "parent_id": parent}
        chosen = {k: v for k, v in filters.items() if v is not None}
        return await call(ctx, lambda c: c.list(chosen, limit, offset, after))

    @server.tool()
    async def task_log(
        ctx: Context[Any, Any, Any],
        task_id: TaskId,
        max_bytes: Annotated[int, Range(1, MAX_LOG_TAIL, whole=True, unit="bytes")] = 4000,
    ) -> str:
        """The tail of the output (stdout and stderr) of a task's latest run."""
        return await call(ctx, lambda c: c.log(task_id, max_bytes))

    @server.tool()
    async def task_diff(
        ctx: Context[Any, Any, Any],
        task_id: TaskId,
        stat_only: Annotated[StrictBool, Field(description="Only the diff stat, no patch")] = False,
        max_bytes: Annotated[int, Range(1, MAX_DIFF, whole=True, unit="bytes")] = 64 * 1024,
    ) -> dict[str, Any]:
        """What a worktree task's latest run changed against the commit it started from
        (committed and uncommitted work): {branch, base_commit, stat, text, truncated}.
        Review it before `merge_task`."""
        return await call(ctx, lambda c: c.diff(task_id, stat_only, max_bytes))

    @server.tool()
    async def merge_task(
        ctx: Context[Any, Any, Any],
        task_id: TaskId,
        into: Annotated[
            str | None, Field(description="The branch to merge into (default: its base)")
        ] = None,
        squash: Annotated[
            StrictBool, Field(description="Squash the run's commits into one")
        ] = False,
    ) -> dict[str, Any]:
        """Land an ended worktree run: merge its branch into `into` in a temporary
        worktree, then move that branch if it has not moved meanwhile (and the files of
        a clean checkout that has it, as `git merge` there: for an admin only). A
        conflict names the files and changes nothing; so does a checkout of the target
        with uncommitted changes, or one a caller not an admin may not change."""
        return await call(ctx, lambda c: c.merge(task_id, into, squash))

    @server.tool()
    async def cancel_task(
        ctx: Context[Any, Any, Any],
        task_id: TaskId,
        cascade: Annotated[StrictBool, Field(description="Also cancel its subtasks")] = False,
    ) -> dict[str, Any]:
        """Cancel a task. A running one is stopped (TERM, then KILL); its slot frees when
        its process has exited."""
        return await call(ctx, lambda c: c.steer("cancel", task_id, cascade=cascade))

    @server.tool()
    async def start_now(ctx: Context[Any, Any, Any], task_id: TaskId) -> dict[str, Any]:
        """Start a queued task at once, even over the concurrency limit (nothing else
        starts until the count is back under it). Use sparingly."""
        return await call(ctx, lambda c: c.steer("bump", task_id))

    @server.tool()
    async def boost_task(ctx: Context[Any, Any, Any], task_id: TaskId) -> dict[str, Any]:
        """Put a queued task at position 1 (next up); the limits still apply."""
        return await call(ctx, lambda c: c.steer("boost", task_id))

    @server.tool()
    async def move_task(
        ctx: Context[Any, Any, Any],
        task_id: TaskId,
        to: Annotated[int | None, Field(description="The new position"), ORDINAL] = None,
        before: Annotated[str | None, Field(description="Just before this task")] = None,
        after: Annotated[str | None, Field(description="Just after this task")] = None,
    ) -> dict[str, Any]:
        """Move a queued task to a position, or before/after another queued task."""
        return await call(
            ctx, lambda c: c.steer("move", task_id, to=to, before=before, after=after)
        )

    @server.tool()
    async def set_priority(
        ctx: Context[Any, Any, Any],
        task_id: TaskId,
        priority: Annotated[str, Field(description="urgent, high, normal or low")],
    ) -> dict[str, Any]:
        """Change the priority of a task that has not started."""
        return await call(
            ctx, lambda c: c.steer("priority", task_id, level=Priority.parse(priority))
        )

    @server.tool()
    async def restart_task(
        ctx: Context[Any, Any, Any],
        task_id: TaskId,
        force: Annotated[StrictBool, Field(description="Stop a running task first")] = False,
    ) -> dict[str, Any]:
        """Queue an ended (or blocked) task again as a new attempt; history is kept."""
        return await call(ctx, lambda c: c.steer("restart", task_id, force=force))

    @server.tool()
    async def terminate_task(
        ctx: Context[Any, Any, Any],
        task_id: TaskId,
        reason: Annotated[str, Field(description="Why (in its failure reason)")] = "by request",
        resumable: Annotated[
            StrictBool, Field(description="A restart then resumes the agent's session")
        ] = False,
    ) -> dict[str, Any]:
        """Stop a running task; it fails with "terminated: REASON"."""
        return await call(
            ctx, lambda c: c.steer("terminate", task_id, reason=reason, resumable=resumable)
        )

    @server.tool()
    async def send_input(
        ctx: Context[Any, Any, Any],
        task_id: TaskId,
        text: Annotated[str, Field(description="What to type, as it is", max_length=MAX_INPUT)],
        enter: Annotated[StrictBool, Field(description="Press Enter after it")] = True,
    ) -> dict[str, Any]:
        """Type a line into an interactive task's run (its terminal), then Enter: answer
        the question it waits on (its `needs_input_at` is set while it waits). Read what
        it shows with `task_log` first."""
        return await call(ctx, lambda c: c.send_input(task_id, text, enter))

    @server.tool()
    async def followup_task(
        ctx: Context[Any, Any, Any],
        task_id: TaskId,
        prompt: Annotated[str, Field(description="What the agent does next", min_length=1)],
    ) -> dict[str, Any]:
        """Queue a follow-up of an agent task: it runs once that task succeeded, in its
        worktree and agent session (its agent type's `resume` template) with `prompt`."""
        return await call(ctx, lambda c: c.followup(task_id, prompt))

    @server.tool()
    async def wait_for_task(
        ctx: Context[Any, Any, Any],
        task_id: TaskId,
        timeout: Annotated[float, Field(description="Seconds to wait at most"), WAIT] = 60.0,
    ) -> dict[str, Any]:
        """Wait until a task has ended (succeeded, failed, cancelled, expired or blocked),
        at most `timeout` seconds, sending progress notifications while it waits.

        Returns the task; if it has not ended in time, the task as it is then (check its
        status) — call again to keep waiting."""
        started = time.monotonic()
        changed = calls_for(ctx).watcher()
        try:
            while True:
                task = await call(ctx, lambda c: c.get(task_id))
                elapsed = time.monotonic() - started
                if Status(task["status"]).terminal or task["status"] == Status.BLOCKED:
                    return task
                if elapsed >= timeout:
                    return task
                where = task["status"]
                if task.get("position"):
                    where += f", position {task['position']}"
                if task.get("eta_start") and task["status"] != Status.RUNNING:
                    where += f", starts ~{task['eta_start']}"
                elif task.get("eta_overdue"):
                    where += ", running past its estimate"
                elif task.get("eta_finish"):
                    where += f", ends ~{task['eta_finish']}"
                if task.get("waiting_reason"):
                    where += f" ({task['waiting_reason']['text']})"
                await ctx.report_progress(elapsed, timeout, f"task {task['id'][:8]}: {where}")
                await changed.wait(min(WAIT_TICK, timeout - elapsed))
        finally:
            changed.close()

    return server
