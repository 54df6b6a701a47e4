"""The worktree retention policy as a pure decision (`landing.prune.plan`): oldest
finished first under max_disk (an agent type's own cap counting only its worktrees),
past retain (the agent type's first), until_merged removed once merged, every keep mode
held to retain and max_disk, never a running worktree nor one a retry resumes in."""

from __future__ import annotations

import pytest

from slotline.errors import InvalidInput
from slotline.worktrees.isolation import KeepPolicy, WorktreeState
from slotline.worktrees.prune import Candidate, Removal, WorktreePolicy, parse_size, plan

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


def test_until_merged_goes_once_merged_and_is_held_to_retain_and_max_disk() -> None:
    waiting = tree("waiting", NOW - 9 * DAY, size=10_000, keep=KeepPolicy.UNTIL_MERGED)
    landed = tree("landed", NOW - 1, keep=KeepPolicy.UNTIL_MERGED, merged=True)
    assert plan([waiting, landed], WorktreePolicy(), NOW) == [Removal("landed", "merged")]
    # Past retain, or over max_disk, an unmerged one's folder goes too (its work stays
    # on its branch: `inventory.prune`).
    assert plan([waiting, landed], WorktreePolicy(retain=DAY), NOW) == [
        Removal("waiting", "retain"), Removal("landed", "merged"),
    ]  # fmt: skip
    assert plan([waiting], WorktreePolicy(max_disk=1), NOW) == [Removal("waiting", "max_disk")]


def test_keep_always_stays_and_counts_against_max_disk_while_the_others_make_room() -> None:
    kept = tree("kept", NOW - 9 * DAY, keep=KeepPolicy.ALWAYS, merged=True, size=500)
    assert plan([kept], WorktreePolicy(), NOW) == []
    assert plan([kept], WorktreePolicy(retain=DAY), NOW) == []
    assert plan([kept], WorktreePolicy(max_disk=0), NOW) == []
    # Its 500 bytes count: a newer on_failure one goes to make room under 600.
    newer = tree("newer", NOW - DAY, size=200)
    assert plan([kept, newer], WorktreePolicy(max_disk=600), NOW) == [Removal("newer", "max_disk")]


def test_a_worktree_a_retry_resumes_in_stays_whatever_the_policy() -> None:
    resumed = Candidate("resumed", None, WorktreeState.KEPT, KeepPolicy.ON_FAILURE,
                        NOW - 9 * DAY, 100, False, resumes=True)  # fmt: skip
    assert plan([resumed], WorktreePolicy(retain=DAY, max_disk=0), NOW) == []


def test_an_agent_types_max_disk_counts_only_its_own_worktrees() -> None:
    # Given two claude worktrees (the older one ended first) and a bigger aider one,
    trees = [
        tree("claude-old", NOW - 30, size=300, agent="claude"),
        tree("claude-new", NOW - 10, size=300, agent="claude"),
        tree("aider", NOW - 40, size=1000, agent="aider"),
        tree("claude-running", None, size=300, agent="claude"),
    ]
    # When claude's worktrees may take 700 bytes (900 on disk, the running one's too),
    policy = WorktreePolicy(agent_max_disk={"claude": 700})
    # Then only the oldest finished claude one goes: aider's, older and bigger, stays.
    assert plan(trees, policy, NOW) == [Removal("claude-old", "max_disk")]
    # And the global cap still counts them all, oldest first, after the type's cap.
    both = WorktreePolicy(max_disk=1000, agent_max_disk={"claude": 700})
    assert plan(trees, both, NOW) == [
        Removal("aider", "max_disk"),
        Removal("claude-old", "max_disk"),
    ]


def test_bytes_nothing_owns_count_against_the_global_max_disk() -> None:
    trees = [tree("old", NOW - 30, size=100), tree("new", NOW - 10, size=100)]
    assert plan(trees, WorktreePolicy(max_disk=250), NOW) == []
    assert plan(trees, WorktreePolicy(max_disk=250), NOW, unowned=100) == [
        Removal("old", "max_disk")
    ]


@pytest.mark.parametrize(
    ("text", "size"), [("20GB", 20 * 10**9), ("500MB", 500 * 10**6), ("2GiB", 2 * 1024**3),
                       ("1.5g", 1_500_000_000), (4096, 4096), ("100", 100)],
)  # fmt: skip
def test_sizes_parse(text: str | int, size: int) -> None:
    assert parse_size(text) == size


def test_a_bad_size_is_refused() -> None:
    with pytest.raises(InvalidInput, match="'lots' is not a size"):
        parse_size("lots")
