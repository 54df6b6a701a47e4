-- Several windows per key and unit (issue 15): a budget is one (key, value, unit,
-- period), so `10usd/1h` and `100usd/1d` of one key hold together, and so is a budget
-- reached. `origin` says who owns a budget or a rate limit: 'config' for one that
-- slotline.yaml declares (the next `slotline serve` removes it once the file no longer
-- does), 'api' for one set at run time (`slotline limits --set`, HTTP, Python).
ALTER TABLE budgets RENAME TO budgets_0024;
CREATE TABLE budgets (
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    unit TEXT NOT NULL,
    amount REAL NOT NULL,
    period REAL NOT NULL,
    origin TEXT NOT NULL DEFAULT 'api',
    PRIMARY KEY (key, value, unit, period)
);
INSERT INTO budgets (key, value, unit, amount, period)
SELECT key, value, unit, amount, period FROM budgets_0024;
DROP TABLE budgets_0024;
CREATE TRIGGER budgets_version_insert AFTER INSERT ON budgets
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
END;
CREATE TRIGGER budgets_version_update AFTER UPDATE ON budgets
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
END;
CREATE TRIGGER budgets_version_delete AFTER DELETE ON budgets
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
END;
-- Reached budgets are told apart by their window too; those reached when the store was
-- migrated are found again by the next claim.
DROP TABLE budgets_reached;
CREATE TABLE budgets_reached (
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    unit TEXT NOT NULL,
    period REAL NOT NULL,
    until REAL NOT NULL,
    PRIMARY KEY (key, value, unit, period)
);
ALTER TABLE rate_limits ADD COLUMN origin TEXT NOT NULL DEFAULT 'api';
