"""The worktree retention policy as a pure decision: which finished runs' worktrees a
prune removes, given what is on disk and `now` (`plan`). Effects are `inventory.prune`'s.

A worktree is a candidate once its run has ended and it was kept (`kept`); a run's
worktree still `active` (running, or its end not applied yet) never is, nor one whose
task's next attempt resumes in it, nor one kept `always` (it counts against `max_disk`,
the others make room). `until_merged` ones go once merged. Whatever its other `keep`, a
finished worktree goes once older than `retain` (the agent type's, else the
global one), then, oldest first, while its agent type's worktrees take more than that
type's `max_disk`, then while all of them (and the folders nothing owns that a prune
keeps) take more than the global `max_disk`. What goes is the folder: its work is kept
on its branch (`inventory.prune`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from slotline.errors import InvalidInput
from slotline.worktrees.isolation import KeepPolicy, WorktreeState

_SIZE = re.compile(r"^\s*(?P<n>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4}


def parse_size(text: str | int) -> int:
    """`20GB`, `500MB`, `1.5G`, `2GiB` or a number of bytes, as bytes.

    Raises:
        InvalidInput: not a size.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise InvalidInput(f"a size must be 0 or more, not {text}")
        return text
    found = _SIZE.match(str(text))
    if found is None:
        raise InvalidInput(f"{text!r} is not a size; use e.g. 500MB, 20GB or a number of bytes")
    unit = (found["unit"] or "").lower()
    base = 1024 if "i" in unit else 1
    prefix = unit[:1] if unit[:1] in "kmgt" else ""
    scale = _UNITS[prefix] if base == 1 else 1024 ** "_kmgt".index(prefix or "_")
    return int(float(found["n"]) * scale)


@dataclass(frozen=True, slots=True)
class WorktreePolicy:
    """How long finished runs' worktrees stay (seconds; None: no limit by age), how much
    disk they may take together (bytes; None: no limit), and per agent type `retain`
    and `max_disk` (a type's cap counts only its own worktrees)."""

    retain: float | None = None
    max_disk: int | None = None
    agent_retain: Mapping[str, float] = field(default_factory=dict)
    agent_max_disk: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One worktree on disk, as the policy sees it: `ended_at` None while its run is on;
    `resumes`: its task's next attempt will resume in it (it stays)."""

    attempt_id: str
    agent: str | None
    state: WorktreeState
    keep: KeepPolicy
    ended_at: float | None
    size: int
    merged: bool
    resumes: bool = False


@dataclass(frozen=True, slots=True)
class Removal:
    """A worktree to remove, and why: `merged`, `retain` or `max_disk`."""

    attempt_id: str
    reason: str


def plan(
    candidates: Sequence[Candidate], policy: WorktreePolicy, now: float, unowned: int = 0
) -> list[Removal]:
    """The worktrees to remove, oldest first (see the module's docstring); `unowned`:
    bytes on disk that no attempt holds and that stay (they count against `max_disk`)."""
    removals: dict[str, str] = {}
    finished = sorted(
        (c for c in candidates if _prunable(c)), key=lambda c: (c.ended_at or 0.0, c.attempt_id)
    )
    for c in finished:
        retain = policy.agent_retain.get(c.agent or "", policy.retain)
        if c.keep is KeepPolicy.UNTIL_MERGED and c.merged:
            removals[c.attempt_id] = "merged"
        elif retain is not None and now - (c.ended_at or now) >= retain:
            removals[c.attempt_id] = "retain"
    for agent, cap in sorted(policy.agent_max_disk.items()):
        mine = [c for c in candidates if c.agent == agent]
        _cap(removals, mine, [c for c in finished if c.agent == agent], cap, 0)
    if policy.max_disk is not None:
        _cap(removals, candidates, finished, policy.max_disk, unowned)
    return [
        Removal(c.attempt_id, removals[c.attempt_id]) for c in finished if c.attempt_id in removals
    ]


def _cap(
    removals: dict[str, str],
    counted: Sequence[Candidate],
    finished: Sequence[Candidate],
    cap: int,
    extra: int,
) -> None:
    """Add to `removals` the oldest of `finished` while `counted` (and `extra` bytes)
    take more than `cap` bytes."""
    used = extra + sum(c.size for c in counted if c.attempt_id not in removals)
    for c in finished:
        if used <= cap:
            return
        if c.attempt_id not in removals:
            removals[c.attempt_id] = "max_disk"
            used -= c.size


def _prunable(c: Candidate) -> bool:
    # `always` is the user's word that this worktree stays: it counts against max_disk,
    # but only the others make room.
    return (
        c.state is WorktreeState.KEPT
        and c.ended_at is not None
        and not c.resumes
        and c.keep is not KeepPolicy.ALWAYS
    )
