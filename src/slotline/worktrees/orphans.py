"""Where a store's worktrees live on this machine, and the folders there that no attempt
holds: the node's sweep removes them, and so does `slotline worktrees prune` (after a
crash, with no node running) — one rule for both.

A folder is slotline's when it is named `<task id>-<attempt>` (`worktree.place`). It is
unheld when no attempt records it as active or kept, and either no attempt of that name
exists (an orphan: its task was deleted) or that attempt has ended and never recorded
it (its node died between `git worktree add` and the record) or recorded it removed (a
removal cut short). A live attempt's folder is never unheld: it may be opening it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from slotline.config.file import redact_url
from slotline.errors import NotFound
from slotline.models import Attempt, Task
from slotline.runlogs import default_log_dir
from slotline.store import Store
from slotline.worktrees import worktree
from slotline.worktrees.isolation import Checkout, WorktreeState

log = logging.getLogger("slotline.node")


@dataclass(frozen=True, slots=True)
class Unheld:
    """A worktree folder no attempt holds: `checkout` is its attempt's (the folder is
    removed through its repository, whatever it holds: that run never recorded work in
    it, or its removal was cut short), None when no attempt knows it (an orphan: removed
    only if it holds no work, `worktree.remove_orphan`)."""

    folder: Path
    checkout: Checkout | None

    def clear(self, store: Store, root: Path) -> str | None:
        """Remove it (blocking: git); None when removed, else why it was kept. Whether
        an attempt holds it is read again holding the repository's lock, under which a
        resumed run or a follow-up reopens a folder and records it (`Isolator.reopen`):
        one that did since `unheld` read the store keeps it."""
        path = str(self.folder)
        if self.checkout is None:
            return worktree.remove_orphan(root, self.folder, lambda: holder(store, path))
        why: list[str] = []

        def taken() -> bool:
            why.extend(filter(None, [holder(store, path)]))
            return bool(why)

        return why[0] if not worktree.remove(root, self.checkout, taken) else None


def unheld(store: Store, root: Path, running: Collection[str] = ()) -> list[Unheld]:
    """The folders under `root` that no attempt holds (see the module's docstring);
    attempts in `running` (a node's own, still closing) are left alone. Blocking."""
    if not root.is_dir():
        return []
    # The folders an attempt holds: a resumed run or a follow-up works in the folder
    # named after the attempt it continues, which no longer holds it.
    held = _held(store)
    found = []
    for folder in _folders(root):
        if str(folder) in held:
            continue
        try:
            item = _unheld(store, root, folder, running)
        except Exception:  # one unreadable folder must not hide the others
            log.exception("reading a worktree folder failed", extra={"path": str(folder)})
            continue
        if item is not None:
            found.append(item)
    return found


def _held(store: Store) -> dict[str, Attempt]:
    """The worktree folders attempts record as active or kept, each with one of them."""
    return {
        a.worktree.path: a
        for state in (WorktreeState.ACTIVE, WorktreeState.KEPT)
        for a in store.worktrees(state)
        if a.worktree is not None
    }


def holder(store: Store, path: str) -> str | None:
    """Which attempt records the folder at `path` as active or kept, as a reason to
    leave it, read now; None if none."""
    attempt = _held(store).get(path)
    if attempt is None:
        return None
    assert attempt.worktree is not None
    return (
        f"attempt {attempt.number} of task {attempt.task_id[:8]} took it over "
        f"(it records it {attempt.worktree.state.value})"
    )


def _folders(root: Path) -> list[Path]:
    found = []
    for repo_folder in sorted(root.iterdir()):
        if repo_folder.is_dir():
            found.extend(sorted(p for p in repo_folder.iterdir() if p.is_dir()))
    return found


def _unheld(store: Store, root: Path, folder: Path, running: Collection[str]) -> Unheld | None:
    named = worktree.parse_name(folder)
    if named is None:
        return None  # not slotline's
    task_id, number = named
    try:
        task: Task | None = store.get(task_id)
    except NotFound:
        task = None
    attempt = None
    if task is not None:
        attempt = next((a for a in task.attempts if a.number == number), None)
    if task is None or attempt is None:
        return Unheld(folder, None)
    if attempt.finished_at is None or attempt.id in running:
        return None
    recorded = attempt.worktree
    if recorded is not None and recorded.state is not WorktreeState.REMOVED:
        return None  # kept by policy, or active until the sweep closes it
    return Unheld(folder, checkout_of(root, task, attempt))


def checkout_of(root: Path, task: Task, attempt: Attempt) -> Checkout | None:
    """The worktree of an attempt: as recorded, else where its node would have made it
    under `root` before dying (if that folder exists), else None."""
    if task.repo is None or task.isolation is None:
        return None
    if attempt.worktree is not None:
        recorded = attempt.worktree
        return Checkout(task.repo, recorded.path, recorded.branch, recorded.base_commit)
    path, branch = worktree.place(root, task.repo, task.id, attempt.number)
    base = task.isolation.base_commit
    if base is None or not path.is_dir():
        return None
    return Checkout(task.repo, str(path), branch, base)


def default_root(log_dir: Path) -> Path:
    """Where a node keeps its worktrees: beside its logs, in the data folder."""
    return log_dir.parent / "worktrees"


def store_root(base: Path, store_url: str) -> Path:
    """The folder of one store's worktrees under `base`: nodes of several stores on one
    machine (PostgreSQL stores share the default data folder) never sweep each other's.
    Absolute: git runs in the repository, where a relative path would land inside it."""
    key = hashlib.sha256(redact_url(store_url).encode()).hexdigest()[:12]
    return Path(os.path.abspath(base)) / f"store-{key}"


def roots_here(store: Store, recorded: Collection[str]) -> list[Path]:
    """This machine's worktree roots of `store`: where a node with the default data
    folder keeps them, and the root of each `recorded` worktree folder found here (a
    node started with another --log-dir)."""
    roots = {store_root(default_root(default_log_dir(store)), store.url)}
    for path in recorded:
        root = Path(path).parent.parent
        with contextlib.suppress(OSError):
            if root.name.startswith("store-") and root.is_dir():
                roots.add(root)
    return sorted(roots)
