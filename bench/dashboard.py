"""The dashboard with a long line: time to the first screen, and to a scrolled-to window.

A real `slotline serve` over an SQLite store holding N queued tasks (and two running ones),
and Debian's chromium driven by Playwright. Each repeat opens the page in a fresh browser
context; a MutationObserver installed before the page's own scripts records (on the page's
clock, from navigation start) when the first row of the line and the utilization are in
the DOM. Then the line is scrolled to its middle and the time until the rows of that window
are drawn is recorded. The API's `/api/line` (one page) is timed beside the full
`/api/status` (every queued task) that a page without paging would read.

.venv/bin/python bench/dashboard.py               # 10,000 queued, 7 repeats
.venv/bin/python bench/dashboard.py --queued 1000 --repeat 1   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):  # run as a script: make the `bench` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import describe
from bench.stats import median, percentile
from slotline.store import Store, open_store

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("SLOTLINE_CHROMIUM", "/usr/bin/chromium")
BATCH = 1000

# Installed before the page's scripts: note when the first row and the header appear.
OBSERVE = """
window.__marks = {};
new MutationObserver(() => {
  const m = window.__marks;
  if (!m.row && document.querySelector('#queue [data-task-id]')) m.row = performance.now();
  if (!m.header && document.querySelector('#utilization')) m.header = performance.now();
}).observe(document, {childList: true, subtree: true});
"""


def fill(path: Path, queued: int) -> None:
    with open_store(path) as store:
        store.set_setting("max_queue_size", queued + 100)
        store.set_setting("max_concurrent", 2)
        for _ in range(2):  # the two that run (the node starts them)
            store.submit({"command": ["sleep", "600"], "title": "running"})
        for start in range(0, queued, BATCH):
            size = min(BATCH, queued - start)
            store.submit_many(
                [
                    {"command": ["true"], "title": f"queued task {start + i}", "agent": "claude"}
                    for i in range(size)
                ]
            )


def serve(path: Path, folder: Path) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLOTLINE_")}
    env.update(SLOTLINE_TOKENS=str(folder / "tokens.json"), XDG_DATA_HOME=str(folder / "xdg"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "slotline", "--json", "--store", str(path), "serve",
         "--port", "0", "--node-id", "bench"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=folder,
    )  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.readline()
    return proc, json.loads(proc.stdout.readline())["dashboard"].rstrip("/")


def stop_runs(store: Store, reason: str) -> None:
    """Pause and terminate every run (the emergency stop), and wait until they are gone:
    call it before stopping the node, which would leave its runs running."""
    store.emergency_stop(reason)
    deadline = time.monotonic() + 30
    while store.status().running and time.monotonic() < deadline:
        time.sleep(0.1)


def time_api(url: str, path: str, repeat: int) -> float:
    """Median seconds of GET url+path."""
    times = []
    with httpx.Client(base_url=url, timeout=60) as http:
        http.get(path).raise_for_status()
        for _ in range(repeat):
            start = time.perf_counter()
            http.get(path).raise_for_status()
            times.append(time.perf_counter() - start)
    return median(times)


def time_page(browser: Any, url: str, queued: int) -> dict[str, float]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.add_init_script(OBSERVE)
        page.goto(url + "/")
        # Waiting by selector, not by a JS predicate: the page's CSP forbids eval.
        page.wait_for_selector("#queue [data-task-id]", timeout=30_000)
        page.wait_for_selector("#utilization", timeout=30_000)
        marks = page.evaluate("window.__marks")
        middle = queued // 2
        start = page.evaluate("performance.now()")
        page.evaluate(f"document.querySelector('.line-scroll').scrollTop = {middle} * 44")
        wanted = f"#queue [data-task-id] .pos >> text='#{middle + 1}'"
        page.wait_for_selector(wanted, timeout=30_000)
        scrolled = page.evaluate("performance.now()") - start
        return {"first_screen": marks["row"] / 1000, "scroll": scrolled / 1000}
    finally:
        context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queued", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="slotline-dash-bench-") as tmp:
        folder = Path(tmp)
        path = folder / "store.db"
        fill(path, args.queued)
        proc, url = serve(path, folder)
        try:
            api_line = time_api(url, "/api/line?limit=100", 20)
            api_status = time_api(url, "/api/status", 5)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
                )
                runs = [time_page(browser, url, args.queued) for _ in range(args.repeat)]
                browser.close()
        finally:
            with open_store(path) as store:  # stop the runs while their node still runs
                stop_runs(store, "bench over")
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
    first = [r["first_screen"] for r in runs]
    scroll = [r["scroll"] for r in runs]
    machine = describe(ROOT)
    cpu = f"{machine['cpu']}, {machine['cores']} cores"
    print(f"{args.queued} queued, {args.repeat} page loads; {cpu}")
    print("| measure | median | p95 |")
    print("|---|---|---|")
    for name, values in (
        ("first screen (navigation → first row drawn)", first),
        ("scroll to the middle → its rows drawn", scroll),
    ):
        print(f"| {name} | {median(values):.3f} s | {percentile(sorted(values), 95):.3f} s |")
    print(f"| GET /api/line?limit=100 (one page) | {api_line:.3f} s | |")
    print(f"| GET /api/status (the whole line) | {api_status:.3f} s | |")
    print(f"| ratio /api/status ÷ /api/line | {api_status / api_line:.1f} | |")


if __name__ == "__main__":
    main()
