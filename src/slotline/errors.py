"""The one exception tree of slotline.

SlotlineError
├── InvalidInput            bad arguments (HTTP 422)
│   ├── UnknownDependency   a depends_on id that does not exist
│   └── DependencyCycle     an edge that would close a cycle
├── NotFound                no task (or attempt) with that id or prefix (HTTP 404)
├── AmbiguousId             a prefix that matches several tasks (HTTP 422)
├── InvalidTransition       the verb does not apply to the task's state (HTTP 409)
│   └── MergeConflict       a run's branch does not merge cleanly (names the files)
├── StaleAttempt            a report from an attempt that is no longer current (HTTP 409)
├── TaskFailed              a task whose result was asked for did not succeed
├── BoundExceeded           queue size, depth or children bound reached (HTTP 429)
├── AccessDenied            the server refused the token, or its role the verb
└── StoreError              the store cannot be used
    ├── SchemaTooNew        the database was written by a newer slotline
    └── ServerUnavailable   the server cannot be reached, or failed to answer
"""

from __future__ import annotations

from typing import Any


class SlotlineError(Exception):
    """Root of every error slotline raises on purpose."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def __str__(self) -> str:
        return self.message


class InvalidInput(SlotlineError):
    """An argument is malformed or out of range."""


class UnknownDependency(InvalidInput):
    """A `depends_on` id names no task."""


class DependencyCycle(InvalidInput):
    """Adding the dependency would make a task wait on itself."""


class NotFound(SlotlineError):
    """No task or attempt has that id."""


class AmbiguousId(SlotlineError):
    """An id prefix matches more than one task."""


class InvalidTransition(SlotlineError):
    """The requested change is not legal from the task's current state."""


class MergeConflict(InvalidTransition):
    """A run's branch conflicts with the merge target; `details["files"]` names the
    conflicting files. Nothing was changed."""


class StaleAttempt(SlotlineError):
    """A report names an attempt that is not the task's live attempt, or a wrong token."""


class TaskFailed(SlotlineError):
    """The task whose result was asked for failed, was cancelled or expired."""


class BoundExceeded(SlotlineError):
    """A spawn or queue bound would be exceeded; nothing was created."""


class StoreError(SlotlineError):
    """The store cannot be opened or used."""


class SchemaTooNew(StoreError):
    """The database schema is newer than this version of slotline knows."""


class AccessDenied(SlotlineError):
    """The server refused the token (401) or its role does not allow the verb (403)."""


class ServerUnavailable(StoreError):
    """The server cannot be reached, or failed to answer."""
