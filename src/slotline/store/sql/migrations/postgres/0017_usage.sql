-- What a run spent (issue 15), read from its output at its end by its agent type's
-- `usage` rules: cost in US dollars, tokens in and out, and the agent's session id
-- (for resuming it). NULL: not read (no rule, or nothing matched).
ALTER TABLE attempts ADD COLUMN cost_usd DOUBLE PRECISION;
ALTER TABLE attempts ADD COLUMN input_tokens BIGINT;
ALTER TABLE attempts ADD COLUMN output_tokens BIGINT;
ALTER TABLE attempts ADD COLUMN session_id TEXT;
