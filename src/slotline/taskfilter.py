"""Which tasks a listing, the line or a bulk verb is about: one filter for the HTTP API,
the dashboard and the CLI."""

from __future__ import annotations

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
