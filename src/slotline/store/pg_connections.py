"""A PostgreSQL store's connections: a pool (psycopg_pool) sized to a node's work, each
connection set up for the store's schema and timeouts.

A serve process runs its node's claims, the commits of its runs' reports, heartbeats
and the HTTP server's reads in threads at once; with one connection each waited for
the others (a dashboard's read of a long line held up the next claim). Each
transaction now takes a connection of its own from the pool and gives it back.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Self

import psycopg
from psycopg import sql
from psycopg.abc import Params
from psycopg.rows import DictRow, dict_row
from psycopg.types.array import ListBinaryDumper, ListDumper
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from slotline.errors import StoreError
from slotline.store.pg_listen import first_line
from slotline.store.statements import Composed, Ids

# How many connections a store may open: a claim, a report's commit and a heartbeat of
# the node, and a read of the server, at once. A CLI command uses one.
POOL_SIZE = 4
# How long a transaction waits for a free connection (or for the server to accept one)
# before it fails.
POOL_TIMEOUT_S = 30.0
# Like SQLite's busy timeout: how long a writer waits for another node's transaction.
LOCK_TIMEOUT = "60s"
# A node stopped (SIGSTOP, a frozen VM) inside a transaction would hold the write lock and
# freeze every node: the server ends such a session after this long idle in it (the node,
# if it resumes, reconnects). Store transactions never wait on anything but the database.
IDLE_IN_TRANSACTION_TIMEOUT = "10s"

Connection = psycopg.Connection[DictRow]


class _Cursor(psycopg.Cursor[DictRow]):
    """The store's cursor: a composed query (`Composed`) is planned anew at each run,
    never prepared. Its conditions vary from one use to the next, and PostgreSQL would
    keep the generic plan of its first runs, made while a table was small (a sequential
    scan), as the table grows."""

    def execute(
        self,
        query: Any,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> Self:
        if isinstance(query, Composed):
            prepare = False
        return super().execute(query, params, prepare=prepare, binary=binary)


class Connections:
    """The connections of one store: `connect` for one of its own, `get` and `put` for
    the pool's. The pool opens on the first `get`, so a store that fails to open (an
    unreachable server, a schema too new) never starts its threads."""

    def __init__(self, conninfo: str, connect_args: dict[str, Any], schema: str, where: str):
        self._conninfo = conninfo
        self._connect_args = connect_args
        self._search_path = sql.SQL("SET search_path TO {}").format(sql.Identifier(schema))
        self._where = where
        self._pool: ConnectionPool[Connection] | None = None
        self._opening = threading.Lock()  # two threads' first calls open one pool
        self.size = POOL_SIZE

    def connect(self) -> Connection:
        """A new connection, set up; fails at once if the server cannot be reached.

        Raises:
            StoreError: naming the URL (without its password) and what to check.
        """
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
            self._configure(conn)
        except psycopg.Error as exc:
            conn.close()
            raise StoreError(
                f"cannot set up the connection to {self._where}: {first_line(exc)}"
            ) from exc
        return conn

    def _configure(self, conn: Connection) -> None:
        conn.cursor_factory = _Cursor
        # An `Ids` parameter is an array (`= ANY(...)`), as a list would be.
        conn.adapters.register_dumper(Ids, ListDumper)
        conn.adapters.register_dumper(Ids, ListBinaryDumper)
        conn.execute(self._search_path)
        conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT)))
        conn.execute(
            sql.SQL("SET idle_in_transaction_session_timeout = {}").format(
                sql.Literal(IDLE_IN_TRANSACTION_TIMEOUT)
            )
        )

    def get(self) -> Connection:
        """A connection of the pool, idle, for one transaction; give it back with `put`.

        Raises:
            StoreError: none could be had within POOL_TIMEOUT_S.
        """
        with self._opening:
            if self._pool is None:
                self._pool = self._open_pool()
            pool = self._pool
        try:
            return pool.getconn()
        except (PoolTimeout, PoolClosed) as exc:
            raise StoreError(
                f"no connection to the PostgreSQL store at {self._where} within "
                f"{POOL_TIMEOUT_S:g}s: {first_line(exc)}. Check that the server is running."
            ) from exc

    def _open_pool(self) -> ConnectionPool[Connection]:
        return ConnectionPool(
            self._conninfo,
            connection_class=psycopg.Connection[DictRow],
            kwargs={"autocommit": True, "row_factory": dict_row, **self._connect_args},
            configure=self._configure,
            min_size=1,
            max_size=self.size,
            timeout=POOL_TIMEOUT_S,
            name=f"slotline {self._where}",
            open=True,
        )

    def put(self, conn: Connection) -> None:
        """Give a connection back (the pool closes it if it is broken)."""
        pool = self._pool
        if pool is not None:
            pool.putconn(conn)
        else:  # the store was closed meanwhile
            conn.close()

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            with contextlib.suppress(psycopg.Error):
                pool.close()
