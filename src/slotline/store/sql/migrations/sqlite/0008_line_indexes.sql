-- A claim looks for tasks marked "start now" and for queue TTLs that ran out; both are
-- rare, so that these indexes hold few rows and a claim costs the same behind a line of
-- 100,000 as behind an empty one.
CREATE INDEX tasks_start_now ON tasks (status, rank) WHERE start_now;
CREATE INDEX tasks_ttl ON tasks (status) WHERE queue_ttl IS NOT NULL;
