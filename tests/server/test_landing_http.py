"""Reviewing and landing a worktree run over HTTP, with the access rules of the other
task routes: readers of the task see its diff, its owner or an admin merges it, another
user's task is hidden, pruning is for admins."""

from __future__ import annotations

from pathlib import Path

from gitrepos import make_repo, run, show
from waiting import until

from .conftest import ServerFactory, command


def test_diff_merge_and_worktrees_follow_the_task_access_rules(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    run(repo, "branch", "integration")
    server = make_server(node=True)
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
