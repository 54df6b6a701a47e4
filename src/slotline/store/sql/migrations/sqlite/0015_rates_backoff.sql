-- Rate limits, their recent starts, and provider back-off (issue 13).
-- A rate caps the starts of one key (global, agent, workspace, user, label:NAME) per
-- period; value '' is every value (each counted apart) or, for global, all tasks.
CREATE TABLE rate_limits (
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    max_starts INTEGER NOT NULL,
    period REAL NOT NULL,
    PRIMARY KEY (key, value)
);
-- One row per start and (key, value) a rate counts it under, written by the claim that
-- starts the task and pruned once older than the key's longest period: the claim reads
-- the window of a key as one range of this index.
CREATE TABLE rate_starts (
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE INDEX rate_starts_window ON rate_starts (key, at);
-- An agent type backing off from its provider: its concurrency cap lowered to `cap`
-- and no start before `not_before`, `level` steps down from normal; `successes`
-- counts the runs that succeeded since the last step.
CREATE TABLE agent_backoff (
    agent TEXT PRIMARY KEY,
    level INTEGER NOT NULL,
    cap INTEGER NOT NULL,
    not_before REAL NOT NULL,
    successes INTEGER NOT NULL,
    since REAL NOT NULL,
    reason TEXT
);
-- Fair dispatch: each value of the fairness key has a pass (stride scheduling): its
-- next turn in a band of the line, advanced by 1/weight at each of its starts, written
-- by the claim that starts it; `at` is its last start (rows unused for a day are pruned).
CREATE TABLE fair_passes (
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    pass REAL NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (key, value)
);
