"""The HTTP client of a remote node and the `Backend` the CLI speaks through (local or remote)."""
