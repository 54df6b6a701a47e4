"""What a user token may choose (`users:` in slotline.yaml): where its runs happen, which
repositories its worktree tasks name, which branches it merges into, how many of its
runs it starts over the limit, and which functions and external tasks it submits.

Admins (and open mode's local user) choose anything; a task token is the code of a run
already going on the node, bounded by that run's own sandbox, not by these. Every
surface that takes these fields from a user (HTTP submit and batch, MCP over /mcp, the
Hephaestus bump, merge) calls the checks below, so the rule is stated once. A refusal
is `AccessDenied` (HTTP 403), one line naming the field, the value and what is allowed.

Paths are compared as the file system resolves them (`..`, symlinks): a workspace
`/allowed/../etc`, or a symlink in an allowed folder that leads out of it, is refused.
They are checked when the task is submitted.
"""

from __future__ import annotations

import fnmatch
import os
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from slotline.bounds import COUNT
from slotline.errors import AccessDenied
from slotline.models import Kind
from slotline.spec import TaskSpec


def _absolute(path: str) -> str:
    full = os.path.expanduser(path)
    if not os.path.isabs(full):
        raise ValueError(f"{path!r} must be an absolute path (or start with ~)")
    return full


class UsersConfig(BaseModel):
    """`users:`: what a user token may choose beyond the agent type's own settings.

    The defaults let a user choose nothing of the kind: its tasks run where the agent
    type says, it merges nowhere, starts nothing over the limit, and (with
    `raw_commands: admins`) submits no function or external task.
    """

    model_config = ConfigDict(extra="forbid")

    # Folders (and everything below them) a user's task may name as its workspace.
    workspaces: list[str] = Field(default_factory=list)
    # Repositories a user's worktree task may name (besides its agent type's `repo` and
    # any repository inside `workspaces`).
    repos: list[str] = Field(default_factory=list)
    # Branches a user may merge a run's work into, per repository.
    merge_into: dict[str, list[str]] = Field(default_factory=dict)
    # Runs a user may have started over the limit at once ("start now" past it).
    start_now: Annotated[int, COUNT] = 0
    # Registered functions (fnmatch patterns) a user may submit under raw_commands: admins.
    functions: list[str] = Field(default_factory=list)
    # Whether a user may submit external tasks under raw_commands: admins.
    external: bool = False

    @field_validator("workspaces", "repos")
    @classmethod
    def _paths(cls, paths: list[str]) -> list[str]:
        return [_absolute(p) for p in paths]

    @field_validator("merge_into")
    @classmethod
    def _targets(cls, targets: dict[str, list[str]]) -> dict[str, list[str]]:
        for branches in targets.values():
            if any(not b or b.startswith("-") or b != b.strip() for b in branches):
                raise ValueError("a branch name must not be empty, start with '-' or hold spaces")
        return {_absolute(repo): branches for repo, branches in targets.items()}

    @field_validator("functions")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        if any(not p.strip() for p in patterns):
            raise ValueError("a function pattern must not be empty")
        return patterns


def bounded(role: str) -> bool:
    """Whether `users:` bounds what a caller of `role` chooses: a user token's. An admin
    (open mode's local user too) chooses anything; a task token is its run's code."""
    return role == "user"


def real(path: str) -> str:
    """`path` as the file system resolves it (`~`, `..`, symlinks), even if it does not
    exist (yet)."""
    return os.path.realpath(os.path.expanduser(path))


def _within(path: str, folders: list[str]) -> bool:
    target = real(path)
    for folder in folders:
        top = real(folder)
        if target == top or target.startswith(top.rstrip("/") + "/"):
            return True
    return False


def _listed(values: list[str]) -> str:
    return ", ".join(values) if values else "none"


def check_submit(
    users: UsersConfig, spec: TaskSpec, agent_repo: str | None, admin_only_raw: bool
) -> None:
    """Refuse a user's submit that chooses more than `users` allows: a workspace outside
    `users.workspaces`, a repository that is neither the agent type's (`agent_repo`) nor
    in `users.repos` or `users.workspaces`, and (when raw commands are for admins) a
    function not matching `users.functions` or an external task unless `users.external`.

    Raises:
        AccessDenied: what the user may not choose, and what it may.
    """
    if spec.workspace is not None and not _within(spec.workspace, users.workspaces):
        raise AccessDenied(
            f"workspace {spec.workspace} is not among the workspaces users may choose "
            f"(users.workspaces: {_listed(users.workspaces)})"
        )
    if spec.repo is not None:
        own = agent_repo is not None and real(spec.repo) == real(agent_repo)
        if not own and not _within(spec.repo, [*users.repos, *users.workspaces]):
            allowed = [*([agent_repo] if agent_repo else []), *users.repos, *users.workspaces]
            raise AccessDenied(
                f"repo {spec.repo} is not among the repositories users may choose (the "
                f"agent type's repo, users.repos, users.workspaces: {_listed(allowed)})"
            )
    if not admin_only_raw:
        return
    if spec.resolved_kind is Kind.CALLABLE:
        name = spec.callable or ""
        if not any(fnmatch.fnmatchcase(name, p) for p in users.functions):
            raise AccessDenied(
                f"callable {name} is not among the functions users may call "
                f"(users.functions: {_listed(users.functions)})"
            )
    if spec.resolved_kind is Kind.EXTERNAL and not users.external:
        raise AccessDenied(
            "kind external is for admins here (users.external: false): an admin lets "
            "users submit external tasks with users.external: true"
        )


def check_merge(users: UsersConfig, repo: str, target: str) -> None:
    """Refuse a user's merge into `target` of `repo` unless `users.merge_into` lists it
    for that repository.

    Raises:
        AccessDenied: the branch is not one users may merge into there.
    """
    where = real(repo)
    allowed = next((b for r, b in users.merge_into.items() if real(r) == where), [])
    if target not in allowed:
        raise AccessDenied(
            f"into {target} is not among the branches users may merge into in {repo} "
            f"(users.merge_into: {_listed(allowed)})"
        )
