"""How a node hears of changes on PostgreSQL: LISTEN on the queue's channel, on a
connection of its own (a write sends NOTIFY inside its transaction, see postgres.py)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import time
from typing import Any

import psycopg
from psycopg import sql

from slotline.errors import StoreError
from slotline.store.core import Watcher

# How often a watcher whose connection dropped tries to open a new one.
RECONNECT_DELAY_S = 1.0


def channel_name(schema: str) -> str:
    """The LISTEN/NOTIFY channel of a schema's queue (at most 63 characters)."""
    name = f"slotline_{schema}"
    if len(name) <= 63:
        return name
    return "slotline_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


# A notification's payload: the id of the watcher that need not wake, then `_FULL` if
# the commit left the line full (`Tx.line_full`).
_SEPARATOR = " "
_FULL = "full"


def notice(quiet_for: str | None, full: bool) -> str:
    """The payload of a commit's notification (see `ListenWatcher._drain`)."""
    return (quiet_for or "") + (_SEPARATOR + _FULL if full else "")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class ListenWatcher(Watcher):
    """LISTENs on a connection of its own, opened when the watcher is made, so a change
    committed between `watcher()` and the first `wait()` is not missed."""

    def __init__(
        self,
        conninfo: str,
        connect_args: dict[str, Any],
        listen: sql.Composed,
        where: str,
        dispatching: bool = False,
    ) -> None:
        self.dispatching = dispatching
        self._conninfo = conninfo
        self._connect_args = connect_args
        self._listen = listen
        self._where = where
        self._closed = False
        self.id = secrets.token_hex(8)
        self._conn: psycopg.Connection[Any] | None = self._open()

    def _open(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True, **self._connect_args)
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to the PostgreSQL store at {self._where} to watch it: "
                f"{first_line(exc)}"
            ) from exc
        try:
            conn.execute(self._listen)
        except psycopg.Error as exc:
            conn.close()
            raise StoreError(f"cannot LISTEN on {self._where}: {first_line(exc)}") from exc
        return conn

    async def _reopen(self) -> bool:
        try:
            self._conn = await asyncio.to_thread(self._open)
        except StoreError:
            return False
        return True

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None

    def _drain(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether notifications for this watcher arrived; reads all that did without
        blocking."""
        got = False
        for notification in conn.notifies(timeout=0):
            quiet, _, flag = notification.payload.partition(_SEPARATOR)
            full = self.dispatching and flag == _FULL
            got = got or (quiet != self.id and not full)
        return got

    async def wait(self, timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        loop = asyncio.get_running_loop()
        while True:
            if self._closed:
                raise StoreError(f"this watcher of {self._where} is closed")
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            conn = self._conn
            if conn is None:
                if await self._reopen():
                    return True  # changes may have gone unnoticed while disconnected
                if remaining is not None and remaining <= RECONNECT_DELAY_S:
                    await asyncio.sleep(remaining)
                    return False
                await asyncio.sleep(RECONNECT_DELAY_S)
                continue
            try:
                if self._drain(conn):
                    return True
            except psycopg.Error:
                self._drop()
                continue
            if remaining == 0.0:
                return False
            readable = loop.create_future()
            fd = conn.fileno()
            loop.add_reader(fd, _resolve, readable)
            try:
                # asyncio.timeout, not wait_for: on Python 3.11, wait_for swallows a
                # cancellation that comes as the notification arrives, and this loop would
                # then wait out the whole timeout for the caller that gave up on it.
                async with asyncio.timeout(remaining):
                    await readable
            except TimeoutError:
                return False
            finally:
                loop.remove_reader(fd)

    def close(self) -> None:
        self._closed = True
        self._drop()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
