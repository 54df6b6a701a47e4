-- Budgets (migration 0020) are configuration too: their changes bump the version of
-- migration 0022 (which only a PostgreSQL store reads).
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
