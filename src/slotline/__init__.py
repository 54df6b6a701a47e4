"""slotline: an agent task queue with concurrency control."""

from __future__ import annotations

__version__ = "0.1.0"
