-- Worktree isolation (issue 13). A task's repository (a limit key, also without
-- isolation) and its isolation as JSON ({"base", "base_commit", "keep"}; NULL: none).
ALTER TABLE tasks ADD COLUMN repo TEXT;
ALTER TABLE tasks ADD COLUMN isolation TEXT;
-- An attempt's worktree: its folder, branch and base commit once created, its state
-- (active, kept, removed) and the diff stat against the base once the run ended.
ALTER TABLE attempts ADD COLUMN worktree_path TEXT;
ALTER TABLE attempts ADD COLUMN worktree_branch TEXT;
ALTER TABLE attempts ADD COLUMN worktree_base TEXT;
ALTER TABLE attempts ADD COLUMN worktree_state TEXT;
ALTER TABLE attempts ADD COLUMN diff_files INTEGER;
ALTER TABLE attempts ADD COLUMN diff_insertions INTEGER;
ALTER TABLE attempts ADD COLUMN diff_deletions INTEGER;
-- The sweep reads the worktrees not yet removed; running tasks per repository.
CREATE INDEX attempts_worktree ON attempts (worktree_state);
CREATE INDEX tasks_repo ON tasks (repo);
