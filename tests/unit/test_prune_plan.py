"""The worktree retention policy as a pure decision (`landing.prune.plan`): oldest
finished first under max_disk, past retain (the agent type's first), until_merged kept
until merged, never a running or `always` worktree."""

from __future__ import annotations

import pytest

from slotline.errors import InvalidInput
from slotline.isolation import KeepPolicy, WorktreeState
from slotline.landing.prune import Candidate, Removal, WorktreePolicy, parse_size, plan

DAY = 86_400.0
NOW = 100 * DAY


def tree(
    name: str,
    ended: float | None,
    size: int = 100,
    keep: KeepPolicy = KeepPolicy.ON_FAILURE,
    merged: bool = False,
    agent: str | None = None,
) -> Candidate:
    state = WorktreeState.ACTIVE if ended is None else WorktreeState.KEPT
    return Candidate(name, agent, state, keep, ended, size, merged)


def test_max_disk_removes_oldest_finished_first_and_never_a_running_one() -> None:
    trees = [
        tree("running", None, size=500),
        tree("newest", NOW - 1, size=100),
        tree("oldest", NOW - 30, size=100),
        tree("middle", NOW - 20, size=100),
    ]
    # 800 bytes on disk, at most 650: the two oldest finished go, the running one stays.
    assert plan(trees, WorktreePolicy(max_disk=650), NOW) == [
        Removal("oldest", "max_disk"), Removal("middle", "max_disk"),
    ]  # fmt: skip
    assert plan(trees, WorktreePolicy(max_disk=800), NOW) == []
    assert [r.attempt_id for r in plan(trees, WorktreePolicy(max_disk=0), NOW)] == [
        "oldest", "middle", "newest",
    ]  # fmt: skip


def test_retain_removes_those_older_than_it_the_agent_types_own_first() -> None:
    trees = [
        tree("old", NOW - 4 * DAY),
        tree("young", NOW - 2 * DAY),
        tree("quick-agent", NOW - 2 * 3600, agent="quick"),
    ]
    policy = WorktreePolicy(retain=3 * DAY, agent_retain={"quick": 3600})
    assert plan(trees, policy, NOW) == [Removal("old", "retain"), Removal("quick-agent", "retain")]
    assert plan(trees, WorktreePolicy(), NOW) == []


def test_until_merged_stays_until_merged_whatever_retain_and_max_disk_say() -> None:
    waiting = tree("waiting", NOW - 9 * DAY, size=10_000, keep=KeepPolicy.UNTIL_MERGED)
    landed = tree("landed", NOW - 1, keep=KeepPolicy.UNTIL_MERGED, merged=True)
    policy = WorktreePolicy(retain=DAY, max_disk=1)
    assert plan([waiting, landed], policy, NOW) == [Removal("landed", "merged")]


def test_keep_always_is_never_pruned() -> None:
    kept = tree("kept", NOW - 9 * DAY, keep=KeepPolicy.ALWAYS)
    assert plan([kept], WorktreePolicy(retain=DAY, max_disk=0), NOW) == []


@pytest.mark.parametrize(
    ("text", "size"), [("20GB", 20 * 10**9), ("500MB", 500 * 10**6), ("2GiB", 2 * 1024**3),
                       ("1.5g", 1_500_000_000), (4096, 4096), ("100", 100)],
)  # fmt: skip
def test_sizes_parse(text: str | int, size: int) -> None:
    assert parse_size(text) == size


def test_a_bad_size_is_refused() -> None:
    with pytest.raises(InvalidInput, match="'lots' is not a size"):
        parse_size("lots")
