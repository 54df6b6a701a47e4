-- Issue 13: idempotency keys, delayed tasks and recurring schedules.
-- An idempotency key, per owner (tasks without one share the no-owner scope): while a
-- task of that owner with the key has not finished (blocked counts as not finished: a
-- restart of its dependency brings it back), a submit of the owner with the same key
-- returns that task. The partial unique index makes a second one impossible, whatever
-- the race; the other index finds the tasks of a key that finished (--dedup-window).
ALTER TABLE tasks ADD COLUMN dedup_key TEXT;
CREATE UNIQUE INDEX tasks_key_live ON tasks (COALESCE(owner, ''), dedup_key)
WHERE dedup_key IS NOT NULL AND status IN ('waiting', 'queued', 'held', 'running', 'blocked');
CREATE INDEX tasks_key ON tasks (COALESCE(owner, ''), dedup_key, finished_at)
WHERE dedup_key IS NOT NULL;
-- The start time a delayed task asked for (submit --at / --in); not_before holds it while
-- the task waits, this keeps it for display and for a task queued after its dependencies.
ALTER TABLE tasks ADD COLUMN run_at DOUBLE PRECISION;
-- The recurring schedule that submitted the task, for its overlap policy.
ALTER TABLE tasks ADD COLUMN schedule TEXT;
CREATE INDEX tasks_schedule ON tasks (schedule, status) WHERE schedule IS NOT NULL;
-- Recurring schedules: a task (spec, JSON) submitted at each tick of a cron expression.
-- A tick is claimed by moving next_at on, in the transaction that submits its task.
CREATE TABLE schedules (
    name TEXT PRIMARY KEY,
    cron TEXT NOT NULL,
    tz TEXT NOT NULL,
    overlap TEXT NOT NULL,
    spec TEXT NOT NULL,
    paused BOOLEAN NOT NULL DEFAULT FALSE,
    origin TEXT NOT NULL,
    next_at DOUBLE PRECISION NOT NULL,
    last_at DOUBLE PRECISION,
    last_task_id TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX schedules_due ON schedules (paused, next_at);
