"""The PostgreSQL backend: several nodes on several machines sharing one queue.

Every write transaction first takes a transaction-scoped advisory lock derived from the
schema, so claims (and every other write) are serialized across nodes, and sends a
NOTIFY that PostgreSQL delivers only if the transaction commits. Watchers LISTEN on a
connection of their own. `?schema=NAME` in the URL puts the queue in its own schema,
so several queues can share one database.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow, dict_row

from slotline.errors import InvalidInput, StoreError
from slotline.store.base import Store
from slotline.store.core import Watcher
from slotline.store.migrate import migrate
from slotline.store.pg_listen import ListenWatcher, channel_name, first_line
from slotline.store.queries import Cursor, Tx, load_queries

DEFAULT_SCHEMA = "public"
CONNECT_TIMEOUT_S = 10
# Like SQLite's busy timeout: how long a writer waits for another node's transaction.
LOCK_TIMEOUT = "60s"
# A node stopped (SIGSTOP, a frozen VM) inside a transaction would hold the write lock and
# freeze every node: the server ends such a session after this long idle in it (the node,
# if it resumes, reconnects). Store transactions never wait on anything but the database.
IDLE_IN_TRANSACTION_TIMEOUT = "10s"

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
_BEGIN_WRITE = "BEGIN"
# Writes (a claim, a finish) read a few rows through the status indexes of tables whose
# rows change status many times a second. Each change leaves a dead index entry until
# autovacuum comes (a minute or more); a bitmap scan visits every one of them on every
# read (2,000 for 50 running tasks after a 2,000-task drain), while a plain index scan
# marks them dead on its first visit and skips them after (0.1 ms instead of 1 ms).
_NO_BITMAP_SCANS = "SET LOCAL enable_bitmapscan = off"
_WRITE_LOCK = "SELECT pg_advisory_xact_lock(CAST(%(key)s AS BIGINT))"
_SCHEMA_EXISTS = "SELECT 1 FROM pg_namespace WHERE nspname = %(schema)s"
_NOTIFY = "SELECT pg_notify(%(channel)s, %(payload)s)"


# clock_timestamp(), not now(): a write reads the clock after taking the write lock, so
# that recorded starts and ends follow commit order (now() is when the transaction began,
# possibly before a wait for the lock).
_CLOCK = "SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8 AS now"


def _clock(cursor: Cursor) -> float:
    """The database server's clock: every node of a store goes by this one."""
    cursor.execute(_CLOCK)
    row = cursor.fetchall()[0]
    return float(row["now"])


def split_url(url: str) -> tuple[str, str]:
    """The libpq conninfo of `url` without slotline's `schema` parameter, and the schema.

    Raises:
        InvalidInput: the schema name is not a plain lower-case identifier.
    """
    parts = urlsplit(url)
    params = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in params if key == "schema"]
    if len(schemas) > 1:
        raise InvalidInput(f"give ?schema= once in the store URL, not {len(schemas)} times")
    schema = schemas[0] if schemas else DEFAULT_SCHEMA
    if not _SCHEMA_NAME.match(schema) or schema.startswith("pg_"):
        raise InvalidInput(
            f"schema {schema!r} in the store URL must be 1-63 lower-case letters, digits or _, "
            "start with a letter or _, and not start with pg_"
        )
    rest = urlencode([(k, v) for k, v in params if k != "schema"], quote_via=quote)
    return urlunsplit(parts._replace(query=rest)), schema


def redact(url: str) -> str:
    """The URL with its password hidden, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def lock_key(schema: str) -> int:
    """The advisory lock key of a schema's queue: a signed 64-bit hash of its name."""
    digest = hashlib.sha256(f"slotline:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PostgresStore(Store):
    """A store in one schema of a PostgreSQL database.

    The URL is `postgresql://user[:password]@host[:port]/db`, with libpq parameters and
    `schema=NAME` (default `public`; created if missing) in its query string. `url` keeps
    the URL as given, so that a task can open the same store.

    One connection, used by one thread at a time; a connection found dead is replaced
    on the next transaction.
    """

    dialect = "postgres"

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
        self._listen = sql.SQL("LISTEN {}").format(sql.Identifier(channel_name(self.schema)))
        self._channel = channel_name(self.schema)
        self._search_path = sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema))
        self._queries = load_queries("postgres")
        self._lock = threading.RLock()
        self._conn: psycopg.Connection[DictRow] | None = None
        # The pipeline of the write transaction under way, if any (see `_begin`).
        self._pipeline: contextlib.AbstractContextManager[psycopg.Pipeline] | None = None
        try:
            self._migrate()
        except BaseException:
            self.close()
            raise

    # -- connection -----------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[DictRow]:
        try:
            conn = psycopg.connect(
                self._conninfo, autocommit=True, row_factory=dict_row, **self._connect_args
            )
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to the PostgreSQL store at {self._where}: {first_line(exc)}. "
                "Check that the server is running and accepts this URL (host, port, user, "
                "database, password)."
            ) from exc
        try:
            conn.execute(self._search_path)
            conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT)))
            conn.execute(
                sql.SQL("SET idle_in_transaction_session_timeout = {}").format(
                    sql.Literal(IDLE_IN_TRANSACTION_TIMEOUT)
                )
            )
        except psycopg.Error as exc:
            conn.close()
            raise StoreError(
                f"cannot set up the connection to {self._where}: {first_line(exc)}"
            ) from exc
        return conn

    def _connection(self) -> psycopg.Connection[DictRow]:
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
        return self._conn

    def _drop_connection(self) -> None:
        self._pipeline = None
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None

    def _error(self, exc: psycopg.Error, doing: str) -> StoreError:
        """A StoreError saying what failed and what to do; forgets a broken connection."""
        if isinstance(exc, pg_errors.LockNotAvailable):
            return StoreError(
                f"{doing} on {self._where} waited {LOCK_TIMEOUT} for the write lock another "
                "node holds; is a node stuck in a transaction?"
            )
        if self._conn is not None and self._conn.broken:
            self._drop_connection()
            return StoreError(
                f"lost the connection to the PostgreSQL store at {self._where} ({doing}): "
                f"{first_line(exc)}. It reconnects on the next call; check the server."
            )
        return StoreError(f"{doing} failed on {self._where}: {first_line(exc)}")

    def _begin(
        self, write: bool
    ) -> tuple[psycopg.Cursor[DictRow] | _PipelinedCursor, float | None]:
        """A cursor inside a new transaction and, for a write, the store's clock read
        once the write lock is held. A write runs in pipeline mode (`_PipelinedCursor`):
        BEGIN, the lock and the clock go in one round trip."""
        for retry in (False, True):
            conn = self._connection()
            cur = conn.cursor()
            try:
                if not write:
                    cur.execute(_BEGIN_READ)
                    return cur, None
                self._pipeline = conn.pipeline()
                piped = _PipelinedCursor(cur, self._pipeline.__enter__())
                piped.execute(_BEGIN_WRITE)
                piped.execute(_NO_BITMAP_SCANS)
                piped.execute(_WRITE_LOCK, {"key": self._key})
                piped.execute(_CLOCK)
                now = float(piped.fetchall()[0]["now"])
            except psycopg.Error as exc:
                cur.close()
                broken = conn.broken
                self._rollback()
                if broken and not retry:
                    # The idle connection died (server restart, network); nothing ran yet.
                    self._drop_connection()
                    continue
                doing = "taking the write lock" if write else "starting a transaction"
                raise self._error(exc, doing) from exc
            return piped, now
        raise AssertionError("unreachable")

    def _rollback(self) -> None:
        conn = self._conn
        if conn is None or conn.closed:
            return
        try:
            with contextlib.suppress(psycopg.Error):  # what failed is reported already
                self._end_pipeline()
            conn.rollback()
        except psycopg.Error:
            self._drop_connection()

    def _end_pipeline(self) -> None:
        """Leave pipeline mode, sending what is queued; raises the error of any of it."""
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None:
            pipeline.__exit__(None, None, None)

    @contextlib.contextmanager
    def _transaction(self, write: bool) -> Iterator[Tx]:
        with self._lock:
            cur, now = self._begin(write)
            # A write reads the clock once, right after the lock (see `_CLOCK`).
            clock = _clock if now is None else lambda _cursor: now
            try:
                try:
                    yield Tx(cur, self._queries, clock)
                except psycopg.Error as exc:
                    self._rollback()
                    raise self._error(exc, "a store query") from exc
                except BaseException:
                    self._rollback()
                    raise
                try:
                    cur.execute("COMMIT")
                    self._end_pipeline()
                except psycopg.Error as exc:
                    self._rollback()
                    raise self._error(exc, "commit") from exc
            finally:
                cur.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[Tx]:
        # NOTIFY inside the transaction: PostgreSQL delivers it only if the change commits.
        with self._transaction(write=True) as tx:
            yield tx
            if tx.notify:
                # The payload names the one watcher that need not wake (or none).
                payload = tx.quiet_for or ""
                tx.cursor.execute(_NOTIFY, {"channel": self._channel, "payload": payload})

    def _notify(self, skip: str | None = None) -> None:
        """Nothing to do: `_write` sends NOTIFY inside the committed transaction."""

    def _migrate(self) -> None:
        with self._transaction(write=True) as tx:
            tx.cursor.execute(_SCHEMA_EXISTS, {"schema": self.schema})
            if not tx.cursor.fetchall():
                tx.cursor.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
            migrate(tx, self.dialect, self._where)

    def watcher(self) -> Watcher:
        return ListenWatcher(self._conninfo, self._connect_args, self._listen, self._where)

    def close(self) -> None:
        with self._lock:
            self._drop_connection()


class _PipelinedCursor:
    """A write transaction's cursor in pipeline mode: a statement whose result nobody
    reads is only queued, and each read sends what is queued with a Sync, in one round
    trip. The Sync (not a mere flush) leaves the session "idle in transaction" between
    statements, so that a node frozen inside a transaction is still ended by the
    server's idle_in_transaction_session_timeout."""

    def __init__(self, cursor: psycopg.Cursor[DictRow], pipeline: psycopg.Pipeline) -> None:
        self._cursor = cursor
        self._pipeline = pipeline

    def execute(self, sql: Any, params: Any = None) -> None:
        self._cursor.execute(sql, params)

    def executemany(self, sql: Any, params_seq: Any, /) -> None:
        self._cursor.executemany(sql, params_seq)

    def fetchall(self) -> list[DictRow]:
        self._pipeline.sync()
        return self._cursor.fetchall()

    def close(self) -> None:
        self._cursor.close()
