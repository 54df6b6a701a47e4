"""Worktree isolation with real nodes, real git repositories and fake coding agents that
edit the same file and commit: each run in its own worktree, both branches kept, the
user's checkout untouched; and the worktrees a crash leaves behind, cleaned up."""

from __future__ import annotations

import asyncio
import logging
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from clean_env import without_slotline_variables
from gitrepos import agent_command, agent_script, branches, make_repo, run, show, worktree_paths
from slotline.models import Status, Task
from slotline.node.node import Node
from slotline.store import Store, open_store
from slotline.worktrees import repolock, worktree
from slotline.worktrees.isolate import Isolator
from slotline.worktrees.isolation import DiffStat, WorktreeState
from slotline.worktrees.orphans import default_root, store_root
from waiting import until, until_async


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(tmp_path / "store.db")
    yield s
    s.close()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"notes.txt": "base\n"})


@asynccontextmanager
async def running_node(store: Store, tmp_path: Path) -> AsyncIterator[Node]:
    node = Node(store, log_dir=tmp_path / "data" / "logs", kill_grace=2.0)
    stop = asyncio.Event()
    task = asyncio.create_task(node.run(stop))
    try:
        yield node
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def worktree_state(store: Store, task: Task) -> WorktreeState | None:
    attempts = store.get(task.id).attempts
    tree = attempts[-1].worktree if attempts else None
    return None if tree is None else tree.state


def test_two_agents_edit_the_same_file_each_in_its_own_worktree(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    # Given two agents that append to the same file and commit, at once,
    store.set_setting("max_concurrent", 2)
    script, signals = agent_script(tmp_path), tmp_path / "signals"
    signals.mkdir()
    head = run(repo, "rev-parse", "HEAD")
    tasks = {
        name: store.submit(
            {
                "command": agent_command(script, name, "notes.txt", signals),
                "title": name,
                "isolation": "worktree",
                "workspace": str(repo),
            }
        )
        for name in ("alpha", "beta")
    }

    async def scenario() -> None:
        async with running_node(store, tmp_path):
            # …both are in flight together (each committed, neither ended),
            await until_async(
                lambda: all((signals / f"{n}.started").exists() for n in tasks), what="both runs"
            )
            paths = {n: store.get(t.id).attempts[0].worktree for n, t in tasks.items()}
            assert all(p is not None and p.state is WorktreeState.ACTIVE for p in paths.values())
            (signals / "go").touch()
            # (a run's worktree is closed before its end reaches the node's next claim)
            await until_async(
                lambda: all(
                    worktree_state(store, t) is WorktreeState.REMOVED
                    and store.get(t.id).status is not Status.RUNNING
                    for t in tasks.values()
                ),
                what="both runs ended and their worktrees closed",
            )

    asyncio.run(scenario())
    # Then both succeeded, each on its own branch with its own line in the shared file,
    for name, task in tasks.items():
        done = store.get(task.id)
        assert done.status is Status.SUCCEEDED, done.attempts[0].reason
        tree = done.attempts[0].worktree
        assert tree is not None
        assert tree.base_commit == head
        assert tree.branch == f"slotline/{task.id}-1"
        assert tree.diff == DiffStat(2, 2, 0)
        assert show(repo, tree.branch, "notes.txt") == f"base\nwritten by {name}"
        assert show(repo, tree.branch, f"{name}.txt") == name
    assert sorted(branches(repo)) == sorted(
        ["main", *(f"slotline/{t.id}-1" for t in tasks.values())]
    )
    # …their clean worktrees were removed, and the user's checkout never moved.
    assert worktree_paths(repo) == [str(repo)]
    assert run(repo, "rev-parse", "HEAD") == head
    assert run(repo, "status", "--porcelain") == ""
    assert (repo / "notes.txt").read_text() == "base\n"


def test_a_failed_run_keeps_its_worktree_and_a_bad_base_fails_the_attempt_clearly(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    failing = store.submit(
        {"command": ["sh", "-c", "echo half >> notes.txt; exit 3"], "isolation": "worktree",
         "repo": str(repo)}
    )  # fmt: skip
    gone = make_repo(tmp_path / "gone")
    vanishing = store.submit({"command": ["true"], "isolation": "worktree", "repo": str(gone)})
    shutil.rmtree(gone)  # after submit: the run finds it gone

    async def scenario() -> None:
        async with running_node(store, tmp_path):
            await until_async(lambda: worktree_state(store, failing) is WorktreeState.KEPT)
            await until_async(lambda: store.get(vanishing.id).status is Status.FAILED)

    asyncio.run(scenario())
    kept = store.get(failing.id).attempts[0].worktree
    assert kept is not None
    assert kept.diff == DiffStat(1, 1, 0)
    assert (Path(kept.path) / "notes.txt").read_text() == "base\nhalf\n"
    failed = store.get(vanishing.id).attempts[0]
    assert failed.reason == f"worktree: repository {gone} does not exist"
    assert failed.worktree is None


def test_a_scheduled_task_starts_from_its_base_at_its_first_run_and_its_retry_too(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    # Given a schedule whose worktree task moves the user's branch on, then fails,
    moved = f"git -C {repo} commit -q --allow-empty -m moved; exit 1"
    spec = {"command": ["sh", "-c", moved], "isolation": "worktree", "repo": str(repo),
            "keep": "never", "max_attempts": 2, "backoff": 0}  # fmt: skip
    store.add_schedule("nightly", "* * * * *", spec)
    (fired,) = store.fire_schedules(now=time.time() + 60).fired
    store.remove_schedule("nightly")  # its task stays; no node fires another
    assert fired.task is not None
    head = run(repo, "rev-parse", "HEAD")

    # When a node runs it, twice,
    async def scenario() -> None:
        async with running_node(store, tmp_path):
            await until_async(lambda: store.get(fired.task.id).status is Status.FAILED)

    asyncio.run(scenario())
    # Then its first run started from the branch as it was then, and its retry from
    # the same commit, not from where the first run moved the branch.
    first, second = store.get(fired.task.id).attempts
    assert first.worktree is not None
    assert second.worktree is not None
    assert first.worktree.base_commit == head
    assert second.worktree.base_commit == head
    assert run(repo, "rev-list", "--count", "HEAD") == "3"


def test_the_sweep_closes_what_a_crash_left_and_spares_live_runs(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    root = store_root(tmp_path / "data" / "worktrees", store.url)
    store.set_setting("max_concurrent", 10)
    spec = {"command": ["true"], "isolation": "worktree", "repo": str(repo)}
    for _ in range(4):
        store.submit(spec)
    claims = {c.task.id: c for c in store.claim("elsewhere").claims}
    live, ended_active, never_recorded, removed_cut_short = claims.values()

    def make(claim_: object, record: bool) -> worktree.Checkout:
        task, attempt = claim_.task, claim_.attempt  # type: ignore[attr-defined]
        made = worktree.create(root, str(repo), task.isolation.base_commit, task.id, 1)
        if record:
            store.record_worktree(
                attempt.id, attempt.token, made.path, made.branch, made.base_commit
            )
        return made

    # Given worktrees as crashes leave them: a live run's; one whose attempt ended (another
    # node reaped it) while it still says active; one its attempt never recorded; one
    # whose removal was cut short; and the folder of a task this store never had,
    live_tree = make(live, True)
    ended_tree = make(ended_active, True)
    unrecorded = make(never_recorded, False)
    cut_short = make(removed_cut_short, True)
    store.end_worktree(removed_cut_short.attempt.id, WorktreeState.REMOVED, None)
    orphan = worktree.create(root, str(repo), "HEAD", "f" * 32, 1)
    for c in (ended_active, never_recorded, removed_cut_short):
        store.finish(c.attempt.id, c.attempt.token, None, "interrupted: node elsewhere died")

    # When a node starts and sweeps,
    async def scenario() -> None:
        async with running_node(store, tmp_path):
            await until_async(lambda: not Path(orphan.path).exists(), what="the sweep")
            await until_async(lambda: not Path(cut_short.path).exists(), what="the sweep")

    asyncio.run(scenario())
    # Then the ended run's worktree is closed by its policy (a failure: kept), the
    # leftovers are gone, and the live run's worktree is untouched.
    assert worktree_state(store, ended_active.task) is WorktreeState.KEPT
    assert Path(ended_tree.path).is_dir()
    assert not Path(unrecorded.path).exists()
    assert Path(live_tree.path).is_dir()
    assert worktree_state(store, live.task) is WorktreeState.ACTIVE
    assert sorted(worktree_paths(repo)) == sorted([str(repo), live_tree.path, ended_tree.path])
    # A sweep with nothing left to do does nothing.
    isolator = Isolator(store, tmp_path / "data" / "worktrees")
    assert isolator.root == root
    assert isolator.sweep(set()) == 0
    # Another store's worktrees are out of its reach.
    assert store_root(tmp_path / "data" / "worktrees", "postgresql://other/db") != root


def test_the_sweep_keeps_an_orphan_holding_work_and_warns_once_with_its_path(
    store: Store, repo: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Given worktrees of tasks this store does not know: one with uncommitted work,
    # one clean,
    isolator = Isolator(store, tmp_path / "data" / "worktrees")
    dirty = worktree.create(isolator.root, str(repo), "HEAD", "d" * 32, 1)
    (Path(dirty.path) / "notes.txt").write_text("base\nunsaved\n")
    clean = worktree.create(isolator.root, str(repo), "HEAD", "c" * 32, 1)
    # When the sweep runs, twice,
    with caplog.at_level(logging.INFO, logger="slotline.node.node"):
        assert isolator.sweep(set()) == 1
        assert isolator.sweep(set()) == 0
    # Then the clean one is gone, the dirty one kept as it was, with one warning naming it.
    assert not Path(clean.path).exists()
    assert (Path(dirty.path) / "notes.txt").read_text() == "base\nunsaved\n"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert dirty.path in warnings[0].getMessage()
    assert "uncommitted" in warnings[0].getMessage()


def start_node(store_path: Path, tmp_path: Path) -> subprocess.Popen[bytes]:
    env = without_slotline_variables()
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    return subprocess.Popen(
        [sys.executable, "-m", "slotline", "--store", str(store_path), "serve", "--no-http",
         "--node-id", "crashy"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tmp_path,
    )  # fmt: skip


def test_a_node_killed_mid_run_finishes_the_worktree_after_its_restart(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    # Given an agent running in its worktree under a node,
    script, signals = agent_script(tmp_path), tmp_path / "signals"
    signals.mkdir()
    task = store.submit(
        {"command": agent_command(script, "gamma", "notes.txt", signals), "isolation": "worktree",
         "repo": str(repo)}
    )  # fmt: skip
    node = start_node(tmp_path / "store.db", tmp_path)
    try:
        until((signals / "gamma.started").exists, what="the agent")
        # …when the node is killed -9 (the agent lives on) and the agent then ends,
        node.send_signal(signal.SIGKILL)
        node.wait(30)
        assert worktree_state(store, task) is WorktreeState.ACTIVE
        (signals / "go").touch()
        # …then the restarted node collects the run and closes its worktree by policy.
        node = start_node(tmp_path / "store.db", tmp_path)
        until(lambda: worktree_state(store, task) is WorktreeState.REMOVED, what="the close")
    finally:
        node.send_signal(signal.SIGTERM)
        node.wait(30)
    done = store.get(task.id)
    assert done.status is Status.SUCCEEDED
    tree = done.attempts[0].worktree
    assert tree is not None
    assert tree.diff == DiffStat(2, 2, 0)
    assert show(repo, tree.branch, "notes.txt") == "base\nwritten by gamma"
    assert worktree_paths(repo) == [str(repo)]


def test_a_cancelled_run_loses_its_worktree_but_not_its_commits(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    script, signals = agent_script(tmp_path), tmp_path / "signals"
    signals.mkdir()
    task = store.submit(
        {"command": agent_command(script, "delta", "notes.txt", signals), "isolation": "worktree",
         "repo": str(repo), "keep": "on_failure"}
    )  # fmt: skip

    async def scenario() -> None:
        async with running_node(store, tmp_path):
            await until_async((signals / "delta.started").exists, what="the agent")
            store.cancel(task.id)
            await until_async(lambda: worktree_state(store, task) is WorktreeState.REMOVED)

    asyncio.run(scenario())
    done = store.get(task.id)
    assert done.status is Status.CANCELLED
    tree = done.attempts[0].worktree
    assert tree is not None
    assert show(repo, tree.branch, "delta.txt") == "delta"
    assert worktree_paths(repo) == [str(repo)]


def test_keep_never_removes_the_worktree_and_its_branch_commits_and_all(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    # Given a run under `keep: never` that commits work, and one under `on_failure`
    # that fails after committing too,
    script = agent_script(tmp_path)
    never = store.submit(
        {"command": agent_command(script, "eps", "notes.txt"), "isolation": "worktree",
         "repo": str(repo), "keep": "never"}
    )  # fmt: skip
    failing = [sys.executable, "-c", "import subprocess, sys; open('x.txt', 'w').write('x'); "
               "subprocess.run(['git', 'add', 'x.txt']); "
               "subprocess.run(['git', 'commit', '-qm', 'x']); sys.exit(1)"]  # fmt: skip
    kept = store.submit({"command": failing, "isolation": "worktree", "repo": str(repo)})
    # When both have run,
    asyncio.run(Node(store, log_dir=tmp_path / "data" / "logs").run_until_idle())
    # Then the `never` run's folder and branch are gone (the one policy that drops
    # committed work),
    tree = store.get(never.id).attempts[0].worktree
    assert tree is not None
    assert tree.state is WorktreeState.REMOVED
    assert not Path(tree.path).exists()
    assert tree.branch not in branches(repo)
    # while the failed run's branch stays with its commit.
    other = store.get(kept.id).attempts[0].worktree
    assert other is not None
    assert other.branch in branches(repo)
    assert worktree_paths(repo) == [str(repo), other.path]


def test_runs_whose_worktrees_wait_leave_the_node_its_heartbeat(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    # Given eight worktree runs starting at once while their repository is locked (a
    # prune, a merge or git itself holding it for long): more than the threads of the
    # default pool (6 on two cores), where the node's heartbeat and claims run,
    store.set_setting("max_concurrent", 8)
    tasks = [
        store.submit({"command": ["true"], "isolation": "worktree", "workspace": str(repo)})
        for _ in range(8)
    ]
    log_dir = tmp_path / "data" / "logs"
    lock = repolock.RepoLock(store_root(default_root(log_dir), store.url), str(repo))
    lock.acquire()

    async def scenario() -> None:
        node = Node(store, log_dir=log_dir, heartbeat=0.1)
        stop = asyncio.Event()
        running = asyncio.create_task(node.run(stop))
        try:
            # when all eight are claimed and wait for the lock to make their worktrees,
            await until_async(
                lambda: all(store.get(t.id).status is Status.RUNNING for t in tasks),
                what="all eight claimed",
            )
            row = store.node(node.node_id)
            assert row is not None
            beat = float(row["heartbeat_at"])

            # then the node's heartbeat goes on meanwhile (other nodes would reap its
            # runs otherwise), and once the lock is free every run ends.
            def beat_again() -> bool:
                again = store.node(node.node_id)
                return again is not None and float(again["heartbeat_at"]) > beat + 0.3

            await until_async(beat_again, what="heartbeats while the worktrees wait")
            lock.release()
            await until_async(
                lambda: all(store.get(t.id).status is Status.SUCCEEDED for t in tasks),
                what="all eight ran",
            )
        finally:
            lock.release()
            stop.set()
            await asyncio.wait_for(running, 30)

    asyncio.run(scenario())
