-- Budgets (migration 0020) are configuration too: their changes bump the version of
-- migration 0022, so a store may keep what it read of them between transactions.
CREATE TRIGGER budgets_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON budgets
FOR EACH STATEMENT EXECUTE FUNCTION config_version_bump();
