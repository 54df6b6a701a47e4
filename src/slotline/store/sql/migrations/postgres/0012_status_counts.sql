-- How many tasks are in each status, kept by triggers on every insert, delete and status
-- change, so that `status` and the queue bound of a submit read one row instead of
-- counting the line (in proportion to its length).
CREATE TABLE status_counts (
    status TEXT PRIMARY KEY,
    n BIGINT NOT NULL
);
INSERT INTO status_counts (status, n)
SELECT s.status, (SELECT COUNT(*) FROM tasks WHERE tasks.status = s.status)
FROM (VALUES ('waiting'), ('queued'), ('held'), ('running'), ('succeeded'), ('failed'),
             ('cancelled'), ('blocked'), ('expired')) AS s (status);
CREATE FUNCTION status_counts_follow() RETURNS trigger AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE status_counts SET n = n - 1 WHERE status = OLD.status;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        UPDATE status_counts SET n = n + 1 WHERE status = NEW.status;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER status_counts_insert_delete AFTER INSERT OR DELETE ON tasks
FOR EACH ROW EXECUTE FUNCTION status_counts_follow();
CREATE TRIGGER status_counts_update AFTER UPDATE OF status ON tasks
FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
EXECUTE FUNCTION status_counts_follow();
