-- The claim's common case (store/head_claim.py): no pacing, fairness, aging, per-key or
-- exempt rule configured, no "start now" task waiting: what it reads of the line, beside
-- its head (`tasks_queued_in_order`).

-- name: count_holding_slots
-- The running tasks the limits count (an interactive run that gave its slot back does
-- not: `Task.holds_slot`).
SELECT COUNT(*) AS n FROM tasks WHERE status = 'running' AND slot_released IS NULL;
