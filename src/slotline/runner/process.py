"""The process runner: argv, no shell, own session, cwd = workspace, output to a log file.

Each command runs under `wrap.py`, which writes the exit status to a file, so that the
outcome survives a restart of the node. A handle can also re-adopt a process started by an
earlier incarnation of the node, as long as the pid and its start time still match.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil

WRAP = str(Path(__file__).with_name("wrap.py"))
DEFAULT_LOG_MAX = 50 * 1024 * 1024


class SpawnError(Exception):
    """The command could not be started; the attempt fails with this reason."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a process ended: its exit code (negative: killed by that signal) and why."""

    exit_code: int | None
    reason: str | None = None


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


def process_start_time(pid: int) -> float | None:
    """The start time of `pid` (to tell it apart from a later process with the same pid)."""
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def read_exit_file(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


class ProcessHandle:
    """A running command (started here or by an earlier node): wait, signal, stop."""

    def __init__(
        self,
        pid: int,
        pid_started: float | None,
        log_path: Path,
        exit_path: Path,
        child: bool = False,
    ) -> None:
        self.pid = pid
        self.pid_started = pid_started
        self.log_path = log_path
        self.exit_path = exit_path
        self.child = child
        self.stop_reason: str | None = None

    @classmethod
    def adopt(cls, pid: int, pid_started: float, log_path: Path, exit_path: Path) -> ProcessHandle:
        """Take over a process started by an earlier node (it is not our child)."""
        return cls(pid, pid_started, log_path, exit_path)

    def alive(self) -> bool:
        """True while the keeper runs (same pid and start time, not a zombie)."""
        started = process_start_time(self.pid)
        if started is None or self.pid_started is None:
            return False
        if abs(started - self.pid_started) >= 1.0:
            return False
        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    async def wait(self) -> Outcome:
        """Wait until the keeper exits, then report the command's exit status."""
        await self._exited()
        # Kill what the command left in its group while the keeper is still an unreaped
        # zombie: it holds the group id, so the signal cannot reach a stranger's group.
        self._reap_group()
        keeper_code = None
        if self.child:
            with contextlib.suppress(ChildProcessError):
                _, status = os.waitpid(self.pid, 0)
                keeper_code = os.waitstatus_to_exitcode(status)
        code = read_exit_file(self.exit_path)
        if code is None and keeper_code is not None and keeper_code < 0:
            code = keeper_code  # the keeper itself was killed (SIGKILL to the group)
        reason = self.stop_reason or describe_exit(code)
        return Outcome(code, reason)

    async def _exited(self) -> None:
        try:
            fd = os.pidfd_open(self.pid)
        except OSError:
            fd = None
        if fd is None:  # no pidfd (old kernel, or already gone): poll
            while self.alive():
                await asyncio.sleep(0.2)
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def exited() -> None:
            if not done.done():
                done.set_result(None)

        loop.add_reader(fd, exited)
        try:
            if self.child or self.alive():
                await done
        finally:
            loop.remove_reader(fd)
            os.close(fd)

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
) -> ProcessHandle:
    """Start `argv` under the exit-code keeper in a new session, output to `log_path`.

    Raises:
        SpawnError: the workspace does not exist or the program cannot be found.
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
    log_path.parent.mkdir(parents=True, exist_ok=True)
    exit_path = log_path.with_suffix(".exit")
    exit_path.unlink(missing_ok=True)
    keeper = [
        sys.executable,
        "-I",
        "-S",
        WRAP,
        str(exit_path),
        str(memory_mb or 0),
        cwd or "",
        str(log_max_bytes),
        "--",
        *argv,
    ]
    # posix_spawn, not asyncio's subprocess: the node must be able to stop watching and
    # exit while the command runs on, to be re-adopted by the next node.
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(log_path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    try:
        # posix_spawn waits for the keeper's exec (a few ms): keep that off the loop thread.
        pid = await asyncio.to_thread(
            os.posix_spawn, sys.executable, keeper, env, file_actions=actions, setsid=True
        )
    except OSError as exc:
        raise SpawnError(f"cannot start {program}: {exc.strerror or exc}") from exc
    return ProcessHandle(pid, process_start_time(pid), log_path, exit_path, child=True)
