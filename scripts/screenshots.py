"""Make the dashboard screenshots in docs/img: a real `slotline serve` on a throwaway
SQLite store, a demo line (stand-in agent types that print and sleep), and Debian's
chromium driven by Playwright.

Usage: .venv/bin/python scripts/screenshots.py [OUT_DIR]   (default docs/img)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `bench` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.dashboard import stop_runs

from slotline.store import Store, open_store

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("SLOTLINE_CHROMIUM", "/usr/bin/chromium")
# Stand-ins for real agents: they print what they were asked, then work (sleep) a while.
DEMO = """
agents:
  claude:
    command: [sh, -c, 'echo "claude: $1"; sleep 300', claude, "{prompt}"]
    max_concurrent: 2
  aider:
    command: [sh, -c, 'echo "aider: $1"; sleep 300', aider, "{prompt}"]
"""
WORK = 'echo "$0: $1"; for i in 1 2 3; do echo "step $i"; sleep 0.5; done; sleep 300'
PROMPTS = [
    ("claude", "fix the flaky test in test_scheduler", "high"),
    ("aider", "add type hints to the store module", "normal"),
    ("claude", "write the migration guide", "normal"),
    ("claude", "review PR 412: bulk verbs", "urgent"),
    ("aider", "rename Settings.values to Settings.fields", "low"),
    ("claude", "bump dependencies and run the suite", "normal"),
    ("aider", "port the CLI tables to rich", "normal"),
]


def demo_line(store: Store) -> None:
    store.set_setting("max_concurrent", 3)
    store.set_limit("agent", "claude", 2)
    # Two quick ones first (urgent): one succeeds, one fails, for the history.
    done = store.submit({"command": ["echo", "ok"], "title": "format the docs", "priority": 0})
    store.submit(
        {
            "command": ["sh", "-c", "exit 3"],
            "title": "deploy staging",
            "agent": "aider",
            "priority": 0,
        }
    )
    for agent, prompt, priority in PROMPTS:
        store.submit(
            {
                "agent": agent,
                "title": prompt,
                "priority": priority,
                "command": ["sh", "-c", WORK, agent, prompt],
            }
        )
    store.submit({"command": ["true"], "title": "publish release notes", "depends_on": [done.id]})
    held = store.submit({"command": ["true"], "title": "nightly benchmark"})
    store.hold(held.id)


def phone(browser: Any, url: str, out: Path) -> None:
    """A phone held upright (360 by 740, touch): the first screen, a row's actions sheet,
    and a run's task view over the page."""
    context = browser.new_context(
        viewport={"width": 360, "height": 740}, has_touch=True, is_mobile=True,
        device_scale_factor=2, color_scheme="light",
    )  # fmt: skip
    page = context.new_page()
    page.goto(url + "/")
    page.wait_for_selector("#queue [data-task-id]")
    page.wait_for_selector("#connection:has-text('live')")
    page.screenshot(path=str(out / "phone.png"))
    page.locator("#queue [data-task-id] [data-action=more]").nth(1).tap()
    page.wait_for_selector("#task-sheet")
    page.screenshot(path=str(out / "phone-actions.png"))
    page.locator("#task-sheet [data-action=close-sheet]").tap()
    page.locator("#running [data-action=view]").first.tap()
    page.wait_for_selector("#task-log:has-text('step 2')")
    page.screenshot(path=str(out / "phone-task.png"))
    context.close()


def shoot(url: str, out: Path, store: Store) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for theme in ("light", "dark"):
            context = browser.new_context(
                viewport={"width": 1400, "height": 900}, color_scheme=theme, device_scale_factor=1
            )
            page = context.new_page()
            page.goto(url + "/")
            page.wait_for_selector("#queue [data-task-id]")
            page.wait_for_selector("#connection:has-text('live')")
            time.sleep(1.5)  # a few CPU samples for the sparklines
            name = "dashboard" if theme == "light" else "dashboard-dark"
            first = page.locator("#queue [data-task-id]").first
            first.hover()
            page.screenshot(path=str(out / f"{name}.png"), full_page=True)
            if theme == "dark":
                context.close()
                continue
            page.locator("#running [data-action=view]").first.click()
            page.wait_for_selector("#task-log:has-text('step 2')")
            page.screenshot(path=str(out / "task.png"), full_page=True)
            page.click("#task-panel [data-action=close]")
            page.click("[data-view=history]")
            page.wait_for_selector(".history tbody tr")
            page.screenshot(path=str(out / "history.png"), full_page=True)
            page.click("[data-view=charts]")
            page.wait_for_selector(".plot canvas", timeout=30_000)
            page.wait_for_selector(".timings")
            page.screenshot(path=str(out / "charts.png"), full_page=True)
            page.click("[data-view=submit]")
            page.screenshot(path=str(out / "submit.png"), full_page=True)
            context.close()
        phone(browser, url, out)
        browser.close()
    del store


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "img"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="slotline-shots-") as tmp:
        folder = Path(tmp)
        (folder / "slotline.yaml").write_text(DEMO)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLOTLINE_")}
        env.update(
            SLOTLINE_TOKENS=str(folder / "tokens.json"),
            SLOTLINE_STORE=str(folder / "store.db"),
            XDG_DATA_HOME=str(folder / "xdg"),
        )
        store = open_store(folder / "store.db")
        demo_line(store)
        proc = subprocess.Popen(
            [sys.executable, "-m", "slotline", "--json", "serve", "--port", "0",
             "--node-id", "box1", "--sample-interval", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=folder,
        )  # fmt: skip
        assert proc.stdout is not None
        proc.stdout.readline()
        url: Any = json.loads(proc.stdout.readline())["dashboard"].rstrip("/")
        try:
            time.sleep(4)  # a few samples for the charts
            shoot(url, out, store)
        finally:
            stop_runs(store, "screenshots taken")  # while their node still runs
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
            store.close()
    print(f"screenshots in {out}")


if __name__ == "__main__":
    main()
