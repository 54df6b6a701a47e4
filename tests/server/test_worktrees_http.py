"""Worktree isolation over HTTP: submitted with a repository, run by a node, its attempt's
branch, state and diff stat in the task JSON (and read back by the Python client)."""

from __future__ import annotations

from pathlib import Path

from gitrepos import make_repo, run, show
from slotline.client.http import SlotlineClient
from slotline.worktrees.isolation import DiffStat, WorktreeState
from waiting import until

from .conftest import ServerFactory, command


def test_a_worktree_run_over_http(make_server: ServerFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    server = make_server(node=True)
    agent = command(
        "import subprocess",
        "open('notes.txt', 'a').write('from http\\n')",
        "subprocess.run(['git', 'commit', '-qam', 'work'], check=True)",
    )
    with server.client() as http:
        answer = http.post(
            "/api/tasks", json={"command": agent, "isolation": "worktree", "repo": str(repo)}
        )
        assert answer.status_code == 201, answer.text
        task = answer.json()
        assert task["repo"] == str(repo)
        assert task["isolation"] == {
            "kind": "worktree", "base": "main", "base_commit": run(repo, "rev-parse", "HEAD"),
            "keep": "on_failure",
        }  # fmt: skip

        def closed() -> dict[str, object] | None:
            body = http.get(f"/api/tasks/{task['id']}").json()
            attempts = body["attempts"]
            # The worktree is closed before the run's outcome is committed: wait for both.
            removed = attempts and (attempts[0]["worktree"] or {}).get("state") == "removed"
            return body if removed and body["status"] != "running" else None

        done = until(closed, what="the worktree closed and the run ended")
    assert done["status"] == "succeeded"
    tree = done["attempts"][0]["worktree"]  # type: ignore[index]
    assert tree["diff"] == {"files": 1, "insertions": 1, "deletions": 0}
    assert show(repo, tree["branch"], "notes.txt") == "base\nfrom http"
    with SlotlineClient(server.url) as client:
        read = client.get(task["id"])
    assert read.isolation is not None
    assert read.repo == str(repo)
    worktree = read.attempts[0].worktree
    assert worktree is not None
    assert (worktree.state, worktree.diff) == (WorktreeState.REMOVED, DiffStat(1, 1, 0))


def test_submit_refuses_a_folder_that_is_not_a_repository(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with make_server().client() as http:
        answer = http.post(
            "/api/tasks", json={"command": ["true"], "isolation": "worktree", "repo": str(plain)}
        )
        assert answer.status_code == 422
        assert answer.json()["detail"].startswith(f"repo: {plain} is not a git repository")
        bad = http.post(
            "/api/tasks",
            json={"command": ["true"], "isolation": "worktree", "repo": str(plain), "keep": "x"},
        )
        assert bad.status_code == 422
