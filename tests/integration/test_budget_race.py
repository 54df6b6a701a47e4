"""A budget is exact across nodes: several nodes (each its own store connection, in its
own thread) claim and finish runs at once on the store's own clock; no run starts after
the runs finished before it (in commit order) reached the budget, because each claim
reads the spend under the store's write lock and each finish writes it under the same."""

from __future__ import annotations

import threading
from contextlib import closing

from slotline.models import Usage
from slotline.store import open_store

NODES = 4
ROUNDS = 8
BUDGET, PERIOD = 3.0, 3600.0


def test_nodes_claiming_and_finishing_at_once_never_start_past_a_budget(store_url: str) -> None:
    # Given: claude may spend $3 an hour; each run costs $1; a long line
    with closing(open_store(store_url)) as store:
        store.set_setting("max_concurrent", 1000)
        store.set_budget("agent", "claude", BUDGET, PERIOD)
        store.submit_many([{"command": ["true"], "agent": "claude"} for _ in range(60)])
    barrier = threading.Barrier(NODES)
    errors: list[BaseException] = []

    def node(name: str) -> None:
        try:
            with closing(open_store(store_url)) as mine:
                for _ in range(ROUNDS):
                    barrier.wait(timeout=60)  # every node claims at the same moment
                    for claimed in mine.claim(name, slots=2).claims:
                        attempt = claimed.attempt
                        mine.finish(attempt.id, attempt.token, 0, usage=Usage(cost_usd=1.0))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            barrier.abort()

    # When: four nodes claim and finish, eight rounds each
    threads = [threading.Thread(target=node, args=(f"node-{i}",)) for i in range(NODES)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors

    # Then: every start saw less than the budget spent by the runs finished before it
    with closing(open_store(store_url)) as store:
        attempts = store.attempts()
        assert attempts
        assert all(a.finished_at is not None for a in attempts)
        for attempt in attempts:
            before = [
                b for b in attempts
                if b.finished_at is not None and b.finished_at <= attempt.started_at
            ]  # fmt: skip
            assert sum(1.0 for _ in before) < BUDGET, (attempt.started_at, len(before))
        # the budget was reached, and the rest of the line waits with the reason
        assert len(attempts) >= BUDGET
        queued = store.status(all=True).queued
        assert len(queued) == 60 - len(attempts)
        assert (queued[0].status_reason or "").startswith("budget agent[claude] 3usd/1h")
        assert len([e for e in store.events() if e.kind == "budget_reached"]) == 1
