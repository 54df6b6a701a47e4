"""The floors: the least a durable submit or claim costs on this machine, with no queue at all.

.venv/bin/python bench/floors.py                # SQLite and PostgreSQL, 5 runs each
.venv/bin/python bench/floors.py --no-postgres  # SQLite only

A submit that commits each task before it answers cannot beat a bare one-row INSERT and
commit; a claim cannot beat one bare `UPDATE … RETURNING` of the oldest queued row and its
commit. Each rate here is that statement in a loop, from Python, one commit per row:

- SQLite (the `sqlite3` module, WAL): the INSERT at synchronous=NORMAL (slotline's setting:
  no fsync per commit) and at FULL (an fsync per commit, huey's default); the claim at NORMAL
  over a table pre-filled untimed, through an index on (state, id).
- SQLite on slotline's own schema: the statements a submit of one task sends (the lock,
  the configuration's version, the count of the line, the rank, the task's row with its
  indexes and status-count trigger, its event, the commit), from `sqlite3` with no Python
  of slotline around them: what a submit would cost if slotline's Python cost nothing.
- PostgreSQL (psycopg, autocommit, prepared statements, the server's own fsync settings):
  the INSERT, and the claim with `FOR UPDATE SKIP LOCKED` in its subquery, as a queue whose
  workers may race does it; each in a schema of its own, dropped afterwards.
"""

from __future__ import annotations

import argparse
import secrets
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `bench` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stats import median

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
TABLE = "CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT NOT NULL, x INTEGER)"
INDEX = "CREATE INDEX jobs_state ON jobs (state, id)"
SQLITE_CLAIM = (
    "UPDATE jobs SET state = 'running' WHERE id = (SELECT id FROM jobs WHERE state = 'queued' "
    "ORDER BY id LIMIT 1) RETURNING id"
)
PG_CLAIM = (
    "UPDATE {t} SET state = 'running' WHERE id = (SELECT id FROM {t} WHERE state = 'queued' "
    "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id"
)


def _sqlite(path: Path, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute(TABLE)
    conn.execute(INDEX)
    return conn


def sqlite_insert_rate(path: Path, n: int, synchronous: str = "NORMAL") -> float:
    """Rows per second: one-row INSERT, then COMMIT, into a fresh WAL file."""
    conn = _sqlite(path, synchronous)
    try:
        start = time.perf_counter()
        for i in range(n):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO jobs (state, x) VALUES ('queued', ?)", (i,))
            conn.execute("COMMIT")
        return n / (time.perf_counter() - start)
    finally:
        conn.close()


def sqlite_claim_rate(path: Path, n: int) -> float:
    """Rows per second: one `UPDATE … RETURNING` claim of the oldest queued row, then
    COMMIT, over `n` rows queued untimed (WAL, synchronous=NORMAL)."""
    conn = _sqlite(path, "NORMAL")
    try:
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO jobs (state, x) VALUES ('queued', ?)", ((i,) for i in range(n))
        )
        conn.execute("COMMIT")
        start = time.perf_counter()
        for _ in range(n):
            conn.execute("BEGIN IMMEDIATE")
            if conn.execute(SQLITE_CLAIM).fetchone() is None:
                raise RuntimeError("the claim found no queued row")
            conn.execute("COMMIT")
        return n / (time.perf_counter() - start)
    finally:
        conn.close()


def sqlite_schema_submit_rate(path: Path, n: int) -> float:
    """Tasks per second: a submit's statements on a slotline store's schema (migrated by
    opening the store), one transaction per task, as `store/submit.py` sends them."""
    from slotline.store import open_store
    from slotline.store.statements import load_queries

    open_store(path).close()
    queries = load_queries("sqlite")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    row = {
        "kind": "command", "command": '["true"]', "callable": None, "args": "{}",
        "title": "true", "agent": None, "workspace": None, "owner": None, "labels": "{}",
        "env": "{}", "priority": 2, "status": "queued", "status_reason": None,
        "depends_on": "[]", "parent_id": None, "depth": 0, "max_attempts": 1,
        "backoff": 5.0, "timeout": None, "queue_ttl": None, "memory_mb": None,
        "expected_duration": None, "hold_when_ready": False, "dedup_key": None,
        "run_at": None, "schedule": None, "interactive": False, "first_input": None,
    }  # fmt: skip
    data = '{"parent_id":null,"priority":"normal","reason":null,"title":"true","to":"queued"}'
    try:
        start = time.perf_counter()
        for _ in range(n):
            now = time.time()
            task_id = secrets.token_hex(16)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("SELECT value FROM counters WHERE name = 'config'").fetchall()
            conn.execute(queries["count_pending"]).fetchall()
            rank = conn.execute(queries["counter_add"], {"n": 1, "name": "rank"}).fetchall()
            task = {**row, "id": task_id, "rank": f"{rank[0][0]:015d}"}
            conn.executemany(
                queries["task_insert"], [{**task, "created_at": now, "queued_at": now}]
            )
            event = {"at": now, "kind": "submitted", "task_id": task_id, "data": data}
            conn.executemany(queries["event_append"], [event])
            conn.execute("COMMIT")
        return n / (time.perf_counter() - start)
    finally:
        conn.close()


def pg_insert_rate(url: str, n: int) -> float:
    """Rows per second: one prepared one-row INSERT in autocommit (one round trip and one
    synchronous commit each), in a fresh schema."""
    import psycopg

    name = f"bench_{secrets.token_hex(5)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
        try:
            conn.execute(f'CREATE TABLE "{name}".floor (id BIGSERIAL PRIMARY KEY, x INT)')
            insert = f'INSERT INTO "{name}".floor (x) VALUES (%s)'
            start = time.perf_counter()
            for i in range(n):
                conn.execute(insert, (i,), prepare=True)
            return n / (time.perf_counter() - start)
        finally:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')


def pg_claim_rate(url: str, n: int) -> float:
    """Rows per second: one prepared `UPDATE … (… FOR UPDATE SKIP LOCKED) RETURNING` claim
    in autocommit, over `n` rows queued untimed, in a fresh schema."""
    import psycopg

    name = f"bench_{secrets.token_hex(5)}"
    table = f'"{name}".jobs'
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
        try:
            conn.execute(f"CREATE TABLE {table} (id BIGSERIAL PRIMARY KEY, state TEXT, x INT)")
            conn.execute(f"CREATE INDEX ON {table} (state, id)")
            conn.execute(
                f"INSERT INTO {table} (state, x) SELECT 'queued', i FROM generate_series(1, %s) i",
                (n,),
            )
            conn.execute(f"VACUUM ANALYZE {table}")
            claim = PG_CLAIM.format(t=table)
            start = time.perf_counter()
            for _ in range(n):
                if conn.execute(claim, prepare=True).fetchone() is None:
                    raise RuntimeError("the claim found no queued row")
            return n / (time.perf_counter() - start)
        finally:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')


def measure(folder: Path, n: int, url: str | None) -> dict[str, float]:
    """Every floor once; returns `floor.NAME` → rows per second."""
    sample = {
        "floor.sqlite_insert_normal": sqlite_insert_rate(folder / "normal.db", n, "NORMAL"),
        "floor.sqlite_insert_full": sqlite_insert_rate(folder / "full.db", n, "FULL"),
        "floor.sqlite_claim": sqlite_claim_rate(folder / "claim.db", n),
        "floor.sqlite_schema_submit": sqlite_schema_submit_rate(folder / "schema.db", n),
    }
    if url:
        sample["floor.pg_insert"] = pg_insert_rate(url, n)
        sample["floor.pg_claim"] = pg_claim_rate(url, n)
    return sample


LABELS = {
    "floor.sqlite_insert_normal": "SQLite one-row INSERT + COMMIT, WAL, synchronous=NORMAL",
    "floor.sqlite_insert_full": "SQLite one-row INSERT + COMMIT, WAL, synchronous=FULL (fsync)",
    "floor.sqlite_claim": "SQLite `UPDATE … RETURNING` claim + COMMIT, WAL, NORMAL",
    "floor.sqlite_schema_submit": "SQLite, a submit's own statements on slotline's schema",
    "floor.pg_insert": "PostgreSQL one-row INSERT, autocommit (psycopg, prepared)",
    "floor.pg_claim": "PostgreSQL `UPDATE … SKIP LOCKED … RETURNING` claim, autocommit",
}


def render(samples: list[dict[str, float]]) -> str:
    lines = ["| floor | rows/s, median | min–max |", "|---|---:|---:|"]
    for key, label in LABELS.items():
        values = [s[key] for s in samples if key in s]
        if values:
            lines.append(
                f"| {label} | {median(values):,.0f} | {min(values):,.0f}–{max(values):,.0f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/floors.py", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="rows per measurement")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--url", default=DEFAULT_URL, help=f"PostgreSQL (default {DEFAULT_URL})")
    parser.add_argument("--no-postgres", action="store_true", help="the SQLite floors only")
    args = parser.parse_args(argv)
    samples = []
    for index in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix=f"slotline-floors-{index}-") as tmp:
            samples.append(measure(Path(tmp), args.n, None if args.no_postgres else args.url))
    print(render(samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
