"""`worktrees prune` with `max_disk` on real worktrees: finished runs' worktrees go
oldest first until the rest fit, a running one stays, and a branch whose commits are
merged nowhere stays though its worktree goes; a node applies the policy by itself."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gitrepos import branches, make_repo
from waiting import until

from .conftest import Run, Serve, ok

# Writes a 400 kB file left uncommitted (after committing a change when asked), then
# fails (so `keep: on_failure` keeps its worktree); with a folder, waits for `go` there.
FAILING = """\
import os, pathlib, subprocess, sys, time
pathlib.Path("big.bin").write_bytes(os.urandom(400_000))
if sys.argv[1] == "commit":
    pathlib.Path("work.txt").write_text("committed\\n")
    subprocess.run(["git", "add", "work.txt"], check=True)
    subprocess.run(["git", "commit", "-q", "-m", "work"], check=True)
if len(sys.argv) > 2:
    while not os.path.exists(os.path.join(sys.argv[2], "go")):
        time.sleep(0.02)
sys.exit(1)
"""


def _ended(cli: Run, task_id: str) -> dict[str, Any] | None:
    task = ok(cli("--json", "show", task_id))
    tree = task["attempts"][0]["worktree"] if task["attempts"] else None
    return task if tree and tree["state"] == "kept" else None


def test_max_disk_prunes_oldest_finished_first_keeping_running_and_unmerged(
    cli: Run, serve: Serve, tmp_path: Path
) -> None:
    # Given three failed runs finished one after the other (the oldest committed work),
    repo = make_repo(tmp_path / "repo")
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    signals = tmp_path / "signals"
    signals.mkdir()
    serve()
    done = []
    for mode in ("commit", "plain", "plain"):
        task = ok(cli("--json", "submit", "--worktree", "--repo", str(repo), "--",
                      sys.executable, str(script), mode))  # fmt: skip
        done.append(until(lambda t=task: _ended(cli, t["id"]), what="kept")["attempts"][0])
    # and one still running, with a worktree as big,
    running = ok(cli("--json", "submit", "--worktree", "--repo", str(repo), "--",
                     sys.executable, str(script), "plain", str(signals)))  # fmt: skip
    until(lambda: (ok(cli("--json", "show", running["id"]))["attempts"] or [{}])[0].get("worktree"))
    until(lambda: len(ok(cli("--json", "worktrees"))) == 4, what="four worktrees")
    sizes = {w["task_id"]: w["size"] for w in ok(cli("--json", "worktrees"))}
    assert all(size > 400_000 for size in sizes.values())
    # When the policy allows about two worktrees' worth of disk,
    config = tmp_path / "slotline.yaml"
    config.write_text("worktrees:\n  max_disk: 1000kB\n")
    pruned = ok(cli("--config", str(config), "--json", "worktrees", "prune"))["pruned"]
    # Then the two oldest finished go, oldest first; the running one and the newest stay,
    oldest, second, newest = (a["worktree"] for a in done)
    assert [(p["branch"], p["reason"]) for p in pruned] == [
        (oldest["branch"], "max_disk"), (second["branch"], "max_disk"),
    ]  # fmt: skip
    left = {w["branch"]: w["state"] for w in ok(cli("--json", "worktrees"))}
    assert newest["branch"] in left
    assert "active" in left.values()
    assert not Path(oldest["path"]).exists()
    assert Path(newest["path"]).exists()
    # and the oldest run's branch stays (its commit is merged nowhere), the other goes.
    assert [p["branch_fate"] for p in pruned] == ["kept", "deleted"]
    assert oldest["branch"] in branches(repo)
    assert second["branch"] not in branches(repo)
    (signals / "go").touch()


def test_a_node_applies_the_policy_when_a_run_ends(cli: Run, serve: Serve, tmp_path: Path) -> None:
    # Given a node whose policy allows no finished worktree on disk,
    repo = make_repo(tmp_path / "repo")
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    config = tmp_path / "slotline.yaml"
    config.write_text("worktrees:\n  max_disk: 0\n")
    serve("--config", str(config))
    # When a run fails (its worktree is kept by on_failure),
    task = ok(cli("--json", "submit", "--worktree", "--repo", str(repo), "--",
                  sys.executable, str(script), "plain"))  # fmt: skip

    # Then the node prunes it soon after, by itself.
    def removed() -> bool:
        tree = (ok(cli("--json", "show", task["id"]))["attempts"] or [{}])[0].get("worktree")
        return bool(tree) and tree["state"] == "removed"

    until(removed, what="pruned by the node")
    assert ok(cli("--json", "worktrees")) == []
