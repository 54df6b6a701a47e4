"""What this platform offers the runner, probed once per process: each Linux-only call
sits behind one flag here, and every flag has a portable fallback that works wherever
slotline does (Linux and macOS).

Each flag, where it holds, what it is for, and its fallback:
- `pidfd` (Linux 5.3+): wait for a keeper's exit on the event loop; else `kqueue_proc`,
  else polling.
- `kqueue_proc` (macOS, the BSDs): the same by `EVFILT_PROC`/`NOTE_EXIT`; else polling.
- `proc_fs` (Linux): a process's start time in one read of /proc/PID/stat, the node's
  open descriptors from /proc/self/fd; else psutil, and /dev/fd.
- `rlimit_as` (Linux, where `RLIMIT_AS` is enforced): the per-task memory cap; else none,
  and the run's log (and the node's) says so.
- `spawn_setsid` (glibc, musl, macOS 10.15+): `posix_spawn(setsid=True)` puts the keeper
  server in a session of its own; else a process group of its own.

`SLOTLINE_PORTABLE=1` (a testing and diagnostic switch, not a setting) turns every
Linux-only flag off, so the fallbacks run on Linux too: CI runs the runner's tests once
more with it (scripts/check).
"""

from __future__ import annotations

import logging
import os
import select
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from slotline.errors import InvalidInput

log = logging.getLogger("slotline.node")

PORTABLE_VARIABLE = "SLOTLINE_PORTABLE"
_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"", "0", "false", "no", "off"})


@dataclass(frozen=True, slots=True)
class Capabilities:
    """The platform facts the runner branches on (see the module's table)."""

    pidfd: bool
    kqueue_proc: bool
    proc_fs: bool
    rlimit_as: bool
    spawn_setsid: bool


# Nothing but what every supported platform has: what `SLOTLINE_PORTABLE=1` leaves on.
PORTABLE = Capabilities(
    pidfd=False, kqueue_proc=False, proc_fs=False, rlimit_as=False, spawn_setsid=False
)


def portable_requested(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether `SLOTLINE_PORTABLE` asks for the portable fallbacks only.

    Raises:
        InvalidInput: the variable holds something other than a yes or a no.
    """
    value = environ.get(PORTABLE_VARIABLE, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise InvalidInput(
        f"{PORTABLE_VARIABLE}={environ[PORTABLE_VARIABLE]!r}: give 1 (portable fallbacks "
        "only, for testing) or 0"
    )


def probe(portable: bool = False) -> Capabilities:
    """Ask the platform what it offers; with `portable`, the fallbacks only (kqueue is
    not Linux-only, but it is off too: 'portable' means the paths every platform has)."""
    if portable:
        return PORTABLE
    return Capabilities(
        pidfd=_has_pidfd(),
        kqueue_proc=hasattr(select, "kqueue") and hasattr(select, "KQ_FILTER_PROC"),
        proc_fs=os.path.exists("/proc/self/stat"),
        # macOS accepts RLIMIT_AS and ignores it: only Linux is known to enforce it.
        rlimit_as=sys.platform.startswith("linux"),
        spawn_setsid=_has_spawn_setsid(),
    )


def _has_pidfd() -> bool:
    try:
        fd = os.pidfd_open(os.getpid())
    except (AttributeError, OSError):  # absent (not Linux), or a kernel before 5.3
        return False
    os.close(fd)
    return True


def _has_spawn_setsid() -> bool:
    """CPython refuses `setsid` (NotImplementedError) before it spawns anything where the
    C library lacks POSIX_SPAWN_SETSID (macOS before 10.15): a program that does not
    exist tells it apart, at the cost of no process (or one that fails its exec)."""
    if not hasattr(os, "posix_spawn"):
        return False
    try:
        os.posix_spawn("/nonexistent/slotline-probe", ["slotline-probe"], {}, setsid=True)
    except NotImplementedError:
        return False
    except OSError:
        return True
    return True  # pragma: no cover - the program above never exists


CAPS = probe(portable_requested())


class ExitNotice(Protocol):
    """A descriptor that becomes readable when a process exits."""

    def fileno(self) -> int: ...

    def close(self) -> None: ...


class _Pidfd:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        os.close(self._fd)


def exit_notice(pid: int, caps: Capabilities = CAPS) -> ExitNotice | None:
    """A descriptor readable once `pid` has exited (a pidfd, or a kqueue watching it), to
    wait on with `loop.add_reader`; None where the platform has neither, or `pid` is
    gone already: the caller polls (`ProcessHandle.alive`)."""
    if caps.pidfd:
        try:
            return _Pidfd(os.pidfd_open(pid))
        except OSError:  # gone already
            return None
    # (mypy checks as Linux, which has no kqueue: the platform test keeps it quiet.)
    if caps.kqueue_proc and sys.platform != "linux":
        queue = select.kqueue()
        watch = select.kevent(
            pid,
            filter=select.KQ_FILTER_PROC,
            flags=select.KQ_EV_ADD | select.KQ_EV_ONESHOT,
            fflags=select.KQ_NOTE_EXIT,
        )
        try:
            queue.control([watch], 0, 0)
        except OSError:  # gone already (ESRCH)
            queue.close()
            return None
        return queue
    return None


def open_fds(caps: Capabilities = CAPS) -> list[int]:
    """This process's open file descriptors: from /proc, else /dev/fd (macOS, the BSDs),
    each checked open (listing the folder opened one more, closed by now); empty where
    neither lists them (the keeper closes what it inherited itself)."""
    folder = "/proc/self/fd" if caps.proc_fs else "/dev/fd"
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    fds = []
    for name in names:
        fd = int(name)
        try:
            os.fstat(fd)
        except OSError:
            continue
        fds.append(fd)
    return fds


def unenforced_cap(memory_mb: int, at_submit: bool = False) -> str:
    """What a run (or its submit, on a platform whose nodes cannot cap it) is told."""
    said = (
        f"memory cap of {memory_mb} MB not enforced: this platform ({sys.platform}) "
        "has no enforced RLIMIT_AS"
    )
    if not at_submit:
        return said
    return f"{said}: a node on this machine runs it uncapped (a node on Linux caps it)"


def memory_cap(memory_mb: int | None, log_path: Path, caps: Capabilities = CAPS) -> int:
    """The memory cap to enforce on a run, in MB (0: none). Where the platform cannot
    enforce one, a run that asked for it runs without, and says so: a line in its log
    (before its output) and a warning in the node's."""
    if not memory_mb:
        return 0
    if caps.rlimit_as:
        return memory_mb
    note = f"[slotline: {unenforced_cap(memory_mb)}]\n"
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # as the keeper
    try:
        os.write(fd, note.encode())
    finally:
        os.close(fd)
    log.warning(note.strip("[]\n"), extra={"log": str(log_path)})
    return 0
