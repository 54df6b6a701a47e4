"""A rate limit is exact across nodes: several nodes (each its own store connection, in
its own thread) claim at the same instants; no window ever holds more starts than the
rate allows, because each claim counts and records them under the store's write lock."""

from __future__ import annotations

import threading
from contextlib import closing

from slotline.clock import utcnow
from slotline.store import open_store

NODES = 4
STEPS = 8
STEP = 0.5  # seconds between the instants the nodes claim at
MAX_STARTS, PERIOD = 3, 2.0


def test_nodes_claiming_at_once_never_exceed_a_rate(store_url: str) -> None:
    # Given: a rate of 3 starts per 2 s on claude, room for everything else, a long line
    with closing(open_store(store_url)) as store:
        store.set_setting("max_concurrent", 1000)
        store.set_rate("agent", "claude", MAX_STARTS, PERIOD)
        store.submit_many([{"command": ["true"], "agent": "claude"} for _ in range(60)])
    start = float(int(utcnow()))
    barrier = threading.Barrier(NODES)
    starts: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def node(name: str) -> None:
        try:
            with closing(open_store(store_url)) as mine:
                for step in range(STEPS):
                    barrier.wait(timeout=60)  # every node claims at the same instant
                    now = start + step * STEP
                    claimed = mine.claim(name, now=now).claims
                    with lock:
                        starts.extend(c.attempt.started_at for c in claimed)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            barrier.abort()

    # When: four nodes claim at eight instants, half a second apart
    threads = [threading.Thread(target=node, args=(f"node-{i}",)) for i in range(NODES)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors

    # Then: every window of 2 s holds at most 3 starts, and the rate was used to the full
    starts.sort()
    for i, at in enumerate(starts):
        assert sum(1 for s in starts[i:] if s < at + PERIOD) <= MAX_STARTS, starts
    assert len(starts) == MAX_STARTS * 2  # instants 0-1.5 s and 2-3.5 s
