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
import json
import logging
from typing import Any

from fastapi import APIRouter, HTTPException, WebSocket, WebSocketDisconnect

from slotline.errors import SlotlineError
from slotline.models import Status, Task
from slotline.runner.tmux import Terminal, TerminalError
from slotline.server.access import AccessWatch
from slotline.server.context import (
    SUBPROTOCOL,
    ServerState,
    authenticate,
    presented_token,
    server_state,
)
from slotline.server.hub import WS_REFUSED
from slotline.server.input_gate import Gate
from slotline.server.pty_client import Client

log = logging.getLogger("slotline.server.terminal")

router = APIRouter(tags=["tasks"])

CLOSE_ENDED = 1000  # the run ended (its session is gone)
CLOSE_STOPPING = 1001  # the server is stopping
CLOSE_FAILED = 1011  # tmux could not be started
CLOSE_NO_TASK = 4404  # no such task, or one the caller may not see
CLOSE_NO_TERMINAL = 4409  # the task has no terminal on this machine now
CLOSE_DETACHED = 4000  # the client was detached (C-b d, `detach-client`): the run goes on

# The size of the pseudo-terminal until the page says its own (`?cols=&rows=`, then
# resize frames); what a browser may ask for is bounded.
COLS, ROWS = 80, 24
MAX_SIDE = 1000
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


# The terminals open now (one object each), in every app of this process (`MAX_OPEN`).
OPEN: set[object] = set()


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
