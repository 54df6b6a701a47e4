"""Webhooks and desktop hooks: what fires on a task's events, and delivering it."""
