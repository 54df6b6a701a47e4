-- slotline schema, version 2 (PostgreSQL): when a task was last restarted. Its queue TTL
-- counts from then (or from its submission), so a restarted task gets a full TTL.
ALTER TABLE tasks ADD COLUMN restarted_at DOUBLE PRECISION;
