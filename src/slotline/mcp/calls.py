"""What the MCP tools (`tools.py`) need of the queue, as `Calls`, and its provider over a
store or server (`BackendCalls`, for `slotline mcp` on stdio): the caller's identity and
rights applied, results in the JSON of the CLI's `--json`."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from slotline import limits
from slotline.client.backend import Backend, agent_type_fields
from slotline.client.wire import task_path
from slotline.config.file import Config
from slotline.models import Status, Task
from slotline.runlogs import plain_text
from slotline.store import Store, Watcher
from slotline.store.readback import read_back
from slotline.taskfilter import ListQuery, TaskFilter

R = TypeVar("R")


class Calls(Protocol):
    """What the tools need of the queue, with the caller's identity and rights applied."""

    async def status(self) -> dict[str, Any]: ...

    async def submit(self, fields: dict[str, Any]) -> dict[str, Any]: ...

    async def get(self, ref: str) -> dict[str, Any]: ...

    async def list(
        self, filters: dict[str, Any], limit: int, offset: int, after: str | None
    ) -> dict[str, Any]: ...

    async def log(self, ref: str, max_bytes: int) -> str: ...

    async def steer(self, verb: str, ref: str, **options: Any) -> dict[str, Any]: ...

    async def followup(self, ref: str, prompt: str) -> dict[str, Any]: ...

    async def diff(self, ref: str, stat_only: bool, max_bytes: int) -> dict[str, Any]: ...

    async def merge(self, ref: str, into: str | None, squash: bool) -> dict[str, Any]: ...

    async def send_input(self, ref: str, text: str, enter: bool) -> dict[str, Any]: ...

    def watcher(self) -> Watcher: ...


def status_summary(
    status: dict[str, Any], mine: list[dict[str, Any]], limits: list[dict[str, Any]]
) -> dict[str, Any]:
    """queue_status's answer: capacity, the per-key limits and their use (`limits.usage`),
    the running tasks, the length of the line (not every queued task: it may be
    thousands) and the caller's own live tasks."""
    keep = ("active", "max_concurrent", "slots_available", "at_capacity", "paused")
    return {
        **{k: status[k] for k in keep},
        "capacity": status.get("capacity"),
        "limits": limits,
        "admission_hold": status.get("admission_hold"),
        "queue_length": status["queued_total"],
        "next_up": status.get("next_up"),
        "running": status["running"],
        "mine": mine,
        # Why tasks of a key wait with slots free: a rate used up, a provider back-off.
        "rates": [r for r in status.get("rates") or () if r.get("next_start_at") is not None],
        "backoff": status.get("backoff") or [],
    }


def task_log(task: Task, max_bytes: int) -> str:
    """What `task_log` answers: the last `max_bytes` of the task's latest log as text;
    for an interactive run, what its terminal shows now (the question it waits on is
    there, where its log holds the screen's redrawing), else its log without escapes."""
    path = task.attempts[-1].log_path if task.attempts else None
    if task.interactive:
        from slotline.runner.tmux import Terminal, TerminalError

        terminal = Terminal.of(path) if task.status is Status.RUNNING else None
        if terminal is not None:
            try:
                return terminal.screen()[-max_bytes:]
            except TerminalError:
                pass  # it ended meanwhile: its log
        return plain_text(tail(path, max_bytes).encode()).decode("utf-8", "replace")
    return tail(path, max_bytes)


def tail(path: str | None, max_bytes: int) -> str:
    """The last `max_bytes` of a log file as text ('' when there is none yet)."""
    if not path:
        return ""
    try:
        with Path(path).open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            return handle.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


class BackendCalls:
    """The tools over a store (`--store`) or a server (`--url` + token), for stdio.

    On a store the caller is the run whose `$SLOTLINE_TASK_ID` is set (its subtasks are
    submitted under it and "mine" is its subtree); over a server, the token says who.
    """

    def __init__(self, backend: Backend, config: Config, task_id: str | None) -> None:
        self.backend = backend
        self.config = config
        self.task_id = task_id

    async def _run(self, function: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        return await asyncio.to_thread(function, *args, **kwargs)

    async def status(self) -> dict[str, Any]:
        from slotline.client.http import SlotlineClient

        if isinstance(self.backend, SlotlineClient):
            current = await self._run(self.backend.status, True, self.task_id)
        else:
            current = await self._run(self.backend.status)
            mine = [] if self.task_id is None else await self._run(self._mine, self.task_id)
            current = replace(current, mine=mine)
        settings = await self._run(self.backend.settings)
        data = current.to_dict()
        return status_summary(
            data, data.get("mine") or [], limits.usage(settings.per_key, current.running)
        )

    def _mine(self, root: str) -> list[Task]:
        from slotline.store import Store

        assert isinstance(self.backend, Store)
        return self.backend.mine(self.backend.get(root).id)

    async def submit(self, fields: dict[str, Any]) -> dict[str, Any]:
        prompt = fields.pop("prompt", None)
        if self.task_id is not None:
            fields.setdefault("parent_id", self.task_id)
        warnings: list[str] = []
        if prompt is not None or (fields.get("agent") and not fields.get("command")):
            fields = await self._run(
                agent_type_fields, self.backend, self.config, fields, prompt, warnings.append
            )
        task = await self._run(self.backend.submit, fields)
        fresh = (await self._run(read_back, self.backend.get, task)).to_dict()
        # A local agent type that differs from the one the running node serves.
        said = {"warning": "; ".join(warnings)} if warnings else {}
        return {**fresh, "deduplicated": task.deduplicated, **said}

    async def get(self, ref: str) -> dict[str, Any]:
        return (await self._run(self.backend.get, ref)).to_dict()

    async def list(
        self, filters: dict[str, Any], limit: int, offset: int, after: str | None
    ) -> dict[str, Any]:
        status, parent = filters.get("status"), filters.get("parent_id")
        if parent:  # an id prefix, as everywhere
            parent = (await self._run(self.backend.get, parent)).id
        wanted = TaskFilter(status=[Status(status)] if status else [], agent=filters.get("agent"))
        page = await self._run(
            self.backend.list_page,
            ListQuery(
                wanted, parent_id=parent, limit=limit, after=after, offset=offset, count=True
            ),
        )
        return page.to_dict()

    async def log(self, ref: str, max_bytes: int) -> str:
        from slotline.client.http import SlotlineClient

        if isinstance(self.backend, SlotlineClient):
            data = await self._run(self.backend.log, ref)
            return data[-max_bytes:].decode("utf-8", "replace")
        task = await self._run(self.backend.get, ref)
        return await self._run(task_log, task, max_bytes)

    def watcher(self) -> Watcher:
        return self.backend.watcher()

    async def followup(self, ref: str, prompt: str) -> dict[str, Any]:
        from slotline.client.followup import submit_followup

        task = await self._run(submit_followup, self.backend, self.config, ref, prompt)
        return (await self._run(read_back, self.backend.get, task)).to_dict()

    async def diff(self, ref: str, stat_only: bool, max_bytes: int) -> dict[str, Any]:
        from slotline.client.http import SlotlineClient

        if isinstance(self.backend, SlotlineClient):
            params = {"stat": "true" if stat_only else "false", "max_bytes": str(max_bytes)}
            path = task_path(ref, "diff")
            found: dict[str, Any] = await self._run(self.backend.call, "GET", path, params=params)
            return found
        from slotline.worktrees import verbs
        from slotline.worktrees.gitpool import run_git

        store = self._store()
        return (await run_git(verbs.diff, store, ref, stat_only, max_bytes)).to_dict()

    async def merge(self, ref: str, into: str | None, squash: bool) -> dict[str, Any]:
        from slotline.client.http import SlotlineClient

        if isinstance(self.backend, SlotlineClient):
            body: dict[str, Any] = {"squash": squash, **({"into": into} if into else {})}
            path = task_path(ref, "merge")
            merged: dict[str, Any] = await self._run(self.backend.call, "POST", path, json=body)
            return merged
        from slotline.worktrees import verbs
        from slotline.worktrees.gitpool import run_git

        # A run (`$SLOTLINE_TASK_ID`) may not move a checkout, as with its task token.
        mine = self.task_id is None
        result, task = await run_git(verbs.merge, self._store(), ref, into, squash, mine)
        return {**result.to_dict(), "task": task.to_dict()}

    def _store(self) -> Store:
        assert isinstance(self.backend, Store)
        return self.backend

    async def send_input(self, ref: str, text: str, enter: bool) -> dict[str, Any]:
        from slotline.client.http import SlotlineClient

        if isinstance(self.backend, SlotlineClient):
            typed = await self._run(self.backend.send_input, ref, text, enter)
            return typed.to_dict()
        from slotline.runner.terminal_input import send_input

        task = await self._run(self.backend.get, ref)
        await self._run(send_input, task, text, enter, self._store())
        return task.to_dict()

    async def steer(self, verb: str, ref: str, **options: Any) -> dict[str, Any]:
        verbs: dict[str, Callable[..., Task]] = {
            "cancel": self.backend.cancel,
            "bump": self.backend.bump,
            "boost": self.backend.boost,
            "move": self.backend.move,
            "priority": self.backend.set_priority,
            "restart": self.backend.restart,
            "terminate": self.backend.terminate,
        }
        task = await self._run(verbs[verb], ref, **options)
        return (await self._run(read_back, self.backend.get, task)).to_dict()
