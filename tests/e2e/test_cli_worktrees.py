"""Worktree isolation through the CLI: an agent type with `isolation: worktree` in
slotline.yaml, two agents on one repository at once under `slotline serve`, `show` with
each attempt's branch and diff stat, `submit --worktree` errors, and `repo` limits."""

from __future__ import annotations

import sys
from pathlib import Path

from gitrepos import agent_script, branches, make_repo, run, show, worktree_paths
from waiting import until

from .conftest import Run, Serve, ok

CONFIG = """\
max_concurrent: 2
agents:
  coder:
    command: [{python}, {script}, "{{prompt}}", notes.txt, {signals}]
    isolation: worktree
"""


def test_two_agents_on_one_repository_each_get_a_branch(
    cli: Run, serve: Serve, tmp_path: Path
) -> None:
    # Given an agent type that runs in worktrees, and a repository,
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    signals = tmp_path / "signals"
    signals.mkdir()
    config = tmp_path / "slotline.yaml"
    config.write_text(
        CONFIG.format(python=sys.executable, script=agent_script(tmp_path), signals=signals)
    )
    serve("--config", str(config))
    # When two agents are submitted on it, from inside it, and run at once,
    ids = [
        ok(cli("--json", "--config", str(config), "submit", "--agent", "coder", "--prompt", name,
               cwd=repo))["id"]
        for name in ("alpha", "beta")
    ]  # fmt: skip
    until(lambda: all((signals / f"{n}.started").exists() for n in ("alpha", "beta")))
    (signals / "go").touch()

    def closed(task_id: str) -> dict[str, object] | None:
        task = ok(cli("--json", "show", task_id))
        tree = task["attempts"][0]["worktree"] if task["attempts"] else None
        return task if tree and tree["state"] == "removed" else None

    shown = [until(lambda i=i: closed(i), what="worktree closed") for i in ids]
    # Then each has its branch with its own line in the shared file, and the checkout
    # the agents were submitted from is as it was.
    for name, task in zip(("alpha", "beta"), shown, strict=True):
        assert task["status"] == "succeeded"
        assert task["repo"] == str(repo)
        tree = task["attempts"][0]["worktree"]  # type: ignore[index]
        assert tree["diff"] == {"files": 2, "insertions": 2, "deletions": 0}
        assert show(repo, tree["branch"], "notes.txt") == f"base\nwritten by {name}"
    assert len(branches(repo)) == 3
    assert worktree_paths(repo) == [str(repo)]
    assert run(repo, "status", "--porcelain") == ""
    text = cli("show", ids[0]).out
    assert "WORKTREES" in text
    assert f"slotline/{ids[0]}-1" in text
    assert "2 files +2 -0" in text
    assert "worktree from main" in text


def test_submit_worktree_refuses_clearly(cli: Run, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    repo = make_repo(tmp_path / "repo")
    not_git = cli("submit", "--worktree", "--repo", str(plain), "--", "true")
    assert not_git.code == 1
    assert not_git.error_line().startswith(f"error: repo: {plain} is not a git repository")
    missing = cli("submit", "--worktree", "--repo", str(tmp_path / "gone"), "--", "true")
    assert "does not exist" in missing.error_line()
    bad_base = cli("submit", "--worktree", "--base", "nope", "--", "true", cwd=repo)
    assert bad_base.error_line() == f"error: base: 'nope' names no commit in {repo}"
    no_isolation = cli("submit", "--keep", "always", "--", "true")
    assert "only with isolation: worktree" in no_isolation.error_line()
    pinned = ok(cli("--json", "submit", "--worktree", "--keep", "never", "--", "true", cwd=repo))
    assert pinned["isolation"]["keep"] == "never"
    assert pinned["isolation"]["base_commit"] == run(repo, "rev-parse", "HEAD")


def test_limits_key_on_the_repository(cli: Run, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    assert cli("limits", "--set", f"repo[{repo}]=1").code == 0
    limits = ok(cli("--json", "limits"))
    assert {"key": "repo", "value": str(repo), "max": 1, "origin": "api"} in limits["limits"]
