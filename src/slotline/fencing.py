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


class Fence:
    """A node's side: its fence file, renewed after each confirmed heartbeat, and the
    spec each of its keepers is given (`wrap.py`'s FENCE argument)."""

    def __init__(self, path: Path, lease: float) -> None:
        self.path = path
        self.lease = lease
        self.margin = margin(lease)

    def confirm(self, sent: float) -> None:
        """The store renewed this node's leases in a heartbeat sent at `sent`."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, f"{sent!r} {self.lease!r} {self.margin!r}\n".encode())
        finally:
            os.close(fd)
        os.replace(tmp, self.path)

    def spec(self, claimed: float) -> str:
        """The keeper's FENCE argument for a run claimed in a claim sent at `claimed`:
        when it must be stopped unless a later heartbeat renewed it, the margin, the file."""
        return f"{claimed + self.lease - self.margin!r}:{self.margin!r}:{self.path}"

    def lapsed(self, claimed: float) -> bool:
        """Whether a run claimed at `claimed` may no longer start (its keeper refuses)."""
        return clock() >= claimed + self.lease - self.margin
