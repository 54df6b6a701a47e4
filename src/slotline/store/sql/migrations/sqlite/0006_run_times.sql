-- Recent run times per agent type (scope 'agent') and over all tasks (scope 'all', name
-- ''), kept so that ETAs survive a restart: the last runs' seconds as a JSON list and a
-- robust statistic over them.
CREATE TABLE run_times (
    scope TEXT NOT NULL,
    name TEXT NOT NULL,
    samples TEXT NOT NULL,
    estimate REAL NOT NULL,
    runs INTEGER NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (scope, name)
);
-- The latest finish, read at each claim to measure the dispatch gap (finish → next start).
CREATE INDEX attempts_finished ON attempts (finished_at);
