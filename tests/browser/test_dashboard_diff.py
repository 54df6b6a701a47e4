"""The dashboard's task page shows a worktree run's diff, as text (issue 15 §1)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gitrepos import make_repo
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
