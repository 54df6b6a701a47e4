"""Pacing: rate limits, budgets, spending and retry backoff, as rules and their configuration."""
