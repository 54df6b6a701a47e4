-- Several windows per key and unit (issue 15): a budget is one (key, value, unit,
-- period), so `10usd/1h` and `100usd/1d` of one key hold together, and so is a budget
-- reached. `origin` says who owns a budget or a rate limit: 'config' for one that
-- slotline.yaml declares (the next `slotline serve` removes it once the file no longer
-- does), 'api' for one set at run time (`slotline limits --set`, HTTP, Python).
ALTER TABLE budgets DROP CONSTRAINT budgets_pkey;
ALTER TABLE budgets ADD PRIMARY KEY (key, value, unit, period);
ALTER TABLE budgets ADD COLUMN origin TEXT NOT NULL DEFAULT 'api';
-- Reached budgets are told apart by their window too; those reached when the store was
-- migrated are found again by the next claim.
DELETE FROM budgets_reached;
ALTER TABLE budgets_reached DROP CONSTRAINT budgets_reached_pkey;
ALTER TABLE budgets_reached ADD COLUMN period DOUBLE PRECISION NOT NULL;
ALTER TABLE budgets_reached ADD PRIMARY KEY (key, value, unit, period);
ALTER TABLE rate_limits ADD COLUMN origin TEXT NOT NULL DEFAULT 'api';
