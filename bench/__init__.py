"""Benchmarks of slotline against its peers; `bench/goals.py` runs them all (RESULTS.md)."""
