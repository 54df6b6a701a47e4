-- Interactive runs (issue 30): a task whose command runs in a terminal of slotline's own
-- tmux server, that people attach to and type into.
ALTER TABLE tasks ADD COLUMN interactive BOOLEAN NOT NULL DEFAULT FALSE;
-- Since when its run's terminal has been quiet while the run waited on it (it needs
-- someone's input); NULL: it does not. Cleared when the run prints again and when it ends.
ALTER TABLE tasks ADD COLUMN needs_input_at DOUBLE PRECISION;
-- Since when the run has given its slot back while it needs input (its agent type's
-- `release_while_idle`); NULL: it holds its slot, as every running task does. The limits
-- count a running task only while this is NULL; cleared when it takes a slot again.
ALTER TABLE tasks ADD COLUMN slot_released DOUBLE PRECISION;
-- What is typed into an interactive run's terminal as it starts (its agent type's
-- `first_input`, filled with the prompt: an agent that takes no first message on its
-- command line, as aider); NULL: nothing.
ALTER TABLE tasks ADD COLUMN first_input TEXT;
