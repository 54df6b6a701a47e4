-- Per-task memory cap and expected duration; CPU and memory of each attempt's process tree.
ALTER TABLE tasks ADD COLUMN memory_mb INTEGER;
ALTER TABLE tasks ADD COLUMN expected_duration DOUBLE PRECISION;
ALTER TABLE attempts ADD COLUMN cpu_percent DOUBLE PRECISION;
ALTER TABLE attempts ADD COLUMN rss_bytes BIGINT;
ALTER TABLE attempts ADD COLUMN peak_cpu_percent DOUBLE PRECISION;
ALTER TABLE attempts ADD COLUMN peak_rss_bytes BIGINT;
