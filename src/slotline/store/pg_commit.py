"""What a PostgreSQL write sends with its COMMIT (`postgres.py`): the status counts'
deltas folded now and then, the checks left for the commit, then its events and its
NOTIFY in one statement, under the events lock."""

from __future__ import annotations

import functools
from typing import Any

from slotline.store.core import Serial
from slotline.store.queries import Tx

LOCK = "SELECT pg_advisory_xact_lock(CAST(%(key)s AS BIGINT))"
# The deltas of the status counts folded into their rows (migration 0023), by a write
# that holds the write lock (the only writers of those rows, so they never contend).
_FOLD_COUNTS = """
WITH folded AS (DELETE FROM status_deltas RETURNING status, d),
     sums AS (SELECT status, SUM(d) AS d FROM folded GROUP BY status)
UPDATE status_counts SET n = status_counts.n + sums.d FROM sums
WHERE status_counts.status = sums.status"""
# The same by a submit, if the write lock is free right now (never waiting for it): with
# no node claiming, deltas would otherwise pile up under every count read.
_TRY_FOLD_COUNTS = _FOLD_COUNTS.replace(
    "DELETE FROM status_deltas",
    "DELETE FROM status_deltas WHERE (SELECT pg_try_advisory_xact_lock(CAST(%(key)s AS BIGINT)))",
)
# A submit tries to fold the count deltas once in this many submits of a store.
FOLD_EVERY = 64
# A write under the write lock folds them once in this many writes of a store, its first
# included (a CLI command makes one write: it folds, as every write did before). A fold is
# a statement and about 0.07 ms of the server's time under that lock; the deltas of a
# node's writes between two folds add little to a read of the counts.
FOLD_WRITES_EVERY = 16
_NOTIFY = "SELECT pg_notify(%(channel)s, %(payload)s)"
_EVENT_COLUMNS = ("at", "kind", "task_id", "data")
# A write's events in one statement (a claim appends about four a run), numbered in the
# order it appended them (their columns as arrays, sent in binary: psycopg's text form
# escapes each value with a regular expression), under the events lock. The statement
# takes that lock itself before any row is numbered: a row reaches the insert, which
# numbers it, only joined with the one row of `locked`, whose scan takes the lock. A
# write that holds it already takes it again, harmlessly.
_EVENTS_FROM = """
WITH locked AS MATERIALIZED (SELECT pg_advisory_xact_lock(CAST(%(lock)s AS BIGINT))){told}
INSERT INTO events (at, kind, task_id, data)
SELECT e.at, e.kind, e.task_id, e.data
FROM locked,{told_row}
     unnest(%(at)b::float8[], %(kind)b::text[], %(task_id)b::text[], %(data)b::text[])
     WITH ORDINALITY AS e(at, kind, task_id, data, n)
ORDER BY e.n"""
_APPEND_EVENTS = _EVENTS_FROM.format(told="", told_row="")
# The same with the write's NOTIFY (one statement fewer: the notice goes out at the commit
# either way).
_APPEND_EVENTS_AND_NOTIFY = _EVENTS_FROM.format(
    told=",\n     told AS MATERIALIZED (SELECT pg_notify(%(channel)s, %(payload)s))",
    told_row=" told,",
)


class CommitTail:
    """The last statements of each write of one store (which counts its writes: it
    folds the count deltas once in so many)."""

    def __init__(self, key: int, events_key: int, channel: str) -> None:
        self._key = key  # the write lock's
        self._events_key = events_key
        self._channel = channel
        self._writes = 0
        self._submits = 0

    def send(self, tx: Tx, serial: Serial, migrated: bool) -> None:
        """The last statements of a write, sent with its COMMIT: the count deltas folded
        (see `_FOLD_COUNTS`), then its events, under the events lock, which the commit
        releases: so a reader that has seen `seq` n never later sees a smaller one.

        A check left for the commit (is the line drained?) reads the end state under
        that lock already (taken before its read; a check that need not read takes it
        not): every write that changes a task appends an event, so takes it before its
        commit, and none can commit between the check and this commit."""
        if tx.checks_left:
            tx.run_last_checks(
                first_read=functools.partial(tx.cursor.execute, LOCK, {"key": self._events_key})
            )
        if migrated:
            if serial.writes:
                self._writes += 1
                if self._writes % FOLD_WRITES_EVERY == 1:
                    tx.cursor.execute(_FOLD_COUNTS)
            elif serial is Serial.SUBMITS:
                self._submits += 1
                if self._submits % FOLD_EVERY == 0:
                    tx.cursor.execute(_TRY_FOLD_COUNTS, {"key": self._key})
        events = tx.take_events()
        told = {"channel": self._channel, "payload": tx.notice}
        if events:
            columns: dict[str, Any] = {
                name: [event[name] for event in events] for name in _EVENT_COLUMNS
            }
            # One type per array: a caller's `now` may be an int beside the clock's floats.
            columns["at"] = [float(at) for at in columns["at"]]
            appended = {**columns, "lock": self._events_key}
            if tx.notice is None:
                tx.cursor.execute(_APPEND_EVENTS, appended)
            else:
                tx.cursor.execute(_APPEND_EVENTS_AND_NOTIFY, {**appended, **told})
        elif tx.notice is not None:
            tx.cursor.execute(_NOTIFY, told)
