"""What a storage backend must provide: transactions, notification, a watcher."""

from __future__ import annotations

import abc
import contextlib
import enum
import threading
from collections.abc import Iterator, Sequence

from slotline.store.queries import Tx
from slotline.store.statements import Read


class Watcher(abc.ABC):
    """Wakes a waiting node or follower when any process changes the store."""

    # Names this watcher to a writer that need not wake it (see `Tx.quiet_for`).
    id: str = ""
    # A node's watcher, which a commit after which no node could start a task does not
    # wake (`Tx.line_full`); every other watcher wakes on every commit.
    dispatching: bool = False

    @abc.abstractmethod
    async def wait(self, timeout: float | None) -> bool:
        """Return True when a change was signalled, False on timeout."""

    @abc.abstractmethod
    def close(self) -> None: ...


class Serial(enum.Enum):
    """Which other writes a write transaction waits for. SQLite serializes every write;
    PostgreSQL takes the locks named here (docs/architecture.md), and every write
    inserts its events last, under a lock of their own, so that `seq` order stays
    commit order."""

    # Every write of the kinds below: claims, finishes, steering, settings, schedules...
    # (the store's write lock): anything that decides or changes who runs.
    WRITES = "writes"
    # Other submits only (the submit lock): a submit that reads no other task (no
    # dependency, parent or idempotency key) only adds to the line, which a claim
    # under way may see or not, as if it came just before or after.
    SUBMITS = "submits"
    # Both, in that order: a submit that reads other tasks, whose ends it must not miss.
    BOTH = "both"
    # Neither: a node's own bookkeeping (its heartbeat, its runs' leases and usage, the
    # line's samples), which decides nothing about who runs; its row locks order it
    # with any other write of the same rows.
    ROWS = "rows"

    @property
    def submits(self) -> bool:
        """Whether it takes the submit lock."""
        return self in (Serial.SUBMITS, Serial.BOTH)

    @property
    def writes(self) -> bool:
        """Whether it takes the write lock."""
        return self in (Serial.WRITES, Serial.BOTH)


# Reads a transaction will make first: a store with a server sends them with the round
# trip that takes the locks. Only reads whose result nothing the transaction does before
# them can change (`Tx.answer`).
Ahead = Sequence[Read]

# The write transaction each store has open for verbs made together (`_together`), per
# thread: a verb on another thread opens its own, as ever.
_TOGETHER = threading.local()


def _joined() -> dict[int, Tx]:
    """This thread's open `_together` transactions, by store."""
    found: dict[int, Tx] | None = getattr(_TOGETHER, "stores", None)
    if found is None:
        found = _TOGETHER.stores = {}
    return found


class StoreCore(abc.ABC):
    """The backend primitives every store verb is built from."""

    dialect: str
    url: str
    # Whether reads sent ahead of a transaction's statements save round trips (a store
    # with a server): else what a verb would read ahead is not even listed (`ahead`).
    reads_ahead: bool = False

    @abc.abstractmethod
    def _transaction(
        self, write: bool, serial: Serial = Serial.WRITES, ahead: Ahead = ()
    ) -> contextlib.AbstractContextManager[Tx]:
        """A transaction; a write one is serialized as `serial` says. `ahead`: named
        queries (and their parameters) the transaction will run, which a store with a
        server may send with the first round trip (`Tx.preload`)."""

    @abc.abstractmethod
    def _notify(self, skip: str | None = None, full: bool = False) -> None:
        """Tell watchers, in this and other processes, that something was committed; all
        but the one whose id is `skip` and, if the line is `full`, the dispatching ones."""

    @abc.abstractmethod
    def watcher(self, dispatching: bool = False) -> Watcher:
        """A new handle that wakes when the store changes; close it when done.
        `dispatching`: a node's, not woken when the line is full (`Tx.line_full`)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> StoreCore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _joins_write(self) -> bool:
        """Whether a `_write` on this thread joins a transaction `_together` opened."""
        return id(self) in _joined()

    @contextlib.contextmanager
    def _write(self, serial: Serial = Serial.WRITES, ahead: Ahead = ()) -> Iterator[Tx]:
        """A write transaction whose commit wakes the watchers; inside `_together`, on
        the thread that opened it, that one transaction."""
        joined = _joined().get(id(self))
        if joined is not None:
            assert serial.writes, "a write joins one that holds the write lock only"
            yield joined
            return
        with self._write_transaction(serial, ahead) as tx:
            yield tx

    @contextlib.contextmanager
    def _write_transaction(self, serial: Serial, ahead: Ahead) -> Iterator[Tx]:
        """A write transaction of its own whose commit wakes the watchers (a backend
        that notifies inside the transaction overrides this)."""
        with self._transaction(write=True, serial=serial, ahead=ahead) as tx:
            yield tx
        if tx.notify:
            self._notify(tx.quiet_for, tx.line_full)

    @contextlib.contextmanager
    def _together(self) -> Iterator[Tx]:
        """One write transaction for several verbs: every `_write` on this thread joins
        it until it ends, so they commit together, or none does if one raises."""
        with self._write_transaction(Serial.WRITES, ()) as tx:
            _joined()[id(self)] = tx
            try:
                yield tx
            finally:
                del _joined()[id(self)]
