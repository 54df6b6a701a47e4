"""The event hub: one reader of the store's event log, fanned out to the stream's clients
through a bounded queue each (a client too slow is dropped, never waited for)."""

from __future__ import annotations

import asyncio
import logging

from slotline.errors import SlotlineError
from slotline.models import Event
from slotline.store import Store

log = logging.getLogger("slotline.server.events")

PAGE = 500
WS_DROPPED = 4000  # close code: too slow, resume from the last seq
WS_REFUSED = 1008  # close code: policy (token refused or revoked, bad since)
WS_GOING_AWAY = 1001  # close code: the server is stopping


class Dropped(Exception):
    """The client was cut off: it fell too far behind, or the server is stopping."""


class Subscriber:
    """One client's bounded queue of live events."""

    def __init__(self, size: int) -> None:
        self.queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=size)
        self.reason: str | None = None
        self.code = WS_DROPPED
        self.gone = asyncio.Event()
        # The last seq written to the client: where it should resume from.
        self.sent = 0

    def offer(self, event: Event) -> bool:
        """Queue an event without waiting; a full queue drops the subscriber."""
        if self.reason is not None:
            return False
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.drop(f"too slow: fell {self.queue.maxsize} events behind")
            return False
        return True

    def drop(self, reason: str, code: int = WS_DROPPED) -> None:
        """Cut the client off; its stream ends with `reason` (a WebSocket with `code`)."""
        if self.reason is None:
            self.reason, self.code = reason, code
            self.gone.set()

    def check(self) -> None:
        """Raises:
        Dropped: the subscriber was cut off (also while it catches up, when nothing
            waits on its queue)."""
        if self.reason is not None:
            raise Dropped(self.reason)

    async def get(self, timeout: float) -> Event | None:
        """The next live event, or None after `timeout` seconds of silence.

        Raises:
            Dropped: the subscriber was cut off.
        """
        self.check()
        if not self.queue.empty():
            return self.queue.get_nowait()
        getter = asyncio.create_task(self.queue.get())
        gone = asyncio.create_task(self.gone.wait())
        try:
            await asyncio.wait((getter, gone), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not getter.done():
                getter.cancel()
        if getter.done() and not getter.cancelled():
            return getter.result()
        self.check()
        return None


class EventHub:
    """Reads new events from the store when it changes and offers them to subscribers."""

    def __init__(self, store: Store, idle_wait: float = 5.0) -> None:
        self.store = store
        self.idle_wait = idle_wait
        self.last_seq = 0
        self.ready = asyncio.Event()
        self.closed: str | None = None
        self._subscribers: set[Subscriber] = set()

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def attach(self, subscriber: Subscriber) -> int:
        """Start offering live events; returns the last seq published before it."""
        if self.closed is not None:
            subscriber.drop(self.closed, WS_GOING_AWAY)
        else:
            self._subscribers.add(subscriber)
        return self.last_seq

    def detach(self, subscriber: Subscriber) -> None:
        self._subscribers.discard(subscriber)

    def close(self, reason: str) -> None:
        """End every stream (the server is stopping); clients reconnect and resume."""
        self.closed = reason
        for subscriber in list(self._subscribers):
            subscriber.drop(reason, WS_GOING_AWAY)
        self._subscribers.clear()

    def publish(self, event: Event) -> None:
        for subscriber in list(self._subscribers):
            if not subscriber.offer(event):
                self._subscribers.discard(subscriber)
                log.info("dropped a slow event-stream client", extra={"seq": event.seq})

    async def run(self) -> None:
        """Follow the event log until cancelled."""
        watcher = self.store.watcher()
        try:
            self.last_seq = await asyncio.to_thread(self.store.last_seq)
            self.ready.set()
            while True:
                try:
                    batch = await asyncio.to_thread(self.store.events, self.last_seq, PAGE)
                except SlotlineError:
                    log.exception("cannot read events; retrying")
                    await watcher.wait(self.idle_wait)
                    continue
                for event in batch:
                    self.last_seq = event.seq
                    self.publish(event)
                if len(batch) < PAGE:
                    await watcher.wait(self.idle_wait)
        finally:
            watcher.close()
