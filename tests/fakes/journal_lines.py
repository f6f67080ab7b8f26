"""The tests' readers of a JSON-lines journal: every segment of it (``state.segments``: the rotated,
gzipped ones, oldest first, then the live file), strictly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from state.segments import open_segment, segments


def journal_bytes(live: Path) -> bytes:
    """The whole journal's bytes, across its segments (b"" when there is none)."""
    return b"".join(b"".join(open_segment(path)) for path in segments(Path(live)))


def journal_text(live: Path) -> str:
    return journal_bytes(live).decode()


def read_all(path: Path | str) -> list[dict[str, Any]]:
    """Every record of a JSON-lines journal, across its segments.

    Raises ``ValueError`` naming the segment and line for a line that is not a JSON object or is
    incomplete.
    """
    records: list[dict[str, Any]] = []
    for segment in segments(Path(path)):
        data = b"".join(open_segment(segment))
        if data and not data.endswith(b"\n"):
            raise ValueError(
                f"{segment}: the last line is incomplete (open the journal to repair it)"
            )
        for number, line in enumerate(data.splitlines(), start=1):
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"{segment} line {number} is not JSON: {exc}") from None
            if not isinstance(record, dict):
                raise ValueError(f"{segment} line {number} is not a JSON object")
            records.append(record)
    return records
