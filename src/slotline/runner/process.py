"""The process runner: argv, no shell, own session, cwd = workspace, output to a log file.

Each command runs under a keeper (`wrap.py`), which writes the exit status to a file, so
that the outcome survives a restart of the node. Keepers are forked by one keeper server
per node process (see `wrap.py`), so the node is not their parent: it waits on every
keeper as it does on one re-adopted after a restart, through its exit notice (a pidfd or a
kqueue, else polling: `capabilities.py`) and the exit file.
A handle can re-adopt a process started by an earlier incarnation of the node, as long as
the pid and its start time still match.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

import psutil

from slotline.runner.capabilities import CAPS, Capabilities, exit_notice, memory_cap
from slotline.runner.files import private_dir
from slotline.runner.keepers import KEEPERS
from slotline.runner.space import NO_SPACE, no_space
from slotline.runner.wrap import NOT_STARTED

DEFAULT_LOG_MAX = 50 * 1024 * 1024
# How long a node waits, once an interactive run's keeper has exited, for tmux to copy
# the run's last output to its log.
TEED_PATIENCE = 5.0


class SpawnError(Exception):
    """The command could not be started; the attempt fails with this reason."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a process ended: its exit code (negative: killed by that signal) and why."""

    exit_code: int | None
    reason: str | None = None
    # What a function returned, as JSON (function tasks only).
    result: str | None = None
    # Seconds before now the process ended, when it was found ended later (from its
    # exit file, by a node restarted after it); None: it ended just now.
    ended_ago: float | None = None
    # Put the task back in line, the attempt uncounted: how the run ended is unknown
    # through no fault of its own (a full disk kept its exit status from being written).
    requeue: bool = False
    # Stopped by its own keeper, its node's heartbeats unconfirmed (`slotline.fencing`).
    fenced: bool = False


def describe_exit(code: int | None) -> str | None:
    """A failure reason for an exit code, or None for success."""
    if code is None:
        return "the process ended without an exit status"
    if code == 0:
        return None
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    return f"exit code {code}"


def unknown_exit(exit_path: Path) -> Outcome:
    """The outcome of a run whose keeper left no exit status: on a full disk the status
    could not be written (the run goes back in line, no failure of its agent), else the
    keeper was killed."""
    if no_space(exit_path.parent):
        return Outcome(None, f"{NO_SPACE}: the exit status could not be written", requeue=True)
    return Outcome(None, describe_exit(None))


def process_start_time(pid: int) -> float | None:
    """The start time of `pid` (to tell it apart from a later process with the same pid)."""
    found = _process_state(pid)
    return None if found is None else found[0]


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if CAPS.proc_fs else 100


@functools.cache
def _boot_time() -> float:
    return psutil.boot_time()


def _process_state(pid: int, caps: Capabilities = CAPS) -> tuple[float, bool] | None:
    """(start time, whether it is a zombie) of `pid`, or None if there is no such process.

    With /proc one read of /proc/PID/stat, computed as psutil's `create_time` (the boot
    time read once per node process): a spawn, a stop and a wait each ask, and psutil reads
    two files per process object (the stat file and the boot time from /proc/stat)."""
    if not caps.proc_fs:
        try:
            process = psutil.Process(pid)
            return process.create_time(), process.status() == psutil.STATUS_ZOMBIE
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: fields after it.
    fields = data[data.rindex(b")") + 2 :].split()
    return int(fields[19]) / _CLOCK_TICKS + _boot_time(), fields[0] == b"Z"


def read_exit_status(exit_path: Path) -> int | None:
    """The exit status a keeper wrote: its exit file, or (on a disk that filled up during
    the run) the room it reserved at its start."""
    code = read_exit_file(exit_path)
    if code is None:
        code = read_exit_file(reserved_path(exit_path))
    return code


def reserved_path(exit_path: Path) -> Path:
    return exit_path.with_name(exit_path.name + ".reserved")


def read_exit_file(path: Path) -> int | None:
    try:
        fd = os.open(path, os.O_RDONLY)  # not `read_text`: no text layer for a few bytes
    except OSError:
        return None
    try:
        return int(os.read(fd, 64).strip())
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def read_fenced(log_path: Path) -> Outcome | None:
    """The outcome of a run its keeper fenced (`wrap.Fence`), if it did: one never
    started goes back in line uncounted."""
    try:
        reason = log_path.with_suffix(".fenced").read_text().strip() or "fenced"
    except OSError:
        return None
    return Outcome(None, reason, requeue=reason.endswith(NOT_STARTED), fenced=True)


def stale_claim() -> Outcome:
    """A run its node did not start, its claim being too old (`slotline.fencing`)."""
    return Outcome(
        None, f"fenced: its node confirmed no heartbeat for its lease; {NOT_STARTED}",
        requeue=True, fenced=True,
    )  # fmt: skip


# Why the node stopped a function run inside it (no keeper to) at its deadline.
IN_NODE_FENCED = (
    "fenced: its node confirmed no heartbeat for its lease; stopped so that another node "
    "may take the task"
)


class ProcessHandle:
    """A running command (started here or by an earlier node): wait, signal, stop."""

    def __init__(
        self,
        pid: int,
        pid_started: float | None,
        log_path: Path,
        exit_path: Path,
        teed: Path | None = None,
    ) -> None:
        self.pid = pid
        self.pid_started = pid_started
        self.log_path = log_path
        self.exit_path = exit_path
        # An interactive run's (`terminal.py`): the file that says its whole output has
        # reached the log, which tmux copies there after the keeper has exited.
        self.teed = teed
        self.stop_reason: str | None = None

    @classmethod
    def adopt(cls, pid: int, pid_started: float, log_path: Path, exit_path: Path) -> ProcessHandle:
        """Take over a process started by an earlier node (an interactive run's too: its
        terminal's file `N.tmux` is beside its log)."""
        interactive = log_path.with_suffix(".tmux").exists()
        teed = log_path.with_suffix(".teed") if interactive else None
        return cls(pid, pid_started, log_path, exit_path, teed)

    def alive(self, caps: Capabilities = CAPS) -> bool:
        """True while the keeper runs (same pid and start time, not a zombie)."""
        found = _process_state(self.pid, caps)
        if found is None or self.pid_started is None:
            return False
        started, zombie = found
        return abs(started - self.pid_started) < 1.0 and not zombie

    async def wait(self, caps: Capabilities = CAPS) -> Outcome:
        """Wait until the keeper exits, then report the command's exit status."""
        await self._exited(caps)
        if self.teed is not None:
            await self._teed()
            # Its environment file, which its keeper removes once read; one a keeper
            # that died first left behind must not keep the run's keys on disk.
            self.log_path.with_suffix(".env").unlink(missing_ok=True)
        # Kill what the command left in its group. While any of it runs, the group id
        # (the keeper's pid) stays taken, so the signal cannot reach a stranger's group.
        self._reap_group()
        fenced = read_fenced(self.log_path)
        if fenced is not None:  # its keeper stopped it: the code is of that stop
            return fenced
        code = read_exit_status(self.exit_path)
        if code is None and self.stop_reason is None:
            return unknown_exit(self.exit_path)
        return Outcome(code, self.stop_reason or describe_exit(code))

    async def _teed(self, patience: float = TEED_PATIENCE) -> None:
        """Wait until tmux has copied the run's last output to its log (its pane closes
        once the keeper exits), for at most `patience` seconds: the end of the log is
        where what the run spent is read."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + patience
        while not self.teed_done() and loop.time() < deadline:
            await asyncio.sleep(0.02)

    def teed_done(self) -> bool:
        return self.teed is None or self.teed.exists()

    async def _exited(self, caps: Capabilities) -> None:
        notice = exit_notice(self.pid, caps)
        if notice is None:  # neither a pidfd nor a kqueue (or already gone): poll
            while self.alive(caps):
                await asyncio.sleep(0.2)
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def exited() -> None:
            if not done.done():
                done.set_result(None)

        loop.add_reader(notice.fileno(), exited)
        try:
            if self.alive(caps):
                await done
        finally:
            loop.remove_reader(notice.fileno())
            notice.close()

    def signal_group(self, sig: signal.Signals) -> bool:
        """Send `sig` to the whole process group; False if it is already gone."""
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def _reap_group(self) -> None:
        # Children the command left behind in its group go with it: the slot frees only
        # when nothing of the attempt is left running.
        self.signal_group(signal.SIGKILL)

    async def stop(self, reason: str, grace: float) -> None:
        """TERM to the process group, KILL after `grace` seconds if it is still there."""
        if self.stop_reason is None:
            self.stop_reason = reason
        if not self.signal_group(signal.SIGTERM):
            return
        deadline = asyncio.get_running_loop().time() + grace
        while asyncio.get_running_loop().time() < deadline:
            if not self.alive():
                return
            await asyncio.sleep(0.05)
        self.signal_group(signal.SIGKILL)


async def spawn(
    argv: list[str],
    cwd: str | None,
    env: dict[str, str],
    log_path: Path,
    memory_mb: int | None = None,
    log_max_bytes: int = DEFAULT_LOG_MAX,
    fence: str = "",
) -> ProcessHandle:
    """Start `argv` under the exit-code keeper in a new session, output to `log_path`;
    `fence` is the keeper's FENCE argument (`slotline.fencing.Fence.spec`), if any.

    Raises:
        SpawnError: the workspace does not exist or the program cannot be found.
    """
    exit_path = log_path.with_suffix(".exit")
    keeper = [str(exit_path), cwd or "", str(log_max_bytes), fence, "--", *argv]
    # The checks, the log folder and the keeper server's answer (after its fork, about a
    # millisecond) are file system calls and waits: all off the loop thread, in one hop.
    pid, started = await asyncio.to_thread(_start, argv, cwd, env, log_path, keeper, memory_mb)
    return ProcessHandle(pid, started, log_path, exit_path)


def check_program(argv: list[str], cwd: str | None, env: dict[str, str]) -> None:
    """Refuse a run whose workspace or program is not there, before anything starts.

    Raises:
        SpawnError: which of the two is missing.
    """
    if cwd is not None and not os.path.isdir(cwd):
        raise SpawnError(f"workspace {cwd} does not exist")
    program = argv[0]
    search = env.get("PATH", os.defpath)
    if os.sep in program:
        resolved = program if os.path.isabs(program) else os.path.join(cwd or ".", program)
        if not (os.path.isfile(resolved) and os.access(resolved, os.X_OK)):
            raise SpawnError(f"command not found or not executable: {program}")
    elif shutil.which(program, path=search) is None:
        raise SpawnError(f"command not found: {program}")


def clear_earlier(log_path: Path) -> None:
    """Remove what an earlier run of the same log left beside it."""
    log_path.with_suffix(".exit").unlink(missing_ok=True)  # its exit file
    reserved_path(log_path.with_suffix(".exit")).unlink(missing_ok=True)
    log_path.with_suffix(".tail").unlink(missing_ok=True)  # its output past the cap
    log_path.with_suffix(".fenced").unlink(missing_ok=True)  # why it was fenced


def _start(
    argv: list[str],
    cwd: str | None,
    env: dict[str, str],
    log_path: Path,
    keeper: list[str],
    memory_mb: int | None,
) -> tuple[int, float | None]:
    """`spawn`'s blocking part: the keeper's pid and start time."""
    check_program(argv, cwd, env)
    private_dir(log_path.parent)
    clear_earlier(log_path)
    keeper.insert(1, str(memory_cap(memory_mb, log_path)))
    try:
        pid = KEEPERS.start_keeper(keeper, env, log_path)
    except OSError as exc:
        raise SpawnError(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc
    return pid, process_start_time(pid)
