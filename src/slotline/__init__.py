"""slotline: an agent task queue with concurrency control."""

from __future__ import annotations

from slotline.api import Queue, open_queue
from slotline.errors import (
    AmbiguousId,
    BoundExceeded,
    DependencyCycle,
    InvalidInput,
    InvalidTransition,
    NotFound,
    SchemaTooNew,
    SlotlineError,
    StaleAttempt,
    StoreError,
    UnknownDependency,
)
from slotline.models import Attempt, Event, Priority, Status, Task
from slotline.node import Node
from slotline.spec import TaskSpec

__version__ = "0.1.0"

__all__ = [
    "AmbiguousId",
    "Attempt",
    "BoundExceeded",
    "DependencyCycle",
    "Event",
    "InvalidInput",
    "InvalidTransition",
    "Node",
    "NotFound",
    "Priority",
    "Queue",
    "SchemaTooNew",
    "SlotlineError",
    "StaleAttempt",
    "Status",
    "StoreError",
    "Task",
    "TaskSpec",
    "UnknownDependency",
    "__version__",
    "open_queue",
]
