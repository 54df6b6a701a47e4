"""The schema a store creates is exactly its migration scripts applied in order."""

from __future__ import annotations

import re
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest

from slotline.errors import SchemaTooNew
from slotline.store import open_store
from slotline.store.migrate import migrations
from slotline.store.pg_url import split_url
from slotline.store.statements import load_queries

Catalog = dict[str, list[tuple[Any, ...]]]


def declared_tables(dialect: str) -> set[str]:
    """The tables the migration scripts of `dialect` create and do not drop after."""
    tables: set[str] = set()
    for _, script in migrations(dialect):
        for verb, name in re.findall(r"(CREATE|DROP) TABLE (\w+)", script, re.IGNORECASE):
            if verb.upper() == "CREATE":
                tables.add(name)
            else:
                tables.discard(name)
    return tables


def latest(dialect: str) -> int:
    return migrations(dialect)[-1][0]


# -- SQLite ------------------------------------------------------------------------------------


def sqlite_catalog(path: Path) -> Catalog:
    """Tables, columns, indexes and foreign keys of an SQLite file, schema_version aside."""
    with closing(sqlite3.connect(path)) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' AND name != 'schema_version' ORDER BY name"
            )
        ]
        catalog: Catalog = {"tables": [(t,) for t in tables]}
        for table in tables:
            catalog[f"{table}.columns"] = conn.execute(f"PRAGMA table_info({table})").fetchall()
            catalog[f"{table}.foreign_keys"] = conn.execute(
                f"PRAGMA foreign_key_list({table})"
            ).fetchall()
            indexes = conn.execute(f"PRAGMA index_list({table})").fetchall()
            catalog[f"{table}.indexes"] = sorted(indexes, key=lambda r: r[1])
            for index in indexes:
                catalog[f"{index[1]}.keys"] = conn.execute(
                    f"PRAGMA index_xinfo({index[1]})"
                ).fetchall()
        return catalog


def test_sqlite_schema_equals_the_migrations_applied_in_order(tmp_path: Path) -> None:
    # Given the scripts applied by hand, in order, to an empty file…
    expected = tmp_path / "expected.db"
    with closing(sqlite3.connect(expected)) as conn:
        for _, script in migrations("sqlite"):
            conn.executescript(script)
    # …when a store creates its schema, then opens it again (nothing left to do)…
    store_path = tmp_path / "store.db"
    open_store(store_path).close()
    open_store(store_path).close()

    # …then both have the same tables, columns, indexes and keys, each version once.
    actual = sqlite_catalog(store_path)
    assert {t for (t,) in actual["tables"]} == declared_tables("sqlite")
    assert actual == sqlite_catalog(expected)
    assert schema_versions(str(store_path)) == [v for v, _ in migrations("sqlite")]


def sqlite_before(version: int, path: Path) -> sqlite3.Connection:
    """A connection to a new SQLite file at `path` holding the schema before migration
    `version`, as a store of that slotline left it (its versions recorded)."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for number, script in migrations("sqlite"):
        if number < version:
            conn.executescript(script)
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (number,))
    return conn


def test_the_event_log_keeps_its_numbers_when_its_seq_becomes_the_rowid(
    tmp_path: Path,
) -> None:
    # Given a store of the schema before 0032 (seq AUTOINCREMENT) with a task's events,
    path = tmp_path / "store.db"
    with closing(sqlite_before(32, path)) as conn:
        for n in range(3):
            conn.execute(
                "INSERT INTO events (at, kind, task_id, data) VALUES (?, 'x', 't', '{}')", (n,)
            )
        conn.commit()
    # when slotline opens it (and migrates it) and logs more,
    store = open_store(path)
    try:
        store.submit({"command": ["true"]})
        events = store.events(since=0)
    finally:
        store.close()
    # then the old events keep their numbers, and the new ones follow them,
    assert [(e.seq, e.kind) for e in events[:3]] == [(1, "x"), (2, "x"), (3, "x")]
    assert [(e.seq, e.kind) for e in events[3:]] == [(4, "submitted")]
    # with no counter of their own left in sqlite_sequence.
    with closing(sqlite3.connect(path)) as conn:
        names = [name for (name,) in conn.execute("SELECT name FROM sqlite_sequence")]
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'events'").fetchone()[0]
    assert "events" not in names
    assert "AUTOINCREMENT" not in sql


def test_the_status_counts_kept_in_counters_count_what_was_counted(tmp_path: Path) -> None:
    # Given a store of the schema before 0033 (a table of counts) with tasks in line,
    path = tmp_path / "store.db"
    queries = load_queries("sqlite")
    with closing(sqlite_before(33, path)) as conn:
        for n, status in enumerate(["queued", "queued", "held"]):
            row = {**TASK_ROW, "id": f"{n:032x}", "rank": f"{n:015d}", "status": status}
            conn.execute(queries["task_insert"], row)
        conn.commit()
    # when slotline opens it (and migrates it) and the line changes,
    store = open_store(path)
    try:
        assert store.counts() == {"queued": 2, "held": 1}
        store.submit({"command": ["true"]})
        store.cancel(f"{2:032x}")
        # then the counts are what was counted, and follow every change.
        assert store.counts() == {"queued": 3, "cancelled": 1}
    finally:
        store.close()
    with closing(sqlite3.connect(path)) as conn:
        kinds = dict(
            conn.execute("SELECT name, type FROM sqlite_master WHERE name = 'status_counts'")
        )
    assert kinds == {"status_counts": "view"}


# A task row as `task_insert` takes it (only what the test above varies is set there).
TASK_ROW: dict[str, Any] = {
    "kind": "command", "command": '["true"]', "callable": None, "args": "{}", "title": "true",
    "agent": None, "workspace": None, "owner": None, "labels": "{}", "env": "{}",
    "priority": 2, "status_reason": None, "depends_on": "[]", "parent_id": None,
    "depth": 0, "max_attempts": 1, "backoff": 5.0, "timeout": None, "queue_ttl": None,
    "created_at": 1.0, "queued_at": 1.0, "memory_mb": None, "expected_duration": None,
    "hold_when_ready": False, "dedup_key": None, "run_at": None, "schedule": None,
    "interactive": False, "first_input": None,
}  # fmt: skip


# -- PostgreSQL --------------------------------------------------------------------------------


@pytest.fixture
def scratch_schema(pg_url: str) -> Iterator[str]:
    """An extra empty schema in the test database, dropped afterwards."""
    schema = "t_" + secrets.token_hex(6)
    conninfo = split_url(pg_url)[0]
    yield schema
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def postgres_catalog(conninfo: str, schema: str) -> Catalog:
    """Columns, constraints and indexes of one schema, schema_version aside, with the
    schema's own name taken out so two schemas compare equal."""
    with psycopg.connect(conninfo, autocommit=True) as conn:

        def rows(query: str) -> list[tuple[Any, ...]]:
            found = conn.execute(query, {"schema": schema}).fetchall()
            return [
                tuple(v.replace(f"{schema}.", "") if isinstance(v, str) else v for v in row)
                for row in found
            ]

        return {
            "columns": rows(
                "SELECT table_name, ordinal_position, column_name, data_type, is_nullable, "
                "column_default, collation_name FROM information_schema.columns "
                "WHERE table_schema = %(schema)s AND table_name != 'schema_version' "
                "ORDER BY table_name, ordinal_position"
            ),
            "constraints": rows(
                "SELECT t.relname, c.conname, c.contype, pg_get_constraintdef(c.oid) "
                "FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid "
                "JOIN pg_namespace n ON n.oid = t.relnamespace "
                "WHERE n.nspname = %(schema)s ORDER BY t.relname, c.conname"
            ),
            "indexes": rows(
                "SELECT tablename, indexname, indexdef FROM pg_indexes "
                "WHERE schemaname = %(schema)s ORDER BY tablename, indexname"
            ),
        }


@pytest.mark.postgres
def test_postgres_schema_equals_the_migrations_applied_in_order(
    pg_url: str, scratch_schema: str
) -> None:
    conninfo, schema = split_url(pg_url)
    # Given the scripts applied by hand, in order, to an empty schema…
    with psycopg.connect(conninfo, autocommit=True) as conn, conn.transaction():
        conn.execute(f'CREATE SCHEMA "{scratch_schema}"')
        conn.execute(f'SET LOCAL search_path TO "{scratch_schema}"')
        for _, script in migrations("postgres"):
            conn.execute(script)
    # …when a store creates its schema, then opens it again (nothing left to do)…
    open_store(pg_url).close()
    open_store(pg_url).close()

    # …then both have the same tables, columns, constraints and indexes, each version once.
    actual = postgres_catalog(conninfo, schema)
    assert {row[0] for row in actual["columns"]} == declared_tables("postgres")
    assert actual == postgres_catalog(conninfo, scratch_schema)
    assert schema_versions(pg_url) == [v for v, _ in migrations("postgres")]


# -- every backend -----------------------------------------------------------------------------


def dialect_of(store_url: str) -> str:
    return "postgres" if store_url.startswith("postgresql://") else "sqlite"


def schema_versions(store_url: str) -> list[int]:
    """The versions recorded in the store's schema_version table, in order."""
    if dialect_of(store_url) == "postgres":
        conninfo, schema = split_url(store_url)
        with psycopg.connect(conninfo) as conn:
            rows = conn.execute(
                f'SELECT version FROM "{schema}".schema_version ORDER BY version'
            ).fetchall()
    else:
        with closing(sqlite3.connect(store_url)) as conn:
            rows = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    return [v for (v,) in rows]


def add_schema_version(store_url: str, version: int) -> None:
    """Record `version` as applied, as a newer slotline would."""
    if dialect_of(store_url) == "postgres":
        conninfo, schema = split_url(store_url)
        with psycopg.connect(conninfo) as conn:
            conn.execute(f'INSERT INTO "{schema}".schema_version (version) VALUES (%s)', [version])
    else:
        with closing(sqlite3.connect(store_url)) as conn, conn:
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", [version])


def test_reopening_a_store_keeps_its_tasks(store_url: str) -> None:
    with closing(open_store(store_url)) as first:
        task = first.submit({"command": ["true"]})

    with closing(open_store(store_url)) as again:
        assert [t.id for t in again.list_tasks()] == [task.id]
    assert schema_versions(store_url) == [v for v, _ in migrations(dialect_of(store_url))]


def test_a_database_written_by_a_newer_slotline_is_refused(store_url: str) -> None:
    dialect = dialect_of(store_url)
    open_store(store_url).close()
    add_schema_version(store_url, latest(dialect) + 1)

    with pytest.raises(SchemaTooNew, match=rf"version {latest(dialect) + 1}.*Upgrade slotline"):
        open_store(store_url)


def test_stores_opened_at_the_same_moment_migrate_once(store_url: str) -> None:
    # Several nodes starting together on an empty database: one migrates, the others
    # wait for it and find nothing to do.
    start = threading.Barrier(4)
    failures: list[BaseException] = []

    def open_one() -> None:
        start.wait(timeout=10)
        try:
            open_store(store_url).close()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert failures == []
    assert schema_versions(store_url) == [v for v, _ in migrations(dialect_of(store_url))]
    with closing(open_store(store_url)) as store:
        assert store.settings()["max_concurrent"] == 3
        assert store.submit({"command": ["true"]}).status.value == "queued"
