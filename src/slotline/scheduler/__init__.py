"""Scheduling: queue order, the dispatch policy, ETAs."""
