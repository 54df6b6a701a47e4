"""`worktrees prune` after a crash, with no node running, on this machine only: it finds
the folders no attempt holds under this machine's worktree root (an empty one removed,
one holding work kept and reported, its bytes counted against max_disk), and leaves a
worktree another machine sharing the store recorded, which `worktrees` lists as remote,
without a size."""

from __future__ import annotations

import os
import signal
import sys
import uuid
from pathlib import Path

from gitrepos import make_repo, run
from slotline.store import Store
from slotline.worktrees import worktree
from slotline.worktrees.isolation import WorktreeState
from waiting import until

from .conftest import Run, Serve, claim_one, ok
from .test_cli_prune import FAILING, _ended


def test_prune_after_a_crash_finds_orphans_and_counts_those_it_keeps(
    cli: Run, serve: Serve, tmp_path: Path
) -> None:
    # Given a failed run whose worktree (about 400 kB) was kept,
    repo = make_repo(tmp_path / "repo")
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    node = serve()
    task = ok(cli("--json", "submit", "--worktree", "--repo", str(repo), "--",
                  sys.executable, str(script), "plain"))  # fmt: skip
    kept = until(lambda: _ended(cli, task["id"]), what="kept")["attempts"][0]["worktree"]
    # and, with no node running any more, two folders as a crash leaves them: the
    # worktrees of tasks the store no longer has, one empty, one holding 400 kB of
    # uncommitted work,
    node.send_signal(signal.SIGTERM)
    node.wait(timeout=30)
    root = Path(kept["path"]).parent.parent
    empty = Path(worktree.create(root, str(repo), "HEAD", uuid.uuid4().hex, 1).path)
    holding = Path(worktree.create(root, str(repo), "HEAD", uuid.uuid4().hex, 1).path)
    (holding / "notes.bin").write_bytes(os.urandom(400_000))
    # When the policy allows 700 kB (the run's worktree alone would fit),
    config = tmp_path / "slotline.yaml"
    config.write_text("worktrees:\n  max_disk: 700kB\n")
    dry = ok(cli("--config", str(config), "--json", "worktrees", "prune", "--dry-run"))
    pruned = ok(cli("--config", str(config), "--json", "worktrees", "prune"))["pruned"]
    # Then the empty orphan is removed, the one holding work kept and reported,
    by_path = {p["path"]: p for p in pruned}
    assert by_path[str(empty)]["reason"] == "orphan"
    assert by_path[str(empty)]["folder_fate"] == "removed"
    assert not empty.exists()
    assert by_path[str(holding)]["folder_fate"] == "kept"
    assert "uncommitted" in by_path[str(holding)]["note"]
    assert (holding / "notes.bin").exists()
    # and its bytes count: the run's worktree goes over max_disk, its work committed.
    assert by_path[kept["path"]]["reason"] == "max_disk"
    assert by_path[kept["path"]]["branch_fate"] == "kept"
    assert not Path(kept["path"]).exists()
    assert "big.bin" in run(repo, "ls-tree", "--name-only", kept["branch"]).split()
    # A dry run had said the same, changing nothing.
    assert {p["path"]: p["folder_fate"] for p in dry["pruned"]} == {
        p: v["folder_fate"] for p, v in by_path.items()
    }


def test_another_machines_worktree_is_listed_remote_and_never_pruned_here(
    cli: Run, store: Store, tmp_path: Path
) -> None:
    # Given a worktree another machine sharing the store kept: its folder, and its
    # branch in that machine's clone, are not here,
    repo = make_repo(tmp_path / "repo")
    task = ok(cli("--json", "submit", "--worktree", "--repo", str(repo), "--", "true"))
    claim_one(store)
    attempt = store.get(task["id"]).attempts[0]
    elsewhere = tmp_path / "other-machine" / "worktrees" / "store-0" / "repo-0"
    path, branch = str(elsewhere / f"{task['id']}-1"), f"slotline/{task['id']}-1"
    base = run(repo, "rev-parse", "HEAD")
    store.record_worktree(attempt.id, attempt.token, path, branch, base)
    store.finish(attempt.id, attempt.token, 1, None)
    store.end_worktree(attempt.id, WorktreeState.KEPT, None)
    # When the worktrees are listed here,
    listed = ok(cli("--json", "worktrees"))
    # Then it is marked remote, without a size,
    assert [(w["task_id"], w["remote"], w["size"]) for w in listed] == [(task["id"], True, None)]
    assert "remote" in cli("worktrees").out
    # and a prune here leaves it to its own machine, whatever the policy.
    config = tmp_path / "slotline.yaml"
    config.write_text("worktrees:\n  max_disk: 0\n  retain: 1s\n")
    assert ok(cli("--config", str(config), "--json", "worktrees", "prune"))["pruned"] == []
    tree = ok(cli("--json", "show", task["id"]))["attempts"][0]["worktree"]
    assert tree["state"] == "kept"
