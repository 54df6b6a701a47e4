"""The worktree retention policy as a pure decision: which finished runs' worktrees a
prune removes, given what is on disk and `now` (`plan`). Effects are `inventory.prune`'s.

A worktree is a candidate once its run has ended and it was kept (`kept`); a run's
worktree still `active` (running, or its end not applied yet) never is, nor one with
`keep: always`. `until_merged` ones go once merged, and stay until then (`retain` and
`max_disk` do not touch them). The others go once older than `retain` (the agent type's,
else the global one), then, oldest first, while the worktrees on disk take more than
`max_disk`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from slotline.errors import InvalidInput
from slotline.isolation import KeepPolicy, WorktreeState

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
    disk they may take together (bytes; None: no limit), and per agent type `retain`."""

    retain: float | None = None
    max_disk: int | None = None
    agent_retain: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One worktree on disk, as the policy sees it: `ended_at` None while its run is on."""

    attempt_id: str
    agent: str | None
    state: WorktreeState
    keep: KeepPolicy
    ended_at: float | None
    size: int
    merged: bool


@dataclass(frozen=True, slots=True)
class Removal:
    """A worktree to remove, and why: `merged`, `retain` or `max_disk`."""

    attempt_id: str
    reason: str


def plan(candidates: Sequence[Candidate], policy: WorktreePolicy, now: float) -> list[Removal]:
    """The worktrees to remove, oldest first (see the module's docstring)."""
    removals: dict[str, str] = {}
    finished = sorted(
        (c for c in candidates if _prunable(c)), key=lambda c: (c.ended_at or 0.0, c.attempt_id)
    )
    for c in finished:
        retain = policy.agent_retain.get(c.agent or "", policy.retain)
        if c.keep is KeepPolicy.UNTIL_MERGED:
            if c.merged:
                removals[c.attempt_id] = "merged"
        elif retain is not None and now - (c.ended_at or now) >= retain:
            removals[c.attempt_id] = "retain"
    if policy.max_disk is not None:
        used = sum(c.size for c in candidates if c.attempt_id not in removals)
        for c in finished:
            if used <= policy.max_disk:
                break
            if c.attempt_id in removals or c.keep is KeepPolicy.UNTIL_MERGED:
                continue
            removals[c.attempt_id] = "max_disk"
            used -= c.size
    return [
        Removal(c.attempt_id, removals[c.attempt_id]) for c in finished if c.attempt_id in removals
    ]


def _prunable(c: Candidate) -> bool:
    return (
        c.state is WorktreeState.KEPT and c.ended_at is not None and c.keep is not KeepPolicy.ALWAYS
    )
