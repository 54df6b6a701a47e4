"""Landing a run's work (issue 15 §1): what a worktree run changed (`diff`), merging its
branch into a target without touching the user's checkout (`merge`), and the retention
policy that prunes finished worktrees (`prune`, `inventory`)."""
