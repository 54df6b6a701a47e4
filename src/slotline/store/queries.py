"""Running the named SQL of `statements.py` inside one transaction."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol, TypeVar, cast

from slotline.clock import utcnow
from slotline.errors import SlotlineError, StoreError
from slotline.store.statements import Read, Where, load_queries, statement

T = TypeVar("T")

# The first page `Tx.iter_rows` reads.
FIRST_PAGE = 8

# The reads of the configuration tables (settings, limits, rates, back-off, budgets) that a
# PostgreSQL store keeps between transactions while the configuration's version stays,
# and the tables whose every change bumps that version (migration 0022).
CONFIG_READS = frozenset(
    {"settings_all", "limits_all", "rate_limits_all", "backoff_all", "budgets_all"}
)
_CONFIG_TABLES = "settings|limits|rate_limits|agent_backoff|budgets"
_CONFIG_WRITE = re.compile(
    rf"^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(?:{_CONFIG_TABLES})\b",
    re.IGNORECASE | re.MULTILINE,
)


@cache
def config_writes(dialect: str) -> frozenset[str]:
    """The named queries of `dialect` that change a configuration table."""
    return frozenset(
        name for name, sql in load_queries(dialect).items() if _CONFIG_WRITE.search(sql)
    )


@dataclass
class ConfigRows:
    """The rows of the configuration reads as of one version of the configuration, and
    what was built of them (`Tx.kept`)."""

    version: int
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    built: dict[str, Any] = field(default_factory=dict)


class ConfigCache:
    """What a store read of its configuration tables, kept between transactions while
    the version a transaction reads under the write lock is the same (the tables only
    change through write transactions, which bump it). Shared by the threads of a store:
    a newer version replaces the rows kept (one assignment); a transaction that read an
    older one (it began before the last change) gets rows of its own."""

    def __init__(self) -> None:
        self._current: ConfigRows | None = None

    def at(self, version: int | None) -> ConfigRows | None:
        """The rows for a transaction that read `version` (None: no cache)."""
        if version is None:
            return None
        current = self._current
        if current is not None and current.version == version:
            return current
        fresh = ConfigRows(version)
        if current is None or version > current.version:
            self._current = fresh
        else:
            # An older version: a transaction that began before the last change, or a
            # database restored from a backup, whose counter may climb back to the
            # number kept here with other rows. Forget them; the next read refills.
            self._current = None
        return fresh


def _key(sql: str, params: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, Any], ...]]:
    return sql, tuple(sorted(params.items()))


# Reads sent together (SQL, parameters), the first `n` of them by index (`Read.by_index`):
# the rows of each, in order, in one round trip.
Together = Callable[[Sequence[tuple[str, Mapping[str, Any]]], int], list[list[Any]]]


def dicts(cursor: Cursor) -> list[dict[str, Any]]:
    """The rows `cursor` fetched, each a new dict: sqlite3's tuples zipped with the
    column names (2.5 times faster than `dict` of a `sqlite3.Row`), psycopg's dict rows
    as they come (new dicts at each fetch)."""
    found = cursor.fetchall()
    if not found or isinstance(found[0], dict):
        return found
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in found]


class Cursor(Protocol):
    """The slice of DB-API both sqlite3 and psycopg cursors provide."""

    def execute(self, sql: Any, params: Any = ...) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    @property
    def description(self) -> Any: ...

    def executemany(self, sql: Any, params_seq: Any, /) -> Any: ...


class Tx:
    """One open transaction: run named queries, get rows as dicts."""

    def __init__(
        self,
        cursor: Cursor,
        queries: Mapping[str, str],
        clock: Callable[[Cursor], float] | None = None,
        config: ConfigRows | Callable[[], ConfigRows | None] | None = None,
        config_writes: frozenset[str] = frozenset(),
        together: Together | None = None,
    ) -> None:
        self.cursor = cursor
        # How a store with a server sends several reads in one round trip (None: one
        # after the other, as SQLite in the same process does at no cost).
        self._together = together
        # What a store does before a read that is not by index (PostgreSQL: the planner's
        # usual settings back, after reads by index: `pg_pipeline`).
        self.before_read: Callable[[], None] | None = None
        # What to do once before the next read (`run_last_checks`).
        self._first_read: Callable[[], None] | None = None
        self._cursor = cursor
        self._clock = clock
        # Whether committing wakes the watchers; a verb that changed nothing clears it,
        # so that a node is not woken by its own empty claims.
        self.notify = True
        # The id of a watcher the commit need not wake: the writer's own, when it knows
        # everything it changed (a node's claim).
        self.quiet_for: str | None = None
        # Set by a claim after which no node could start a task (every slot of the store
        # is taken and no "start now" task waits): nodes' watchers need not wake, as
        # their claims could only find that out again, under the write lock.
        self.line_full = False
        # What the commit tells the watchers of a store that tells them inside the
        # transaction (PostgreSQL's NOTIFY payload), set by the store once the verb is done.
        self.notice: str | None = None
        # Set by the store once its COMMIT succeeded (what follows, waking the watchers,
        # may still fail).
        self.committed = False
        self._queries = queries
        # What was read of the configuration as of its version (None: read it afresh),
        # or how to find that out when the transaction first reads it (SQLite, where
        # reading the version is a statement a transaction that needs none would pay).
        self._config: ConfigRows | None = None
        self._config_at: Callable[[], ConfigRows | None] | None = None
        if callable(config):
            self._config_at = config
        else:
            self._config = config
        self._config_writes = config_writes
        # The events the transaction appends, inserted in order just before its commit
        # (`flush_events`): on PostgreSQL under a lock of their own, so that their `seq`
        # order is commit order however the rest of the transaction was serialized.
        self.events: list[dict[str, Any]] = []
        # Checks to make once, just before the commit, whatever changed before them
        # (`once_before_commit`), by name.
        self._last_checks: dict[str, Callable[[], None]] = {}
        # Rows read ahead for the next read of a query with the same parameters (`preload`).
        # Keyed by the statement's text and parameters (`_key`).
        self._preloaded: dict[tuple[str, tuple[tuple[str, Any], ...]], list[dict[str, Any]]]
        self._preloaded = {}

    def now(self) -> float:
        """The store's clock in epoch seconds: the database server's on PostgreSQL, where
        nodes on several machines must agree on leases; this machine's on SQLite."""
        return utcnow() if self._clock is None else self._clock(self._cursor)

    def rows(self, query: str, /, **params: Any) -> list[dict[str, Any]]:
        if self._preloaded:
            ahead = self._preloaded.pop(_key(self._queries[query], params), None)
            if ahead is not None:
                return ahead
        config = self._kept_config() if query in CONFIG_READS else None
        kept = None if config is None else config.rows.get(query)
        if kept is not None:
            return [dict(row) for row in kept]
        self._written(query)
        self._reading()
        self._cursor.execute(self._queries[query], params)
        found = dicts(self._cursor)
        if config is not None and self._config is not None:
            config.rows[query] = [dict(row) for row in found]
        return found

    def _kept_config(self) -> ConfigRows | None:
        if self._config_at is not None:
            self._config, self._config_at = self._config_at(), None
        return self._config

    def kept(self, name: str, build: Callable[[], T]) -> T:
        """What `build` makes of the configuration tables (read with `rows`), kept with
        their rows while the configuration's version stays: built once per version, not
        once per transaction. Callers must not change what it returns."""
        config = self._kept_config()
        if config is None:
            return build()
        if name not in config.built:
            made = build()
            if self._config is not config:  # `build` itself changed the configuration
                return made
            config.built[name] = made
        return cast(T, config.built[name])

    def append_events(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Append events (at, kind, task_id, data) to the log when the transaction
        commits; a rolled-back `part` drops its own."""
        self.events.extend(dict(row) for row in rows)

    def once_before_commit(self, name: str, check: Callable[[], None]) -> None:
        """Run `check` once, just before the commit (the last one given a name wins):
        for a check on the transaction's end state, which a verb that ends many runs
        (a claim) would otherwise make after each (a round trip apiece on PostgreSQL)."""
        self._last_checks[name] = check

    @property
    def checks_left(self) -> bool:
        """Whether checks are left for the commit (`once_before_commit`)."""
        return bool(self._last_checks)

    def run_last_checks(self, first_read: Callable[[], None] | None = None) -> None:
        """Make the checks left for the commit (the store calls it before its last
        statements); `first_read` is done before the first read they make, if they make
        one (PostgreSQL: the lock they read under)."""
        checks, self._last_checks = self._last_checks, {}
        self._first_read = first_read
        try:
            for check in checks.values():
                check()
        finally:
            self._first_read = None

    def flush_events(self) -> None:
        """Insert the events appended so far, in order (the store calls it last)."""
        self.run_many("event_append", self.take_events())

    def take_events(self) -> list[dict[str, Any]]:
        """The events appended so far, in order, for the store to insert (last)."""
        events, self.events = self.events, []
        return events

    def preload(self, query: str, params: Mapping[str, Any], rows: list[dict[str, Any]]) -> None:
        """Give the next read of `query` with exactly `params` these rows, read ahead by
        the caller together with others (one round trip for many reads). Only for rows
        nothing in the transaction changes before that read."""
        self.answer(Read(query, params), rows)

    def answer(self, read: Read, rows: list[dict[str, Any]]) -> None:
        """Give the next `read_together` (or `rows`) of `read` these rows (`preload`)."""
        self._preloaded[_key(*statement(self._queries, read))] = rows

    def forget_preloaded(self, queries: Iterable[str] | None = None) -> None:
        """Drop the rows read ahead that no read took (of `queries` only, if given):
        later reads go to the database."""
        if queries is None:
            self._preloaded.clear()
            return
        texts = {self._queries[name] for name in queries}
        for key in [key for key in self._preloaded if key[0] in texts]:
            del self._preloaded[key]

    def read_together(self, reads: Sequence[Read]) -> list[list[dict[str, Any]]]:
        """The rows of each of `reads` (given ahead, `answer`, or read now: in one round
        trip on a store with a server)."""
        statements = [statement(self._queries, read) for read in reads]
        found = [self._preloaded.pop(_key(*s), None) for s in statements]
        # Those read now, those by index first (see `Together`).
        missing = sorted(
            (i for i, rows in enumerate(found) if rows is None), key=lambda i: not reads[i].by_index
        )
        indexed = sum(reads[i].by_index for i in missing)
        sent = [statements[i] for i in missing]
        if self._together is None or (len(missing) < 2 and not indexed):
            fresh = []
            if sent:
                self._reading()
            for sql, params in sent:
                self._cursor.execute(sql, params)
                fresh.append(dicts(self._cursor))
        else:
            fresh = [[dict(row) for row in rows] for rows in self._together(sent, indexed)]
        for i, rows in zip(missing, fresh, strict=True):
            found[i] = rows
        return [rows or [] for rows in found]

    @property
    def reads_ahead(self) -> bool:
        """Whether `prefetch` reads ahead (a store with a server), so that a read should
        ask for what was read ahead, not only for what it needs."""
        return self._together is not None

    def prefetch(self, reads: Sequence[Read]) -> None:
        """On a store with a server, read now, in one round trip, what the next read of
        each named query with the same parameters takes (`preload`); on SQLite, nothing
        (each read runs when it is made, in the same process). Only for rows nothing in
        the transaction changes between now and that read."""
        if self._together is None or not reads:
            return
        for read, rows in zip(reads, self.read_together(reads), strict=True):
            self.answer(read, rows)

    def _reading(self) -> None:
        """What the store does before a read (`before_read`, `run_last_checks`)."""
        if self._first_read is not None:
            first, self._first_read = self._first_read, None
            first()
        if self.before_read is not None:
            self.before_read()

    def _written(self, query: str) -> None:
        """Stop using the cached configuration once this transaction changes it: its own
        changes are not in the cache (which stays right if it rolls back; its commit
        bumps the version)."""
        if query in self._config_writes:
            self._config, self._config_at = None, None

    def iter_rows(
        self, query: str, /, page: int = FIRST_PAGE, max_page: int = 512, **params: Any
    ) -> Iterator[dict[str, Any]]:
        """Rows of a query with `:limit`/`:offset`, fetched lazily in growing pages: a
        reader that needs only the first few rows (a claim filling one slot) reads few.

        Each page is read at its own moment: a task a submit (not serialized with every
        write, see `Serial`) adds meanwhile may shift the pages, so a row seen on two
        pages is yielded once, and one shifted past may be missed until the next read."""
        offset = 0
        seen: set[Any] = set()
        while True:
            batch = self.rows(query, limit=page, offset=offset, **params)
            for row in batch:
                key = row.get("id")
                if key is None or key not in seen:
                    seen.add(key)
                    yield row
            if len(batch) < page:
                return
            offset += page
            page = min(page * 8, max_page)

    def select(self, query: str, where: Where, /, **params: Any) -> list[dict[str, Any]]:
        """Rows of a composed query: `query` with the conditions of `where`."""
        sql, more = where.compose(self._queries, query)
        self._reading()
        self._cursor.execute(sql, {**params, **more})
        return dicts(self._cursor)

    def one(self, query: str, /, **params: Any) -> dict[str, Any] | None:
        found = self.rows(query, **params)
        return found[0] if found else None

    def run(self, query: str, /, **params: Any) -> None:
        """Run a statement whose result nobody reads: on PostgreSQL it is sent with the
        transaction's next read or its commit, not in a round trip of its own."""
        self._written(query)
        self._cursor.execute(self._queries[query], params)

    def run_many(self, query: str, rows: Sequence[Mapping[str, Any]], /) -> None:
        """Run a query once per row of parameters, as one statement (`executemany`)."""
        if rows:
            self._written(query)
            self._cursor.executemany(self._queries[query], rows)

    @contextlib.contextmanager
    def part(self) -> Iterator[None]:
        """A part of the transaction that a `SlotlineError` undoes alone (a savepoint):
        the error propagates, the rest of the transaction stands."""
        self._cursor.execute("SAVEPOINT one_part")
        appended = len(self.events)
        try:
            yield
        except SlotlineError as exc:
            if not isinstance(exc, StoreError):
                self._cursor.execute("ROLLBACK TO SAVEPOINT one_part")
                del self.events[appended:]
            raise
        self._cursor.execute("RELEASE SAVEPOINT one_part")
