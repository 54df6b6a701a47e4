-- Interactive runs (issue 30): a task whose command runs in a terminal of slotline's own
-- tmux server, that people attach to and type into.
ALTER TABLE tasks ADD COLUMN interactive BOOLEAN NOT NULL DEFAULT FALSE;
-- Since when its run's terminal has been quiet while the run waited on it (it needs
-- someone's input); NULL: it does not. Cleared when the run prints again and when it ends.
ALTER TABLE tasks ADD COLUMN needs_input_at REAL;
