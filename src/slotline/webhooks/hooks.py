"""The two kinds of hook and how each delivers one event: a webhook POSTs it as signed
JSON, a command hook runs an argv template through the runner's process keeper (a new
session, no inherited descriptors, a timeout, its output to a log)."""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import hmac
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from slotline.clock import iso
from slotline.errors import InvalidInput
from slotline.models import Event, Task
from slotline.runner.process import SpawnError, spawn
from slotline.webhooks.config import (
    EVENT_KINDS,
    EVENT_NAMES,
    WebhookConfig,
    fill_hook_command,
    public_url,
)

# A command hook is stopped after this long (TERM, then KILL after the grace).
COMMAND_TIMEOUT = 30.0
COMMAND_GRACE = 5.0


@dataclass(frozen=True, slots=True)
class Result:
    """How one try went: `ok`, the HTTP status or exit code, and why not (never a secret);
    `final`: another try would go the same way (it is logged, not retried)."""

    ok: bool
    status: int | None = None
    error: str | None = None
    final: bool = False


class Hook(Protocol):
    name: str
    kinds: frozenset[str]
    max_attempts: int | None

    async def deliver(self, event: Event, task: Task | None) -> Result: ...


def payload(event: Event, task: Task | None) -> dict[str, Any]:
    """The JSON a hook receives: the event, its `seq` and a summary of its task."""
    summary = None
    if task is not None:
        summary = {
            "id": task.id,
            "title": task.title,
            "status": task.status.value,
            "agent": task.agent,
            "workspace": task.workspace,
            "user": task.user,
            "stalled_at": iso(task.stalled_at),
            "needs_input_at": iso(task.needs_input_at),
        }
    return {
        "event": EVENT_NAMES.get(event.kind, event.kind),
        "seq": event.seq,
        "at": iso(event.at),
        "kind": event.kind,
        "task_id": event.task_id,
        "data": event.data,
        "task": summary,
    }


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """`Slotline-Signature`: `t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


class Webhook:
    """POSTs each selected event to one URL."""

    def __init__(self, config: WebhookConfig, client: httpx.AsyncClient) -> None:
        self.name = config.hook
        self.kinds = frozenset(EVENT_KINDS[name] for name in config.events)
        self.max_attempts: int | None = config.max_attempts
        self._config = config
        self._client = client

    async def deliver(self, event: Event, task: Task | None) -> Result:
        body = json.dumps(payload(event, task), separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "slotline",
            "Slotline-Event": EVENT_NAMES.get(event.kind, event.kind),
            "Slotline-Seq": str(event.seq),
        }
        secret = self._config.secret
        if secret is not None:
            headers["Slotline-Signature"] = signature(
                secret.get_secret_value(), int(time.time()), body
            )
        try:
            answer = await self._client.post(
                self._config.url, content=body, headers=headers, timeout=self._config.timeout
            )
        except httpx.TimeoutException:
            return Result(False, None, f"no answer within {self._config.timeout:g}s")
        except httpx.HTTPError as exc:
            # The exception's text can hold the URL (and its credentials): name its type.
            where = public_url(self._config.url)
            return Result(False, None, f"{type(exc).__name__} posting to {where}")
        if 200 <= answer.status_code < 300:
            return Result(True, answer.status_code)
        return Result(False, answer.status_code, f"answered HTTP {answer.status_code}")


class CommandHook:
    """Runs an argv template for each selected event (`on_event`)."""

    def __init__(
        self,
        event_name: str,
        index: int,
        argv: list[str],
        log_dir: Path,
        allow: Sequence[str],
        timeout: float = COMMAND_TIMEOUT,
    ) -> None:
        self.name = f"on_event.{event_name}.{index}"
        self.kinds = frozenset({EVENT_KINDS[event_name]})
        self.max_attempts: int | None = 3
        self._argv = argv
        self._log = log_dir / "hooks" / f"{self.name}.log"
        self._allow = tuple(allow)
        self.timeout = timeout

    async def deliver(self, event: Event, task: Task | None) -> Result:
        values = {
            "event": EVENT_NAMES.get(event.kind, event.kind),
            "seq": str(event.seq),
            "id": event.task_id or "",
            "reason": str(event.data.get("reason") or ""),
        }
        if task is not None:
            values.update(
                title=task.title,
                status=task.status.value,
                agent=task.agent or "",
                workspace=task.workspace or "",
                user=task.user or "",
            )
        env = {
            name: value
            for name, value in os.environ.items()
            if any(fnmatch.fnmatchcase(name, allowed) for allowed in self._allow)
        }
        env.update(SLOTLINE_EVENT=values["event"], SLOTLINE_SEQ=values["seq"])
        if event.task_id:
            env["SLOTLINE_TASK_ID"] = event.task_id
        try:
            argv = fill_hook_command(self._argv, values)
        except InvalidInput as exc:
            return Result(False, None, f"not run: {exc}", final=True)
        try:
            handle = await spawn(argv, None, env, self._log)
        except SpawnError as exc:
            return Result(False, None, str(exc))
        waiting = asyncio.create_task(handle.wait())
        try:
            outcome = await asyncio.wait_for(asyncio.shield(waiting), self.timeout)
        except TimeoutError:
            await handle.stop(f"timed out after {self.timeout:g}s", COMMAND_GRACE)
            outcome = await waiting
        if outcome.exit_code == 0 and outcome.reason is None:
            return Result(True, 0)
        why = outcome.reason or f"exit code {outcome.exit_code}"
        return Result(False, outcome.exit_code, f"{why} (output in {self._log})")
