-- For the dashboard. Its charts: one row per sampling interval (the interval's number as
-- the key, so that several nodes sampling one store write it once), kept for a day; the
-- tasks ended in a window; and its task view reads one task's events.
CREATE TABLE samples (
    bucket BIGINT PRIMARY KEY,
    at REAL NOT NULL,
    queued INTEGER NOT NULL,
    running INTEGER NOT NULL,
    max_concurrent INTEGER NOT NULL,
    finished INTEGER NOT NULL,
    failed INTEGER NOT NULL
);
CREATE INDEX tasks_finished ON tasks (finished_at);
CREATE INDEX events_task ON events (task_id, seq);
