"""`worktrees prune` with `max_disk` on real worktrees: finished runs' worktree folders
go oldest first until the rest fit (an agent type's own cap counting only its own), a
running one stays, `until_merged` ones too go over the cap; what a run left uncommitted
is committed on its branch first, and a branch whose commits are merged nowhere stays
though its folder goes; a node applies the policy by itself."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gitrepos import branches, make_repo, run
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
    # and both branches stay, each holding the big file its run left uncommitted,
    # committed there by slotline.
    assert [(p["folder_fate"], p["branch_fate"]) for p in pruned] == [("removed", "kept")] * 2
    for gone in (oldest, second):
        assert gone["branch"] in branches(repo)
        assert "big.bin" in run(repo, "ls-tree", "--name-only", gone["branch"]).split()
    assert run(repo, "log", "-1", "--format=%an", second["branch"]) == "slotline"
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


def _agents(config: Path, repo: Path, script: Path, **caps: str) -> Path:
    """A slotline.yaml with one worktree agent type per name in `caps` (its max_disk,
    or "" for none), each running the FAILING script with the prompt as its mode."""
    lines = ["agents:"]
    for name, cap in caps.items():
        lines += [
            f"  {name}:",
            f"    command: [{sys.executable}, {script}, '{{prompt}}']",
            "    isolation: worktree",
            f"    repo: {repo}",
            "    keep: until_merged",
        ]
        if cap:
            lines.append(f"    max_disk: {cap}")
    config.write_text("\n".join(lines) + "\n")
    return config


def _run_agent(cli: Run, config: Path, agent: str, mode: str) -> dict[str, Any]:
    task = ok(cli("--config", str(config), "--json", "submit", "--agent", agent,
                  "--prompt", mode))  # fmt: skip
    attempt: dict[str, Any] = until(lambda: _ended(cli, task["id"]), what="kept")["attempts"][0]
    return attempt["worktree"]


def test_an_agent_types_max_disk_prunes_its_own_oldest_until_merged_worktrees(
    cli: Run, serve: Serve, tmp_path: Path
) -> None:
    # Given a type `small` whose worktrees may take 500 kB, a type `big` with no cap
    # of its own, both keeping their worktrees until merged,
    repo = make_repo(tmp_path / "repo")
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    config = _agents(tmp_path / "slotline.yaml", repo, script, small="500kB", big="")
    # (its node knows no cap: the prune below is the one to apply it)
    serve("--config", str(_agents(tmp_path / "node.yaml", repo, script, small="", big="")))
    # and runs that each left about 400 kB: big's first, then two of small's (the
    # first of them also committed work),
    big = _run_agent(cli, config, "big", "plain")
    old_small = _run_agent(cli, config, "small", "commit")
    new_small = _run_agent(cli, config, "small", "plain")
    # When the policy is applied,
    pruned = ok(cli("--config", str(config), "--json", "worktrees", "prune"))["pruned"]
    # Then only small's oldest folder goes, though unmerged and younger than big's,
    assert [(p["branch"], p["reason"], p["folder_fate"]) for p in pruned] == [
        (old_small["branch"], "max_disk", "removed"),
    ]  # fmt: skip
    assert not Path(old_small["path"]).exists()
    assert Path(new_small["path"]).exists()
    assert Path(big["path"]).exists()
    # and none of its work is lost: its commit and its uncommitted file are on its
    # branch, which stays.
    assert pruned[0]["branch_fate"] == "kept"
    assert pruned[0]["saved_commit"] == run(repo, "rev-parse", old_small["branch"])
    files = run(repo, "ls-tree", "--name-only", old_small["branch"]).split()
    assert {"work.txt", "big.bin"} <= set(files)
    shown = ok(cli("--json", "show", pruned[0]["task_id"]))["attempts"][0]["worktree"]
    assert shown["state"] == "removed"
