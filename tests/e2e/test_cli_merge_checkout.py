"""`slotline merge` into the branch the user has checked out (their `main`), as `git merge`
there: a fast-forward or a merge commit when the checkout is clean, its files and index
moving with the branch; refused, changing nothing, when it is dirty, a merge waits there,
or the run's branch conflicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gitrepos import agent_command, agent_script, commit_file, make_repo, worktree_paths
from gitrepos import run as git_in
from slotline.worktrees.git import GitFailed
from waiting import until

from .conftest import Run, Serve, ok


def _ended_runs(cli: Run, repo: Path, tmp_path: Path, *files: str) -> list[dict[str, Any]]:
    """A fake agent per file, each appending its line to it in a worktree of its own and
    committing; the tasks once their runs ended."""
    script = agent_script(tmp_path)
    ids = [
        ok(cli("--json", "submit", "--worktree", "--repo", str(repo), "--keep", "always",
               "--", *agent_command(script, f"agent{n}", file)))["id"]
        for n, file in enumerate(files)
    ]  # fmt: skip
    return [until(lambda i=i: _ended(cli, i), what="the run ended") for i in ids]


def _ended(cli: Run, task_id: str) -> dict[str, Any] | None:
    task: dict[str, Any] = ok(cli("--json", "show", task_id))
    return task if task["status"] == "succeeded" else None


def _checkout(repo: Path) -> tuple[str, str, str, str, dict[str, str]]:
    """All a merge could change in the user's checkout: HEAD, the branch's commit, the
    index, the status, and the files."""
    files = {p.name: p.read_text() for p in repo.iterdir() if p.is_file()}
    return (
        git_in(repo, "symbolic-ref", "HEAD"),
        git_in(repo, "rev-parse", "main"),
        git_in(repo, "ls-files", "--stage"),
        git_in(repo, "status", "--porcelain"),
        files,
    )


def test_a_run_fast_forwards_the_checked_out_main_and_its_files(
    cli: Run, serve: Serve, tmp_path: Path
) -> None:
    # Given the user's repository, main checked out and clean (but for a file of their
    # own, untracked), and a run that committed on its branch
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    (repo / "mine.txt").write_text("untracked, the user's\n")
    serve()
    (task,) = _ended_runs(cli, repo, tmp_path, "notes.txt")
    branch = task["attempts"][0]["worktree"]["branch"]
    # When it is merged into main (the branch it started from)
    merged = ok(cli("--json", "merge", task["id"]))
    # Then main fast-forwarded to the run's commit, with the checkout's files and index
    assert (merged["into"], merged["checkout"], merged["already"]) == ("main", str(repo), False)
    assert (
        merged["commit"] == git_in(repo, "rev-parse", branch) == git_in(repo, "rev-parse", "HEAD")
    )
    assert (repo / "notes.txt").read_text() == "base\nwritten by agent0\n"
    assert (repo / "agent0.txt").read_text() == "agent0\n"
    assert git_in(repo, "status", "--porcelain") == "?? mine.txt"
    assert git_in(repo, "symbolic-ref", "--short", "HEAD") == "main"
    shown = ok(cli("--json", "show", task["id"]))
    assert shown["attempts"][0]["worktree"]["merged"]["into"] == "main"


def test_a_merge_commit_or_a_squash_when_main_moved_on(
    cli: Run, serve: Serve, tmp_path: Path
) -> None:
    # Given two runs on files of their own, and main moved on since they started
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    serve()
    first, second = _ended_runs(cli, repo, tmp_path, "a.txt", "b.txt")
    before = commit_file(repo, "user.txt", "the user's\n", "the user's own work")
    # When the first is merged and the second squashed into the checked-out main
    merged = ok(cli("--json", "merge", first["id"]))
    squashed = cli("merge", second["id"], "--squash")
    # Then the first is a merge commit of main and the run's branch,
    branch = first["attempts"][0]["worktree"]["branch"]
    assert merged["old"] == before
    parents = git_in(repo, "rev-list", "--parents", "-n", "1", merged["commit"]).split()[1:]
    assert parents == [before, git_in(repo, "rev-parse", branch)]
    # the second one commit on top of it, each with its files in the checkout, clean.
    assert squashed.code == 0, squashed.err
    assert f"squashed into main: {merged['commit'][:12]} -> " in squashed.out
    assert f"(and the files of {repo})" in squashed.out
    head = git_in(repo, "rev-parse", "HEAD")
    assert git_in(repo, "rev-list", "--parents", "-n", "1", head).split()[1:] == [merged["commit"]]
    assert git_in(repo, "rev-parse", "main") == head
    for name, text in {"a.txt": "written by agent0\n", "b.txt": "written by agent1\n",
                       "user.txt": "the user's\n", "agent1.txt": "agent1\n"}.items():  # fmt: skip
        assert (repo / name).read_text() == text
    assert git_in(repo, "status", "--porcelain") == ""


def test_refused_when_the_checkout_has_changes_or_a_merge_waits_there(
    cli: Run, serve: Serve, tmp_path: Path
) -> None:
    # Given a run, and the user's main with an unstaged and a staged change
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n", "todo.txt": "todo\n"})
    serve()
    (task,) = _ended_runs(cli, repo, tmp_path, "new.txt")
    (repo / "notes.txt").write_text("base\nedited\n")
    (repo / "todo.txt").write_text("staged\n")
    git_in(repo, "add", "todo.txt")
    seen = _checkout(repo)
    # When it is merged into main, it is refused naming both files; nothing changed
    dirty = cli("merge", task["id"])
    assert dirty.code == 1
    assert dirty.error_line() == (
        f"error: branch main is checked out in {repo}, which has uncommitted changes in "
        "notes.txt, todo.txt; nothing was changed: commit or stash them there, then merge "
        "again"
    )
    assert _checkout(repo) == seen
    assert "merged" not in [e["kind"] for e in ok(cli("--json", "events"))]
    # And with a merge of the user's own waiting for its conflicts to be resolved
    git_in(repo, "reset", "-q", "--hard")
    git_in(repo, "checkout", "-q", "-b", "side")
    commit_file(repo, "notes.txt", "side\n")
    git_in(repo, "checkout", "-q", "main")
    commit_file(repo, "notes.txt", "main\n")
    with pytest.raises(GitFailed):  # the conflict, which the user has yet to resolve
        git_in(repo, "merge", "side")
    seen = _checkout(repo)
    waiting = cli("merge", task["id"])
    assert waiting.code == 1
    assert "where a merge is in progress; nothing was changed" in waiting.error_line()
    assert _checkout(repo) == seen


def test_refused_on_a_conflict_leaving_the_checkout_as_it_was(
    cli: Run, serve: Serve, tmp_path: Path
) -> None:
    # Given a run that appended to notes.txt, and main that changed the same line since
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    serve()
    (task,) = _ended_runs(cli, repo, tmp_path, "notes.txt")
    commit_file(repo, "notes.txt", "base\nthe user's line\n")
    seen, trees = _checkout(repo), worktree_paths(repo)
    # When it is merged into main
    refused = cli("--json", "merge", task["id"])
    # Then it is refused naming the file, and the checkout is exactly as it was
    assert refused.code == 1
    assert '"type": "MergeConflict"' in refused.err
    assert "conflicts with the target in notes.txt" in refused.err
    assert _checkout(repo) == seen
    assert not Path(git_in(repo, "rev-parse", "--absolute-git-dir"), "MERGE_HEAD").exists()
    assert worktree_paths(repo) == trees
