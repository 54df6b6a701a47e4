"""A PostgreSQL write transaction's cursor in pipeline mode: statements queued, reads sent
together, each read's rows as dicts; and the reads planned by index."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg.rows import DictRow, TupleRow, tuple_row

from slotline.store.statements import Composed

# The reads that an index answers (`Read.by_index`) are planned once, with sequential scans
# off, and that plan kept (`force_generic_plan`). Planned for their parameters, as
# PostgreSQL chose, each cost 0.1-0.25 ms of planning at each claim; and a generic plan
# made while the tables were small (on a new store) would be a sequential scan, kept as
# the tables grow (tests/integration/test_pg_plans.py). Only them: a full read of a small
# table with many dead rows (the count deltas) is best scanned: a read that is not by
# index puts the usual settings back first (`as_usual`). The writes that follow reads by
# index run under them (by key, or with no way but a scan, as the count deltas' fold,
# which they only make dearer on paper). JIT compilation goes off
# with them for the rest of the transaction: a statement left with no way but a sequential
# scan (a table without an index) is costed past `jit_above_cost` by the scan's penalty,
# and compiled, 0.3 s, for a scan of a few rows (the count deltas' fold, measured).
BY_INDEX_SETTINGS = (
    "set_config('enable_bitmapscan', 'off', true),"
    " set_config('enable_seqscan', 'off', true),"
    " set_config('plan_cache_mode', 'force_generic_plan', true),"
    " set_config('jit', 'off', true)"
)
BY_INDEX = f"SELECT {BY_INDEX_SETTINGS}"
# Marks their text: a statement of its own, prepared apart from the same read made
# elsewhere, whose generic plan PostgreSQL may have made with sequential scans on (it keeps
# a statement's generic plan whatever the settings of its later runs).
INDEXED = "/* by index */ "
# Then the two settings are the server's again (`PostgresStore._usual`), but only before a
# read that is not by index: the writes between (by key) and the COMMIT, which ends the
# settings, need them not (two statements fewer for a node's claim).
_AS_USUAL = (
    "SELECT set_config('enable_seqscan', %(seqscan)s, true),"
    " set_config('plan_cache_mode', %(plans)s, true)"
)
# The column names of each read's rows, by its text (not a composed one's: their texts
# vary), kept by each store: its schema's columns.
Columns = dict[str, tuple[str, ...]]


def _as_dicts(cursor: psycopg.Cursor[TupleRow], query: str, known: Columns) -> list[dict[str, Any]]:
    """The rows of `cursor`, which ran `query`, as dicts. Its column names are read once
    per text (`known`), not per result as psycopg's `dict_row` does (a claim reads a
    dozen results, some of fifty columns); read again if their number changed."""
    rows = cursor.fetchall()
    if not rows:
        return []
    names = known.get(query)
    if names is None or len(names) != len(rows[0]):
        names = tuple(column.name for column in cursor.description or ())
        if not isinstance(query, Composed):
            known[query] = names
    return [dict(zip(names, row, strict=True)) for row in rows]


class PipelinedCursor:
    """A write transaction's cursor in pipeline mode: a statement whose result nobody
    reads is only queued, and each read sends what is queued with a Sync, in one round
    trip. The Sync (not a mere flush) leaves the session "idle in transaction" between
    statements, so that a node frozen inside a transaction is still ended by the
    server's idle_in_transaction_session_timeout."""

    def __init__(
        self,
        cursor: psycopg.Cursor[DictRow],
        pipeline: psycopg.Pipeline,
        usual: Mapping[str, str],
        columns: Columns,
    ) -> None:
        self._cursor = cursor
        self._pipeline = pipeline
        self._usual = usual  # the planner's settings reads by index change (`_AS_USUAL`)
        self._columns = columns
        # Whether the transaction plans its reads by index now (`BY_INDEX` sent); None:
        # not known (a rollback to a savepoint undid what was set since).
        self._by_index: bool | None = False

    def planned_by_index(self) -> None:
        """Say that `BY_INDEX`'s settings were sent (with another statement)."""
        self._by_index = True

    def as_usual(self) -> None:
        """The planner's usual settings back, before a read that is not by index."""
        if self._by_index is not False:
            self.execute(_AS_USUAL, self._usual)
            self._by_index = False

    def execute(self, sql: Any, params: Any = None) -> None:
        if isinstance(sql, str) and sql.startswith("ROLLBACK TO SAVEPOINT"):
            self._by_index = None  # the settings are as they were at the savepoint
        self._cursor.execute(sql, params)

    def executemany(self, sql: Any, params_seq: Any, /) -> None:
        self._cursor.executemany(sql, params_seq)

    def fetchall(self) -> list[DictRow]:
        self._pipeline.sync()
        return self._cursor.fetchall()

    @property
    def description(self) -> Any:
        return self._cursor.description

    def read_together(
        self, statements: Sequence[tuple[str, Mapping[str, Any]]], indexed: int = 0
    ) -> list[list[Any]]:
        """The rows of each statement, each sent on a cursor of its own and all read
        after one Sync: one round trip. The first `indexed` are planned by index
        (`BY_INDEX`, unless in force already); the others as usual."""
        cursors: list[psycopg.Cursor[TupleRow]] = []
        try:
            for n, (query, params) in enumerate(statements):
                if n == indexed:
                    self.as_usual()
                elif n == 0 and self._by_index is not True:
                    self.execute(BY_INDEX)
                    self._by_index = True
                cursors.append(self._cursor.connection.cursor(row_factory=tuple_row))
                cursors[-1].execute(INDEXED + query if n < indexed else query, params)
            self._pipeline.sync()
            return [
                _as_dicts(cursor, query, self._columns)
                for cursor, (query, _) in zip(cursors, statements, strict=True)
            ]
        finally:
            for cursor in cursors:
                cursor.close()

    def close(self) -> None:
        self._cursor.close()
