"""A stop request: someone asked a running attempt to stop, and how its task ends once
the process is gone (by the verb of `transitions.TRANSITIONS` the request names)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from slotline.errors import InvalidInput


class StopKind(enum.StrEnum):
    """Why a running attempt is asked to stop; its task then ends by the verb of that name
    in TRANSITIONS ("restart" by "restart_running")."""

    CANCEL = "cancel"
    TERMINATE = "terminate"
    RESTART = "restart"


_STOP_OUTCOMES = {
    StopKind.CANCEL: "cancelled",
    StopKind.TERMINATE: "terminated",
    StopKind.RESTART: "restarted",
}


@dataclass(frozen=True, slots=True)
class StopRequest:
    """Someone asked a running attempt to stop: how its task ends once the process is gone.

    Stored (and shown over HTTP as `stop_requested`) as "cancel", "restart" or
    "terminate:REASON"; `str()` gives that form and `parse` reads it.
    """

    kind: StopKind
    reason: str | None = None  # terminate's, shown in the task's failure reason

    @classmethod
    def parse(cls, text: str | None) -> StopRequest | None:
        """The request stored as `text`, or None for none."""
        return None if text is None else cls.read(text)

    @classmethod
    def read(cls, text: str) -> StopRequest:
        kind, _, reason = text.partition(":")
        try:
            stop = StopKind(kind)
        except ValueError:
            raise InvalidInput(f"unknown stop request {text!r}") from None
        return cls(stop, reason if stop is StopKind.TERMINATE else None)

    @classmethod
    def terminate(cls, reason: str) -> StopRequest:
        return cls(StopKind.TERMINATE, reason)

    def __str__(self) -> str:
        if self.kind is StopKind.TERMINATE:
            return f"{self.kind}:{self.reason or ''}"
        return str(self.kind)

    @property
    def verb(self) -> str:
        """The TRANSITIONS verb that ends the run's task."""
        return "restart_running" if self.kind is StopKind.RESTART else str(self.kind)

    @property
    def outcome(self) -> str:
        """The attempt's outcome: cancelled, terminated or restarted."""
        return _STOP_OUTCOMES[self.kind]

    @property
    def stop_reason(self) -> str:
        """Why the run stopped, in words: "cancelled", "terminated: REASON", "restarted"."""
        if self.kind is StopKind.TERMINATE:
            return f"terminated: {self.reason}"
        return self.outcome


CANCEL = StopRequest(StopKind.CANCEL)
RESTART = StopRequest(StopKind.RESTART)
