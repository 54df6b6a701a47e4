"""The store alone: a node's claims in a loop, without a node (no runner, no event loop).

python bench/claims.py URL_OR_PATH LIMIT N   # one loop; prints one JSON line

Fills a fresh queue with N function tasks at limit LIMIT, then claims in a loop, each
claim reporting the end of every run the previous one started (as a node whose runs end
at once would), until the line is empty: LIMIT ends and LIMIT starts a claim. Prints
the milliseconds and CPU milliseconds per claim. `bench/ab.py --only claims-1,claims-4`
runs it on two trees in turn (this file, with the other tree's `src` first on the path:
it uses only the store's public verbs).
"""

from __future__ import annotations

import json
import sys
import time

from slotline.store import open_store
from slotline.store.runs import Report

KINDS = frozenset({"callable", "command"})
FUNCTIONS = frozenset({"noop"})


def claim_loop(where: str, limit: int, n: int) -> dict[str, float]:
    store = open_store(where)
    try:
        store.set_setting("max_concurrent", limit)
        store.submit_many([{"callable": "noop"} for _ in range(n)])
        reports: list[Report] = []
        claims = ended = 0
        start, cpu = time.perf_counter(), time.process_time()
        while True:
            result = store.claim(
                "bench", kinds=KINDS, finished=reports, functions=FUNCTIONS, watcher="bench"
            )
            claims += 1
            ended += len(reports)
            reports = [Report(c.attempt.id, c.attempt.token, 0) for c in result.claims]
            if not reports:
                break
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        store.close()
    if ended != n:
        raise RuntimeError(f"the loop ended {ended} of {n} tasks")
    return {"ms per claim": seconds / claims * 1000, "CPU ms per claim": cpu / claims * 1000}


if __name__ == "__main__":
    where, limit, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    print(json.dumps(claim_loop(where, limit, n)))
