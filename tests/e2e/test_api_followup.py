"""`Queue.followup` (and `SyncQueue.followup`): a follow-up of a finished coding-agent
task, queued from Python, runs the resume template with the first run's session in its
worktree, by a real node and the fake agent (tests/fake_agent.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import slotline
from e2e.conftest import Run, Serve, ok
from e2e.test_cli_resume import write_config
from gitrepos import make_repo
from slotline.api.queue import open_queue
from slotline.config.file import load_config
from slotline.errors import InvalidInput
from slotline.models import Status
from waiting import until


@pytest.mark.timeout(120)
def test_the_python_api_queues_a_followup_that_resumes_the_session(
    cli: Run, tmp_path: Path, store_path: Path, serve: Serve
) -> None:
    # Given a finished run of an agent type with a resume template,
    go = tmp_path / "go"
    go.touch()
    write_config(tmp_path, go)
    config = load_config(tmp_path / "slotline.yaml", env={})
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    serve()
    first = ok(cli("--json", "submit", "--agent", "claude", "--prompt", "write the notes",
                   "--workspace", str(repo)))  # fmt: skip

    async def follow_up() -> slotline.Task:
        async with open_queue(store_path) as queue:
            return await queue.followup(first["id"], "now add tests", config=config)

    with slotline.open(store_path) as queue:
        until(lambda: queue.get(first["id"]).status is Status.SUCCEEDED, what="the first run")
        # When a follow-up is queued from Python (async, then sync),
        follow = asyncio.run(follow_up())
        again = queue.followup(follow.id, "and the docs", config=config)
        for task in (follow, again):
            until(lambda t=task.id: queue.get(t).status.terminal, what=f"{task.id} ended")
        # Then each ran the resume template with the session, in the first run's worktree.
        one = queue.get(first["id"]).attempts[0]
        two = queue.get(follow.id).attempts[0]
        three = queue.get(again.id).attempts[0]
        assert queue.get(again.id).status is Status.SUCCEEDED
        assert two.resumed_from is not None
        assert two.resumed_from.task_id == first["id"]
        assert three.resumed_from is not None
        assert three.resumed_from.task_id == follow.id
        assert one.worktree is not None
        assert two.worktree is not None
        assert two.worktree.branch == one.worktree.branch
        notes = (Path(two.worktree.path) / "notes.txt").read_text()
        assert "now add tests (resumed sess-42)" in notes

        # A task of a type without a resume template is refused, naming the type.
        aider = ok(cli("--json", "submit", "--agent", "aider", "--prompt", "tidy"))
        with pytest.raises(InvalidInput, match="agent type 'aider' has no resume template"):
            queue.followup(aider["id"], "more", config=config)
