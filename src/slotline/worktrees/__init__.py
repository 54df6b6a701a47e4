"""Worktrees: isolating a run in its own checkout, what it changed, and landing its work."""
