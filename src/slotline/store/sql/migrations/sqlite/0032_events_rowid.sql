-- The event log's `seq` is the table's rowid, without AUTOINCREMENT. AUTOINCREMENT kept
-- its highest value in `sqlite_sequence`, a row rewritten by every transaction that logs
-- an event: one more page in each commit of a claim or a submit (about a twentieth of a
-- claim's pages, a tenth of a submit's). Without it a new row takes the highest rowid
-- plus one, which is the same rule while no row is deleted: nothing deletes events (the
-- log is kept whole, and followers read it by `seq`). A deletion of the newest events
-- would let their numbers be given again.
ALTER TABLE events RENAME TO events_autoincrement;
CREATE TABLE events (
    seq INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    task_id TEXT,
    data TEXT NOT NULL
);
INSERT INTO events (seq, at, kind, task_id, data)
SELECT seq, at, kind, task_id, data FROM events_autoincrement ORDER BY seq;
DROP TABLE events_autoincrement;
CREATE INDEX events_task ON events (task_id, seq);
DELETE FROM sqlite_sequence WHERE name = 'events';
