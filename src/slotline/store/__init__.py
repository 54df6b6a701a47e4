"""Storage: one interface of domain verbs, an SQLite and a PostgreSQL backend."""

from __future__ import annotations

from pathlib import Path

from slotline.errors import InvalidInput
from slotline.models import KillRequest
from slotline.store.base import Line, QueueStatus, Store
from slotline.store.core import Watcher
from slotline.store.runs import Claim, ClaimResult, Report, StartReport


def open_store(url: str | Path | None = None) -> Store:
    """Open the store at `url`: `postgresql://…`, `sqlite:///path`, or a file path.

    None opens the default SQLite file under the XDG data directory.
    """
    from slotline.store.sqlite import SQLiteStore, default_path

    if url is None or url == "":
        return SQLiteStore(default_path())
    text = str(url)
    if text.startswith(("postgresql://", "postgres://")):
        from slotline.store.postgres import PostgresStore

        return PostgresStore(text)
    if text.startswith("sqlite://"):
        path = text.removeprefix("sqlite://")
        if not path.startswith("/"):
            raise InvalidInput(f"use sqlite:///ABSOLUTE/PATH or a plain file path, not {text!r}")
        return SQLiteStore(path)
    if "://" in text:
        raise InvalidInput(f"unknown store URL {text!r}; use a file path or postgresql://…")
    return SQLiteStore(text)


__all__ = [
    "Claim",
    "ClaimResult",
    "KillRequest",
    "Line",
    "QueueStatus",
    "Report",
    "StartReport",
    "Store",
    "Watcher",
    "open_store",
]
