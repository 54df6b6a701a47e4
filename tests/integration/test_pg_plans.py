"""The plans PostgreSQL keeps for a claim's reads stay right as a new store's tables grow.

A node's statements are prepared after a few uses (psycopg), and PostgreSQL then keeps one
generic plan for each, made from the table sizes of that moment: on a new store, when the
attempts table holds a few rows. A read that plan answers with a sequential scan scans
every attempt ever made, in every claim, once the table has grown (a 2,000-task drain
spent half its server time there). These tests make the plans on a small table, grow it,
and ask PostgreSQL which plan it runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import psycopg
import pytest

from slotline.store import open_store
from slotline.store.statements import Where, load_queries

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
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", sql)))
    for i, name in enumerate(names, 1):
        sql = sql.replace(f"%({name})s", f"${i}")
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


@pytest.mark.parametrize("write", [True, False], ids=["write", "read"])
def test_a_composed_query_is_planned_for_its_parameters(pg_url: str, write: bool) -> None:
    """A claim reads its reports' attempts in one composed query (`id IN (...)`), the
    task list pages with composed filters: each is planned at each run, never kept as
    a prepared statement, so a table that grew gets an index scan. A plain query run as
    often is prepared: the check can tell."""
    store = open_store(pg_url)
    try:
        with store._transaction(write=write) as tx:
            where = Where().all("attempts_where_ids", ids=("a" * 32, "b" * 32))
            for _ in range(8):
                tx.select("attempts_page", where)
                tx.rows("attempt_get", id="c" * 32)
            tx.cursor.execute("SELECT statement FROM pg_prepared_statements")
            prepared = [str(row["statement"]) for row in tx.cursor.fetchall()]
    finally:
        store.close()
    assert any("FROM attempts WHERE id =" in text for text in prepared), prepared
    assert not any("IN (" in text for text in prepared), prepared
