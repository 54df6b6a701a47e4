"""Review, merge, then ask for more: a follow-up of a run whose branch was merged (and
whose worktree and branch a prune then removed, as `keep: until_merged` does) resumes
the agent's session in a new worktree of its own, from the commit the run was merged as."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e.conftest import Run, Serve, ok
from e2e.test_cli_resume import write_config
from gitrepos import branches, make_repo, show
from gitrepos import run as git_in
from slotline.models import Status
from slotline.store import open_store
from waiting import until


@pytest.mark.timeout(180)
def test_a_followup_after_merge_resumes_the_session_from_the_merge(
    cli: Run, tmp_path: Path, store_path: Path, serve: Serve
) -> None:
    # Given an agent type that keeps each run's worktree until it is merged,
    go = tmp_path / "go"
    go.touch()
    write_config(tmp_path, go)
    config = tmp_path / "slotline.yaml"
    agents = json.loads(config.read_text())
    agents["agents"]["claude"]["keep"] = "until_merged"
    config.write_text(json.dumps(agents))
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    serve("--sweep-interval", "0")  # the prune below is the test's
    store = open_store(store_path)
    first = ok(cli("--json", "submit", "--agent", "claude", "--prompt", "write the notes",
                   "--workspace", str(repo)))["id"]  # fmt: skip
    until(lambda: store.get(first).status.terminal, what="the first run ended")
    ran = store.get(first).attempts[0]
    assert ran.worktree is not None
    # reviewed, merged into the user's main, and its worktree and branch pruned,
    merged = ok(cli("--json", "merge", first))
    pruned = ok(cli("--json", "worktrees", "prune"))
    assert [(p["task_id"], p["reason"]) for p in pruned["pruned"]] == [(first, "merged")]
    assert not Path(ran.worktree.path).exists()
    assert ran.worktree.branch not in branches(repo)
    # When the user asks for more,
    follow = ok(cli("--json", "followup", first, "--prompt", "now add tests"))["id"]
    until(lambda: store.get(follow).status.terminal, what="the follow-up ended")
    # Then it resumed the session (`--resume sess-42`: "resumed sess-42" below),
    task = store.get(follow)
    assert task.status is Status.SUCCEEDED, task.status_reason
    (attempt,) = task.attempts
    assert attempt.resumed_from is not None
    assert attempt.resumed_from.task_id == first
    # in a new worktree on a branch of its own, from the merge,
    tree = attempt.worktree
    assert tree is not None
    assert tree.branch != ran.worktree.branch
    assert tree.path != ran.worktree.path
    assert tree.base_commit == merged["commit"]
    assert (Path(tree.path) / "notes.txt").read_text() == (
        "base\nwrite the notes (resumed None)\nnow add tests (resumed sess-42)\n"
    )
    # whose diff is its own change only, and which lands on main in turn.
    patch = ok(cli("--json", "diff", follow))
    assert patch["stat"] == {"files": 1, "insertions": 1, "deletions": 0}
    changed = [
        line for line in patch["text"].splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]  # fmt: skip
    assert changed == ["+now add tests (resumed sess-42)"]
    ok(cli("--json", "merge", follow))
    assert show(repo, "main", "notes.txt").endswith("now add tests (resumed sess-42)")
    assert git_in(repo, "status", "--porcelain") == ""
    store.close()
