"""Private files of a node: attempt logs, pid and exit files, readable by its user only."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def private_dir(path: Path) -> Path:
    """Create `path` and its missing parents as 0700 folders; returns `path`.

    A folder that already exists keeps its mode (it may be a shared parent), except the
    leaf when this user owns it: an attempt's folder is never left readable by others.
    """
    try:
        path.mkdir(mode=DIR_MODE)  # the common case (a new attempt's folder): one call
    except FileExistsError:
        pass
    except FileNotFoundError:
        _make_parents(path.parent)
        with contextlib.suppress(FileExistsError):  # made by another process meanwhile
            path.mkdir(mode=DIR_MODE)
    else:
        return path  # made 0700 here (a umask can only take bits away)
    info = path.stat()
    if info.st_uid == os.getuid() and info.st_mode & 0o077:
        path.chmod(DIR_MODE)
    return path


def _make_parents(path: Path) -> None:
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made by another process meanwhile
            folder.mkdir(mode=DIR_MODE)


def append_private(path: Path, text: str) -> None:
    """Append `text` to `path`, created 0600 (in a 0700 folder) if it does not exist."""
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
    with os.fdopen(fd, "a") as handle:
        handle.write(text)


def output_tail(path: Path, size: int = 16 * 1024) -> str | None:
    """The last `size` bytes of a run's output as text (None if there is no log): what
    an agent type's back-off pattern is matched against. Past the log's cap, the last of
    it is in the keeper's `N.tail` beside `N.log`."""
    tail = path.with_suffix(".tail")
    try:
        with (tail if tail.exists() else path).open("rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - size))
            return log.read().decode("utf-8", errors="replace")
    except OSError:
        return None
