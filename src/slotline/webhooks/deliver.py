"""A node's notifier: delivers the events hooks selected, at least once, from the event
log itself (the outbox every change already writes in its own transaction).

One node delivers to a hook at a time: the one holding that hook's lease
(`store/webhooks.py`); nodes with different hooks in their configurations each deliver
their own. Each hook has a cursor, the last `seq` it got; the holder reads the log after
it, delivers each selected event in order, and moves the cursor only after a success (or
once the hook's tries are used up), and only while it still holds the lease. A node
that dies mid-delivery loses its leases when they expire, and the next holder delivers
again from the cursor: a duplicate carries the same `seq`. Deliveries run in tasks of
their own with bounded timeouts; the dispatch loop never waits for one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from slotline.errors import NotFound, SlotlineError
from slotline.models import Event, Task
from slotline.runner.env import BASE_ALLOW
from slotline.store import Delivery, Store
from slotline.webhooks.config import EVENT_NAMES, WebhookConfig
from slotline.webhooks.hooks import CommandHook, Hook, Result, Webhook

log = logging.getLogger("slotline.notify")

# How many events a hook reads from the log at a time.
BATCH = 200
# Back-off between tries of one delivery: 1s, 2s, 4s … at most this.
MAX_BACKOFF = 300.0


def build_hooks(
    webhooks: Sequence[WebhookConfig],
    on_event: dict[str, list[list[str]]],
    client: httpx.AsyncClient,
    log_dir: Path,
    allow: Sequence[str] = BASE_ALLOW,
) -> list[Hook]:
    """The hooks of a configuration's `notify` and `on_event`."""
    hooks: list[Hook] = [Webhook(config, client) for config in webhooks]
    for name, commands in on_event.items():
        for index, argv in enumerate(commands):
            hooks.append(CommandHook(name, index, argv, log_dir, allow))
    return hooks


class Notifier:
    """Delivers events to each of `hooks` while this node holds its lease."""

    def __init__(
        self,
        store: Store,
        node_id: str,
        hooks: Sequence[Hook],
        lease: float = 30.0,
        first_backoff: float = 1.0,
    ) -> None:
        self.store = store
        self.node_id = node_id
        self.hooks = list(hooks)
        self.lease = lease
        self.first_backoff = first_backoff
        # Until when (monotonic) this node may deliver to each hook; 0: it does not hold
        # the hook's lease.
        self._held_until = {hook.name: 0.0 for hook in self.hooks}
        # One per hook: set when the store changed (or the lease was taken).
        self._wakes = {hook.name: asyncio.Event() for hook in self.hooks}
        self._cursors: dict[str, int] = {}

    def holding(self, hook: str) -> bool:
        return time.monotonic() < self._held_until.get(hook, 0.0)

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until `stop` is set (then give the lease up)."""
        if not self.hooks:
            return
        names = [hook.name for hook in self.hooks]
        while True:
            try:
                self._cursors = await asyncio.to_thread(self.store.notify_cursors, names)
                break
            except SlotlineError:
                log.exception("reading the hooks' cursors failed; retrying")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 2.0)
            if stop.is_set():
                return
        watcher = self.store.watcher()
        workers = [asyncio.create_task(self._hook_loop(hook, stop)) for hook in self.hooks]
        try:
            while not stop.is_set():
                await self._renew()
                if await watcher.wait(self.lease / 3):
                    self._wake_all()
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            watcher.close()
            if any(self._held_until.values()):
                with contextlib.suppress(SlotlineError):
                    await asyncio.to_thread(self.store.drop_notify_lease, self.node_id)

    def _wake_all(self) -> None:
        for wake in self._wakes.values():
            wake.set()

    async def _renew(self) -> None:
        asked = time.monotonic()
        names = [hook.name for hook in self.hooks]
        take = self.store.take_notify_leases
        try:
            held = await asyncio.to_thread(take, self.node_id, names, self.lease)
        except SlotlineError:
            log.exception("renewing the delivery leases failed", extra={"node": self.node_id})
            return
        gained = [name for name in held if not self.holding(name)]
        for name in names:
            # Measured from before the ask: the store's expiry is at least this late.
            self._held_until[name] = asked + self.lease if name in held else 0.0
        if gained:
            # Another node may have delivered (and moved the cursors) while this one did
            # not hold the lease: go on from the store's cursors, not those read before.
            try:
                cursors = await asyncio.to_thread(self.store.notify_cursors, names)
            except SlotlineError:
                log.exception("reading the hooks' cursors failed", extra={"node": self.node_id})
                for name in gained:
                    self._held_until[name] = 0.0
                return
            for name in gained:
                self._cursors[name] = cursors.get(name, self._cursors.get(name, 0))
                self._wakes[name].set()
            log.info("delivering to %s", ", ".join(sorted(gained)), extra={"node": self.node_id})

    async def _hook_loop(self, hook: Hook, stop: asyncio.Event) -> None:
        wake = self._wakes[hook.name]
        while not stop.is_set():
            wake.clear()  # before reading: a change while delivering wakes the next round
            if self.holding(hook.name):
                try:
                    delay = await self._deliver_pending(hook)
                except Exception:  # a bug or the store: logged, the loop goes on
                    log.exception("delivering to %s failed", hook.name)
                    delay = self.first_backoff
                if delay is None:
                    continue  # more to read right away
            else:
                delay = self.lease / 3
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), delay)

    async def _deliver_pending(self, hook: Hook) -> float | None:
        """Deliver what `hook` has not got yet, in order. Returns None if there may be
        more to read at once, else how long to wait (for new events, or a retry)."""
        since = self._cursors.get(hook.name, 0)
        events = await asyncio.to_thread(self.store.events, since, BATCH)
        if not events:
            return 5.0
        for event in events:
            if event.kind in hook.kinds:
                if not await self._deliver(hook, event):
                    return 5.0  # the lease was lost, or the tries are not over
            elif event is events[-1] and not await self._advance(hook, event.seq):
                return 5.0
        return None if len(events) == BATCH else 5.0

    async def _deliver(self, hook: Hook, event: Event) -> bool:
        """Try `event` until it is delivered or `hook.max_attempts` are used; the cursor
        moves past it then. False if this node lost the lease meanwhile."""
        task = await self._task(event.task_id)
        tries = itertools.count(1) if hook.max_attempts is None else range(1, hook.max_attempts + 1)
        for attempt in tries:
            if not self.holding(hook.name):
                return False
            started = time.monotonic()
            try:
                result = await hook.deliver(event, task)
            except Exception as exc:  # a hook's bug must not stop the others
                log.exception("hook %s raised", hook.name)
                result = Result(False, None, f"internal error: {type(exc).__name__}")
            await self._record(hook, event, attempt, result, time.monotonic() - started)
            if result.ok or result.final:
                break  # a final failure was logged by `_record`
            if isinstance(hook, Webhook) and _refused_for_good(result.status):
                log.warning(
                    "%s refused event %s with HTTP %s: not retried",
                    hook.name, event.seq, result.status, extra={"task_id": event.task_id},
                )  # fmt: skip
                break
            if hook.max_attempts is None or attempt < hook.max_attempts:
                delay = min(self.first_backoff * 2 ** (attempt - 1), MAX_BACKOFF)
                await asyncio.sleep(delay)
        else:
            log.warning(
                "gave up delivering event %s to %s after %s tries",
                event.seq,
                hook.name,
                hook.max_attempts,
                extra={"task_id": event.task_id},
            )
        return await self._advance(hook, event.seq)

    async def _advance(self, hook: Hook, seq: int) -> bool:
        moved = await asyncio.to_thread(self.store.advance_notify, self.node_id, hook.name, seq)
        if moved:
            self._cursors[hook.name] = seq
            return True
        # Another node holds the hook's lease now: it delivers from the stored cursor.
        self._held_until[hook.name] = 0.0
        cursors = await asyncio.to_thread(self.store.notify_cursors, [])
        self._cursors[hook.name] = cursors.get(hook.name, self._cursors.get(hook.name, 0))
        return False

    async def _task(self, task_id: str | None) -> Task | None:
        if task_id is None:
            return None
        try:
            return await asyncio.to_thread(self.store.get, task_id, None, False)
        except NotFound:
            return None  # removed since (`clear`): the event still goes out

    async def _record(
        self, hook: Hook, event: Event, attempt: int, result: Result, took: float
    ) -> None:
        delivery = Delivery(
            at=time.time(),
            hook=hook.name,
            event=EVENT_NAMES.get(event.kind, event.kind),
            seq=event.seq,
            task_id=event.task_id,
            node_id=self.node_id,
            attempt=attempt,
            ok=result.ok,
            status=result.status,
            error=result.error,
            took=took,
        )
        if not result.ok:
            log.warning(
                "hook %s: event %s not delivered (try %s): %s",
                hook.name,
                event.seq,
                attempt,
                result.error,
                extra={"task_id": event.task_id},
            )
        try:
            await asyncio.to_thread(self.store.log_notify, delivery)
        except SlotlineError:
            log.exception("recording a delivery failed")


async def deliver_until(
    stop: asyncio.Event,
    store: Store,
    node_id: str,
    webhooks: Sequence[WebhookConfig],
    on_event: dict[str, list[list[str]]],
    log_dir: Path,
    lease: float,
    allow: Sequence[str] = BASE_ALLOW,
) -> None:
    """Run a notifier for the hooks of a configuration until `stop` is set (`serve`)."""
    if not webhooks and not on_event:
        return
    # No redirects: a webhook's answer must not send the signed body elsewhere.
    async with httpx.AsyncClient(follow_redirects=False, trust_env=False) as client:
        hooks = build_hooks(webhooks, on_event, client, log_dir, allow)
        await Notifier(store, node_id, hooks, lease=lease).run(stop)


def _refused_for_good(status: int | None) -> bool:
    """An answer no retry changes (400, 401, 403, 404, 410…): the event is skipped and
    the failure stays in the log; a timeout (408), a limit (429), a server error or no
    answer is retried."""
    return status is not None and 400 <= status < 500 and status not in (408, 429)
