-- The attempts still running, by node: what a node's heartbeat renews, its kill
-- requests, its `slots` count and its re-adoption read. Without it those reads scan
-- every attempt the store ever made (PostgreSQL chose that plan in every claim of a
-- drain, as a fresh table has no statistics yet), and a claim grew with the history.
CREATE INDEX attempts_live ON attempts (node_id) WHERE finished_at IS NULL;
