"""A real `slotline serve` on a real SQLite store, shared by the browser tests of a module,
and one Debian chromium driven by Playwright (its own browser download is not used).

Without chromium the tests skip on a laptop, and fail in CI, where .ci/run installs it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clean_env import without_slotline_variables
from slotline.models import Status
from slotline.server import create_token
from slotline.store import Store, open_store
from waiting import until

IN_CI = bool(os.environ.get("CI"))
CHROMIUM = os.environ.get("SLOTLINE_CHROMIUM", "/usr/bin/chromium")
WAIT = 30.0  # seconds a test waits for a state before failing


def require_chromium() -> str:
    found = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if found:
        return found
    if IN_CI:
        pytest.fail(f"chromium is required in CI but {CHROMIUM} is missing (.ci/run installs it)")
    pytest.skip(f"chromium not found at {CHROMIUM} (apt-get install chromium)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # Module scope: Playwright's sync API keeps an event loop running in this process
    # while it is open, which would break any later test calling asyncio.run.
    executable = require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu"]
        )
        yield launched
        launched.close()


@dataclass
class Serve:
    """A `slotline serve` subprocess over `store_path`, with its tokens."""

    root: Path
    store_path: Path
    tokens_path: Path
    env: dict[str, str]
    admin: str
    viewer: str
    proc: subprocess.Popen[str] | None = None
    url: str = ""
    port: int = 0

    def start(self) -> None:
        with (self.root / "serve.log").open("a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "slotline", "--json", "serve", "--node-id", "dash",
                 "--port", str(self.port), "--max-concurrent", "2", "--sample-interval", "1"],
                stdout=subprocess.PIPE, stderr=log, text=True, env=self.env, cwd=self.root,
            )  # fmt: skip
        assert self.proc.stdout is not None
        self.proc.stdout.readline()  # the node's line
        line = self.proc.stdout.readline()
        assert line, f"serve did not start: {(self.root / 'serve.log').read_text()}"
        self.url = json.loads(line)["dashboard"].rstrip("/")
        self.port = int(self.url.rsplit(":", 1)[1])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.communicate(timeout=30)
            assert self.proc.returncode == 0, (self.root / "serve.log").read_text()


def make_serve(root: Path) -> Serve:
    root.mkdir(parents=True, exist_ok=True)
    tokens = root / "tokens.json"
    env = without_slotline_variables()
    env.update(
        SLOTLINE_STORE=str(root / "store.db"),
        SLOTLINE_TOKENS=str(tokens),
        XDG_DATA_HOME=str(root / "xdg"),
    )
    admin = create_token("boss", "admin", tokens)
    viewer = create_token("watcher", "viewer", tokens)
    return Serve(root, root / "store.db", tokens, env, admin, viewer)


def settle(store: Store) -> None:
    """End every task not ended yet and resume: the next test starts on an empty line."""
    store.resume()
    store.set_setting("max_concurrent", 2)
    pending = [
        t.id for s in (Status.QUEUED, Status.HELD, Status.WAITING) for t in store.list_tasks(s)
    ]
    if pending:
        store.bulk("cancel", pending)
    running = [t.id for t in store.list_tasks(Status.RUNNING) if t.kill_request is None]
    if running:
        store.bulk("terminate", running, reason="test teardown")
    until(lambda: not store.list_tasks(Status.RUNNING), 30, "running tasks ending")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Serve]:
    serve = make_serve(tmp_path_factory.mktemp("dashboard"))
    serve.start()
    try:
        yield serve
    finally:
        with open_store(serve.store_path) as store, contextlib.suppress(AssertionError):
            settle(store)
        serve.stop()


@pytest.fixture
def store(served: Serve) -> Iterator[Store]:
    """The server's store, opened by the test too (to set up and to check), reset first."""
    opened = open_store(served.store_path)
    settle(opened)
    yield opened
    opened.close()


Login = Callable[..., Any]


# A phone held upright: its width, height, touch screen and mobile viewport.
PHONE = {"viewport": {"width": 360, "height": 740}, "has_touch": True, "is_mobile": True}
DESKTOP = {"viewport": {"width": 1280, "height": 900}}


@pytest.fixture(params=["desktop", "phone"])
def screen(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The browser context options of a desktop window, then of a phone: a test that takes
    this fixture runs at both sizes."""
    return PHONE if request.param == "phone" else DESKTOP


@pytest.fixture
def login(browser: Any, served: Serve) -> Iterator[Login]:
    """login(token=admin, width=1280, screen=None) -> a page signed in through the login
    form, in a window `width` wide, or as `screen` says (DESKTOP, PHONE)."""
    contexts: list[Any] = []

    def open_page(
        token: str | None = None, width: int = 1280, screen: dict[str, Any] | None = None
    ) -> Any:
        options = screen or {"viewport": {"width": width, "height": 900}}
        context = browser.new_context(**options)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(WAIT * 1000)
        page.goto(served.url + "/")
        page.fill("input[name=token]", token or served.admin)
        page.click("button[type=submit]")
        page.wait_for_selector("#utilization")
        page.wait_for_selector("#connection:has-text('live')")
        return page

    yield open_page
    for context in contexts:
        # A route handler still fetching when the page closes would raise in teardown.
        for page in context.pages:
            page.unroute_all(behavior="ignoreErrors")
        context.close()


def queue_ids(page: Any) -> list[str]:
    """The task ids of the line's rows, top to bottom."""
    ids: list[str] = page.eval_on_selector_all(
        "#queue [data-task-id][data-status=queued]", "rows => rows.map(r => r.dataset.taskId)"
    )
    return ids


def is_phone(page: Any) -> bool:
    return bool(page.viewport_size["width"] < 700)


def row_action(page: Any, task_id: str, action: str, where: str = "#queue") -> None:
    """Press a row's action as a person would: on a desktop, hover the row and click the
    button that shows; on a phone, tap the row's actions button, then the sheet's button."""
    row = page.locator(f'{where} [data-task-id="{task_id}"]')
    if where == "#queue" and is_phone(page):
        row.locator("[data-action=more]").tap()
        page.locator(f"#task-sheet [data-action={action}]").tap()
    else:
        row.hover()
        row.locator(f"[data-action={action}]").click()
