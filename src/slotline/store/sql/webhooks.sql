-- Webhooks, command hooks and stalled runs (store/webhooks.py).

-- name: notify_cursor_add
-- A hook's cursor, created at :seq the first time the hook is seen (never moved back).
INSERT INTO notify_cursors (hook, seq, updated_at) VALUES (:hook, :seq, :now)
ON CONFLICT (hook) DO NOTHING;

-- name: notify_cursors
SELECT hook, seq FROM notify_cursors;

-- name: notify_cursor_advance
-- Moves a hook's cursor forward, only while :node holds that hook's delivery lease
-- (:lease): a node that lost it (taken for dead) cannot move a cursor the new holder is
-- delivering from.
UPDATE notify_cursors SET seq = :seq, updated_at = :now
WHERE hook = :hook AND seq < :seq
  AND EXISTS (SELECT 1 FROM notify_lease
              WHERE name = :lease AND node_id = :node AND expires_at >= :now)
RETURNING seq;

-- name: notify_lease_add
-- One lease per hook (named `hook:NAME`): each node delivers the hooks of its own
-- configuration, one node per hook at a time.
INSERT INTO notify_lease (name, node_id, expires_at) VALUES (:lease, :node, :expires_at)
ON CONFLICT (name) DO NOTHING;

-- name: notify_lease_take
-- Compare-and-set: taken (or renewed) if free, expired, or already :node's.
UPDATE notify_lease SET node_id = :node, expires_at = :expires_at
WHERE name = :lease AND (node_id = :node OR expires_at < :now)
RETURNING node_id;

-- name: notify_lease_drop
-- Every lease :node holds (a node stopping).
UPDATE notify_lease SET expires_at = 0 WHERE node_id = :node;

-- name: notify_log_add
INSERT INTO notify_log (at, hook, event, seq, task_id, node_id, attempt, ok, status, error, took)
VALUES (:at, :hook, :event, :seq, :task_id, :node, :attempt, :ok, :status, :error, :took);

-- name: notify_log_prune
DELETE FROM notify_log WHERE id <= (SELECT MAX(id) FROM notify_log) - :keep;

-- name: notify_log_recent
SELECT * FROM notify_log ORDER BY id DESC LIMIT :limit;

-- name: task_stall
-- Marks a running task's run stalled (once per quiet spell: not if it already is).
UPDATE tasks SET stalled_at = :at
WHERE id = :id AND status = 'running' AND current_attempt = :attempt AND stalled_at IS NULL
RETURNING id;

-- name: task_unstall
UPDATE tasks SET stalled_at = NULL
WHERE id = :id AND current_attempt = :attempt AND stalled_at IS NOT NULL
RETURNING id;

-- name: task_needs_input
-- Marks a running interactive task as needing input (once per quiet spell), giving its
-- slot back if :release.
UPDATE tasks SET needs_input_at = :at,
    slot_released = CASE WHEN :release THEN :at ELSE slot_released END
WHERE id = :id AND status = 'running' AND current_attempt = :attempt AND needs_input_at IS NULL
RETURNING id;

-- name: task_input_done
UPDATE tasks SET needs_input_at = NULL
WHERE id = :id AND current_attempt = :attempt AND needs_input_at IS NOT NULL
RETURNING id;

-- name: task_slot_retake
-- A run that gave its slot back holds one again.
UPDATE tasks SET slot_released = NULL
WHERE id = :id AND current_attempt = :attempt AND slot_released IS NOT NULL
RETURNING id;

-- name: tasks_active_any
-- Whether anything runs or waits in line to start (queue.drained when not).
SELECT EXISTS (SELECT 1 FROM tasks WHERE status IN ('running', 'queued')) AS busy;
