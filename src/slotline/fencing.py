"""Self-fencing: a run stops before its lease can lapse, so no two copies of a task live.

On a store that other nodes share (PostgreSQL), a node that stops heartbeating (frozen,
cut off from the database, dead) has its runs reclaimed by another node once their lease
lapsed. The processes of those runs must be gone by then, whatever the node is doing, so
it is not the node that stops them but the keeper that holds each run (`runner/wrap.py`,
`runner/worker.py`), a process of its own that a frozen node does not freeze:

- the node writes its *fence file* after each heartbeat the store confirmed: when it
  sent that heartbeat (on `clock()`), its lease and the margin;
- a keeper counts from the last heartbeat sent after the keeper itself started (one sent
  earlier might not have renewed its run, claimed meanwhile) or else from its claim: at
  `lease - margin` past it, the keeper sends TERM to the run's process group, and KILL
  at `lease`. A keeper whose claim is already that old never starts its command;
- another node reclaims a run only once its lease lapsed by `margin` on the store's clock
  (`store/runs.py`), so the two never overlap while the keeper gets the CPU within the
  margin.

Times are on the boot clock (CLOCK_BOOTTIME on Linux, CLOCK_MONOTONIC on macOS, which both
count a suspended machine's sleep): the wall clock may jump, and the node and its keepers
are on one machine. What is and is not promised: docs/architecture.md, "Fencing".
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path

_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


def clock() -> float:
    """Seconds on the boot clock: the one the node and its keepers share."""
    return time.clock_gettime(_CLOCK)


def margin(lease: float) -> float:
    """How long before its lease lapses a run is stopped (TERM; KILL at the lease), and
    how long after it another node may reclaim it: a sixth of the lease, 0.5 to 5 s."""
    return min(5.0, max(0.5, lease / 6))


def fence_file(folder: Path, node_id: str) -> Path:
    """The fence file of node `node_id` in its log folder (made private if need be): a
    restarted node writes the one its re-adopted keepers read."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", node_id)[:64]
    digest = hashlib.sha256(node_id.encode()).hexdigest()[:8]
    return folder / f".fence-{safe}-{digest}"


# The fence file's one record, written in place at a fixed width: a full disk (no room
# for a new file to rename over it) must not keep a live node from confirming its beats.
RECORD = 80


class Fence:
    """A node's side: its fence file, renewed after each confirmed heartbeat, and the
    spec each of its keepers is given (`wrap.py`'s FENCE argument)."""

    def __init__(self, path: Path, lease: float) -> None:
        self.path = path.resolve()  # keepers read it from their run's workspace
        self.lease = lease
        self.margin = margin(lease)
        # The send time of the last heartbeat the store confirmed (None: none yet).
        self.last_sent: float | None = None
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        os.pwrite(self._fd, b" " * (RECORD - 1) + b"\n", 0)  # the record's room, at once

    def confirm(self, sent: float) -> None:
        """The store renewed every lease of this node's runs in a heartbeat sent at
        `sent`: keepers may count from it."""
        record = f"{sent!r} {self.lease!r} {self.margin!r}".ljust(RECORD - 1) + "\n"
        os.pwrite(self._fd, record.encode(), 0)
        self.last_sent = sent

    def deadline(self, claimed: float, committed: float) -> float:
        """When a run claimed in a claim sent at `claimed` (and committed by `committed`)
        must be stopped, as things stand: only a heartbeat sent after the commit surely
        renewed it."""
        since = claimed
        if self.last_sent is not None and self.last_sent >= committed:
            since = max(since, self.last_sent)
        return since + self.lease - self.margin

    def spec(self, claimed: float, committed: float) -> str:
        """The keeper's FENCE argument for a run claimed at `claimed`, committed by
        `committed`: its deadline, the margin, the commit, the file."""
        return f"{self.deadline(claimed, committed)!r}:{self.margin!r}:{committed!r}:{self.path}"

    def lapsed(self, claimed: float, committed: float) -> bool:
        """Whether such a run may no longer start (its keeper would refuse)."""
        return clock() >= self.deadline(claimed, committed)

    def overdue(self) -> bool:
        """Whether this node's runs are past their deadline: no heartbeat confirmed for
        the lease less the margin (runs inside the node are then stopped by the node)."""
        return self.last_sent is not None and clock() >= self.last_sent + self.lease - self.margin

    def close(self) -> None:
        os.close(self._fd)
