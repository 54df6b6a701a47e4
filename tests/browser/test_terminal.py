"""The live terminal of an interactive run on its task page (issue 30): the owner or an
admin reads the run's question and answers it by typing into the page's xterm.js; a viewer
watches, read-only, and what they type never reaches the run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slotline.models import Status
from slotline.runner.tmux import Terminal, tmux_env
from slotline.store import Store

from .conftest import Login, Serve, is_phone, row_action, until

pytestmark = pytest.mark.xdist_group("browser")

ASKING = str(Path(__file__).parents[1] / "asking_agent.py")


@pytest.fixture(autouse=True)
def _tmux() -> None:
    if shutil.which("tmux") is None:
        if os.environ.get("CI"):
            pytest.fail("tmux is required in CI (.ci/run installs it)")
        pytest.skip("tmux is not installed")


def asking(store: Store, title: str) -> str:
    """An interactive asking agent, once it waits for its answer on its terminal."""
    task = store.submit({"command": [sys.executable, ASKING], "interactive": True, "title": title})
    until(lambda: store.get(task.id).status is Status.RUNNING, what="the run starting")
    terminal = until(lambda: Terminal.of(store.get(task.id).attempts[-1].log_path))
    until(lambda: "Proceed?" in terminal.screen(), what="the question")
    return task.id


def open_terminal(page: Any, task_id: str) -> Any:
    """Open the task from the running list (its INTERACTIVE badge shown); its terminal."""
    run = page.locator(f'#running [data-task-id="{task_id}"]')
    assert run.locator(".badge-interactive").inner_text() == "INTERACTIVE"
    row_action(page, task_id, "view", "#running")
    screen = page.locator("#task-terminal")
    screen.locator(".xterm-rows:has-text('Proceed? [y/n]')").wait_for()
    return screen


def width(store: Store, task_id: str) -> int:
    """The columns of the run's tmux window now (it starts at 120, before any client)."""
    terminal = Terminal.of(store.get(task_id).attempts[-1].log_path)
    assert terminal is not None
    done = subprocess.run(
        terminal.tmux("display", "-p", "-t", terminal.target, "#{window_width}"),
        capture_output=True, text=True, env=tmux_env(), check=True,
    )  # fmt: skip
    return int(done.stdout)


def focus(page: Any, screen: Any) -> None:
    """Focus the terminal as a person would: a click, a tap on a phone."""
    if is_phone(page):
        screen.tap()
    else:
        screen.click()


def type_into(page: Any, screen: Any, text: str) -> None:
    focus(page, screen)
    page.keyboard.type(text)
    page.keyboard.press("Enter")


def test_the_owner_answers_the_runs_question_in_the_page(
    store: Store, login: Login, screen: dict[str, Any]
) -> None:
    task = asking(store, "asks first")
    page = login(screen=screen)

    terminal = open_terminal(page, task)
    page.locator("#terminal-state:has-text('Live: what you type goes to the run')").wait_for()
    assert page.locator("#terminal-readonly").count() == 0
    assert f"slotline attach {task[:8]}" in page.locator("#terminal-attach").inner_text()
    # The run's terminal takes the box's size, and follows the window's.
    shown = until(lambda: width(store, task) < 120 and width(store, task), what="a fitted width")
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"] - 60, "height": size["height"]})
    until(lambda: width(store, task) < shown, what="the run's terminal narrowing")
    # Detaching with tmux's keys leaves the run waiting; the page connects again.
    focus(page, terminal)
    page.keyboard.press("Control+b")
    page.keyboard.press("d")
    page.locator("#terminal-state:has-text('Closed: detached: the run goes on')").wait_for()
    assert store.get(task).status is Status.RUNNING
    page.locator("#terminal-state [data-action=reconnect]").click()
    page.locator("#terminal-state:has-text('Live')").wait_for()
    terminal.locator(".xterm-rows:has-text('Proceed? [y/n]')").wait_for()
    type_into(page, terminal, "yes")

    until(lambda: store.get(task).status is Status.SUCCEEDED, what="the run succeeding")
    assert store.get(task).exit_code == 0
    # tmux clears the screen as its client leaves; what the run printed is in its log.
    page.locator("#terminal-state:has-text('Closed: the run ended')").wait_for()
    page.locator("#task-log:has-text(\"asking_agent got 'yes'\")").wait_for()
    page.locator("#task-panel [data-field=status]:has-text('succeeded')").wait_for()
    terminal.wait_for(state="hidden")  # blank once tmux has left: folded away


def test_a_viewer_watches_but_their_typing_never_reaches_the_run(
    served: Serve, store: Store, login: Login
) -> None:
    task = asking(store, "asks a viewer")
    watcher = login(token=served.viewer)

    terminal = open_terminal(watcher, task)
    watcher.locator("#terminal-readonly:has-text('read-only')").wait_for()
    watcher.locator("#terminal-state:has-text('Watching')").wait_for()
    type_into(watcher, terminal, "no")

    # The admin answers in a page of their own: the run reads "yes", the first thing that
    # reached it (had the viewer's "no" gone in, it would read "noyes", or have ended).
    admin = login()
    admins = open_terminal(admin, task)
    assert store.get(task).status is Status.RUNNING
    type_into(admin, admins, "yes")
    until(lambda: store.get(task).status is Status.SUCCEEDED, what="the run succeeding")
    for page in (admin, watcher):
        page.locator("#task-log:has-text(\"asking_agent got 'yes'\")").wait_for()
        page.locator("#terminal-state:has-text('Closed: the run ended')").wait_for()
