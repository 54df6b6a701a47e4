-- What a run's result says beyond its cost (issue 26). `session_totals`: the values the
-- agent printed as its session's running totals (`usage: {session_totals: [KEY, …]}`),
-- a JSON object {key: value} that the next run of the session subtracts (a run's
-- `cost_usd`, `input_tokens`, `output_tokens` are what it alone spent). `denied_tools`:
-- the tool uses the agent was refused (its permission mode), a JSON list of tool names,
-- one per refusal. NULL: not read.
ALTER TABLE attempts ADD COLUMN session_totals TEXT;
ALTER TABLE attempts ADD COLUMN denied_tools TEXT;
