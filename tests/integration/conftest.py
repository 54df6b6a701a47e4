"""Fixtures of the tests that run real nodes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodes import Nodes


@pytest.fixture
def nodes(pg_url: str, tmp_path: Path) -> Iterator[Nodes]:
    """Nodes on a fresh PostgreSQL schema (lease 4 s unless a test sets `nodes.lease`),
    all stopped at the end."""
    started = Nodes(pg_url, tmp_path)
    yield started
    started.stop_all()
