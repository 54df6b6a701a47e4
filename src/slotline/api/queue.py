"""The public async Python API: open a queue on a store URL, submit, steer, watch. The
sync API (`slotline.open`, `SyncQueue`) runs these same coroutines: `api/sync.py`. The
README and docs/python.md show it in use.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import dataclasses
import logging
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Mapping,
    Sequence,
)
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from slotline.api.landing import Landing
from slotline.api.unserved import UnservedWarning, warn
from slotline.config.file import Config
from slotline.errors import InvalidInput, TaskFailed
from slotline.line import STATUS_HEAD
from slotline.models import Event, Priority, Status, Task, TaskPage
from slotline.node.node import Node
from slotline.runner.callable import Entry
from slotline.scheduler.cron import Schedule
from slotline.spec import TaskSpec
from slotline.store import QueueStatus, Settings, Store, open_store, unserved_reason
from slotline.taskfilter import ListQuery, TaskFilter

log = logging.getLogger("slotline")

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class Queue:
    """An async handle on a slotline store. Every method is one store transaction run in
    a worker thread, so it never blocks the event loop."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # Review and land worktree runs: diff, merge, worktrees, prune.
        self.landing = Landing(store)

    async def _call(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(function, *args, **kwargs)

    async def __aenter__(self) -> Queue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._call(self.store.close)

    # -- submit and read --------------------------------------------------------------

    async def submit(
        self,
        /,
        command: Sequence[str] | None = None,
        *,
        callable: str | None = None,
        **fields: Any,
    ) -> Task:
        """Submit a command (an argv list, never a shell string) or a registered callable.

        A callable that no live node serves is still submitted, with an `UnservedWarning`:
        it waits until a node serving it starts.

        Args:
            command: the argv list, e.g. ["claude", "-p", "fix the flaky test"].
            callable: name of a function registered on the node (instead of a command).
            **fields: any TaskSpec field: priority ("urgent"|"high"|"normal"|"low", P0..P3),
                title, agent, workspace, user, labels, env, depends_on, parent_id,
                max_attempts, backoff, timeout, queue_ttl, hold, args, expected_duration
                (seconds, for ETAs); key (idempotency, per user: while a task of the same
                user with that key has not finished, it is returned, with `deduplicated`
                set, instead of a new one) and dedup_window (seconds); run_at (epoch
                seconds, a datetime (a naive one is local time), or ISO 8601 with an
                offset) or delay (seconds): start no earlier; isolation ("worktree"), repo,
                base, keep (a git worktree per run: docs/config.md).

        Returns:
            The task as stored, with its status (queued, waiting, held or blocked).

        Raises:
            InvalidInput: a field is malformed (the message names it), or a worktree
                task's repository or base cannot be used.
            UnknownDependency: a depends_on id does not exist; nothing is created.
            BoundExceeded: the queue, depth or children bound is reached; nothing is created.
        """
        task = await self._call(self.store.submit, _spec(command, callable=callable, **fields))
        if callable is not None:
            await self._warn_if_unserved(callable)
        return task

    async def _warn_if_unserved(self, name: str) -> None:
        """An `UnservedWarning` when no live node serves the function `name`. Read after
        the submit has been committed: a failed read is logged, never raised."""
        try:
            served = await self._call(self.store.served_functions)
        except Exception as exc:
            log.warning("could not tell whether a node serves %r: %r", name, exc)
            return
        if name not in served:
            warn(UnservedWarning(unserved_reason(name)))

    async def submit_many(self, specs: Sequence[TaskSpec | dict[str, Any]]) -> builtins.list[Task]:
        """Submit several tasks atomically: all are created, or none."""
        return await self._call(self.store.submit_many, builtins.list(specs))

    async def get(self, ref: str) -> Task:
        """A task by id or unique id prefix, with its attempts and position."""
        return await self._call(self.store.get, ref)

    async def list(self, status: Status | str | None = None) -> builtins.list[Task]:
        """Tasks in submission order, optionally only those of one status."""
        return await self._call(self.store.list_tasks, Status(status) if status else None)

    async def page(self, /, query: ListQuery | TaskFilter | None = None, **fields: Any) -> TaskPage:
        """One page of the tasks `query` asks for (a filter, `parent_id`, `newest`,
        `limit`, `after`, `count`…: see `ListQuery`), in submission order (or `newest`
        first), read in SQL: pass the page's `next_after` as `after` for the next one.
        `fields` change the query's own (`page(wanted, newest=True, limit=5)`, as before
        ListQuery, still reads a page).

        Raises:
            NotFound: no task matches `after`.
        """
        if isinstance(query, TaskFilter):
            query = ListQuery(wanted=query)
        if fields:
            query = dataclasses.replace(query or ListQuery(), **fields)
        return await self._call(self.store.list_page, query)

    async def status(self, *, limit: int = STATUS_HEAD, all: bool = False) -> QueueStatus:
        """Active/max, slots available, paused, the running tasks, and the head of the line:
        the first `limit` queued tasks with positions and ETAs. `queued_total` says how
        many are queued in all, so a head shorter than it is partial.

        Args:
            limit: how many queued tasks to read from the head of the line.
            all: every queued task instead (the whole line, whose read and ETAs cost
                time in proportion to it: seconds at 100,000 queued).
        """
        return await self._call(self.store.status, limit=limit, all=all)

    async def events(self, since: int = 0, limit: int = 1000) -> builtins.list[Event]:
        """Events after `since` (a seq), oldest first."""
        return await self._call(self.store.events, since, limit)

    async def follow(self, since: int = 0) -> AsyncGenerator[Event, None]:
        """Every event after `since`, then live ones as they happen; never misses one."""
        watcher = self.store.watcher()
        try:
            while True:
                batch = await self._call(self.store.events, since, 1000)
                for event in batch:
                    since = event.seq
                    yield event
                if len(batch) < 1000:
                    await watcher.wait(5.0)
        finally:
            watcher.close()

    async def wait(self, ref: str, timeout: float | None = None) -> Task:
        """Wait until the task has ended (succeeded, failed, cancelled, expired)."""

        async def until_done() -> Task:
            watcher = self.store.watcher()
            try:
                while True:
                    task = await self.get(ref)
                    if task.status.terminal:
                        return task
                    await watcher.wait(5.0)
            finally:
                watcher.close()

        return await asyncio.wait_for(until_done(), timeout)

    async def result(self, ref: str, timeout: float | None = None) -> Any:
        """Wait until the task has ended; what its function returned (JSON: a tuple comes
        back as a list), or None for a task that returned nothing or is a command.

        Raises:
            TaskFailed: the task failed, was cancelled or expired (the message says why).
            TimeoutError: it did not end within `timeout` seconds.
        """
        task = await self.wait(ref, timeout)
        if task.status is not Status.SUCCEEDED:
            why = task.failure_reason or task.status_reason or task.status.value
            raise TaskFailed(
                f"task {task.id[:8]} ({task.title}) {task.status.value}: {why}",
                task_id=task.id,
                status=task.status.value,
            )
        return task.result

    async def settings(self) -> Settings:
        """Limits and settings as stored."""
        return await self._call(self.store.settings)

    # -- steering ---------------------------------------------------------------------

    async def cancel(self, ref: str, cascade: bool = False) -> Task:
        """Cancel a task (a running one is stopped: TERM, then KILL after a grace period)."""
        return await self._call(self.store.cancel, ref, cascade)

    async def terminate(
        self, ref: str, reason: str = "by request", resumable: bool = False
    ) -> Task:
        """Stop a running task (fails "terminated: REASON"); `resumable`: a restart resumes it."""
        return await self._call(self.store.terminate, ref, reason, resumable)

    async def send_input(self, ref: str, text: str, enter: bool = True) -> Task:
        """Type `text` into an interactive task's run, then Enter unless `enter` is false
        (its terminal must be on this machine: coding-agents.md, "Interactive runs")."""
        from slotline.runner.terminal_input import send_input

        task = await self._call(self.store.get, ref)
        await self._call(send_input, task, text, enter, self.store)
        return task

    async def followup(self, ref: str, prompt: str, *, config: Config | None = None) -> Task:
        """A follow-up of `ref` in its session (coding-agents.md), by its agent type in
        `config` (default: slotline.yaml), else as a running node published it (a type
        of both that differs is logged as a warning, and `config`'s is used)."""
        from slotline.config.file import load_config
        from slotline.config.published import store_agent_config
        from slotline.config.templates import followup_fields

        followed = await self._call(self.store.get, ref)
        local = config or load_config()
        if followed.agent is not None:
            agent, warn = followed.agent, log.warning
            local = await self._call(store_agent_config, self.store, local, agent, warn)
        fields = followup_fields(local, followed, prompt)
        return await self._call(self.store.submit_followup, followed.id, prompt, fields)

    async def boost(self, ref: str) -> Task:
        """Start next: position 1, limits still apply."""
        return await self._call(self.store.boost, ref)

    async def bump(self, ref: str) -> Task:
        """Start now, even over the limit (the attempt is marked over-limit)."""
        return await self._call(self.store.bump, ref)

    async def move(
        self,
        ref: str,
        *,
        to: int | None = None,
        before: str | None = None,
        after: str | None = None,
    ) -> Task:
        """Move a queued task to position `to`, or before/after another queued task."""
        return await self._call(self.store.move, ref, to=to, before=before, after=after)

    async def set_priority(
        self, ref: str, level: str | int | Priority, reason: str | None = None
    ) -> Task:
        """Change a waiting task's priority (`reason`: said in its event)."""
        return await self._call(self.store.set_priority, ref, level, reason)

    async def restart(self, ref: str, force: bool = False) -> Task:
        """Queue an ended or blocked task again; `force` stops a running one first."""
        return await self._call(self.store.restart, ref, force)

    async def hold(self, ref: str) -> Task:
        """Keep a queued task out of dispatch."""
        return await self._call(self.store.hold, ref)

    async def release(self, ref: str) -> Task:
        """Return a held task to its place in line."""
        return await self._call(self.store.release, ref)

    async def pause(self) -> None:
        """Start nothing new until resumed."""
        await self._call(self.store.pause)

    async def resume(self) -> None:
        await self._call(self.store.resume)

    async def clear(self) -> int:
        """Cancel every task that has not started; returns how many."""
        return await self._call(self.store.clear)

    # -- pacing: limits, rates, budgets, fairness, back-off ------------------------

    async def set_max_concurrent(self, value: int) -> None:
        """Change the global limit at runtime."""
        await asyncio.to_thread(self.store.set_setting, "max_concurrent", value)

    async def set_limit(self, key: str, value: str | None, max_running: int | None) -> None:
        """Cap running tasks per agent/workspace/user/label:NAME (None removes the cap)."""
        await asyncio.to_thread(self.store.set_limit, key, value, max_running)

    async def set_rate(
        self,
        key: str,
        value: str | None,
        max_starts: int | None,
        period: float | str | None = None,
    ) -> None:
        """At most `max_starts` starts per `period` (seconds, or "30s", "1m", "2h", "1d")
        of the tasks whose `key` (global, agent, workspace, user, label:NAME) is `value`
        (each value apart if None); `max_starts` None removes the rate.

        Raises:
            InvalidInput: an unknown key, a count below 1, a period not more than 0.
        """
        await asyncio.to_thread(self.store.set_rate, key, value, max_starts, period)

    async def set_budget(
        self,
        key: str,
        value: str | None,
        amount: float | None,
        period: float | str | None = None,
        unit: str | None = "usd",
    ) -> None:
        """At most `amount` spent (`unit` "usd": dollars; "tok": tokens in and out) by
        the runs that finished in the last `period` (seconds, or "1h", "1d") of the tasks
        whose `key` (global, agent, workspace, user, repo, label:NAME) is `value` (each
        value apart if None). Once reached, no new task of it starts until enough spend
        ages out. A budget is one window: a key may hold several of one unit (10 dollars an
        hour and 100 a day, both enforced); setting one replaces only the budget of that
        key, value, unit and `period`. `amount` None removes budgets: of `unit` (of every
        unit if None) and of the window `period` (of every window if None).

        Raises:
            InvalidInput: an unknown key or unit, an amount not more than 0 (or not a
                whole number of tokens), a period not more than 0.
        """
        await asyncio.to_thread(self.store.set_budget, key, value, amount, period, unit)

    async def set_fairness(
        self, key: str | None, weights: Mapping[str, float] | None = None
    ) -> None:
        """Take turns between the values of `key` (user, workspace, agent, parent,
        label:NAME) within each priority level, a value's share its weight (1 if not
        named); None turns fairness off.

        Raises:
            InvalidInput: an unknown key or a weight not in (0, 1000].
        """
        await asyncio.to_thread(self.store.set_fairness, key, weights)

    async def set_backoff(self, agent: str, rule: Mapping[str, Any] | None) -> None:
        """Back agent type `agent` off its provider when its runs fail with one of
        `rule["exit_codes"]` or output matching `rule["pattern"]` (see docs/config.md);
        None removes the rule and ends a back-off in force.

        Raises:
            InvalidInput: an unknown field, a bad regex, a number out of range.
        """
        await asyncio.to_thread(self.store.set_backoff, agent, rule)

    # -- recurring schedules ------------------------------------------------------------

    async def add_schedule(
        self,
        /,
        name: str,
        cron: str,
        command: Sequence[str] | None = None,
        *,
        tz: str = "UTC",
        overlap: str = "skip",
        paused: bool = False,
        replace: bool = False,
        **fields: Any,
    ) -> Schedule:
        """Submit a task at each tick of `cron`, exactly once however many nodes run.

        Args:
            name: unique name (letters, digits, `_ . : @ + -`).
            cron: five fields (`"0 3 * * *"`: 03:00 every day), or six with seconds first.
            command: the argv list of the task (or give `callable=` in `fields`).
            tz: the time zone of the ticks (`UTC`, `Europe/Paris`).
            overlap: while the previous run has not ended: `skip` the tick, `queue`
                another run, or `replace` it (cancel, then submit).
            paused: add it paused.
            replace: change the schedule of that name if there is one.
            **fields: TaskSpec fields of the task (priority, title, agent, timeout…).

        Raises:
            InvalidInput: a bad name, expression, zone, overlap or task; a name in use.
        """
        return await self._call(
            self.store.add_schedule,
            name,
            cron,
            _spec(command, **fields),
            tz=tz,
            overlap=overlap,
            paused=paused,
            replace_existing=replace,
        )

    async def schedules(self) -> builtins.list[Schedule]:
        """Every schedule, by name."""
        return await self._call(self.store.schedules)

    async def pause_schedule(self, name: str) -> Schedule:
        """Stop a schedule's ticks (its running task goes on)."""
        return await self._call(self.store.pause_schedule, name)

    async def resume_schedule(self, name: str) -> Schedule:
        """Tick again from the next tick after now."""
        return await self._call(self.store.resume_schedule, name)

    async def remove_schedule(self, name: str) -> Schedule:
        """Delete a schedule; its tasks stay."""
        return await self._call(self.store.remove_schedule, name)

    # -- running ----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def node(
        self,
        *,
        max_concurrent: int | None = None,
        log_dir: Path | None = None,
        callables: Mapping[str, Entry] | None = None,
        **options: Any,
    ) -> AsyncIterator[Node]:
        """Run a node on this queue for the duration of the block, which starts once the
        node is registered (with the functions it serves)."""
        if max_concurrent is not None:
            await self.set_max_concurrent(max_concurrent)
        node = Node(self.store, log_dir=log_dir, callables=callables, **options)
        stop = asyncio.Event()
        runner = asyncio.create_task(node.run(stop))
        ready = asyncio.create_task(node.ready.wait())
        await asyncio.wait({runner, ready}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if runner.done():
            await runner  # it could not start: its error
        try:
            yield node
        finally:
            stop.set()
            await runner


def open_queue(url: str | Path | None = None) -> Queue:
    """Open the queue stored at `url` (a file path, sqlite:///path, postgresql://…).

    None opens the default SQLite file under the XDG data directory.
    """
    return Queue(open_store(url))


def _spec(command: Sequence[str] | None, **fields: Any) -> dict[str, Any]:
    """A task's spec from an argv list and TaskSpec fields."""
    if isinstance(command, str):
        raise InvalidInput("command must be an argv list, not a string")
    return {**fields, "command": builtins.list(command or [])}
