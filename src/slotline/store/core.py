"""What a storage backend must provide: transactions, notification, a watcher."""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterator

from slotline.store.queries import Tx


class Watcher(abc.ABC):
    """Wakes a waiting node or follower when any process changes the store."""

    # Names this watcher to a writer that need not wake it (see `Tx.quiet_for`).
    id: str = ""

    @abc.abstractmethod
    async def wait(self, timeout: float | None) -> bool:
        """Return True when a change was signalled, False on timeout."""

    @abc.abstractmethod
    def close(self) -> None: ...


class StoreCore(abc.ABC):
    """The backend primitives every store verb is built from."""

    dialect: str
    url: str

    @abc.abstractmethod
    def _transaction(self, write: bool) -> contextlib.AbstractContextManager[Tx]:
        """A transaction; write transactions are serialized against every other writer."""

    @abc.abstractmethod
    def _notify(self, skip: str | None = None) -> None:
        """Tell watchers, in this and other processes, that something was committed; all
        but the one whose id is `skip`."""

    @abc.abstractmethod
    def watcher(self) -> Watcher:
        """A new handle that wakes when the store changes; close it when done."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> StoreCore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[Tx]:
        """A write transaction whose commit wakes the watchers."""
        with self._transaction(write=True) as tx:
            yield tx
        if tx.notify:
            self._notify(tx.quiet_for)
