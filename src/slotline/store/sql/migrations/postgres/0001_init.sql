-- slotline schema, version 1 (PostgreSQL).
CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    command TEXT NOT NULL,
    callable TEXT,
    args TEXT NOT NULL,
    title TEXT NOT NULL,
    agent TEXT,
    workspace TEXT,
    owner TEXT,
    labels TEXT NOT NULL,
    env TEXT NOT NULL,
    priority INTEGER NOT NULL,
    boosted BOOLEAN NOT NULL DEFAULT FALSE,
    start_now BOOLEAN NOT NULL DEFAULT FALSE,
    rank TEXT COLLATE "C" NOT NULL,
    status TEXT NOT NULL,
    status_reason TEXT,
    depends_on TEXT NOT NULL,
    parent_id TEXT REFERENCES tasks (id),
    depth INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    backoff DOUBLE PRECISION NOT NULL,
    timeout DOUBLE PRECISION,
    queue_ttl DOUBLE PRECISION,
    not_before DOUBLE PRECISION,
    kill_request TEXT,
    restart_requested BOOLEAN NOT NULL DEFAULT FALSE,
    created_at DOUBLE PRECISION NOT NULL,
    queued_at DOUBLE PRECISION,
    started_at DOUBLE PRECISION,
    finished_at DOUBLE PRECISION,
    exit_code INTEGER,
    failure_reason TEXT,
    attempt_count INTEGER NOT NULL DEFAULT 0,
    attempt_base INTEGER NOT NULL DEFAULT 0,
    current_attempt TEXT
);
CREATE INDEX tasks_line ON tasks (status, boosted DESC, priority, rank);
CREATE INDEX tasks_parent ON tasks (parent_id);

CREATE TABLE deps (
    task_id TEXT NOT NULL REFERENCES tasks (id),
    dep_id TEXT NOT NULL REFERENCES tasks (id),
    PRIMARY KEY (task_id, dep_id)
);
CREATE INDEX deps_dep ON deps (dep_id);

CREATE TABLE attempts (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL REFERENCES tasks (id),
    number INTEGER NOT NULL,
    token TEXT NOT NULL,
    node_id TEXT,
    pid INTEGER,
    pid_started DOUBLE PRECISION,
    started_at DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION,
    exit_code INTEGER,
    outcome TEXT,
    reason TEXT,
    over_limit BOOLEAN NOT NULL DEFAULT FALSE,
    lease_expires_at DOUBLE PRECISION,
    log_path TEXT,
    UNIQUE (task_id, number)
);

CREATE TABLE events (
    seq BIGSERIAL PRIMARY KEY,
    at DOUBLE PRECISION NOT NULL,
    kind TEXT NOT NULL,
    task_id TEXT,
    data TEXT NOT NULL
);

CREATE TABLE limits (
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    max_running INTEGER NOT NULL,
    PRIMARY KEY (key, value)
);

CREATE TABLE settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT INTO counters (name, value) VALUES ('rank', 0);

CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL
);
