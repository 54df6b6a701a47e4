-- Budgets (issue 15): at most `amount` (unit 'usd': dollars, 'tok': tokens in and out)
-- spent by the runs of a key (global, agent, workspace, user, repo, label:NAME) that
-- finished in the last `period` seconds; value '' is every value (each counted apart)
-- or, for global, all tasks. The spend is read from the attempts (migration 0017).
CREATE TABLE budgets (
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    unit TEXT NOT NULL,
    amount DOUBLE PRECISION NOT NULL,
    period DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (key, value, unit)
);
-- The budgets reached, per value, until when: written by the claim that finds one
-- reached (event budget_reached) and deleted by the one that finds it free again
-- (event budget_released), so each is told once, by one node.
CREATE TABLE budgets_reached (
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    unit TEXT NOT NULL,
    until DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (key, value, unit)
);
-- Provider back-off with a reset time: when the provider said its limit resets (a
-- pattern's `reset` group); once it passes, one run probes before the others follow.
ALTER TABLE agent_backoff ADD COLUMN reset_at DOUBLE PRECISION;
