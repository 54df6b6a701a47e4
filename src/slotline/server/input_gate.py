"""The gate before typed keys reach an interactive run from the dashboard's terminal: a
run that gave its slot back while it waited for input takes one again first.
"""

from __future__ import annotations

import asyncio

from slotline.errors import InvalidTransition
from slotline.models import Task
from slotline.runner.terminal_input import NoSlot, retake
from slotline.runner.tmux import Terminal, TerminalError
from slotline.server.context import ServerState


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
