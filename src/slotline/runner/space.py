"""Whether a directory can still be written: a full disk (or a spent quota) is told apart
from other failures, so a run whose exit status could not be written is not recorded as
the agent's failure and `/readyz` says why the node cannot work."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger("slotline.node")

NO_SPACE = "no space left on device"
_FULL = (errno.ENOSPC, errno.EDQUOT)


def no_space(directory: Path) -> bool:
    """True when a byte cannot be written in `directory` for want of space: a real write
    of a probe file, removed at once (a statvfs figure says nothing of quotas, nor of the
    blocks ext4 keeps for root)."""
    probe = directory / f".slotline-space-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError as exc:
        return exc.errno in _FULL
    try:
        os.write(fd, b"\n")
    except OSError as exc:
        return exc.errno in _FULL
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)
    return False


def unwritable(directories: Iterable[Path]) -> str | None:
    """Why one of `directories` cannot be written for want of space, or None."""
    for directory in directories:
        if no_space(directory):
            return f"{NO_SPACE}: {directory} cannot be written"
    return None


class SpaceWatch:
    """Holds a node's new starts while its log directory cannot be written for want of
    space: a run that ended so (`saw_full`) sets it, each dispatch re-probes, and the
    first byte written again clears it. Without it a run whose keeper cannot even start
    would be put back in line and claimed again at once, over and over."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.reason: str | None = None

    def saw_full(self) -> None:
        if self.reason is None:
            self.reason = f"{NO_SPACE}: {self.directory} cannot be written"
            log.warning("new starts wait until there is room: %s", self.reason)

    def holding(self) -> bool:
        """Whether new starts wait; probes the directory only while they do."""
        if self.reason is not None and not no_space(self.directory):
            log.info("%s can be written again: starts go on", self.directory)
            self.reason = None
        return self.reason is not None
