-- Python functions as tasks (`slotline serve --app`). The names each node serves, so
-- that a function task no live node serves says so instead of waiting in silence.
CREATE TABLE node_functions (
    node_id TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (node_id, name)
);
CREATE INDEX node_functions_name ON node_functions (name);
-- A function's return value (JSON), kept with its task: one per task, that of the attempt
-- that stored it; it is the task's result while that attempt is the task's current one.
CREATE TABLE task_results (
    task_id TEXT PRIMARY KEY REFERENCES tasks (id),
    attempt_id TEXT NOT NULL,
    value TEXT NOT NULL,
    stored_at REAL NOT NULL
);
