-- Hear when it needs you (issue 15 §5).
-- When the task's current run went quiet (or printed its agent type's waiting pattern);
-- NULL: not stalled. Cleared when the run prints again and when it ends.
ALTER TABLE tasks ADD COLUMN stalled_at DOUBLE PRECISION;
-- Webhooks and command hooks read the event log itself as their outbox: each hook's
-- cursor is the last event seq it has delivered (or passed over: not selected).
CREATE TABLE notify_cursors (
    hook TEXT PRIMARY KEY,
    seq BIGINT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
-- One node delivers at a time: it holds this lease (taken by compare-and-set, renewed
-- before each delivery); a node that dies loses it when it expires.
CREATE TABLE notify_lease (
    name TEXT PRIMARY KEY,
    node_id TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
-- Recent deliveries and failures (`slotline notify log`), pruned to the last few thousand.
CREATE TABLE notify_log (
    id BIGSERIAL PRIMARY KEY,
    at DOUBLE PRECISION NOT NULL,
    hook TEXT NOT NULL,
    event TEXT NOT NULL,
    seq BIGINT NOT NULL,
    task_id TEXT,
    node_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    ok BOOLEAN NOT NULL,
    status INTEGER,
    error TEXT,
    took DOUBLE PRECISION
);
