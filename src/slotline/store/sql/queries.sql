-- Queries by name, shared by every backend. Parameters are :named; the PostgreSQL
-- backend rewrites them to its own style. Never format values into these strings; the one
-- text filled in is {line_order}, the order of the line (scheduler/policy.py).

-- name: task_insert
INSERT INTO tasks (
    id, kind, command, callable, args, title, agent, workspace, owner, labels, env,
    priority, boosted, start_now, rank, status, status_reason, depends_on, parent_id, depth,
    max_attempts, backoff, timeout, queue_ttl, created_at, queued_at, memory_mb,
    expected_duration, hold_when_ready, dedup_key, run_at, not_before, schedule, interactive,
    first_input
) VALUES (
    :id, :kind, :command, :callable, :args, :title, :agent, :workspace, :owner, :labels, :env,
    :priority, FALSE, FALSE, :rank, :status, :status_reason, :depends_on, :parent_id, :depth,
    :max_attempts, :backoff, :timeout, :queue_ttl, :created_at, :queued_at, :memory_mb,
    :expected_duration, :hold_when_ready, :dedup_key, :run_at, :run_at, :schedule, :interactive,
    :first_input
);

-- name: dep_insert
INSERT INTO deps (task_id, dep_id) VALUES (:task_id, :dep_id);

-- name: deps_of
SELECT dep_id FROM deps WHERE task_id = :task_id;

-- name: dependents_of
SELECT task_id FROM deps WHERE dep_id = :dep_id;

-- name: events_since
SELECT seq, at, kind, task_id, data FROM events WHERE seq > :since ORDER BY seq LIMIT :limit;

-- name: events_last_seq
SELECT COALESCE(MAX(seq), 0) AS seq FROM events;

-- name: counter_next
UPDATE counters SET value = value + 1 WHERE name = :name RETURNING value;

-- name: counter_add
UPDATE counters SET value = value + :n WHERE name = :name RETURNING value;

-- name: event_append
INSERT INTO events (at, kind, task_id, data) VALUES (:at, :kind, :task_id, :data);

-- name: task_get
SELECT * FROM tasks WHERE id = :id;

-- name: task_ids_by_prefix
SELECT id FROM tasks WHERE id LIKE :pattern ORDER BY id LIMIT 2;

-- name: task_ids_by_prefix_of_user
SELECT id FROM tasks WHERE id LIKE :pattern AND owner = :user ORDER BY id LIMIT 2;

-- name: tasks_all
SELECT * FROM tasks ORDER BY created_at, id LIMIT :limit;

-- name: tasks_by_status
SELECT * FROM tasks WHERE status = :status ORDER BY created_at, id LIMIT :limit;

-- name: tasks_children
SELECT * FROM tasks WHERE parent_id = :parent_id ORDER BY created_at, id;

-- name: tasks_subtree
WITH RECURSIVE subtree(id) AS (
    SELECT id FROM tasks WHERE id = :id
    UNION
    SELECT tasks.id FROM tasks JOIN subtree ON tasks.parent_id = subtree.id
)
SELECT id FROM subtree;

-- name: tasks_running
SELECT * FROM tasks WHERE status = 'running';

-- name: tasks_queued_in_order
SELECT * FROM tasks WHERE status = 'queued'
ORDER BY {line_order} LIMIT :limit OFFSET :offset;

-- name: tasks_start_now
SELECT * FROM tasks WHERE status = 'queued' AND start_now ORDER BY rank;

-- name: tasks_ttl_due
-- A queue TTL bounds the wait for a first start (since submission or the last restart);
-- a task waiting to be retried has started in time and does not expire.
SELECT * FROM tasks
WHERE status IN ('waiting', 'queued', 'held') AND queue_ttl IS NOT NULL
  AND attempt_count = attempt_base
  AND COALESCE(restarted_at, created_at) + queue_ttl <= :now;

-- name: next_ttl_deadline
SELECT MIN(COALESCE(restarted_at, created_at) + queue_ttl) AS at FROM tasks
WHERE status IN ('waiting', 'queued', 'held') AND queue_ttl IS NOT NULL
  AND attempt_count = attempt_base;

-- name: rank_taken
SELECT 1 AS taken FROM tasks
WHERE rank = :rank AND status IN ('queued', 'held', 'running') LIMIT 1;

-- name: first_queued_rank
SELECT MIN(rank) AS rank FROM tasks WHERE status IN ('queued', 'held');

-- The counts are the rows of status_counts plus their deltas (migration 0023).
-- name: count_pending
SELECT CAST(SUM(n) AS BIGINT) AS n FROM (
    SELECT n FROM status_counts WHERE status IN ('waiting', 'queued', 'held')
    UNION ALL SELECT d FROM status_deltas WHERE status IN ('waiting', 'queued', 'held')
) AS c;

-- name: count_pending_of_user
SELECT COUNT(*) AS n FROM tasks
WHERE owner = :user AND status IN ('waiting', 'queued', 'held');

-- name: pending_of_user
SELECT id FROM tasks
WHERE owner = :user AND status IN ('waiting', 'queued', 'held');

-- name: count_active_children
SELECT COUNT(*) AS n FROM tasks
WHERE parent_id = :parent_id AND status IN ('waiting', 'queued', 'held', 'running');

-- name: count_by_status
SELECT status, CAST(SUM(n) AS BIGINT) AS n FROM (
    SELECT status, n FROM status_counts UNION ALL SELECT status, d FROM status_deltas
) AS c GROUP BY status HAVING SUM(n) > 0;

-- name: count_by_status_of_user
SELECT status, COUNT(*) AS n FROM tasks WHERE owner = :user GROUP BY status;

-- name: task_set_status
UPDATE tasks SET status = :status, status_reason = :status_reason WHERE id = :id;

-- name: task_enqueue
UPDATE tasks
SET status = :status, status_reason = :status_reason, rank = :rank, queued_at = :now,
    not_before = run_at, hold_when_ready = FALSE
WHERE id = :id;

-- name: task_claim
UPDATE tasks
SET status = 'running', status_reason = NULL, start_now = FALSE, boosted = FALSE,
    started_at = :now, finished_at = NULL, exit_code = NULL, failure_reason = NULL,
    not_before = NULL, kill_request = NULL, attempt_count = attempt_count + 1,
    current_attempt = :attempt_id
WHERE id = :id AND status = 'queued';

-- name: task_end
UPDATE tasks
SET status = :status, status_reason = :status_reason, finished_at = :now,
    exit_code = :exit_code, failure_reason = :failure_reason, kill_request = NULL,
    restart_requested = FALSE, start_now = FALSE, boosted = FALSE, stalled_at = NULL, needs_input_at = NULL, slot_released = NULL
WHERE id = :id;

-- name: task_retry
UPDATE tasks
SET status = 'queued', status_reason = :status_reason, not_before = :not_before,
    exit_code = :exit_code, failure_reason = :failure_reason, kill_request = NULL,
    stalled_at = NULL, needs_input_at = NULL, slot_released = NULL
WHERE id = :id;

-- name: task_reset
UPDATE tasks
SET status = :status, status_reason = :status_reason, rank = :rank, queued_at = :queued_at,
    restarted_at = :now, boosted = FALSE, start_now = FALSE, started_at = NULL, finished_at = NULL,
    exit_code = NULL, failure_reason = NULL, not_before = NULL, kill_request = NULL,
    restart_requested = FALSE, attempt_base = attempt_count, stalled_at = NULL, needs_input_at = NULL, slot_released = NULL
WHERE id = :id;

-- name: task_place
UPDATE tasks SET rank = :rank, boosted = :boosted, priority = :priority WHERE id = :id;

-- name: task_start_now
UPDATE tasks SET start_now = TRUE, boosted = TRUE, status = 'queued', status_reason = NULL
WHERE id = :id;

-- name: task_kill_request
UPDATE tasks SET kill_request = :kill_request, restart_requested = :restart_requested
WHERE id = :id;

-- name: tasks_kill_requested
SELECT t.id AS task_id, a.id AS attempt_id, a.pid, t.kill_request
FROM tasks t JOIN attempts a ON a.id = t.current_attempt
WHERE t.status = 'running' AND t.kill_request IS NOT NULL AND a.node_id = :node_id
  AND a.finished_at IS NULL;

-- name: attempt_insert
INSERT INTO attempts (id, task_id, number, token, node_id, started_at, over_limit,
                      lease_expires_at, log_path)
VALUES (:id, :task_id, :number, :token, :node_id, :now, :over_limit, :lease_expires_at,
        :log_path);

-- name: attempt_get
SELECT * FROM attempts WHERE id = :id;

-- name: attempts_of
SELECT * FROM attempts WHERE task_id = :task_id ORDER BY number;

-- name: attempt_started
UPDATE attempts SET pid = :pid, pid_started = :pid_started, log_path = :log_path
WHERE id = :id;

-- name: attempt_end
UPDATE attempts SET finished_at = :now, exit_code = :exit_code, outcome = :outcome,
                    reason = :reason, cost_usd = :cost_usd, input_tokens = :input_tokens,
                    output_tokens = :output_tokens, session_totals = :session_totals,
                    session_id = :session_id, denied_tools = :denied_tools
WHERE id = :id;

-- name: attempts_all
SELECT * FROM attempts ORDER BY started_at, id;

-- name: attempts_not_renewed
-- The node's runs a heartbeat passed over (another transaction is ending or reaping
-- them): the node then does not tell its keepers that their leases were renewed.
SELECT count(*) AS n FROM attempts
WHERE node_id = :node_id AND finished_at IS NULL AND lease_expires_at < :lease_expires_at;

-- name: attempts_live_of_node
SELECT * FROM attempts WHERE node_id = :node_id AND finished_at IS NULL;

-- name: attempts_lease_lapsed
SELECT * FROM attempts WHERE finished_at IS NULL AND lease_expires_at < :now;

-- name: attempt_renew
-- A heartbeat takes none of the store's locks (`Serial.ROWS`): it passes over a run
-- another transaction is ending (a claim, a reaper), so it never waits for one, nor
-- deadlocks with one that locks the node's runs in another order. Ended, the run needs
-- no lease; if the end rolls back, the next beat renews it.
UPDATE attempts SET lease_expires_at = :lease_expires_at
WHERE id IN (
  SELECT id FROM attempts WHERE node_id = :node_id AND finished_at IS NULL {skip_locked}
);

-- name: limits_all
SELECT key, value, max_running, origin FROM limits ORDER BY key, value;

-- name: limit_delete
DELETE FROM limits WHERE key = :key AND value = :value;

-- name: limit_insert
INSERT INTO limits (key, value, max_running, origin)
VALUES (:key, :value, :max_running, :origin);

-- name: settings_all
SELECT name, value FROM settings;

-- name: setting_delete
DELETE FROM settings WHERE name = :name;

-- name: setting_insert
INSERT INTO settings (name, value) VALUES (:name, :value);

-- name: node_delete
DELETE FROM nodes WHERE id = :id;

-- name: node_insert
INSERT INTO nodes (id, host, pid, started_at, heartbeat_at)
VALUES (:id, :host, :pid, :now, :now);

-- name: node_heartbeat
UPDATE nodes SET heartbeat_at = :now WHERE id = :id RETURNING id;

-- name: nodes_all
SELECT * FROM nodes ORDER BY id;

-- name: task_set_depends_on
UPDATE tasks SET depends_on = :depends_on WHERE id = :id;

-- name: attempt_renew_one
UPDATE attempts SET lease_expires_at = :lease_expires_at WHERE id = :id AND finished_at IS NULL
RETURNING id;

-- name: attempt_lease_locked
-- An attempt's lease, its row locked until the transaction ends: a reaper's check, which
-- a heartbeat (passing over a locked row) then cannot make stale.
SELECT lease_expires_at FROM attempts WHERE id = :id {for_update};

-- name: attempt_usage
UPDATE attempts
SET cpu_percent = :cpu_percent, rss_bytes = :rss_bytes,
    peak_cpu_percent = CASE WHEN peak_cpu_percent IS NULL OR peak_cpu_percent < :cpu_percent
                            THEN :cpu_percent ELSE peak_cpu_percent END,
    peak_rss_bytes = CASE WHEN peak_rss_bytes IS NULL OR peak_rss_bytes < :rss_bytes
                          THEN :rss_bytes ELSE peak_rss_bytes END
WHERE id IN (
  SELECT id FROM attempts WHERE id = :id AND finished_at IS NULL {skip_locked}
);

-- name: task_cancel_start_now
UPDATE tasks SET start_now = FALSE WHERE id = :id;

-- name: node_get
SELECT * FROM nodes WHERE id = :id;

-- name: task_requeue_uncounted
-- Back in line at its place; the attempt that never ran does not count against
-- max_attempts.
UPDATE tasks
SET status = 'queued', status_reason = :status_reason, not_before = NULL,
    kill_request = NULL, attempt_base = attempt_base + 1, stalled_at = NULL, needs_input_at = NULL, slot_released = NULL
WHERE id = :id;

-- name: queue_position
-- 1 + the queued tasks ahead in line order (policy.LINE_ORDER_SQL): three ranges of
-- the tasks_line index, so that the count reads only the entries ahead of the task.
SELECT 1
    + (SELECT COUNT(*) FROM tasks
       WHERE status = 'queued' AND boosted = TRUE AND :boosted = FALSE)
    + (SELECT COUNT(*) FROM tasks
       WHERE status = 'queued' AND boosted = :boosted AND priority < :priority)
    + (SELECT COUNT(*) FROM tasks
       WHERE status = 'queued' AND boosted = :boosted AND priority = :priority
         AND rank < :rank) AS n;

-- name: attempts_by_task_status
SELECT a.* FROM attempts a JOIN tasks t ON t.id = a.task_id
WHERE t.status = :status ORDER BY a.task_id, a.number;

-- name: count_running_on_node
-- A node's own runs, for its `slots` cap: counted from task rows like every limit.
SELECT COUNT(*) AS n FROM tasks t JOIN attempts a ON a.id = t.current_attempt
WHERE t.status = 'running' AND a.node_id = :node_id AND a.finished_at IS NULL;

-- name: node_set_pressure
UPDATE nodes
SET pressure = :reason, pressure_hold = :hold, pressure_limit = :limit, pressure_since = :since
WHERE id = :id;

-- name: nodes_pressed
SELECT id, pressure, pressure_hold, pressure_since FROM nodes
WHERE pressure IS NOT NULL ORDER BY id;

-- name: nodes_guards
-- What each live node's resource guard allows (ETAs simulate under it).
SELECT id, pressure_hold, pressure_limit FROM nodes WHERE heartbeat_at >= :since;

-- name: sample_insert
INSERT INTO samples (bucket, at, queued, running, max_concurrent, finished, failed)
SELECT :bucket, :at,
    (SELECT COUNT(*) FROM tasks WHERE status = 'queued'),
    (SELECT COUNT(*) FROM tasks WHERE status = 'running'),
    :max_concurrent,
    (SELECT COUNT(*) FROM tasks WHERE finished_at > :since AND finished_at <= :at),
    (SELECT COUNT(*) FROM tasks
     WHERE finished_at > :since AND finished_at <= :at AND status = 'failed')
WHERE TRUE  -- SQLite: an upsert's SELECT needs a WHERE to parse
ON CONFLICT (bucket) DO NOTHING;

-- name: samples_prune
DELETE FROM samples WHERE at < :before;

-- name: samples_since
SELECT at, queued, running, max_concurrent, finished, failed FROM samples
WHERE at >= :since ORDER BY bucket;

-- name: tasks_finished_since
-- Tasks that ended after :since, for the wait and run times of the charts.
SELECT * FROM tasks WHERE finished_at >= :since ORDER BY finished_at;

-- name: count_queued
SELECT CAST(SUM(n) AS BIGINT) AS n FROM (
    SELECT n FROM status_counts WHERE status = 'queued'
    UNION ALL SELECT d FROM status_deltas WHERE status = 'queued'
) AS c;

-- name: attempts_of_finished_since
SELECT a.* FROM attempts a JOIN tasks t ON t.id = a.task_id
WHERE t.finished_at >= :since ORDER BY a.task_id, a.number;

-- name: events_of_task
SELECT seq, at, kind, task_id, data FROM events WHERE task_id = :task_id
ORDER BY seq DESC LIMIT :limit;
-- name: eta_line
-- The columns an ETA simulation needs of every task in line or running, in queue order.
SELECT id, kind, agent, workspace, owner, repo, labels, priority, boosted, start_now, rank,
       status, depends_on, not_before, queued_at, started_at, expected_duration, parent_id,
       callable
FROM tasks WHERE status IN ('running', 'queued', 'waiting', 'held')
ORDER BY {line_order};

-- name: run_times_all
SELECT scope, name, samples, estimate, runs FROM run_times;

-- name: run_time_get
SELECT samples, runs FROM run_times WHERE scope = :scope AND name = :name;

-- name: run_time_put
INSERT INTO run_times (scope, name, samples, estimate, runs, updated_at)
VALUES (:scope, :name, :samples, :estimate, :runs, :now)
ON CONFLICT (scope, name) DO UPDATE SET
    samples = excluded.samples, estimate = excluded.estimate, runs = excluded.runs,
    updated_at = excluded.updated_at;

-- name: active_children_ends
SELECT id FROM tasks
WHERE parent_id = :parent_id AND status IN ('waiting', 'queued', 'held', 'running');

-- name: tasks_live
SELECT * FROM tasks
WHERE status IN ('waiting', 'queued', 'held', 'running', 'blocked')
ORDER BY created_at, id;

-- name: events_last
SELECT seq, at FROM events ORDER BY seq DESC LIMIT 1;

-- name: eta_head
-- The running tasks and the first :limit queued ones, with the columns of eta_line: the
-- head of the line, simulated alone when the line is too long to simulate whole.
SELECT * FROM (
    SELECT id, kind, agent, workspace, owner, repo, labels, priority, boosted, start_now, rank,
           status, depends_on, not_before, queued_at, started_at, expected_duration, parent_id,
       callable
    FROM tasks WHERE status = 'running'
) AS running
UNION ALL
SELECT * FROM (
    SELECT id, kind, agent, workspace, owner, repo, labels, priority, boosted, start_now, rank,
           status, depends_on, not_before, queued_at, started_at, expected_duration, parent_id,
       callable
    FROM tasks WHERE status = 'queued'
    ORDER BY {line_order} LIMIT :limit
) AS head;

-- name: eta_arrivals
-- The submits after event :after at one of two priorities (:first, :second: patterns
-- of the event's compact JSON, checked again by the caller), with the task's agent
-- type: the rates the ETA forecast of work arriving ahead of a queued task rests on.
SELECT e.at, e.data, t.agent
FROM events e JOIN tasks t ON t.id = e.task_id
WHERE e.seq > :after AND e.kind = 'submitted'
  AND (e.data LIKE :first OR e.data LIKE :second);

-- name: eta_in_line_from
-- Whether any task in line has priority :priority or lower (a seek per index range).
SELECT 1 AS found FROM tasks
WHERE status IN ('queued', 'waiting') AND boosted IN (FALSE, TRUE) AND priority >= :priority
LIMIT 1;

-- name: event_first_after
SELECT at FROM events WHERE seq > :after ORDER BY seq LIMIT 1;

-- name: finishes_before
SELECT finished_at AS at FROM attempts WHERE finished_at > :since AND finished_at <= :now
ORDER BY finished_at DESC LIMIT :n;

-- The task list, filtered and paged in SQL (store/listing.py). A composed query: its
-- `/*where*/` becomes `AND` and the `where_*` conditions the filter asks for (each one
-- of the fragments below, its parameters renamed apart), so an unused criterion costs
-- nothing and each one used can take an index.

-- name: tasks_page
SELECT * FROM tasks WHERE TRUE /*where*/
ORDER BY created_at, id LIMIT :limit OFFSET :offset;

-- name: oldest_queued_at
SELECT MIN(queued_at) AS at FROM tasks WHERE TRUE /*where*/;

-- name: tasks_page_newest
SELECT * FROM tasks WHERE TRUE /*where*/
ORDER BY created_at DESC, id DESC LIMIT :limit OFFSET :offset;

-- name: tasks_page_ended
-- The last to end first (History): with tasks_where_ended, along the tasks_finished index.
SELECT * FROM tasks WHERE TRUE /*where*/
ORDER BY finished_at DESC, id DESC LIMIT :limit OFFSET :offset;

-- name: tasks_page_count
SELECT COUNT(*) AS n FROM tasks WHERE TRUE /*where*/;

-- name: queued_page
-- Queued tasks that match, in queue order (the line, filtered).
SELECT * FROM tasks WHERE status = 'queued' /*where*/
ORDER BY {line_order} LIMIT :limit OFFSET :offset;

-- name: attempts_page
SELECT * FROM attempts WHERE TRUE /*where*/ ORDER BY task_id, number;

-- name: tasks_where_status
status = :status

-- name: tasks_where_agent
agent = :agent

-- name: tasks_where_workspace
workspace = :workspace

-- name: tasks_where_owner
owner = :owner

-- name: tasks_where_parent
parent_id = :parent_id

-- name: attempts_where_tasks
task_id IN (:ids)

-- The rows the reports of one claim read, read ahead in one round trip (read_ahead.py):
-- their attempts, those attempts' tasks and those tasks' dependents. One statement each
-- however many reports (`{in_ids:...}`: an array on PostgreSQL), so each is prepared
-- once; their plans take the primary keys and `deps`' index whatever the tables' sizes
-- when they were made (tests/integration/test_pg_plans.py).
-- name: attempts_of_ids
SELECT * FROM attempts WHERE id {in_ids:ids} ORDER BY task_id, number;

-- name: tasks_of_attempts
SELECT * FROM tasks WHERE id IN (SELECT task_id FROM attempts WHERE id {in_ids:ids});

-- name: dependents_of_attempts
SELECT dep_id, task_id FROM deps
WHERE dep_id IN (SELECT task_id FROM attempts WHERE id {in_ids:ids});

-- name: plain_end_of
-- What the end of a run in its common case checks (`store/plain_end.py`), in one read:
-- the attempt, what its task's end depends on, and whether any task depends on it.
SELECT a.task_id, a.token, a.finished_at, a.started_at, a.pid, t.kind, t.agent, t.status,
       t.current_attempt, t.kill_request,
       EXISTS (SELECT 1 FROM deps WHERE dep_id = a.task_id) AS depended_on
FROM attempts a JOIN tasks t ON t.id = a.task_id
WHERE a.id = :id;

-- name: tasks_where_label
-- :needle is `"NAME":` or `"NAME":"VALUE"` as the labels' JSON spells them (compact,
-- every value a string): in that JSON an unescaped quote only delimits a string, so the
-- needle is found exactly where the label is. replace() is case-sensitive on both
-- backends, where LIKE is not.
replace(labels, :needle, '') <> labels

-- name: tasks_where_text
-- Part of the title, in any case (the text is given lower-case; SQLite folds only
-- ASCII letters), or the start of the id.
(replace(lower(title), :text, '') <> lower(title) OR id LIKE :id_prefix)

-- name: tasks_where_subtree
id IN (
    WITH RECURSIVE subtree(id) AS (
        SELECT id FROM tasks WHERE id = :root
        UNION
        SELECT tasks.id FROM tasks JOIN subtree ON tasks.parent_id = subtree.id
    )
    SELECT id FROM subtree
)

-- name: tasks_where_after
-- Row values: one range of an index on (created_at, id), on both backends.
(created_at, id) > (:at, :id)

-- name: tasks_where_before
(created_at, id) < (:at, :id)

-- name: tasks_where_ended
finished_at IS NOT NULL

-- name: tasks_where_ended_before
(finished_at, id) < (:at, :id)

-- name: queue_rank_between
-- Queued tasks between two ranks of one band (boosted, priority): one index range.
SELECT COUNT(*) AS n FROM tasks
WHERE status = 'queued' AND boosted = :boosted AND priority = :priority
  AND rank > :lo AND rank < :hi;

-- name: queue_rank_after
SELECT COUNT(*) AS n FROM tasks
WHERE status = 'queued' AND boosted = :boosted AND priority = :priority AND rank > :lo;

-- name: queue_rank_before
SELECT COUNT(*) AS n FROM tasks
WHERE status = 'queued' AND boosted = :boosted AND priority = :priority AND rank < :hi;

-- name: queue_bands_between
-- Queued tasks of the bands strictly between two priorities, both in one boosted half.
SELECT COUNT(*) AS n FROM tasks
WHERE status = 'queued' AND boosted = :boosted AND priority > :lo AND priority < :hi;

-- name: node_functions_delete
DELETE FROM node_functions WHERE node_id = :node_id;

-- name: node_function_insert
INSERT INTO node_functions (node_id, name) VALUES (:node_id, :name);

-- name: functions_served
-- The function names some live node serves (a node is live while it heartbeats).
SELECT DISTINCT f.name FROM node_functions f JOIN nodes n ON n.id = f.node_id
WHERE n.heartbeat_at >= :since;

-- name: node_config_put
INSERT INTO node_configs (node_id, source, agents, settings, published_at)
VALUES (:node_id, :source, :agents, :settings, :now)
ON CONFLICT (node_id) DO UPDATE
SET source = excluded.source, agents = excluded.agents, settings = excluded.settings,
    published_at = excluded.published_at;

-- name: node_config_delete
DELETE FROM node_configs WHERE node_id = :node_id;

-- name: node_configs_live
-- What the live nodes published of their configuration, the latest first.
SELECT c.* FROM node_configs c JOIN nodes n ON n.id = c.node_id
WHERE n.heartbeat_at >= :since
ORDER BY c.published_at DESC, c.node_id;

-- name: result_put
INSERT INTO task_results (task_id, attempt_id, value, stored_at)
VALUES (:task_id, :attempt_id, :value, :now)
ON CONFLICT (task_id) DO UPDATE
SET attempt_id = excluded.attempt_id, value = excluded.value, stored_at = excluded.stored_at;

-- name: result_of_attempt
SELECT value FROM task_results WHERE task_id = :task_id AND attempt_id = :attempt_id;

-- Rate limits and provider back-off (store/rates.py, store/backoff.py; migration 0015).

-- name: rate_limits_all
SELECT key, value, max_starts, period, origin FROM rate_limits ORDER BY key, value;

-- name: rate_limit_delete
DELETE FROM rate_limits WHERE key = :key AND value = :value;

-- name: rate_limit_insert
INSERT INTO rate_limits (key, value, max_starts, period, origin)
VALUES (:key, :value, :max_starts, :period, :origin);

-- name: rate_starts_of_key
-- The window of one key: one range of the rate_starts_window index.
SELECT value, at FROM rate_starts WHERE key = :key AND at > :since ORDER BY at;

-- name: rate_start_insert
INSERT INTO rate_starts (key, value, at) VALUES (:key, :value, :at);

-- name: rate_starts_prune
DELETE FROM rate_starts WHERE key = :key AND at <= :before;

-- name: rate_starts_forget_key
DELETE FROM rate_starts WHERE key = :key;

-- name: backoff_all
SELECT agent, level, cap, not_before, successes, since, reason, reset_at FROM agent_backoff
ORDER BY agent;

-- name: backoff_get
SELECT agent, level, cap, not_before, successes, since, reason, reset_at FROM agent_backoff
WHERE agent = :agent;

-- name: backoff_delete
DELETE FROM agent_backoff WHERE agent = :agent;

-- name: backoff_insert
INSERT INTO agent_backoff (agent, level, cap, not_before, successes, since, reason, reset_at)
VALUES (:agent, :level, :cap, :not_before, :successes, :since, :reason, :reset_at);

-- Budgets (store/budgets.py, store/declared.py; migrations 0020 and 0025).

-- name: budgets_all
SELECT key, value, unit, amount, period, origin FROM budgets ORDER BY key, value, unit, period;

-- name: budget_delete
DELETE FROM budgets WHERE key = :key AND value = :value AND unit = :unit AND period = :period;

-- name: budget_delete_unit
-- Every window of one unit of a key's value.
DELETE FROM budgets WHERE key = :key AND value = :value AND unit = :unit;

-- name: budget_insert
INSERT INTO budgets (key, value, unit, amount, period, origin)
VALUES (:key, :value, :unit, :amount, :period, :origin);

-- name: budget_spend_since
-- What the runs that finished after :since spent, with the keys of their tasks: a
-- range of the attempts_finished index (migration 0006).
SELECT a.finished_at, a.cost_usd, a.input_tokens, a.output_tokens,
       t.agent, t.workspace, t.owner, t.repo, t.labels
FROM attempts a JOIN tasks t ON t.id = a.task_id
WHERE a.finished_at > :since
  AND (a.cost_usd IS NOT NULL OR a.input_tokens IS NOT NULL OR a.output_tokens IS NOT NULL);

-- name: budgets_reached_all
SELECT key, value, unit, period, until FROM budgets_reached;

-- name: budget_reached_delete
DELETE FROM budgets_reached
WHERE key = :key AND value = :value AND unit = :unit AND period = :period;

-- name: budget_reached_insert
INSERT INTO budgets_reached (key, value, unit, period, until)
VALUES (:key, :value, :unit, :period, :until);

-- name: count_running_of_agent
SELECT COUNT(*) AS n FROM tasks WHERE status = 'running' AND agent = :agent;

-- name: fair_passes_of_key
SELECT value, pass FROM fair_passes WHERE key = :key;

-- name: fair_pass_put
INSERT INTO fair_passes (key, value, pass, at) VALUES (:key, :value, :new, :at)
ON CONFLICT (key, value) DO UPDATE SET pass = excluded.pass, at = excluded.at;

-- name: fair_passes_prune
DELETE FROM fair_passes WHERE at < :before;
-- name: task_set_isolation
-- The repository and isolation of a task that has them (most tasks leave them NULL).
UPDATE tasks SET repo = :repo, isolation = :isolation WHERE id = :id;

-- name: attempt_worktree_start
UPDATE attempts
SET worktree_path = :path, worktree_branch = :branch, worktree_base = :base_commit,
    worktree_state = 'active'
WHERE id = :id;

-- An attempt that resumes in an earlier attempt's worktree (its task's, or the task a
-- follow-up continues) takes it over: the earlier one no longer holds it (a prune, a
-- sweep or a listing sees each folder once, as its new run's).
-- name: attempt_worktree_handed_over
UPDATE attempts SET worktree_state = 'removed'
WHERE worktree_path = :path AND id <> :id AND worktree_state = 'kept';

-- name: attempt_worktree_end
UPDATE attempts
SET worktree_state = :state, diff_files = :files, diff_insertions = :insertions,
    diff_deletions = :deletions
WHERE id = :id AND worktree_state IS NOT NULL;

-- name: attempt_worktree_end_from
UPDATE attempts
SET worktree_state = :state
WHERE id = :id AND worktree_state = :expected
RETURNING id;

-- name: attempt_merged
UPDATE attempts
SET merged_into = :into, merged_commit = :merged_commit, merged_at = :at,
    merged_squash = :squash
WHERE id = :id AND worktree_state IS NOT NULL;

-- name: attempts_worktree_in_state
SELECT * FROM attempts WHERE worktree_state = :state ORDER BY started_at, id;

-- name: attempt_resumable
UPDATE attempts SET resumable = TRUE WHERE id = :id;

-- name: attempt_resumed
UPDATE attempts SET resumed_task = :resumed_task, resumed_attempt = :resumed_attempt,
    session_id = COALESCE(:session_id, session_id)
WHERE id = :id;

-- name: task_set_followup
UPDATE tasks SET follows = :follows, follow_prompt = :follow_prompt WHERE id = :id;

-- name: task_followup
SELECT follows, follow_prompt FROM tasks WHERE id = :id;

-- name: task_followups
-- Every follow-up of a task, oldest first: the chain a new follow-up continues.
SELECT id FROM tasks WHERE follows = :follows ORDER BY created_at, id;

-- The last follow-up of a task still to run or running: a new one runs after it, so
-- that two follow-ups never run at once in one worktree and session. (Not a blocked one:
-- a follow-up made after a failed one runs after the task itself.)
-- name: task_last_open_followup
SELECT id FROM tasks
WHERE follows = :follows AND status IN ('waiting', 'queued', 'held', 'running')
ORDER BY created_at DESC, id DESC LIMIT 1;

-- The runs that reported what they spent or were refused tool uses, with what `stats`
-- sums them by; `/*where*/` takes tasks_where_owner (a user's own).
-- name: spent_runs
SELECT t.agent AS agent, t.owner AS owner, t.workspace AS workspace,
       COALESCE(a.finished_at, a.started_at) AS at,
       a.cost_usd AS cost_usd, a.input_tokens AS input_tokens, a.output_tokens AS output_tokens,
       a.denied_tools IS NOT NULL AS denied
FROM attempts a JOIN tasks t ON t.id = a.task_id
WHERE (a.cost_usd IS NOT NULL OR a.input_tokens IS NOT NULL OR a.output_tokens IS NOT NULL
       OR a.denied_tools IS NOT NULL)
/*where*/;

-- name: spend_by_agent
SELECT t.agent AS agent, SUM(a.cost_usd) AS cost_usd, SUM(a.input_tokens) AS input_tokens,
       SUM(a.output_tokens) AS output_tokens, COUNT(*) AS runs
FROM attempts a JOIN tasks t ON t.id = a.task_id
WHERE a.cost_usd IS NOT NULL OR a.input_tokens IS NOT NULL OR a.output_tokens IS NOT NULL
GROUP BY t.agent;

-- name: attempt_of_number
SELECT * FROM attempts WHERE task_id = :task_id AND number = :number;

-- A chunk of a bulk verb's tasks, read in one statement (bulk.py reads them ahead).
-- name: tasks_of_ids
SELECT * FROM tasks WHERE id {in_ids:ids};

-- name: dependents_of_tasks
SELECT dep_id, task_id FROM deps WHERE dep_id {in_ids:ids};
