-- Indexes on columns most rows leave NULL hold only the rows that have a value: a task's
-- parent, an attempt's worktree, and the end of a task or attempt (NULL until it ends).
-- Every change of a task's status rewrites its index entries (status is indexed, so no
-- update is HOT), and each claim changes a task twice and writes an attempt twice: an
-- entry for a NULL that no query looks for cost an index write each time (about ten a
-- run). Every query that reads them names a value (`parent_id = ...`, `finished_at >
-- ...`), which implies the index's condition. No query reads a task by its repository:
-- that index goes.
-- Both tables first, in the order a lease renewal (which takes no store lock) reads
-- them: one under way finishes before this waits for the second.
LOCK TABLE attempts, tasks IN ACCESS EXCLUSIVE MODE;
DROP INDEX tasks_parent;
CREATE INDEX tasks_parent ON tasks (parent_id) WHERE parent_id IS NOT NULL;
DROP INDEX tasks_repo;
DROP INDEX tasks_finished;
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE finished_at IS NOT NULL;
DROP INDEX attempts_finished;
CREATE INDEX attempts_finished ON attempts (finished_at) WHERE finished_at IS NOT NULL;
DROP INDEX attempts_worktree;
CREATE INDEX attempts_worktree ON attempts (worktree_state) WHERE worktree_state IS NOT NULL;
