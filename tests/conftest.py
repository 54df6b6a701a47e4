"""Shared fixtures: a store per backend (SQLite always; PostgreSQL when reachable or in CI)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas import fresh_schema
from slotline.store import Store, open_store

PG_URL = os.environ.get("SLOTLINE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
IN_CI = bool(os.environ.get("CI"))


def postgres_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_URL, connect_timeout=3):
            return True
    except Exception:
        return False


def require_postgres() -> None:
    """Skip on a laptop without PostgreSQL; fail loudly in CI, where it must be there."""
    if postgres_available():
        return
    if IN_CI:
        pytest.fail(f"PostgreSQL is required in CI but {PG_URL} is not reachable")
    pytest.skip(f"PostgreSQL not reachable at {PG_URL}")


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A URL to a fresh, empty schema in the test database, dropped afterwards."""
    require_postgres()
    with fresh_schema(PG_URL) as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return str(tmp_path / "store.db")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL for every backend; contract tests use this."""
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    yield s
    s.close()


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[Store]:
    """A store in a fresh schema of the test PostgreSQL database."""
    s = open_store(pg_url)
    yield s
    s.close()
