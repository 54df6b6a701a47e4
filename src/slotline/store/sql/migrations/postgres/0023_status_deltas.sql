-- The per-status counts (migration 0012) as appended deltas: a status change inserts a
-- row (-1 for the old status, +1 for the new) instead of updating the count rows, so
-- writers that are not serialized by one lock (a submit beside a claim, see
-- `store.core.Serial`) never wait for each other's count rows nor deadlock on them.
-- The count of a status is its row plus its deltas; a write that holds the store's
-- write lock folds the deltas into the rows.
CREATE TABLE status_deltas (
    status TEXT NOT NULL,
    d BIGINT NOT NULL
);
CREATE OR REPLACE FUNCTION status_counts_follow() RETURNS trigger AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO status_deltas (status, d) VALUES (OLD.status, -1);
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        INSERT INTO status_deltas (status, d) VALUES (NEW.status, 1);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
