-- Deltas of the per-status counts, where a PostgreSQL store's triggers append them
-- (writers not serialized by one lock never contend for the count rows there). SQLite
-- serializes every write, so its triggers keep updating the rows and this table stays
-- empty; the count queries, shared by both, add it all the same.
CREATE TABLE status_deltas (
    status TEXT NOT NULL,
    d INTEGER NOT NULL
);
