"""Self-fencing on the keeper's side: a real keeper (`wrap.py`) stops its run once its node
has confirmed no heartbeat for the lease less the margin, never starts a claim that old,
and counts only heartbeats sent after it started (`slotline.fencing`).

The node's side is `fencing.Fence`: the tests write its file as a node does after each
confirmed heartbeat, and give the keeper the FENCE argument a node gives it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from slotline import fencing
from slotline.runner import wrap
from slotline.runner.process import read_fenced
from waiting import until


class Keeper:
    """A keeper started as a node's keeper server would, in a session of its own."""

    def __init__(self, tmp_path: Path, spec: str, *command: str) -> None:
        self.log = tmp_path / "1.log"
        self.exit = tmp_path / "1.exit"
        argv = [sys.executable, "-I", "-S", wrap.__file__, str(self.exit), "0", str(tmp_path),
                "1000000", spec, "--", *command]  # fmt: skip
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=out, start_new_session=True)

    def command_pids(self) -> list[int]:
        """The keeper's command (and what it started), while they live."""
        try:
            kids = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        return [kid.pid for kid in kids if kid.status() != psutil.STATUS_ZOMBIE]

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


@pytest.fixture
def keepers(tmp_path: Path) -> Iterator[list[Keeper]]:
    started: list[Keeper] = []
    yield started
    for keeper in started:
        keeper.stop()


def now() -> tuple[float, float]:
    """A claim sent and committed just now."""
    return fencing.clock(), fencing.clock()


def start(keepers: list[Keeper], tmp_path: Path, spec: str, *command: str) -> Keeper:
    keeper = Keeper(tmp_path, spec, *command)
    keepers.append(keeper)
    return keeper


def test_a_run_whose_node_confirms_no_heartbeat_is_stopped_at_its_deadline(
    tmp_path: Path, keepers: list[Keeper]
) -> None:
    # Given a node's fence (lease 1.2 s, so a margin of 0.5 s) that never confirms a beat,
    fence = fencing.Fence(tmp_path / "fence", lease=1.2)
    keeper = start(keepers, tmp_path, fence.spec(*now()), "sleep", "60")
    until(keeper.command_pids, what="the command runs")
    # when its deadline passes, the keeper TERMs the run, which ends (and the keeper
    # KILLs its group as it goes, itself included),
    assert keeper.process.wait(timeout=30) == -signal.SIGKILL
    assert not keeper.command_pids()
    # with its status (the TERM) and why it was stopped, in the log and for the node.
    assert keeper.exit.read_text() == f"{-signal.SIGTERM}\n"
    fenced = read_fenced(keeper.log)
    assert fenced is not None
    assert fenced.reason is not None
    assert fenced.reason.startswith("fenced: its node confirmed no heartbeat")
    assert not fenced.requeue
    assert "[slotline: fenced:" in keeper.log.read_text()


def test_a_run_that_ignores_term_is_killed_with_its_keeper_a_margin_later(
    tmp_path: Path, keepers: list[Keeper]
) -> None:
    # Given a command (and a child of it) that ignore TERM, under an unconfirmed fence,
    fence = fencing.Fence(tmp_path / "fence", lease=1.2)
    stubborn = "trap '' TERM; sleep 60 & wait"
    keeper = start(keepers, tmp_path, fence.spec(*now()), "sh", "-c", stubborn)
    until(lambda: len(keeper.command_pids()) == 2, what="the command and its child run")
    pids = keeper.command_pids()
    # the keeper's group is KILLed a margin after the TERM: nothing of the run is left,
    assert keeper.process.wait(timeout=30) == -signal.SIGKILL
    until(lambda: not any(psutil.pid_exists(pid) for pid in pids), what="the run gone")
    # and the exit file and the marker say so.
    assert keeper.exit.read_text() == f"{-signal.SIGKILL}\n"
    assert read_fenced(keeper.log) is not None


def test_a_claim_older_than_its_lease_allows_never_starts(
    tmp_path: Path, keepers: list[Keeper]
) -> None:
    # Given a run claimed a whole lease ago (its node froze between claim and spawn),
    fence = fencing.Fence(tmp_path / "fence", lease=1.2)
    started = tmp_path / "started"
    keeper = start(
        keepers, tmp_path, fence.spec(fencing.clock() - 1.2, fencing.clock()), "touch", str(started)
    )
    # its keeper does not start it, and says why.
    assert keeper.process.wait(timeout=30) == 0
    assert not started.exists()
    fenced = read_fenced(keeper.log)
    assert fenced is not None
    assert fenced.reason is not None
    assert "not started" in fenced.reason
    assert fenced.requeue  # back in line, the attempt uncounted
    assert not keeper.exit.exists()


def test_heartbeats_sent_after_the_keeper_started_renew_it_and_earlier_ones_do_not(
    tmp_path: Path, keepers: list[Keeper]
) -> None:
    # Given a node whose last confirmed heartbeat, sent before a run's claim committed, holds
    # a lease of ten minutes, and a run claimed with 0.5 s of its 6 s lease left,
    fence = fencing.Fence(tmp_path / "fence", lease=6.0)
    fencing.Fence(fence.path, lease=600.0).confirm(fencing.clock())
    claimed = fencing.clock() - 4.5
    old = start(keepers, tmp_path / "old", fence.spec(claimed, fencing.clock()), "sleep", "60")
    # that heartbeat (which may not have renewed the run) does not keep it: it is fenced.
    assert old.process.wait(timeout=30) == -signal.SIGKILL
    assert read_fenced(old.log) is not None
    # A run whose node confirms heartbeats sent after its claim committed lives on past
    # its claim's deadline, and is fenced once they stop.
    claimed = fencing.clock() - 4.5
    fresh = start(keepers, tmp_path / "fresh", fence.spec(claimed, fencing.clock()), "sleep", "60")
    until(fresh.command_pids, what="the command runs")
    beats_until = fencing.clock() + 2.0
    while fencing.clock() < beats_until:  # a node's heartbeats, more often than a node's
        fence.confirm(fencing.clock())
        with contextlib.suppress(subprocess.TimeoutExpired):
            fresh.process.wait(timeout=0.2)
        assert fresh.process.poll() is None, "fenced although its node confirms heartbeats"
    assert fresh.process.wait(timeout=30) == -signal.SIGKILL
    assert read_fenced(fresh.log) is not None


def test_a_run_that_closed_its_output_is_fenced_too(tmp_path: Path, keepers: list[Keeper]) -> None:
    # Given a command that closes its output and goes on (the keeper sees the pipe's end),
    fence = fencing.Fence(tmp_path / "fence", lease=1.2)
    quiet = "exec >/dev/null 2>&1; sleep 60"
    keeper = start(keepers, tmp_path, fence.spec(*now()), "sh", "-c", quiet)
    until(keeper.command_pids, what="the command runs")
    # its keeper still fences it at the deadline.
    assert keeper.process.wait(timeout=30) == -signal.SIGKILL
    assert not keeper.command_pids()
    assert read_fenced(keeper.log) is not None


def test_what_ignores_term_in_the_group_is_killed_even_when_the_command_ends_on_it(
    tmp_path: Path, keepers: list[Keeper]
) -> None:
    # Given a command that dies of TERM, and a child of it in its group that ignores it,
    fence = fencing.Fence(tmp_path / "fence", lease=1.2)
    mixed = "(trap '' TERM; exec sleep 60) & exec sleep 100"
    keeper = start(keepers, tmp_path, fence.spec(*now()), "sh", "-c", mixed)
    until(lambda: len(keeper.command_pids()) == 2, what="the command and its child run")
    pids = keeper.command_pids()
    # once fenced, nothing of the run is left: the keeper KILLs its group as it ends.
    keeper.process.wait(timeout=30)
    until(lambda: not any(psutil.pid_exists(pid) for pid in pids), what="the run gone")
    assert read_fenced(keeper.log) is not None


def test_what_a_command_leaves_in_its_group_goes_when_it_exits(
    tmp_path: Path, keepers: list[Keeper]
) -> None:
    # Given a command under a fence far off that exits, leaving a child in its group,
    fence = fencing.Fence(tmp_path / "fence", lease=600.0)
    child = tmp_path / "child"
    leave = f"sleep 60 & echo $! > {child}; exit 3"
    keeper = start(keepers, tmp_path, fence.spec(*now()), "sh", "-c", leave)
    # its keeper writes the status, then KILLs what is left (a frozen node could not).
    assert keeper.process.wait(timeout=30) == -signal.SIGKILL
    assert keeper.exit.read_text() == "3\n"
    pid = int(child.read_text())
    until(lambda: not psutil.pid_exists(pid), what="the child gone")
    assert read_fenced(keeper.log) is None


def test_a_node_counts_from_heartbeats_confirmed_after_a_claim_committed(tmp_path: Path) -> None:
    fence = fencing.Fence(tmp_path / "fence", lease=6.0)
    claimed = fencing.clock() - 5.5
    committed = claimed + 0.1
    # A claim whose start is slow (a worktree to make) is not too old while the node
    # confirms heartbeats sent after its commit,
    assert fence.lapsed(claimed, committed)
    fence.confirm(fencing.clock())
    assert not fence.lapsed(claimed, committed)
    # but one sent before the commit counts for nothing.
    later = fencing.clock() + 1.0
    assert fence.deadline(claimed, later) == claimed + fence.lease - fence.margin


@pytest.fixture(autouse=True)
def folders(tmp_path: Path) -> None:
    for name in ("old", "fresh"):
        (tmp_path / name).mkdir()
