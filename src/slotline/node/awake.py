"""Keeping the machine awake while a node has runs: a laptop that sleeps mid-run loses it.

The node holds an inhibitor from the moment its first run starts until its last one has
ended (and drops it when it stops): `caffeinate -i -w NODE_PID` on macOS, which also ends
with the node however it ends, and `systemd-inhibit --what=sleep … cat` on Linux, whose
`cat` reads a pipe from the node and so ends when the node does, even killed. Where the
tool is missing or refuses (no systemd login manager, as in a container), the node says
so once in its log and runs on without it. The `keep_awake` setting (on by default)
turns it off.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import IO

log = logging.getLogger("slotline.node")

WHY = "slotline: runs in progress"


def inhibitor_argv(platform: str = sys.platform, node_pid: int | None = None) -> list[str]:
    """The command that keeps this machine awake while it runs (an argv list, no shell)."""
    if platform == "darwin":
        # -i: no idle sleep; -w: only as long as the node lives.
        return ["caffeinate", "-i", "-w", str(node_pid or os.getpid())]
    return [
        "systemd-inhibit",
        "--what=sleep",
        "--who=slotline",
        f"--why={WHY}",
        "--mode=block",
        "cat",  # reads the node's pipe until the node closes it or dies
    ]


class KeepAwake:
    """Holds the inhibitor while `update` is told of runs; `release` drops it."""

    def __init__(self, enabled: bool, platform: str = sys.platform) -> None:
        self.enabled = enabled
        self.platform = platform
        self._process: subprocess.Popen[bytes] | None = None
        # What the tool says on stderr, in a file: a pipe could block its reader for ever
        # (a child of a killed tool holding the pipe's other end open).
        self._said: IO[bytes] | None = None
        # Set once the tool turned out missing or refusing: the node does not ask again.
        self._given_up = False

    @property
    def held(self) -> bool:
        return self._process is not None

    def wants_update(self, running: int) -> bool:
        """Whether `update(running)` would start or stop something (cheap: the node asks
        after each dispatch and hands only a change to a worker thread)."""
        if running == 0:
            return self._process is not None
        if self._process is not None:
            return self._process.poll() is not None
        return self.enabled and not self._given_up

    def update(self, running: int) -> None:
        """Hold the inhibitor while `running` > 0, drop it at 0 (blocking: it starts or
        stops a process; call it from a worker thread)."""
        if running == 0:
            self.release()
            return
        if not self.enabled or self._given_up:
            return
        if self._process is None:
            self._acquire()
        elif self._process.poll() is not None:  # it refused, or was ended
            self.release()

    def _acquire(self) -> None:
        argv = inhibitor_argv(self.platform)
        if shutil.which(argv[0]) is None:
            self._give_up(f"{argv[0]} not found")
            return
        said = tempfile.TemporaryFile()  # noqa: SIM115 (kept open while the tool runs)
        try:
            self._process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=said,
                # Its own process group: a Ctrl-C meant for the node is not for it, and
                # `release` ends it with what it started (`cat`).
                start_new_session=True,
            )
        except OSError as exc:
            said.close()
            self._give_up(f"{argv[0]}: {exc.strerror or exc}")
            return
        self._said = said
        log.info("keeping the machine awake while runs go on (%s)", argv[0])

    def _ended(self, process: subprocess.Popen[bytes]) -> str:
        said = b""
        if self._said is not None:
            with contextlib.suppress(OSError, ValueError):
                self._said.seek(0)
                said = self._said.read(500)
        reason = said.decode(errors="replace").strip() or f"exit code {process.returncode}"
        name = process.args[0] if isinstance(process.args, list) else process.args
        return f"{name!s} ended: {reason}"

    def _give_up(self, why: str) -> None:
        self._given_up = True
        log.warning("cannot keep the machine awake while runs go on (%s); it may sleep", why)

    def release(self) -> None:
        """Drop the inhibitor, if held (when the last run ends, and when the node stops)."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is not None:  # it refused (or was ended) while runs went on
            self._give_up(self._ended(process))
        with contextlib.suppress(OSError):
            if process.stdin is not None:
                process.stdin.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)  # the tool and its `cat`
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if self._said is not None:
            self._said.close()
            self._said = None
        if not self._given_up:
            log.info("the machine may sleep again: no run goes on")
