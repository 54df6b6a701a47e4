-- Idempotency keys and recurring schedules (store/dedup.py, store/schedules.py).

-- name: task_by_live_key
-- The task of an owner's key that has not finished (at most one: index tasks_key_live).
-- :owner is '' for tasks without an owner, as in the index.
SELECT * FROM tasks
WHERE COALESCE(owner, '') = :owner AND dedup_key = :key
  AND status IN ('waiting', 'queued', 'held', 'running', 'blocked');

-- name: task_by_key_finished_since
-- The last task of an owner's key that finished at :since or later.
SELECT * FROM tasks
WHERE COALESCE(owner, '') = :owner AND dedup_key = :key AND finished_at >= :since
ORDER BY finished_at DESC, id LIMIT 1;

-- name: task_key_taken
-- Another task of the same owner holds the key and has not finished (a restart would
-- make two).
SELECT id FROM tasks
WHERE COALESCE(owner, '') = :owner AND dedup_key = :key AND id <> :id
  AND status IN ('waiting', 'queued', 'held', 'running', 'blocked')
LIMIT 1;

-- name: tasks_live_of_schedule
SELECT * FROM tasks
WHERE schedule = :schedule AND status IN ('waiting', 'queued', 'held', 'running')
ORDER BY created_at, id;

-- name: schedule_get
SELECT * FROM schedules WHERE name = :name;

-- name: schedules_all
SELECT * FROM schedules ORDER BY name;

-- name: schedules_due
SELECT * FROM schedules WHERE paused = FALSE AND next_at <= :now ORDER BY next_at, name;

-- name: schedules_next_at
SELECT MIN(next_at) AS at FROM schedules WHERE paused = FALSE;

-- name: schedule_insert
INSERT INTO schedules (name, cron, tz, overlap, spec, paused, origin, next_at, created_at,
                       updated_at)
VALUES (:name, :cron, :tz, :overlap, :spec, :paused, :origin, :next_at, :now, :now);

-- name: schedule_update
UPDATE schedules
SET cron = :cron, tz = :tz, overlap = :overlap, spec = :spec, paused = :paused,
    origin = :origin, next_at = :next_at, updated_at = :now
WHERE name = :name;

-- name: schedule_set_paused
UPDATE schedules SET paused = :paused, next_at = :next_at, updated_at = :now
WHERE name = :name;

-- name: schedule_delete
DELETE FROM schedules WHERE name = :name;

-- name: schedule_advance
-- Claim a tick: a compare-and-set on next_at, so a tick is taken once even if two
-- writers read the same due schedule.
UPDATE schedules
SET next_at = :next_at, last_at = :tick
WHERE name = :name AND next_at = :tick AND paused = FALSE
RETURNING name;

-- name: schedule_set_last_task
UPDATE schedules SET last_task_id = :task_id WHERE name = :name;
