"""``read_all``: every record of one JSON-lines journal file, strictly (the tests' reader)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson


def read_all(path: Path | str) -> list[dict[str, Any]]:
    """Every record of a JSON-lines journal file.

    Raises ``ValueError`` naming the line for a line that is not a JSON object or is incomplete.
    """
    data = Path(path).read_bytes()
    if data and not data.endswith(b"\n"):
        raise ValueError(f"{path}: the last line is incomplete (open the journal to repair it)")
    records: list[dict[str, Any]] = []
    for number, line in enumerate(data.splitlines(), start=1):
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"{path} line {number} is not JSON: {exc}") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path} line {number} is not a JSON object")
        records.append(record)
    return records
