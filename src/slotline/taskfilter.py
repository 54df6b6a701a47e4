"""Which tasks a listing, the line or a bulk verb is about: one filter for the HTTP API,
the dashboard and the CLI."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

from slotline.bounds import normalize_workspace
from slotline.models import Status, Task

MAX_TEXT = 200
# The largest page of the task list a caller may ask for.
MAX_PAGE = 1000


class TaskFilter(BaseModel):
    """Every given criterion must match. `q` is any part of the title or the id (any
    case); `label` is NAME or NAME=VALUE."""

    model_config = ConfigDict(extra="forbid")

    status: list[Status] = Field(default_factory=list, max_length=10)
    agent: str | None = Field(default=None, max_length=MAX_TEXT)
    workspace: str | None = Field(default=None, max_length=4096)
    user: str | None = Field(default=None, max_length=MAX_TEXT)
    label: list[str] = Field(default_factory=list, max_length=20)
    q: str | None = Field(default=None, max_length=MAX_TEXT)

    @field_validator("workspace")
    @classmethod
    def _one_spelling(cls, workspace: str | None) -> str | None:
        # `/w/ws/` finds the tasks of `/w/ws`, as submit stores it. A relative value (a
        # path being typed) is kept as it is: it matches no task.
        if workspace and workspace.startswith("/") and "\x00" not in workspace:
            return normalize_workspace(workspace)
        return workspace

    @property
    def empty(self) -> bool:
        return (
            not (self.status or self.agent or self.workspace or self.user or self.label)
            and not self.q
        )

    def matches(self, task: Task) -> bool:
        if self.status and task.status not in self.status:
            return False
        for name in ("agent", "workspace", "user"):
            wanted = getattr(self, name)
            if wanted is not None and getattr(task, name) != wanted:
                return False
        for label in self.label:
            key, sep, value = label.partition("=")
            if key not in task.labels or (sep and task.labels[key] != value):
                return False
        needle = (self.q or "").casefold()
        return not needle or needle in task.title.casefold() or task.id.startswith(needle)


@dataclass(frozen=True)
class ListQuery:
    """One page of the task list asked for: the filter (`wanted`), the scope, the order
    and the cut. Every face of the queue (`Store.list_page`, `SlotlineClient.list_page`,
    the CLI's `Backend`, `Queue.page`, `SyncQueue.page`, the MCP `list` tool) takes it.

    Attributes:
        wanted: the tasks that match this filter (None: every task).
        owner: only this user's tasks (a user's scope: others' tasks are not seen); the
            HTTP client leaves it to the token.
        root: only this task (full id) and its subtasks, at any depth.
        parent_id: only the direct subtasks of this task (full id).
        newest: newest first rather than oldest first.
        ended: only ended tasks, the last to end first.
        limit: at most this many tasks.
        after: continue after this task (an id or unique prefix): the `next_after` of
            the page before. Tasks submitted meanwhile are neither repeated nor skipped
            among those that existed.
        offset: skip this many tasks first (after `after`, if given).
        count: also count every task that matches (`total`), which costs in proportion
            to the matches.
    """

    wanted: TaskFilter | None = None
    owner: str | None = None
    root: str | None = None
    parent_id: str | None = None
    newest: bool = False
    ended: bool = False
    limit: int = 100
    after: str | None = None
    offset: int = 0
    count: bool = False
