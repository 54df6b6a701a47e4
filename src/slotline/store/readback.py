"""The answer to a committed write: the task read back as it is now (position, estimate),
or, when that read fails, the task as the write returned it, saying why it has no
estimate. The write stands either way, so its answer is never an error: a script that
retried a submit answered with one would run its agent twice."""

from __future__ import annotations

import logging
from collections.abc import Callable

from slotline.models import Task, copy_task

log = logging.getLogger("slotline")


def read_back(get: Callable[[str], Task], written: Task) -> Task:
    """`get(written.id)`, or `written` if that read fails, with `eta_unavailable` set
    when it is a task that has an estimate (running or in line). The reason it shows is
    short; what failed goes to the log only (a driver's error is not for every reader)."""
    try:
        return get(written.id)
    except Exception as exc:
        log.warning(
            "task %s: reading it back after the write failed: %r", written.id[:8], exc,
            exc_info=log.isEnabledFor(logging.DEBUG), extra={"task_id": written.id},
        )  # fmt: skip
        from slotline.store.estimates import IN_LINE  # the store's, when it is needed

        if written.status not in IN_LINE:
            return written
        return copy_task(written, eta_unavailable="reading the task back failed")
