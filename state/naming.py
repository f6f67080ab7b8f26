"""Names for the side files the state package leaves for people (rejected edits, torn lines)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path


def timestamp_label(now_ms: int) -> str:
    """``20250301T120000.123Z``: sortable, UTC, and safe in a file name on any OS."""
    instant = datetime.fromtimestamp(now_ms / 1000.0, tz=UTC)
    return instant.strftime("%Y%m%dT%H%M%S") + f".{now_ms % 1000:03d}Z"


def unused_sibling(path: Path, label: str, now_ms: int) -> Path:
    """``<path>.<label>-<timestamp>``, with ``-2``, ``-3``... added if that name is taken."""
    base = f"{path.name}.{label}-{timestamp_label(now_ms)}"
    candidate = path.with_name(base)
    counter = 2
    while candidate.exists():
        candidate = path.with_name(f"{base}-{counter}")
        counter += 1
    return candidate
