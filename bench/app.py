"""The benchmark's functions declared on an App, for `slotline serve --app bench.app:app`:
the path users run (a sync function runs in a worker process, forked per run)."""

from __future__ import annotations

import slotline
from bench.workloads import NOOP

app = slotline.App()  # the store of the node that imports it (--store)


@app.task(name=NOOP)
def noop() -> None:
    return None
