-- Resume instead of restart (issue 15). An attempt that ended interrupted (its node
-- died and its process is gone, its timeout, `terminate --resumable`) is resumable: the
-- next attempt continues its agent's session. An attempt that continued a session names
-- the attempt it continued (task, number). A follow-up task continues the session of the
-- task it follows, with its own prompt.
ALTER TABLE attempts ADD COLUMN resumable INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN resumed_task TEXT;
ALTER TABLE attempts ADD COLUMN resumed_attempt INTEGER;
ALTER TABLE tasks ADD COLUMN follows TEXT;
ALTER TABLE tasks ADD COLUMN follow_prompt TEXT;
