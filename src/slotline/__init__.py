"""slotline: an agent task queue with concurrency control.

The Python API (`App`, `Queue`, `open`, `Node`, `TaskSpec`) is imported on first use, so
that a command of the CLI that needs none of it (`slotline status`) does not pay for it.
"""

from __future__ import annotations

import importlib
import typing

from slotline.errors import (
    AmbiguousId,
    BoundExceeded,
    DependencyCycle,
    InvalidInput,
    InvalidTransition,
    MergeConflict,
    NotFound,
    SchemaTooNew,
    SlotlineError,
    StaleAttempt,
    StoreError,
    TaskFailed,
    UnknownDependency,
)
from slotline.models import Attempt, Event, Priority, Status, Task

if typing.TYPE_CHECKING:
    from slotline.api.app import App, TaskHandle
    from slotline.api.queue import Queue, open_queue
    from slotline.api.sync import SyncQueue, open
    from slotline.api.unserved import UnservedWarning
    from slotline.node.node import Node
    from slotline.scheduler.cron import Schedule
    from slotline.spec import TaskSpec

__version__ = "0.1.0"

# The exports that are imported when first used: name -> module.
_LAZY = {
    "App": "slotline.api.app",
    "Node": "slotline.node.node",
    "Queue": "slotline.api.queue",
    "Schedule": "slotline.scheduler.cron",
    "SyncQueue": "slotline.api.sync",
    "TaskHandle": "slotline.api.app",
    "TaskSpec": "slotline.spec",
    "UnservedWarning": "slotline.api.unserved",
    "open": "slotline.api.sync",
    "open_queue": "slotline.api.queue",
}


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'slotline' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AmbiguousId",
    "App",
    "Attempt",
    "BoundExceeded",
    "DependencyCycle",
    "Event",
    "InvalidInput",
    "InvalidTransition",
    "MergeConflict",
    "Node",
    "NotFound",
    "Priority",
    "Queue",
    "Schedule",
    "SchemaTooNew",
    "SlotlineError",
    "StaleAttempt",
    "Status",
    "StoreError",
    "SyncQueue",
    "Task",
    "TaskFailed",
    "TaskHandle",
    "TaskSpec",
    "UnknownDependency",
    "UnservedWarning",
    "__version__",
    "open",
    "open_queue",
]
