-- How many tasks are in each status, kept by triggers on every insert, delete and status
-- change, so that `status` and the queue bound of a submit read one row instead of
-- counting the line (in proportion to its length).
CREATE TABLE status_counts (
    status TEXT PRIMARY KEY,
    n INTEGER NOT NULL
);
INSERT INTO status_counts (status, n)
SELECT status, 0 FROM (
    SELECT 'waiting' AS status UNION ALL SELECT 'queued' UNION ALL SELECT 'held'
    UNION ALL SELECT 'running' UNION ALL SELECT 'succeeded' UNION ALL SELECT 'failed'
    UNION ALL SELECT 'cancelled' UNION ALL SELECT 'blocked' UNION ALL SELECT 'expired'
);
UPDATE status_counts SET n = (SELECT COUNT(*) FROM tasks WHERE tasks.status = status_counts.status);
CREATE TRIGGER status_counts_insert AFTER INSERT ON tasks
BEGIN
    UPDATE status_counts SET n = n + 1 WHERE status = NEW.status;
END;
CREATE TRIGGER status_counts_delete AFTER DELETE ON tasks
BEGIN
    UPDATE status_counts SET n = n - 1 WHERE status = OLD.status;
END;
CREATE TRIGGER status_counts_update AFTER UPDATE OF status ON tasks
WHEN OLD.status <> NEW.status
BEGIN
    UPDATE status_counts SET n = n - 1 WHERE status = OLD.status;
    UPDATE status_counts SET n = n + 1 WHERE status = NEW.status;
END;
