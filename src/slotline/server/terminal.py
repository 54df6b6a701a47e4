"""The live terminal of an interactive run, over a WebSocket: what the dashboard's task page
shows with xterm.js.

`/api/tasks/{task_id}/terminal` attaches a tmux client to the run's session (the one
`N.tmux` names beside its log, `slotline.runner.tmux`) in a pseudo-terminal of its
own, and carries bytes both ways: binary frames are the terminal's bytes, out and in; a
text frame `{"resize": [cols, rows]}` sizes the pseudo-terminal, so tmux redraws the run
at the browser's size. The server's first text frame, `{"attached": {"read_only": …}}`,
says whether the caller's typing reaches the run: it does for those who may steer the
task (`Principal.steers`: its owner, admins), who attach a normal client; anyone else
who may see the task attaches read-only (`attach -r`), and their input frames are dropped.

A refusal is a close with a code and a reason the page shows: 1008 for a token refused,
4404 for a task the caller cannot see, 4409 for a task without a terminal here (not
interactive, not running, or run by a node of another machine), 1013 while `MAX_OPEN`
terminals are open in the process (each holds a pseudo-terminal and a tmux client,
released on every way out). Closing the socket ends
only this tmux client: the run goes on, as when a person detaches. When the run ends its
session ends, the client exits, and the socket closes with 1000 and "the run ended"; a
client detached from within (C-b d) closes it with 4000, the run going on.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import logging
import os
import signal
import struct
import sys
import termios
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, HTTPException, WebSocket, WebSocketDisconnect

from slotline.errors import InvalidTransition, SlotlineError
from slotline.models import Status, Task
from slotline.runner.terminal_input import NoSlot, retake
from slotline.runner.tmux import Terminal, TerminalError, tmux_env
from slotline.server.access import AccessWatch
from slotline.server.context import (
    SUBPROTOCOL,
    ServerState,
    authenticate,
    presented_token,
    server_state,
)
from slotline.server.hub import WS_REFUSED

log = logging.getLogger("slotline.server.terminal")

router = APIRouter(tags=["tasks"])

CLOSE_ENDED = 1000  # the run ended (its session is gone)
CLOSE_STOPPING = 1001  # the server is stopping
CLOSE_FAILED = 1011  # tmux could not be started
CLOSE_NO_TASK = 4404  # no such task, or one the caller may not see
CLOSE_NO_TERMINAL = 4409  # the task has no terminal on this machine now
CLOSE_DETACHED = 4000  # the client was detached (C-b d, `detach-client`): the run goes on

CHUNK = 64 * 1024
# The size of the pseudo-terminal until the page says its own (`?cols=&rows=`, then
# resize frames); what a browser may ask for is bounded.
COLS, ROWS = 80, 24
MAX_SIDE = 1000
# How long a tmux client that was asked to leave (SIGTERM) may take before it is killed.
CLIENT_GRACE = 2.0
# Pseudo-terminals are a resource of the process (and of the machine: kernel.pty.max): at
# most this many terminals are open at once in this process; one more is refused (1013).
MAX_OPEN = 64
CLOSE_BUSY = 1013


class Refused(Exception):
    """The socket cannot be served: it is closed with `code` and this message."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code


def reason_text(text: str) -> str:
    """`text` cut to what a WebSocket close frame carries (123 bytes of UTF-8)."""
    data = text.encode()
    if len(data) <= 123:
        return text
    return data[:120].decode(errors="ignore") + "…"


async def find_terminal(
    state: ServerState, websocket: WebSocket, task_id: str
) -> tuple[Task, Terminal, bool]:
    """The task, its run's terminal, and whether the caller only watches.

    Raises:
        Refused: the token is refused, the task unknown or hidden, or it has no terminal
            here (not interactive, not running, another machine's run, already ended).
    """
    try:
        who = await authenticate(websocket)
    except HTTPException as exc:
        raise Refused(WS_REFUSED, str(exc.detail)) from exc
    try:
        task = await state.visible_task(who, task_id, estimate=False)
    except SlotlineError as exc:
        raise Refused(CLOSE_NO_TASK, str(exc)) from exc
    short = task.id[:8]
    if not task.interactive:
        raise Refused(
            CLOSE_NO_TERMINAL, f"task {short} is not interactive: it has no terminal; see its log"
        )
    attempt = next((a for a in task.attempts if a.id == task.current_attempt), None)
    if task.status is not Status.RUNNING or attempt is None or attempt.finished_at is not None:
        raise Refused(
            CLOSE_NO_TERMINAL,
            f"task {short} is {task.status.value}, not running: its terminal exists while it runs",
        )
    terminal = await asyncio.to_thread(Terminal.of, attempt.log_path)
    if terminal is None:
        raise Refused(
            CLOSE_NO_TERMINAL,
            f"task {short} runs on node {attempt.node_id}, whose terminal is not on this "
            f"server's machine: run `slotline attach {short}` there",
        )
    if not await asyncio.to_thread(terminal.alive):
        raise Refused(CLOSE_ENDED, "the run ended")
    return task, terminal, not who.steers(task)


def size_of(value: Any) -> tuple[int, int] | None:
    """(cols, rows) of a resize request `[cols, rows]`, each 1 to MAX_SIDE; else None."""
    if not isinstance(value, list) or len(value) != 2:
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in value):
        return None
    cols, rows = value
    return (cols, rows) if 0 < cols <= MAX_SIDE and 0 < rows <= MAX_SIDE else None


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


# The terminals open now (one object each), in every app of this process (`MAX_OPEN`).
OPEN: set[object] = set()


# Run by the client's first process: take the pseudo-terminal (its stdin) as the
# controlling terminal of the new session, then become tmux.
_CONTROLLING = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


def set_size(fd: int, cols: int, rows: int) -> None:
    """Size the pseudo-terminal `fd`; its foreground process gets SIGWINCH."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Gate:
    """What a run that gave its slot back while it waited for input (`release_while_idle`)
    needs before typed keys reach it: a slot again (`terminal.retake`). Looked up in the
    store at most every `EVERY` seconds while keys come."""

    EVERY = 0.5

    def __init__(self, state: ServerState, task: Task, terminal: Terminal) -> None:
        self.state, self.task, self.terminal = state, task, terminal
        self._looked = 0.0

    async def closed(self) -> str | None:
        """None when keys may go to the run (taking a slot for it first if it gave its
        back), else why not, in words."""
        loop = asyncio.get_running_loop()
        if loop.time() - self._looked < self.EVERY:
            return None
        self._looked = loop.time()
        task = await self.state.call(self.state.store.get, self.task.id)
        if task.slot_released is None:
            return None
        try:
            await asyncio.to_thread(retake, task, self.terminal, self.state.store)
        except NoSlot as exc:
            self._looked = 0.0  # look again at the next key
            return f"no slot is free to take back ({exc.limit}): what you type is dropped"
        except (TerminalError, InvalidTransition):
            return None  # it ended or moved on: tmux says so to the client
        return None


async def bridge(
    websocket: WebSocket, client: Client, read_only: bool, gate: Gate | None = None
) -> None:
    """Carry bytes between the socket and the client until either side ends."""

    async def out() -> None:
        while data := await client.read():
            await websocket.send_bytes(data)

    async def into() -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("bytes") is not None:
                if read_only:
                    continue
                closed = None if gate is None else await gate.closed()
                if closed is not None:
                    await websocket.send_bytes(f"\r\n[slotline: {closed}]\r\n".encode())
                    continue
                await client.write(message["bytes"])
            elif message.get("text") is not None:
                resize(client, message["text"])

    tasks = [asyncio.create_task(out()), asyncio.create_task(into())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        # A send to a socket the peer has closed fails: that ends the bridge as well.
        await asyncio.gather(*tasks, return_exceptions=True)


def resize(client: Client, text: str) -> None:
    """Apply a text frame `{"resize": [cols, rows]}`; anything else is ignored."""
    try:
        size = size_of(json.loads(text).get("resize"))
    except (ValueError, AttributeError):
        size = None
    if size is not None:
        client.resize(*size)


def _query_size(websocket: WebSocket) -> tuple[int, int]:
    try:
        asked = [int(websocket.query_params.get(name, default)) for name, default in (
            ("cols", COLS), ("rows", ROWS)
        )]  # fmt: skip
    except ValueError:
        return COLS, ROWS
    return size_of(asked) or (COLS, ROWS)


@router.websocket("/api/tasks/{task_id}/terminal")
async def terminal_ws(websocket: WebSocket, task_id: str) -> None:
    """The live terminal of an interactive running task (see the module): binary frames
    of terminal bytes both ways, `{"resize": [cols, rows]}` text frames in, one
    `{"attached": {"read_only": …}}` text frame out first. `?cols=&rows=` sizes it from
    the start. The token as for `/api/events/ws`."""
    state = server_state(websocket)
    offered = websocket.scope.get("subprotocols") or ()
    # Accepted before any refusal, so that the page reads the refusal's code and reason
    # (a WebSocket refused in its handshake tells a browser nothing).
    await websocket.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
    slot = object()  # this socket's place among the OPEN ones, taken before tmux starts
    try:
        try:
            task, terminal, read_only = await find_terminal(state, websocket, task_id)
            if len(OPEN) >= MAX_OPEN:
                raise Refused(
                    CLOSE_BUSY,
                    f"{MAX_OPEN} terminals are open on this server: close one, try again",
                )
            OPEN.add(slot)
            try:
                argv = terminal.attach_argv(read_only)
                client = await Client.start(argv, *_query_size(websocket))
            except (OSError, TerminalError) as exc:
                raise Refused(CLOSE_FAILED, f"cannot attach to the run's terminal: {exc}") from exc
        except Refused as refused:
            await _close(websocket, refused.code, str(refused))
            return
        try:
            code, reason = await attached(state, websocket, task, terminal, client, read_only)
        finally:
            await client.close()
    finally:
        OPEN.discard(slot)
    await _close(websocket, code, reason)


async def attached(
    state: ServerState,
    websocket: WebSocket,
    task: Task,
    terminal: Terminal,
    client: Client,
    read_only: bool,
) -> tuple[int, str]:
    """Bridge the socket and `client` until one ends, the token stops granting access or
    the server stops; the close code and reason that say which."""
    extra = {"task_id": task.id}
    log.info("terminal attached (read_only=%s)", read_only, extra=extra)
    code, reason = CLOSE_ENDED, "the run ended"
    try:
        await websocket.send_text(json.dumps({"attached": {"read_only": read_only}}))
    except WebSocketDisconnect:
        log.info("terminal detached: the page left at once", extra=extra)
        return code, reason
    lost = asyncio.Event()
    async with AccessWatch(state, presented_token(websocket), lambda _: lost.set()) as access:
        waits = {
            asyncio.create_task(
                bridge(websocket, client, read_only, Gate(state, task, terminal))
            ): "bridge",
            asyncio.create_task(lost.wait()): "access",
            asyncio.create_task(state.closing.wait()): "closing",
        }
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
    ended = {waits[t] for t in done}
    if "access" in ended:
        code, reason = WS_REFUSED, access.reason or "access ended"
    elif "closing" in ended:
        code, reason = CLOSE_STOPPING, "the server is stopping"
    elif await asyncio.to_thread(terminal.alive):
        # The client left while the run goes on: someone detached it (C-b d).
        code, reason = CLOSE_DETACHED, "detached: the run goes on"
    log.info("terminal detached: %s", reason, extra=extra)
    return code, reason


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    """Close with `code` and `reason`, unless the peer has gone already."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(websocket.close(code, reason_text(reason)), 5.0)
