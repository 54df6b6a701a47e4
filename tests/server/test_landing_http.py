"""Reviewing and landing a worktree run over HTTP, with the access rules of the other
task routes: readers of the task see its diff, its owner or an admin merges it, another
user's task is hidden, pruning is for admins."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gitrepos import make_repo, run, show
from slotline.config.file import Config
from slotline.errors import InvalidTransition
from slotline.mcp.calls import BackendCalls
from slotline.reach import UsersConfig
from waiting import until

from .conftest import Running, ServerFactory, command, mcp_tool


def test_diff_merge_and_worktrees_follow_the_task_access_rules(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    run(repo, "branch", "integration")
    server = make_server(node=True, config=merging_into(repo, "integration"))
    admin, alice = server.token("root", "admin"), server.token("alice", "user")
    bob, viewer = server.token("bob", "user"), server.token("eve", "viewer")
    agent = command(
        "import subprocess",
        "open('notes.txt', 'a').write('from alice\\n')",
        "subprocess.run(['git', 'commit', '-qam', 'work'], check=True)",
    )
    with server.client(admin) as http:
        answer = http.post("/api/tasks", json={
            "command": agent, "isolation": "worktree", "repo": str(repo), "user": "alice",
            "keep": "always",
        })  # fmt: skip
        assert answer.status_code == 201, answer.text
        task_id = answer.json()["id"]

        def kept() -> bool:
            attempts = http.get(f"/api/tasks/{task_id}").json()["attempts"]
            return bool(attempts) and (attempts[0]["worktree"] or {}).get("state") == "kept"

        until(kept, what="the run ended, its worktree kept")
        assert http.post("/api/worktrees/prune", json={"dry_run": True}).json() == {
            "pruned": [], "dry_run": True,
        }  # fmt: skip

    with server.client(alice) as mine, server.client(bob) as other, server.client(viewer) as eve:
        diff = mine.get(f"/api/tasks/{task_id}/diff")
        assert diff.status_code == 200, diff.text
        assert "+from alice" in diff.json()["text"]
        assert diff.json()["stat"] == {"files": 1, "insertions": 1, "deletions": 0}
        assert eve.get(f"/api/tasks/{task_id}/diff?stat=true").json()["text"] == ""
        assert other.get(f"/api/tasks/{task_id}/diff").status_code == 404
        assert other.get("/api/worktrees").json() == {"worktrees": []}
        assert [w["task_id"] for w in mine.get("/api/worktrees").json()["worktrees"]] == [task_id]
        assert mine.post("/api/worktrees/prune", json={}).status_code == 403

        body = {"into": "integration"}
        assert eve.post(f"/api/tasks/{task_id}/merge", json=body).status_code == 403
        assert other.post(f"/api/tasks/{task_id}/merge", json=body).status_code == 404
        assert run(repo, "rev-parse", "integration") == run(repo, "rev-parse", "main")
        merged = mine.post(f"/api/tasks/{task_id}/merge", json=body)
        assert merged.status_code == 200, merged.text
        assert merged.json()["task"]["attempts"][0]["worktree"]["merged"]["into"] == "integration"
    assert show(repo, "integration", "notes.txt") == "base\nfrom alice"


def merging_into(repo: Path, *branches: str) -> Config:
    """A configuration where users may merge into `branches` of `repo`."""
    return Config(users=UsersConfig(merge_into={str(repo): list(branches)}))


def _ended_run_of_alice(server: Running, admin: str, repo: Path) -> str:
    """A task of user alice whose worktree run committed a line to notes.txt, ended."""
    agent = command(
        "import subprocess",
        "open('notes.txt', 'a').write('from alice\\n')",
        "subprocess.run(['git', 'commit', '-qam', 'work'], check=True)",
    )
    with server.client(admin) as http:
        answer = http.post("/api/tasks", json={
            "command": agent, "isolation": "worktree", "repo": str(repo), "user": "alice",
            "keep": "always",
        })  # fmt: skip
        assert answer.status_code == 201, answer.text
        task_id: str = answer.json()["id"]

        def kept() -> bool:
            attempts = http.get(f"/api/tasks/{task_id}").json()["attempts"]
            return bool(attempts) and (attempts[0]["worktree"] or {}).get("state") == "kept"

        until(kept, what="the run ended, its worktree kept")
    return task_id


def _mcp_merge(server: Running, token: str, task_id: str, into: str | None = None) -> str:
    """The error of the merge_task tool called over /mcp with `token`."""
    failed, said = mcp_tool(
        server, token, "merge_task", task_id=task_id, **({} if into is None else {"into": into})
    )
    assert failed, said
    return said


def test_only_an_admin_merges_into_a_branch_a_checkout_has(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    # Given an ended run of alice's, started from main, which the repository's own
    # (clean) checkout has
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    server = make_server(node=True, config=merging_into(repo, "main"))
    admin, alice = server.token("root", "admin"), server.token("alice", "user")
    task_id = _ended_run_of_alice(server, admin, repo)
    main = run(repo, "rev-parse", "main")

    # When alice merges it into main over HTTP, over MCP, and one of her runs on the store
    with server.client(alice) as mine:
        refused = mine.post(f"/api/tasks/{task_id}/merge", json={})
    over_mcp = _mcp_merge(server, alice, task_id)
    as_a_run = BackendCalls(server.store, Config(), task_id)
    with pytest.raises(InvalidTransition) as from_a_run:
        asyncio.run(as_a_run.merge(task_id, None, False))

    # Then each is refused, saying what to do instead, and nothing changed
    assert refused.status_code == 409, refused.text
    for said in (refused.json()["detail"], over_mcp, str(from_a_run.value)):
        assert f"branch main is checked out in {repo}, and only an admin may merge" in said
        assert "Either ask an admin, or run slotline merge" in said
        assert f"slotline merge {task_id[:8]} --into BRANCH" in said
    assert run(repo, "rev-parse", "main") == main
    assert (repo / "notes.txt").read_text() == "base\n"

    # while an admin's merge moves main and the checkout's files with it.
    with server.client(admin) as http:
        merged = http.post(f"/api/tasks/{task_id}/merge", json={})
    assert merged.status_code == 200, merged.text
    assert (merged.json()["into"], merged.json()["checkout"]) == ("main", str(repo))
    assert run(repo, "rev-parse", "main") == merged.json()["commit"] != main
    assert (repo / "notes.txt").read_text() == "base\nfrom alice\n"
    assert run(repo, "status", "--porcelain") == ""


def test_a_user_merges_only_into_the_branches_the_admin_allows(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    # Given an ended run of alice's, and users allowed to merge into integration only
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    for branch in ("integration", "release"):
        run(repo, "branch", branch)
    server = make_server(node=True, config=merging_into(repo, "integration"))
    admin, alice = server.token("root", "admin"), server.token("alice", "user")
    task_id = _ended_run_of_alice(server, admin, repo)
    tips = {b: run(repo, "rev-parse", b) for b in ("main", "release", "integration")}

    # When alice merges it into release, or into main (its base, the default)
    with server.client(alice) as mine:
        release = mine.post(f"/api/tasks/{task_id}/merge", json={"into": "release"})
        default = mine.post(f"/api/tasks/{task_id}/merge", json={})
    over_mcp = _mcp_merge(server, alice, task_id, "refs/heads/release")

    # Then each is refused, naming the branch and the ones she may merge into
    assert release.status_code == 403, release.text
    assert release.json()["detail"] == (
        f"into release is not among the branches users may merge into in {repo} "
        "(users.merge_into: integration)"
    )
    assert default.status_code == 403
    assert default.json()["detail"].startswith("into main is not among")
    assert "not allowed: into release is not among the branches" in over_mcp
    assert {b: run(repo, "rev-parse", b) for b in tips} == tips

    # while integration is hers to merge into, and any branch an admin's
    with server.client(alice) as mine:
        assert mine.post(f"/api/tasks/{task_id}/merge", json={"into": "integration"}).is_success
    with server.client(admin) as http:
        assert http.post(f"/api/tasks/{task_id}/merge", json={"into": "release"}).is_success
    assert show(repo, "release", "notes.txt") == "base\nfrom alice"
