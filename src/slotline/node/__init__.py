"""A node: its loop, its supervisor of runs, admission, registration, adoption."""
