"""Landing a run's work (issue 15 §1): what a worktree run changed (`diff`), merging its
branch into a target, and the user's clean checkout of it with it (`merge`, `checkout`),
and the retention policy that prunes finished worktrees (`prune`, `inventory`)."""
