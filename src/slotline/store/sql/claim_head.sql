-- The claim's common case (store/head_claim.py): no pacing, fairness, aging, per-key or
-- exempt rule configured, no "start now" task waiting. What it reads of the line is the
-- head, a few columns a row; what it starts, it starts in one statement.

-- name: count_holding_slots
-- The running tasks the limits count (an interactive run that gave its slot back does
-- not: `Task.holds_slot`).
SELECT COUNT(*) AS n FROM tasks WHERE status = 'running' AND slot_released IS NULL;

-- name: line_head
-- The line in order, what the common case decides on: whether the node runs the task,
-- and whether it may start yet.
SELECT id, kind, callable, not_before FROM tasks WHERE status = 'queued'
ORDER BY {line_order} LIMIT :limit OFFSET :offset;

-- name: tasks_claim_ids
-- The tasks `ids` started, each with a new attempt (its id made here: `current_attempt`;
-- the claim inserts the attempt's row with it). As `task_claim`, for many tasks at once.
UPDATE tasks
SET status = 'running', status_reason = NULL, start_now = FALSE, boosted = FALSE,
    started_at = :now, finished_at = NULL, exit_code = NULL, failure_reason = NULL,
    not_before = NULL, kill_request = NULL, attempt_count = attempt_count + 1,
    current_attempt = {new_id}
WHERE id {in_ids:ids} AND status = 'queued'
RETURNING *;
