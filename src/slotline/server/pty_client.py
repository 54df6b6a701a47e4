"""A tmux client in a pseudo-terminal of its own (`Client`): what the live terminal's
WebSocket (`server/terminal.py`) carries bytes to and from. Reading and writing wait on
the event loop, never on a thread; closing it ends this client only, never the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import signal
import struct
import sys
import termios
from dataclasses import dataclass

from slotline.runner.tmux import tmux_env

CHUNK = 64 * 1024
# How long a tmux client that was asked to leave (SIGTERM) may take before it is killed.
CLIENT_GRACE = 2.0


@dataclass
class Client:
    """One tmux client in a pseudo-terminal of its own: its process and the master side."""

    process: asyncio.subprocess.Process
    master: int

    @classmethod
    async def start(cls, argv: list[str], cols: int, rows: int) -> Client:
        """Start `argv` (a tmux attach) on a new pseudo-terminal of `cols` by `rows`.

        Raises:
            OSError: no pseudo-terminal, or tmux cannot be started.
        """
        master, slave = os.openpty()
        try:
            set_size(master, cols, rows)
            os.set_blocking(master, False)
            # Its own session, with the pseudo-terminal as its controlling terminal (the
            # `-c` step below), as a shell's tmux has: a resize then reaches it as the
            # kernel's SIGWINCH. TERM says what xterm.js understands.
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-S", "-c", _CONTROLLING, *argv,
                stdin=slave, stdout=slave, stderr=slave,
                start_new_session=True, env={**tmux_env(), "TERM": "xterm-256color"},
            )  # fmt: skip
        except BaseException:
            os.close(master)
            raise
        finally:
            # Only the client keeps the slave side open: once it exits, reading the
            # master fails (EIO), which is how the bridge learns the client is gone.
            os.close(slave)
        return cls(process, master)

    async def read(self) -> bytes:
        """The next bytes the client wrote; b"" once it has exited. One read waits at a
        time, and the socket's send is awaited before the next: a slow browser slows the
        client down (tmux copes with a slow client) instead of piling bytes up here."""
        while True:
            await _ready(self.master, write=False)
            try:
                return os.read(self.master, CHUNK)
            except BlockingIOError:
                continue
            except OSError as exc:  # EIO: the slave side is closed, the client has exited
                if exc.errno == errno.EIO:
                    return b""
                raise

    async def write(self, data: bytes) -> None:
        """Type `data` into the client, waiting while the pseudo-terminal is full."""
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.master, view) :]
            except BlockingIOError:
                await _ready(self.master, write=True)

    def resize(self, cols: int, rows: int) -> None:
        set_size(self.master, cols, rows)

    async def close(self) -> None:
        """End the client (TERM, then KILL after `CLIENT_GRACE`) and the pseudo-terminal.
        Only the client: the run and its tmux session go on."""
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), CLIENT_GRACE)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
                await self.process.wait()
        os.close(self.master)


async def _ready(fd: int, write: bool) -> None:
    """Wait until `fd` can be read (or written) without blocking."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    if write:
        loop.add_writer(fd, wake)
    else:
        loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        if write:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


# Run by the client's first process: take the pseudo-terminal (its stdin) as the
# controlling terminal of the new session, then become tmux.
_CONTROLLING = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


def set_size(fd: int, cols: int, rows: int) -> None:
    """Size the pseudo-terminal `fd`; its foreground process gets SIGWINCH."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
