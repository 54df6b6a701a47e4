"""The PostgreSQL backend: several nodes on several machines sharing one queue.

Every write transaction first takes a transaction-scoped advisory lock derived from the
schema, so claims (and every other write) are serialized across nodes, and sends a
NOTIFY that PostgreSQL delivers only if the transaction commits. Watchers LISTEN on a
connection of their own. `?schema=NAME` in the URL puts the queue in its own schema,
so several queues can share one database.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow

from slotline.errors import InvalidInput, StoreError
from slotline.store.base import Store
from slotline.store.core import Ahead, Serial, Watcher
from slotline.store.migrate import migrate
from slotline.store.pg_commit import LOCK, CommitTail
from slotline.store.pg_connections import LOCK_TIMEOUT, Connection, Connections
from slotline.store.pg_listen import ListenWatcher, channel_name, first_line, notice
from slotline.store.pg_pipeline import BY_INDEX_SETTINGS, Columns, PipelinedCursor
from slotline.store.pg_url import lock_key, redact, split_url
from slotline.store.queries import ConfigCache, Cursor, Tx, config_writes
from slotline.store.statements import Read, load_queries, statement
from slotline.store.windows import Pending

CONNECT_TIMEOUT_S = 10

_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
_BEGIN_WRITE = "BEGIN"
# Writes (a claim, a finish) read a few rows through the status indexes of tables whose
# rows change status many times a second. Each change leaves a dead index entry until
# autovacuum comes (a minute or more); a bitmap scan visits every one of them on every
# read (2,000 for 50 running tasks after a 2,000-task drain), while a plain index scan
# marks them dead on its first visit and skips them after (0.1 ms instead of 1 ms).
_NO_BITMAP_SCANS = "SET LOCAL enable_bitmapscan = off"
# The server's own planner settings, which reads by index change for a moment (see
# `pg_pipeline`), read when the store opens.
_USUAL = (
    "SELECT current_setting('enable_seqscan') AS seqscan,"
    " current_setting('plan_cache_mode') AS plans"
)
_LOCK_NO_BITMAP_SCANS = (
    "SELECT pg_advisory_xact_lock(CAST(%(key)s AS BIGINT)),"
    " set_config('enable_bitmapscan', 'off', true)"
)
# The same with the settings of the reads by index that follow it (`BY_INDEX`).
_LOCK_BY_INDEX = f"{LOCK}, {BY_INDEX_SETTINGS}"
_SCHEMA_EXISTS = "SELECT 1 FROM pg_namespace WHERE nspname = %(schema)s"

# clock_timestamp(), not now(): a write reads the clock after taking the write lock, so
# that recorded starts and ends follow commit order (now() is when the transaction began,
# possibly before a wait for the lock).
_CLOCK = "SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8 AS now"
# The clock and the version of the configuration (see `ConfigCache`), once migrated.
_CLOCK_AND_CONFIG = (
    "SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8 AS now, "
    "(SELECT value FROM counters WHERE name = 'config') AS config"
)


def _clock(cursor: Cursor) -> float:
    """The database server's clock: every node of a store goes by this one."""
    cursor.execute(_CLOCK)
    row = cursor.fetchall()[0]
    return float(row["now"])


class PostgresStore(Store):
    """A store in one schema of a PostgreSQL database.

    The URL is `postgresql://user[:password]@host[:port]/db`, with libpq parameters and
    `schema=NAME` (default `public`; created if missing) in its query string. `url` keeps
    the URL as given, so that a task can open the same store.

    Each transaction takes a connection of the store's pool (`pg_connections`), so its
    threads (a node's claims, its reports, the server's reads) do not wait for each
    other; a connection found dead is replaced on the next transaction.
    """

    dialect = "postgres"
    reads_ahead = True

    def __init__(self, url: str) -> None:
        self.url = url
        self._conninfo, self.schema = split_url(url)
        self._where = f"{redact(self._conninfo)} (schema {self.schema})"
        try:
            given = conninfo_to_dict(self._conninfo)
        except psycopg.Error as exc:
            raise InvalidInput(
                f"{redact(url)} is not a valid PostgreSQL URL: {first_line(exc)}"
            ) from exc
        self._connect_args: dict[str, Any] = {}
        if "connect_timeout" not in given:
            self._connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
        self._key = lock_key(self.schema)
        self._submits_key = lock_key(self.schema, "submits")
        self._run_times = Pending()
        self._listen = sql.SQL("LISTEN {}").format(sql.Identifier(channel_name(self.schema)))
        self._channel = channel_name(self.schema)
        self._tail = CommitTail(self._key, lock_key(self.schema, "events"), self._channel)
        self._connections = Connections(
            self._conninfo, self._connect_args, self.schema, self._where
        )
        self._queries = load_queries("postgres")
        # The configuration tables as last read; None until the schema is migrated.
        self._config: ConfigCache | None = None
        self._config_writes = config_writes(self.dialect)
        # The server's planner settings that reads by index change for a moment (`_USUAL`).
        self._usual = {"seqscan": "on", "plans": "auto"}
        self._columns: Columns = {}  # the columns of the reads sent together, by their text
        try:
            self._migrate()
            self._config = ConfigCache()
        except BaseException:
            self.close()
            raise

    # -- transactions ---------------------------------------------------------------------

    def _begin(self, conn: Connection, write: bool, serial: Serial, ahead: Ahead) -> _Begun:
        """A new transaction on `conn` and, for a write, the store's clock and the
        configuration's version read once its locks are held. A write runs in pipeline
        mode (`PipelinedCursor`): BEGIN, the locks, the clock and the queries `ahead`
        (each on a cursor of its own) go in one round trip."""
        cur = conn.cursor()
        if not write:
            cur.execute(_BEGIN_READ)
            return _Begun(cur, None, None, None)
        pipeline = conn.pipeline()
        try:
            piped = PipelinedCursor(cur, pipeline.__enter__(), self._usual, self._columns)
            piped.execute(_BEGIN_WRITE)
            # Those by index first, after `BY_INDEX` (which turns bitmap scans off too),
            # the clock with them (it reads a row by its key).
            reads = sorted(ahead, key=lambda read: not read.by_index)
            indexed = sum(read.by_index for read in reads)
            locks = [self._submits_key] if serial.submits else []
            locks += [self._key] if serial.writes else []
            # Bitmap scans off (or `BY_INDEX`) with the first lock, one statement fewer.
            for n, key in enumerate(locks):
                if n == 0 and indexed:
                    piped.execute(_LOCK_BY_INDEX, {"key": key})
                    piped.planned_by_index()
                else:
                    piped.execute(_LOCK_NO_BITMAP_SCANS if n == 0 else LOCK, {"key": key})
            if not locks and not indexed:
                piped.execute(_NO_BITMAP_SCANS)
            statements = [statement(self._queries, read) for read in reads]
            clock = _CLOCK if self._config is None else _CLOCK_AND_CONFIG
            statements.insert(indexed, (clock, {}))
            answers = piped.read_together(statements, indexed + 1 if indexed else 0)
            row = answers.pop(indexed)[0]
            read = [
                (r, [dict(found) for found in rows]) for r, rows in zip(reads, answers, strict=True)
            ]
        except BaseException:
            _leave(pipeline)
            raise
        version = row.get("config")
        number = None if version is None else int(version)
        return _Begun(piped, pipeline, float(row["now"]), number, read)

    def _start(
        self, write: bool, serial: Serial, own: Connection | None, ahead: Ahead = ()
    ) -> tuple[Connection, _Begun]:
        """A connection (`own`, or one of the pool) inside a new transaction. An idle
        connection of the pool found dead (a server restart, the network) is dropped
        and another taken: nothing ran on it yet."""
        for _ in range(self._connections.size + 1):
            conn = own or self._connections.get()
            try:
                return conn, self._begin(conn, write, serial, ahead)
            except psycopg.Error as exc:
                broken = conn.broken
                _roll_back(conn, None)
                if own is None:
                    self._connections.put(conn)
                if broken and own is None:
                    continue
                doing = "taking the write lock" if write else "starting a transaction"
                raise self._error(exc, conn, doing) from exc
        raise StoreError(
            f"every connection to the PostgreSQL store at {self._where} was lost; check the server"
        )

    def _error(self, exc: psycopg.Error, conn: Connection, doing: str) -> StoreError:
        """A StoreError saying what failed and what to do."""
        if isinstance(exc, pg_errors.LockNotAvailable):
            return StoreError(
                f"{doing} on {self._where} waited {LOCK_TIMEOUT} for the write lock another "
                "node holds; is a node stuck in a transaction?"
            )
        if conn.broken:  # the pool drops it when it is given back
            return StoreError(
                f"lost the connection to the PostgreSQL store at {self._where} ({doing}): "
                f"{first_line(exc)}. It reconnects on the next call; check the server."
            )
        return StoreError(f"{doing} failed on {self._where}: {first_line(exc)}")

    @contextlib.contextmanager
    def _transaction(
        self, write: bool, serial: Serial = Serial.WRITES, ahead: Ahead = ()
    ) -> Iterator[Tx]:
        with self._on(write, serial, None, ahead) as tx:
            yield tx

    @contextlib.contextmanager
    def _on(
        self, write: bool, serial: Serial, own: Connection | None, ahead: Ahead = ()
    ) -> Iterator[Tx]:
        conn, begun = self._start(write, serial, own, ahead if write else ())
        try:
            # A write reads the clock once, right after the locks (see `_CLOCK`).
            clock = _clock if begun.now is None else lambda _cursor, now=begun.now: now
            config = None if self._config is None else self._config.at(begun.version)
            piped = begun.cursor if isinstance(begun.cursor, PipelinedCursor) else None
            together = None if piped is None else piped.read_together
            tx = Tx(begun.cursor, self._queries, clock, config, self._config_writes, together)
            if piped is not None:
                tx.before_read = piped.as_usual
            for read, rows in begun.read:
                tx.answer(read, rows)
            try:
                yield tx
            except psycopg.Error as exc:
                _roll_back(conn, begun.pipeline)
                raise self._error(exc, conn, "a store query") from exc
            except BaseException:
                _roll_back(conn, begun.pipeline)
                raise
            try:
                if write:
                    self._tail.send(tx, serial, migrated=self._config is not None)
                begun.cursor.execute("COMMIT")
                if begun.pipeline is not None:
                    begun.pipeline.__exit__(None, None, None)
                tx.committed = True
            except psycopg.Error as exc:
                _roll_back(conn, begun.pipeline)
                raise self._error(exc, conn, "commit") from exc
        finally:
            with contextlib.suppress(psycopg.Error):
                begun.cursor.close()
            if own is None:
                self._connections.put(conn)

    @contextlib.contextmanager
    def _write_transaction(self, serial: Serial, ahead: Ahead) -> Iterator[Tx]:
        # NOTIFY inside the transaction: PostgreSQL delivers it only if the change commits.
        with self._transaction(write=True, serial=serial, ahead=ahead) as tx:
            yield tx
            if tx.notify:
                # The payload names the one watcher that need not wake (or none), and
                # whether the line is full (dispatching watchers need not wake). Sent
                # with the events, in their statement (`_before_commit`).
                tx.notice = notice(tx.quiet_for, tx.line_full)

    def _notify(self, skip: str | None = None, full: bool = False) -> None:
        """Nothing to do: `_write` sends NOTIFY inside the committed transaction."""

    def _migrate(self) -> None:
        # On a connection of its own, made at once: a store that cannot be reached or
        # migrated fails here, before its pool starts.
        conn = self._connections.connect()
        try:
            with self._on(True, Serial.WRITES, conn) as tx:
                tx.cursor.execute(_SCHEMA_EXISTS, {"schema": self.schema})
                if not tx.cursor.fetchall():
                    schema = sql.Identifier(self.schema)
                    tx.cursor.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
                migrate(tx, self.dialect, self._where)
                tx.cursor.execute(_USUAL)
                self._usual = dict(tx.cursor.fetchall()[0])
        finally:
            conn.close()

    def watcher(self, dispatching: bool = False) -> Watcher:
        return ListenWatcher(
            self._conninfo, self._connect_args, self._listen, self._where, dispatching
        )

    def close(self) -> None:
        self._write_run_times()
        self._connections.close()


# What `Connection.pipeline()` returns: entered, the pipeline; left, its statements sent.
_Pipeline = contextlib.AbstractContextManager[psycopg.Pipeline]


@dataclass(frozen=True, slots=True)
class _Begun:
    """A transaction begun: its cursor, its pipeline (a write's) and, for a write, the
    clock and the configuration's version read under its locks."""

    cursor: psycopg.Cursor[DictRow] | PipelinedCursor
    pipeline: _Pipeline | None
    now: float | None
    version: int | None
    # The queries read ahead (`Ahead`), with their rows.
    read: list[tuple[Read, list[dict[str, Any]]]] = field(default_factory=list)


def _leave(pipeline: _Pipeline | None) -> None:
    """Leave pipeline mode; what failed in it is reported already."""
    if pipeline is not None:
        with contextlib.suppress(psycopg.Error):
            pipeline.__exit__(None, None, None)


def _roll_back(conn: Connection, pipeline: _Pipeline | None) -> None:
    """Undo the transaction under way; a connection that cannot is closed (the pool
    drops it when it is given back)."""
    if conn.closed:
        return
    _leave(pipeline)
    try:
        conn.rollback()
    except psycopg.Error:
        conn.close()
