"""The plans PostgreSQL keeps for a claim's reads stay right as a new store's tables grow.

A node's statements are prepared after a few uses (psycopg), and PostgreSQL then keeps one
generic plan for each, made from the table sizes of that moment: on a new store, when the
attempts table holds a few rows. A read that plan answers with a sequential scan scans
every attempt ever made, in every claim, once the table has grown (a 2,000-task drain
spent half its server time there). These tests make the plans on a small table, grow it,
and ask PostgreSQL which plan it runs.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from slotline.errors import InvalidInput
from slotline.store import open_store, read_ahead
from slotline.store.claim import _snapshot_reads
from slotline.store.core import Serial
from slotline.store.pg_pipeline import BY_INDEX, INDEXED
from slotline.store.queries import Tx
from slotline.store.runs import Report, StartReport
from slotline.store.statements import Ids, Read, Where, load_queries, statement
from slotline.store.windows import reads as run_time_reads

pytestmark = pytest.mark.postgres

# A node's reads (and its heartbeat's write) of its own runs: through the partial index
# of unfinished attempts (migration 0026).
OWN_RUNS = ["tasks_kill_requested", "count_running_on_node", "attempts_live_of_node"]
OWN_RUNS += ["attempt_renew"]


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A connection on a new, migrated store's schema (no task, no attempt)."""
    open_store(pg_url).close()
    schema = pg_url.rsplit("schema=", 1)[1]
    with psycopg.connect(pg_url.split("?", maxsplit=1)[0], autocommit=True) as c:
        c.execute(f'SET search_path TO "{schema}"')
        yield c


def _grow(conn: psycopg.Connection[tuple[object, ...]], url: str, n: int) -> None:
    """`n` tasks, each with a finished attempt of node n1 (a run history)."""
    store = open_store(url)
    store.submit_many([{"command": ["true"]} for _ in range(n)])
    store.close()
    conn.execute(
        "INSERT INTO attempts (id, task_id, number, token, node_id, started_at, finished_at) "
        "SELECT md5(id), id, 1, 't', 'n1', 0, 1 FROM tasks"
    )


def _positional(sql: str) -> tuple[str, list[str]]:
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)[sb]", sql)))
    for i, name in enumerate(names, 1):
        sql = sql.replace(f"%({name})s", f"${i}").replace(f"%({name})b", f"${i}")
    return sql, names


@pytest.mark.parametrize("query", OWN_RUNS)
def test_a_nodes_reads_of_its_own_runs_keep_an_index_plan_as_attempts_grow(
    conn: psycopg.Connection[tuple[object, ...]], pg_url: str, query: str
) -> None:
    sql, names = _positional(load_queries("postgres")[query])
    args = ", ".join("'n1'" if name == "node_id" else "0" for name in names)
    conn.execute("SET plan_cache_mode = force_generic_plan")
    conn.execute("SET enable_bitmapscan = off")  # as in a write transaction
    conn.execute(f"PREPARE own AS {sql}")
    conn.execute(f"EXECUTE own({args})")  # its generic plan, made on an empty table
    _grow(conn, pg_url, 3000)
    plan = "\n".join(str(row[0]) for row in conn.execute(f"EXPLAIN EXECUTE own({args})"))
    assert "Seq Scan on attempts" not in plan, plan
    assert "attempts_live" in plan, plan


def _by_index_reads(plan: bool = True, common: bool = True) -> list[Read]:
    """The reads a claim makes by index (`Read.by_index`), with parameters as a claim's:
    its reports' attempts, their tasks and dependents; the line, as the plan reads it or
    as the common case does (`store/head_claim.py`), and its answer."""
    reports = [Report("a" * 32, "t", 0), StartReport("b" * 32, "t", 42, None, None)]
    windows = [("all", ""), ("dispatch", ""), ("agent", "claude")]  # due to be written
    run_times = run_time_reads(windows, 1.0)
    reads = read_ahead.reads(reports)
    for taken, line in ((plan, False), (common, True)):
        if taken:
            found = _snapshot_reads("n1", 1.0, run_times, counted=True, common=line)
            reads += [read for read in found if read not in reads]
    assert all(read.by_index for read in reads)
    return reads


def _literal(conn: psycopg.Connection[tuple[object, ...]], value: object) -> str:
    if isinstance(value, Ids):
        value = list(value)
    return sql.Literal(value).as_string(conn)


def test_a_claims_reads_by_index_keep_index_plans_as_their_tables_grow(
    conn: psycopg.Connection[tuple[object, ...]], pg_url: str
) -> None:
    """Each read by index is prepared as the store sends it and gets its generic plan
    under the same settings, on a new store's empty tables; the tables grow; each plan
    still reads through an index, never a whole table."""
    queries = load_queries("postgres")
    calls = {}
    with conn.transaction():
        conn.execute("SET LOCAL enable_bitmapscan = off")  # as in a write transaction
        conn.execute(BY_INDEX)  # as before the store's reads by index
        for n, read in enumerate(_by_index_reads()):
            text, params = statement(queries, read)
            positional, names = _positional(INDEXED + text)
            conn.execute(f"PREPARE r{n} AS {positional}")
            args = ", ".join(_literal(conn, params[name]) for name in names)
            calls[f"{read.query} {n}"] = f"r{n}({args})" if names else f"r{n}"
            conn.execute(f"EXECUTE {calls[f'{read.query} {n}']}")  # its plan, on empty tables
    _grow(conn, pg_url, 3000)
    conn.execute("INSERT INTO deps (task_id, dep_id) SELECT id, id FROM tasks")
    conn.execute("UPDATE tasks SET status = 'running' WHERE id IN (SELECT id FROM tasks LIMIT 50)")
    conn.execute("INSERT INTO run_times (scope, name, samples, estimate, runs, updated_at) "
                 "SELECT 'agent', md5(id), '[]', 1, 1, 0 FROM tasks")  # fmt: skip
    with conn.transaction():
        conn.execute(BY_INDEX)
        for query, call in calls.items():
            plan = "\n".join(str(row[0]) for row in conn.execute(f"EXPLAIN EXECUTE {call}"))
            assert "Seq Scan" not in plan, f"{query}:\n{plan}"
            assert re.search(r"Index (Only )?Scan", plan), f"{query}:\n{plan}"


def test_a_claims_reads_by_index_are_planned_once(pg_url: str) -> None:
    """After a few claims, each read by index runs prepared, on the plan made once (its
    generic plan), not planned anew for its parameters at each claim."""
    store = open_store(pg_url)
    store._connections.size = 1  # every transaction on the one connection asked below
    try:
        store.set_setting("max_concurrent", 1)
        store.submit_many([{"command": ["true"], "agent": "claude"} for _ in range(12)])
        reports: list[Report] = []
        for _ in range(10):
            (claimed,) = store.claim("n1", slots=2, finished=reports).claims
            reports = [Report(claimed.attempt.id, claimed.attempt.token, 0)]
        with store._transaction(write=False) as tx:
            tx.cursor.execute(
                "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
            )
            by_index = [row for row in tx.cursor.fetchall() if INDEXED in row["statement"]]
    finally:
        store.close()
    # (its claims take the common case: only the global limit is set; the run-time
    # windows, which its claims write at most once a second, are not read often enough
    # to be prepared)
    windows = {"run_time_get", "finishes_before"}
    assert {read.query for read in _by_index_reads(plan=False)} - windows <= {
        name for name, text in load_queries("postgres").items()
        if any(_positional(text)[0] in row["statement"] for row in by_index)
    }  # fmt: skip
    for row in by_index:
        assert row["custom_plans"] == 0, row
        assert row["generic_plans"] > 0, row


@pytest.mark.parametrize("write", [True, False], ids=["write", "read"])
def test_a_composed_query_is_planned_for_its_parameters(pg_url: str, write: bool) -> None:
    """A claim reads its reports' attempts in one composed query (`id IN (...)`), the
    task list pages with composed filters: each is planned at each run, never kept as
    a prepared statement, so a table that grew gets an index scan. A plain query run as
    often is prepared: the check can tell."""
    store = open_store(pg_url)
    try:
        with store._transaction(write=write) as tx:
            where = Where().all("attempts_where_tasks", ids=("a" * 32, "b" * 32))
            for _ in range(8):
                tx.select("attempts_page", where)
                tx.rows("attempt_get", id="c" * 32)
            tx.cursor.execute("SELECT statement FROM pg_prepared_statements")
            prepared = [str(row["statement"]) for row in tx.cursor.fetchall()]
    finally:
        store.close()
    assert any("FROM attempts WHERE id =" in text for text in prepared), prepared
    assert not any("IN (" in text for text in prepared), prepared


# Reads by index, and the two settings they change, as a test reads them.
_BY_INDEX_READS = [Read("tasks_running", by_index=True), Read("tasks_start_now", by_index=True)]
_SETTINGS = "SELECT current_setting('enable_seqscan') AS seqscan, " \
            "current_setting('plan_cache_mode') AS plans"  # fmt: skip
_USUAL = [{"seqscan": "on", "plans": "auto"}]


@contextlib.contextmanager
def _write_after_reads_by_index(pg_url: str) -> Iterator[Tx]:
    """A write transaction that began with reads by index (as a claim does)."""
    store = open_store(pg_url)
    try:
        with store._transaction(write=True, ahead=_BY_INDEX_READS) as tx:
            yield tx
    finally:
        store.close()


def _settings(tx: Tx) -> list[Any]:
    tx.cursor.execute(_SETTINGS)
    return tx.cursor.fetchall()


def test_the_planner_settings_are_the_servers_again_for_the_next_read(pg_url: str) -> None:
    """Reads by index turn sequential scans off and keep generic plans; the next read
    that is not by index is planned as the server says (a full read of a small table
    with many dead rows is best scanned). Until then the settings stay (the writes
    between, by key, and the COMMIT need no statement to put them back)."""
    with _write_after_reads_by_index(pg_url) as tx:
        while_by_index = _settings(tx)
        tx.rows("count_pending")
        after_a_read = _settings(tx)
        tx.forget_preloaded()
        tx.read_together([*_BY_INDEX_READS, Read("count_pending")])
        after_reads_together = _settings(tx)
        tx.read_together(_BY_INDEX_READS)
        tx.select("tasks_page", Where(), limit=1, offset=0)
        after_a_composed_read = _settings(tx)
        tx.cursor.execute("SELECT current_setting('jit') AS jit")
        jit = tx.cursor.fetchall()
    assert while_by_index == [{"seqscan": "off", "plans": "force_generic_plan"}]
    assert after_a_read == after_reads_together == after_a_composed_read == _USUAL
    # JIT stays off to the commit: a statement whose only way is a sequential scan, made
    # while sequential scans are off, is costed past the JIT's threshold (0.3 s compiled).
    assert jit == [{"jit": "off"}]


def _refused_part(tx: Tx) -> None:
    with tx.part():
        tx.rows("count_pending")  # the usual settings, inside the savepoint
        raise InvalidInput("refused")


def test_the_planner_settings_are_right_after_a_part_is_undone_and_a_lone_read(
    pg_url: str,
) -> None:
    """A refused part of a transaction (a savepoint rolled back) undoes the settings it
    changed: the next read that is not by index puts the usual ones back all the same.
    So does a lone read among reads sent together."""
    with _write_after_reads_by_index(pg_url) as tx:
        with pytest.raises(InvalidInput):
            _refused_part(tx)
        tx.rows("count_pending")
        after_the_part = _settings(tx)
        tx.forget_preloaded()
        tx.read_together(_BY_INDEX_READS)
        tx.read_together([Read("count_pending")])
        after_a_lone_read = _settings(tx)
    assert after_the_part == after_a_lone_read == _USUAL


@pytest.mark.parametrize("serial", list(Serial), ids=lambda s: s.name.lower())
def test_every_write_reads_with_bitmap_scans_off(pg_url: str, serial: Serial) -> None:
    """A write reads through the status indexes without bitmap scans (which visit every
    dead entry a status change left), whichever locks it takes (the setting goes with
    its first lock) or none."""
    store = open_store(pg_url)
    try:
        with store._transaction(write=True, serial=serial) as tx:
            tx.cursor.execute("SELECT current_setting('enable_bitmapscan') AS bitmap")
            assert tx.cursor.fetchall() == [{"bitmap": "off"}]
        with store._transaction(write=False) as tx:  # a read keeps the server's setting
            tx.cursor.execute("SELECT current_setting('enable_bitmapscan') AS bitmap")
            assert tx.cursor.fetchall() == [{"bitmap": "on"}]
    finally:
        store.close()
