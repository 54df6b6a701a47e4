-- The task list pages in submission order (created_at, id), after a cursor, optionally of
-- some statuses: both read a range of one of these indexes and stop at the page's end.
CREATE INDEX tasks_created ON tasks (created_at, id);
CREATE INDEX tasks_status_created ON tasks (status, created_at, id);
