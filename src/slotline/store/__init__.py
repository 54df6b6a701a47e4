"""Storage: one interface of domain verbs, an SQLite and a PostgreSQL backend.

What the rest of slotline uses of the store is exported here, and only here. The names
are loaded when first used, so that a command that needs only `Settings` (the CLI talking
to a server) does not import the verbs and the SQL.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slotline.errors import InvalidInput

if TYPE_CHECKING:
    from slotline.limits import check_limit_max
    from slotline.line import unserved_reason
    from slotline.models import KillRequest
    from slotline.store.base import Store
    from slotline.store.bulk import BULK_CHUNK, BULK_VERBS, MAX_BULK, BulkResult
    from slotline.store.claim import ClaimResult
    from slotline.store.core import Watcher
    from slotline.store.followups import Followup
    from slotline.store.reads import Line, QueueStatus
    from slotline.store.runs import Report, StartReport
    from slotline.store.schedules import Fired, FireResult
    from slotline.store.serving import PublishedConfig
    from slotline.store.settings import (
        LEASE_SECONDS,
        NONE_MEANS_NO_BOUND,
        SETTING_RULES,
        Settings,
        SettingsChange,
        check_setting,
    )
    from slotline.store.starts import Claim
    from slotline.store.webhooks import Delivery

# Each exported name, and the module that defines it.
_HOMES = {
    "KillRequest": "slotline.models",
    "Store": "slotline.store.base",
    "BULK_CHUNK": "slotline.store.bulk",
    "BULK_VERBS": "slotline.store.bulk",
    "MAX_BULK": "slotline.store.bulk",
    "BulkResult": "slotline.store.bulk",
    "Claim": "slotline.store.starts",
    "ClaimResult": "slotline.store.claim",
    "Watcher": "slotline.store.core",
    "Delivery": "slotline.store.webhooks",
    "Followup": "slotline.store.followups",
    "Line": "slotline.store.reads",
    "QueueStatus": "slotline.store.reads",
    "Report": "slotline.store.runs",
    "StartReport": "slotline.store.runs",
    "FireResult": "slotline.store.schedules",
    "Fired": "slotline.store.schedules",
    "PublishedConfig": "slotline.store.serving",
    "unserved_reason": "slotline.line",
    "LEASE_SECONDS": "slotline.store.settings",
    "NONE_MEANS_NO_BOUND": "slotline.store.settings",
    "SETTING_RULES": "slotline.store.settings",
    "Settings": "slotline.store.settings",
    "SettingsChange": "slotline.store.settings",
    "check_limit_max": "slotline.limits",
    "check_setting": "slotline.store.settings",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


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
    "BULK_CHUNK",
    "BULK_VERBS",
    "LEASE_SECONDS",
    "MAX_BULK",
    "NONE_MEANS_NO_BOUND",
    "SETTING_RULES",
    "BulkResult",
    "Claim",
    "ClaimResult",
    "Delivery",
    "FireResult",
    "Fired",
    "Followup",
    "KillRequest",
    "Line",
    "PublishedConfig",
    "QueueStatus",
    "Report",
    "Settings",
    "SettingsChange",
    "StartReport",
    "Store",
    "Watcher",
    "check_limit_max",
    "check_setting",
    "open_store",
    "unserved_reason",
]
