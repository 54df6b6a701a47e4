-- The queue TTLs of a claim (`tasks_ttl_due`, `next_ttl_deadline`) are found by their
-- deadline. The index of 0008 (on status alone) lost to the list index of 0010 (status,
-- created_at, id), which SQLite then read for every queued task, in every claim: 15 ms
-- at 10,000 queued. This one serves the status and the deadline, so it wins.
DROP INDEX tasks_ttl;
CREATE INDEX tasks_ttl_deadline ON tasks (status, (COALESCE(restarted_at, created_at) + queue_ttl))
WHERE queue_ttl IS NOT NULL;
