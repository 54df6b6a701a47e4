-- Per-task memory cap and expected duration; CPU and memory of each attempt's process tree.
ALTER TABLE tasks ADD COLUMN memory_mb INTEGER;
ALTER TABLE tasks ADD COLUMN expected_duration REAL;
ALTER TABLE attempts ADD COLUMN cpu_percent REAL;
ALTER TABLE attempts ADD COLUMN rss_bytes INTEGER;
ALTER TABLE attempts ADD COLUMN peak_cpu_percent REAL;
ALTER TABLE attempts ADD COLUMN peak_rss_bytes INTEGER;
