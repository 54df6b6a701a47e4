"""The worktrees of isolated runs: recorded on their attempt when created, their end
(diff stat, kept or removed) once the run is over, and the ones a sweep looks at."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slotline.errors import NotFound
from slotline.models import Attempt
from slotline.store.core import StoreCore
from slotline.store.events import emit
from slotline.store.queries import Tx
from slotline.store.rows import attempt_from_row
from slotline.store.runs import live_attempt
from slotline.worktrees.isolation import DiffStat, WorktreeState


class WorktreeVerbs(StoreCore):
    """How a node records its runs' worktrees."""

    def record_worktree(
        self, attempt_id: str, token: str, path: str, branch: str, base_commit: str
    ) -> None:
        """Record the worktree a live attempt runs in (before its command starts), in
        state active; a `worktree` event says so. An earlier attempt that kept the same
        folder (this one resumes in it, or follows its task up) no longer holds it.

        Raises:
            StaleAttempt: the attempt is no longer current, or the token is wrong.
        """
        with self._write() as tx:
            task, attempt = live_attempt(tx, attempt_id, token)
            tx.run(
                "attempt_worktree_start",
                id=attempt.id,
                path=path,
                branch=branch,
                base_commit=base_commit,
            )
            tx.run("attempt_worktree_handed_over", path=path, id=attempt.id)
            emit(
                tx, "worktree", task.id, tx.now(), attempt=attempt.id, state="active",
                path=path, branch=branch, base_commit=base_commit,
            )  # fmt: skip

    def end_worktree(
        self,
        attempt_id: str,
        state: WorktreeState,
        diff: DiffStat | None,
        note: Mapping[str, Any] | None = None,
    ) -> Attempt:
        """Record what became of an attempt's worktree once its run is over: its diff
        stat against the base commit (None: keep the one recorded before), and whether
        it was kept or removed. Also for an attempt that has ended already (a sweep
        applies the end a crash left undone), and for a prune, whose `note` (why, what
        became of the branch) the `worktree` event carries.

        Raises:
            NotFound: no attempt has that id, or it has no worktree.
        """
        with self._write() as tx:
            row = _with_worktree(tx, attempt_id)
            stat = diff
            if stat is None and row["diff_files"] is not None:  # measured before: keep it
                stat = DiffStat(row["diff_files"], row["diff_insertions"], row["diff_deletions"])
            tx.run(
                "attempt_worktree_end",
                id=attempt_id,
                state=state.value,
                files=None if stat is None else stat.files,
                insertions=None if stat is None else stat.insertions,
                deletions=None if stat is None else stat.deletions,
            )
            diff_json = None if stat is None else stat.to_dict()
            emit(
                tx, "worktree", row["task_id"], tx.now(), attempt=attempt_id,
                state=state.value, branch=row["worktree_branch"], diff=diff_json,
                **(note or {}),
            )  # fmt: skip
            updated = tx.one("attempt_get", id=attempt_id)
            assert updated is not None
            return attempt_from_row(updated)

    def remove_kept_worktree(self, attempt_id: str, note: Mapping[str, Any]) -> bool:
        """Record a prune's removal of an attempt's worktree, only if the attempt still
        keeps it (compare-and-set from `kept`): whether it did. False when a resumed
        attempt or a follow-up has taken the folder over meanwhile (the handover
        recorded it removed here) or anything else changed it; nothing is recorded then.
        """
        with self._write() as tx:
            row = tx.one("attempt_get", id=attempt_id)
            if row is None:
                return False
            done = tx.one(
                "attempt_worktree_end_from", id=attempt_id,
                state=WorktreeState.REMOVED.value, expected=WorktreeState.KEPT.value,
            )  # fmt: skip
            if done is None:
                return False
            emit(
                tx, "worktree", row["task_id"], tx.now(), attempt=attempt_id,
                state=WorktreeState.REMOVED.value, branch=row["worktree_branch"],
                diff=_stat(row), **note,
            )  # fmt: skip
            return True

    def working_in(self, path: str) -> list[Attempt]:
        """The attempts that record the worktree at `path` as active (a run in it, or
        one whose end a sweep has yet to record), oldest first."""
        return [
            a for a in self.worktrees(WorktreeState.ACTIVE)
            if a.worktree is not None and a.worktree.path == path
        ]  # fmt: skip

    def record_merge(self, attempt_id: str, into: str, commit: str, squash: bool) -> Attempt:
        """Record that an attempt's branch was merged into branch `into`, which now
        points at `commit`; a `merged` event says so. Merging again records the last.

        Raises:
            NotFound: no attempt has that id, or it has no worktree.
        """
        with self._write() as tx:
            row = _with_worktree(tx, attempt_id)
            now = tx.now()
            tx.run(
                "attempt_merged", id=attempt_id, into=into, merged_commit=commit, at=now,
                squash=squash,
            )  # fmt: skip
            emit(
                tx, "merged", row["task_id"], now, attempt=attempt_id,
                branch=row["worktree_branch"], into=into, commit=commit, squash=squash,
            )  # fmt: skip
            updated = tx.one("attempt_get", id=attempt_id)
            assert updated is not None
            return attempt_from_row(updated)

    def worktrees(self, state: WorktreeState) -> list[Attempt]:
        """The attempts whose worktree is in `state`, oldest first."""
        with self._transaction(write=False) as tx:
            rows = tx.rows("attempts_worktree_in_state", state=state.value)
            return [attempt_from_row(row) for row in rows]


def _with_worktree(tx: Tx, attempt_id: str) -> dict[str, Any]:
    """The row of an attempt that has a worktree.

    Raises:
        NotFound: no attempt has that id, or it has no worktree.
    """
    row = tx.one("attempt_get", id=attempt_id)
    if row is None or row["worktree_state"] is None:
        raise NotFound(f"no attempt {attempt_id} with a worktree", attempt_id=attempt_id)
    return row


def _stat(row: dict[str, Any]) -> dict[str, int] | None:
    """The diff stat recorded on an attempt's row, as JSON, or None."""
    if row["diff_files"] is None:
        return None
    return DiffStat(row["diff_files"], row["diff_insertions"], row["diff_deletions"]).to_dict()
