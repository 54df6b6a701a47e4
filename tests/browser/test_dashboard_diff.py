"""The dashboard's task page shows a worktree run's diff, as text (issue 15 §1)."""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gitrepos import make_repo, show
from gitrepos import run as git_in
from slotline.models import Status
from slotline.store import Store

from .conftest import Login, until

pytestmark = pytest.mark.xdist_group("browser")

# Leaves its change uncommitted (a success with uncommitted work is kept), with markup in it.
EDIT = "open('notes.txt', 'a').write('<b>not markup</b> & more\\n')"


def test_the_task_page_shows_a_worktree_runs_diff_as_text(
    store: Store, login: Login, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    task = store.submit({
        "command": [sys.executable, "-c", EDIT], "title": "edit notes",
        "isolation": "worktree", "repo": str(repo),
    }).id  # fmt: skip
    until(lambda: store.get(task).status is Status.SUCCEEDED, what="finished")
    page = login()

    page.click("[data-view=history]")
    page.locator(f'.history [data-task-id="{task}"] button.link').click()
    page.wait_for_selector("#task-diff")
    assert "1 file changed, +1 -0" in page.locator("#diff-stat").inner_text()
    text = page.locator("#task-diff").inner_text()
    assert "+<b>not markup</b> & more" in text
    assert "notes.txt" in text
    assert page.locator("#task-diff b").count() == 0
    assert page.locator("#diff-truncated").count() == 0


def test_a_running_tasks_diff_stays_current_while_its_page_is_open(
    store: Store, login: Login, tmp_path: Path
) -> None:
    # Given a worktree run that writes a first line, then a second when told, then waits,
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    go, done = tmp_path / "go", tmp_path / "done"
    script = (
        "import os, time\n"
        "def wait(path):\n"
        "    while not os.path.exists(path): time.sleep(0.05)\n"
        "open('notes.txt', 'a').write('first line\\n')\n"
        f"wait({str(go)!r})\n"
        "open('notes.txt', 'a').write('second line\\n')\n"
        f"wait({str(done)!r})\n"
    )
    task = store.submit({
        "command": [sys.executable, "-c", script], "title": "slow edit",
        "isolation": "worktree", "repo": str(repo),
    }).id  # fmt: skip
    try:
        until(lambda: store.get(task).status is Status.RUNNING, what="started")
        worktree = until(lambda: store.get(task).attempts[-1].worktree, what="its worktree")
        until(lambda: "first" in (Path(worktree.path) / "notes.txt").read_text(), what="line 1")
        page = login()
        reads: list[float] = []
        page.on("request", lambda r: "/diff" in r.url and reads.append(time.monotonic()))
        page.locator(f'#running [data-task-id="{task}"] [data-action=view]').click()
        page.wait_for_selector("#task-diff")
        assert "+first line" in page.locator("#task-diff").inner_text()

        # When the run writes more while its page is open (no event tells the page),
        go.touch()
        until(lambda: "second" in (Path(worktree.path) / "notes.txt").read_text(), what="line 2")

        # Then the page shows it within a few seconds, read again at a pace,
        page.locator("#task-diff", has_text="+second line").wait_for()
        assert "1 file changed, +2 -0" in page.locator("#diff-stat").inner_text()
        gaps = [b - a for a, b in itertools.pairwise(reads)]
        assert gaps
        assert min(gaps) >= 3.0, gaps  # no more often than every few seconds

        # and its Refresh button reads it again at once.
        with page.expect_request(lambda r: "/diff" in r.url):
            page.click("#task-panel [data-action=refresh-diff]")
    finally:
        done.touch()
    until(lambda: store.get(task).status is Status.SUCCEEDED, what="finished")


# Commits its change, so that its branch holds work of its own.
COMMIT = (
    "import subprocess; open('notes.txt', 'a').write('landed\\n'); "
    "subprocess.run(['git', 'commit', '-qam', 'work'], check=True)"
)


def test_an_ended_worktree_run_is_merged_from_its_page(
    store: Store, login: Login, tmp_path: Path
) -> None:
    # Given an ended worktree run that committed its work, and a branch to land it on,
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    git_in(repo, "branch", "integration")
    task = store.submit({
        "command": [sys.executable, "-c", COMMIT], "title": "land me",
        "isolation": "worktree", "repo": str(repo), "keep": "until_merged",
    }).id  # fmt: skip
    until(lambda: store.get(task).status is Status.SUCCEEDED, what="finished")
    page = login()
    page.click("[data-view=history]")
    page.locator(f'.history [data-task-id="{task}"] button.link').click()
    page.wait_for_selector("#task-diff")

    # When Merge is pressed and the dialog asks where (its base branch, main, is offered),
    page.click("#task-panel [data-action=merge]")
    field = page.locator("form.modal input[name=reason]")
    assert field.input_value() == "main"
    # then merging into main, which the user's checkout has with an edit not committed,
    # is refused, changing nothing,
    (repo / "notes.txt").write_text("base\nthe user's\n")
    page.locator("form.modal button[type=submit]").click()
    page.wait_for_selector(".notice.error")
    refusal = page.locator(".notice.error").inner_text()
    assert "branch main is checked out" in refusal
    assert "which has uncommitted changes in notes.txt" in refusal
    assert git_in(repo, "rev-parse", "main") == git_in(repo, "rev-parse", "integration")
    # and merging into integration lands it: the page marks the run merged.
    page.click("#task-panel [data-action=merge]")
    field = page.locator("form.modal input[name=reason]")
    field.fill("integration")
    page.locator("form.modal button[type=submit]").click()
    page.wait_for_selector("#task-panel .badge-merged")
    assert page.locator("#task-panel .badge-merged").inner_text() == "MERGED into integration"
    assert show(repo, "integration", "notes.txt") == "base\nlanded"
    assert page.locator("#task-panel [data-action=merge]").count() == 0


def test_a_slow_diff_read_is_never_doubled(store: Store, login: Login, tmp_path: Path) -> None:
    # Given a running worktree run whose page is open, and its diff answering slowly
    # (held until the test lets it go),
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    done = tmp_path / "done"
    script = (
        "import os, time\n"
        "open('notes.txt', 'a').write('first line\\n')\n"
        f"while not os.path.exists({str(done)!r}): time.sleep(0.05)\n"
    )
    task = store.submit({
        "command": [sys.executable, "-c", script], "title": "slow diff",
        "isolation": "worktree", "repo": str(repo),
    }).id  # fmt: skip
    try:
        until(lambda: store.get(task).status is Status.RUNNING, what="started")
        page = login()
        held: list[Any] = []
        reads: list[str] = []
        page.on("request", lambda r: "/diff" in r.url and reads.append(r.url))
        page.locator(f'#running [data-task-id="{task}"] [data-action=view]').click()
        page.wait_for_selector("#task-diff")
        page.route("**/api/tasks/*/diff*", lambda route: held.append(route))  # noqa: PLW0108
        reads.clear()
        page.click("#task-panel [data-action=refresh-diff]")
        until(lambda: page.evaluate("1") and len(held) == 1, what="a diff read held")
        # when Refresh is clicked again while that read is in flight (the pace of a
        # running run forces a read the same way),
        for _ in range(3):
            page.click("#task-panel [data-action=refresh-diff]")
        with page.expect_request(lambda r: "marker" in r.url):
            page.evaluate("fetch('/marker').catch(() => {})")
        # then no second read started beside it,
        assert len(reads) == 1, reads
        # and once it is answered, the next Refresh reads it again.
        held[0].continue_()
        page.unroute("**/api/tasks/*/diff*")
        until(lambda: page.evaluate("1") and page.locator("#task-diff").count() == 1)
        with page.expect_request(lambda r: "/diff" in r.url):
            page.click("#task-panel [data-action=refresh-diff]")
    finally:
        done.touch()
    until(lambda: store.get(task).status is Status.SUCCEEDED, what="finished")
