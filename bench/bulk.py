"""How long `bulk cancel` takes on a full store, idle and beside a trickle of submits.

.venv/bin/python bench/bulk.py                       # SQLite, 20,000 tasks, cancel 9,000
.venv/bin/python bench/bulk.py --url postgresql://postgres@127.0.0.1:5432/test
.venv/bin/python bench/bulk.py --tasks 5000 --cancel 2000 --http

The store is filled with queued tasks; the bulk call cancels `--cancel` of them by id.
`--http` goes through the server's bulk route (as `slotline bulk --url` does), which also
resolves and checks every id for the caller. With `--busy`, a thread submits a task every
50 ms while the bulk runs, and the script prints how many of those submits committed
during it and the longest one took (how long the bulk held them off).
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `bench` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slotline.store import Store, open_store


def fill(store: Store, count: int) -> list[str]:
    ids: list[str] = []
    for start in range(0, count, 1000):
        specs = [
            {"title": f"t{i}", "command": ["true"]} for i in range(start, min(count, start + 1000))
        ]
        ids += [t.id for t in store.submit_many(specs)]
    return ids


def trickle(store: Store, stop: threading.Event, waits: list[float]) -> None:
    while not stop.is_set():
        began = time.perf_counter()
        store.submit({"title": "trickle", "command": ["true"]})
        waits.append(time.perf_counter() - began)
        stop.wait(0.05)


def bulk_over_http(store: Store, ids: list[str]) -> tuple[int, int]:
    from slotline.server.auth import OPEN_MODE
    from slotline.server.bulk import BulkBody, _bulk

    out = _bulk(store, OPEN_MODE, BulkBody(verb="cancel", ids=ids))
    return len(out["done"]), len(out["skipped"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a PostgreSQL URL (default: a SQLite file)")
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--cancel", type=int, default=9_000)
    parser.add_argument("--http", action="store_true", help="through the server's route")
    parser.add_argument("--busy", action="store_true", help="submit every 50 ms meanwhile")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{tmp}/bench.db"
        if args.url:
            url = f"{args.url}?schema=bench_{secrets.token_hex(5)}"
        store = open_store(url)
        store.set_setting("max_queue_size", args.tasks + 100_000)
        try:
            began = time.perf_counter()
            ids = fill(store, args.tasks)
            print(f"filled {len(ids)} tasks in {time.perf_counter() - began:.1f}s")
            stop, waits = threading.Event(), []
            thread = threading.Thread(target=trickle, args=(store, stop, waits))
            if args.busy:
                thread.start()
            began = time.perf_counter()
            if args.http:
                done, skipped = bulk_over_http(store, ids[: args.cancel])
            else:
                result = store.bulk("cancel", ids[: args.cancel])
                done, skipped = len(result.done), len(result.skipped)
            took = time.perf_counter() - began
            stop.set()
            if args.busy:
                thread.join()
            print(f"bulk cancel of {args.cancel}: {took:.2f}s ({done} done, {skipped} skipped)")
            if waits:
                print(f"  {len(waits)} submits meanwhile, longest {max(waits):.2f}s")
        finally:
            if args.url:
                import psycopg

                schema = url.rsplit("schema=", 1)[1]
                store.close()
                with psycopg.connect(args.url, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            else:
                store.close()


if __name__ == "__main__":
    main()
