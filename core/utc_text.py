"""An instant as people read it in vigil's messages: ``2025-03-01T00:00:00Z``."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_utc(ms: int) -> str:
    """``ms`` since the epoch as a UTC date and time; one no calendar holds (past year 9999, a
    journaled time gone wrong) as its milliseconds, not a traceback."""
    try:
        return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError, OSError):
        return f"{ms} ms (no calendar date)"


__all__ = ["iso_utc"]
