-- The version of the store's configuration: settings, per-key limits, rate limits and
-- provider back-off. Every statement that changes one of those tables bumps it, so a
-- PostgreSQL store keeps what it read of them between transactions while the version
-- stays (a write transaction reads the version with the clock, in the round trip that
-- takes the write lock, instead of four reads of its own).
INSERT INTO counters (name, value) VALUES ('config', 0);
CREATE FUNCTION config_version_bump() RETURNS trigger AS $$
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER settings_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON settings
FOR EACH STATEMENT EXECUTE FUNCTION config_version_bump();
CREATE TRIGGER limits_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON limits
FOR EACH STATEMENT EXECUTE FUNCTION config_version_bump();
CREATE TRIGGER rate_limits_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON rate_limits
FOR EACH STATEMENT EXECUTE FUNCTION config_version_bump();
CREATE TRIGGER agent_backoff_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
ON agent_backoff FOR EACH STATEMENT EXECUTE FUNCTION config_version_bump();
