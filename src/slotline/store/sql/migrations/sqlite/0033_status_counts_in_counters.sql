-- The per-status counts are rows of `counters` ('status:queued', ...), and
-- `status_counts` a view of them that every count query reads as before. A submit
-- writes the rank counter and a status count: in one table, one page a commit where
-- they were two (counters and status_counts are each a page of their own). PostgreSQL
-- keeps its table and deltas (migration 0023).
INSERT INTO counters (name, value) SELECT 'status:' || status, n FROM status_counts;
DROP TRIGGER status_counts_insert;
DROP TRIGGER status_counts_delete;
DROP TRIGGER status_counts_update;
DROP TABLE status_counts;
CREATE VIEW status_counts AS
SELECT substr(name, 8) AS status, value AS n FROM counters WHERE name LIKE 'status:%';
CREATE TRIGGER status_counts_insert AFTER INSERT ON tasks
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'status:' || NEW.status;
END;
CREATE TRIGGER status_counts_delete AFTER DELETE ON tasks
BEGIN
    UPDATE counters SET value = value - 1 WHERE name = 'status:' || OLD.status;
END;
CREATE TRIGGER status_counts_update AFTER UPDATE OF status ON tasks
WHEN OLD.status <> NEW.status
BEGIN
    UPDATE counters SET value = value - 1 WHERE name = 'status:' || OLD.status;
    UPDATE counters SET value = value + 1 WHERE name = 'status:' || NEW.status;
END;
