"""The Python API's `queue.landing` on real git: two fake agents append to one file,
each diffed; the first squash-merges into a branch nobody has checked out, the second
is refused on the conflict with nothing changed; a prune over max_disk removes
`until_merged` worktrees' folders, their branches kept; past retain, work a run left
uncommitted is committed on its branch by slotline before its folder goes."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from gitrepos import agent_command, agent_script, branches, make_repo, run, show
from slotline.api.queue import open_queue
from slotline.clock import utcnow
from slotline.errors import MergeConflict
from slotline.models import Status
from slotline.node.node import Node
from slotline.worktrees import verbs
from slotline.worktrees.prune import WorktreePolicy
from waiting import until_async


def test_diff_merge_and_prune_through_the_python_api(tmp_path: Path) -> None:
    asyncio.run(_diff_merge_and_prune(tmp_path))


async def _diff_merge_and_prune(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    run(repo, "branch", "integration")
    script = agent_script(tmp_path)
    async with open_queue(tmp_path / "store.db") as queue:
        ids = [
            (await queue.submit(
                agent_command(script, name, "notes.txt"), isolation="worktree",
                repo=str(repo), keep="until_merged",
            )).id
            for name in ("alpha", "beta")
        ]  # fmt: skip
        node = Node(queue.store, log_dir=tmp_path / "data" / "logs")
        await node.run_until_idle()
        assert [(await queue.get(i)).status for i in ids] == [Status.SUCCEEDED] * 2

        patch = await queue.landing.diff(ids[0])
        assert "+written by alpha" in patch.text
        result, task = await queue.landing.merge(ids[0], into="integration", squash=True)
        assert (result.into, result.squash, result.already) == ("integration", True, False)
        assert show(repo, "integration", "notes.txt") == "base\nwritten by alpha"
        assert run(repo, "rev-list", "--count", "main..integration") == "1"  # one squashed commit
        tree = task.attempts[-1].worktree
        assert tree is not None
        assert tree.merged is not None
        assert tree.merged.into == "integration"

        before = run(repo, "rev-parse", "integration")
        with pytest.raises(MergeConflict) as refused:
            await queue.landing.merge(ids[1], into="integration")
        assert refused.value.details["files"] == ["notes.txt"]
        assert run(repo, "rev-parse", "integration") == before

        # Then a prune over max_disk removes both until_merged folders: alpha's as merged
        # (squashed into integration), beta's to make room; both branches stay (alpha's
        # own commits are on no other branch, beta's are merged nowhere).
        paths = [w["path"] for w in await queue.landing.worktrees()]
        pruned = await queue.landing.prune(max_disk=0)
        fates = {p["task_id"]: (p["reason"], p["folder_fate"], p["branch_fate"]) for p in pruned}
        assert fates == {
            ids[0]: ("merged", "removed", "kept"),
            ids[1]: ("max_disk", "removed", "kept"),
        }
        assert await queue.landing.worktrees() == []
        assert not any(Path(path).exists() for path in paths)
        assert {p["branch"] for p in pruned} <= set(branches(repo))


def test_retain_prunes_finished_worktrees_past_it_keeping_unmerged_branches(tmp_path: Path) -> None:
    asyncio.run(_retain(tmp_path))


async def _retain(tmp_path: Path) -> None:
    # Given three failed runs (kept by on_failure): one committed work, one left its
    # change uncommitted, one changed nothing,
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    failing = "import subprocess, sys; open('notes.txt', 'a').write('x\\n'); "
    async with open_queue(tmp_path / "store.db") as queue:
        committed = await queue.submit(
            [sys.executable, "-c", failing + "subprocess.run(['git', 'commit', '-qam', 'w']); "
             "sys.exit(1)"], isolation="worktree", repo=str(repo),
        )  # fmt: skip
        uncommitted = await queue.submit(
            [sys.executable, "-c", failing + "sys.exit(1)"], isolation="worktree", repo=str(repo)
        )
        idle = await queue.submit(
            [sys.executable, "-c", "import sys; sys.exit(1)"], isolation="worktree",
            repo=str(repo),
        )  # fmt: skip
        await Node(queue.store, log_dir=tmp_path / "data" / "logs").run_until_idle()
        trees = {t["task_id"]: t for t in await queue.landing.worktrees()}
        assert set(trees) == {committed.id, uncommitted.id, idle.id}
        ended = max([(await queue.get(i)).finished_at or 0.0 for i in trees])
        policy = WorktreePolicy(retain=3 * 86_400)
        # When the policy is applied before retain has passed, nothing goes;
        assert verbs.prune(queue.store, policy, ended + 86_400) == []
        # once it has, every folder goes, and no work with it:
        pruned = verbs.prune(queue.store, policy, ended + 4 * 86_400)
        events = [e.data for e in await queue.events() if e.kind == "worktree"]
    fates = {p["task_id"]: (p["reason"], p["folder_fate"], p["branch_fate"]) for p in pruned}
    assert fates == {
        committed.id: ("retain", "removed", "kept"),
        uncommitted.id: ("retain", "removed", "kept"),
        idle.id: ("retain", "removed", "deleted"),
    }
    assert not any(Path(t["path"]).exists() for t in trees.values())
    # the committed work stays on its branch; the uncommitted change was committed on
    # its branch by slotline, saying so;
    assert trees[committed.id]["branch"] in branches(repo)
    saved = next(p for p in pruned if p["task_id"] == uncommitted.id)["saved_commit"]
    branch = trees[uncommitted.id]["branch"]
    assert run(repo, "rev-parse", branch) == saved
    assert show(repo, branch, "notes.txt") == "base\nx"
    assert run(repo, "log", "-1", "--format=%an", branch) == "slotline"
    assert "Committed by slotline" in run(repo, "log", "-1", "--format=%B", branch)
    # the branch of the run that changed nothing goes; and each removal is recorded.
    assert trees[idle.id]["branch"] not in branches(repo)
    recorded = {e["branch"]: (e["pruned"], e["branch_fate"]) for e in events if "pruned" in e}
    assert recorded[branch] == ("retain", "kept")


def test_prune_takes_an_agent_types_own_retain_and_max_disk(tmp_path: Path) -> None:
    asyncio.run(_per_type(tmp_path))


async def _per_type(tmp_path: Path) -> None:
    # Given a finished worktree run of each of two agent types,
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    script = agent_script(tmp_path)
    async with open_queue(tmp_path / "store.db") as queue:
        ids = {
            agent: (await queue.submit(
                agent_command(script, agent, "notes.txt"), isolation="worktree",
                repo=str(repo), agent=agent, keep="until_merged",
            )).id
            for agent in ("claude", "codex")
        }  # fmt: skip
        await Node(queue.store, log_dir=tmp_path / "data" / "logs").run_until_idle()

        # when a prune caps one type's disk at nothing and gives the other a week, and
        # one gives the other a second, once a second has passed since its run ended,
        pruned = await queue.landing.prune(
            dry_run=True, agent_max_disk={"claude": "0"}, agent_retain={"codex": "7d"}
        )
        ended = (await queue.get(ids["codex"])).attempts[-1].finished_at
        assert ended is not None
        await until_async(lambda: utcnow() > ended + 1, what="a second since the run ended")
        by_age = await queue.landing.prune(dry_run=True, agent_retain={"codex": "1s"})

    # then only the capped type's worktree goes, and a type's retain counts its own.
    assert [(p["task_id"], p["reason"]) for p in pruned] == [(ids["claude"], "max_disk")]
    assert [(p["task_id"], p["reason"]) for p in by_age] == [(ids["codex"], "retain")]
