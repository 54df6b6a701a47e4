"""Running attempts: processes (through a small wrapper) and registered Python callables."""
