"""Benchmarks of slotline against huey's SqliteHuey consumer; run `python bench/run.py`."""
