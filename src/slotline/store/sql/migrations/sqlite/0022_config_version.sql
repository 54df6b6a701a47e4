-- The version of the store's configuration (settings, per-key limits, rate limits,
-- provider back-off), bumped by every change to those tables. Only a PostgreSQL store
-- reads it (to keep what it read of them between transactions); SQLite keeps it too,
-- so that both schemas stay alike.
INSERT INTO counters (name, value) VALUES ('config', 0);
CREATE TRIGGER settings_version_insert AFTER INSERT ON settings
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
END;
CREATE TRIGGER settings_version_update AFTER UPDATE ON settings
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
END;
CREATE TRIGGER settings_version_delete AFTER DELETE ON settings
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
END;
CREATE TRIGGER limits_version_insert AFTER INSERT ON limits
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
END;
CREATE TRIGGER limits_version_update AFTER UPDATE ON limits
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
END;
CREATE TRIGGER limits_version_delete AFTER DELETE ON limits
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
END;
CREATE TRIGGER rate_limits_version_insert AFTER INSERT ON rate_limits
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
END;
CREATE TRIGGER rate_limits_version_update AFTER UPDATE ON rate_limits
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
END;
CREATE TRIGGER rate_limits_version_delete AFTER DELETE ON rate_limits
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
END;
CREATE TRIGGER agent_backoff_version_insert AFTER INSERT ON agent_backoff
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
END;
CREATE TRIGGER agent_backoff_version_update AFTER UPDATE ON agent_backoff
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
END;
CREATE TRIGGER agent_backoff_version_delete AFTER DELETE ON agent_backoff
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'config';
END;
