-- A task submitted held but waiting on dependencies becomes held, not queued, when ready.
ALTER TABLE tasks ADD COLUMN hold_when_ready BOOLEAN NOT NULL DEFAULT FALSE;
