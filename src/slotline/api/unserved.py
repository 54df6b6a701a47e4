"""A function task that no live node serves is submitted all the same, with a warning;
a `SyncQueue` runs the coroutine in a thread of its own, so the warning is handed back
and given in the caller's thread (`api/sync.py`)."""

from __future__ import annotations

import contextvars
import warnings


class UnservedWarning(UserWarning):
    """A function task was submitted that no live node serves: it waits until one does."""


# Warnings of a coroutine run for a `SyncQueue` caller, which it gives in its own thread
# (set by `api.sync`); None: give them at once.
DEFERRED_WARNINGS: contextvars.ContextVar[list[Warning] | None] = contextvars.ContextVar(
    "slotline_deferred_warnings", default=None
)


def warn(warning: Warning) -> None:
    """Give `warning` at the line that awaited the verb, or to the SyncQueue caller."""
    deferred = DEFERRED_WARNINGS.get()
    if deferred is None:
        warnings.warn(warning, stacklevel=3)  # at the line that awaited the verb
    else:
        deferred.append(warning)
