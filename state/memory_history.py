"""The last versions of the agent's memory note, with who wrote each, so a person can roll back.

Kept in ``runner_state.json`` under ``extra["agent_memory_history"]`` (daemon-owned; a person reads
it with ``vigil memory notes history`` and restores one with ``vigil memory notes rollback N``).
Version numbers only grow; the oldest beyond ``MAX_VERSIONS`` are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

HISTORY_KEY: Final = "agent_memory_history"
MAX_VERSIONS: Final = 20

Author = Literal["model", "person"]


class MemoryVersion(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = Field(ge=1)
    at_ms: int = Field(ge=0)
    author: Author
    text: str
    redactions: int = Field(0, ge=0)  # secrets taken out before it was stored
    note: str = ""  # e.g. "rollback to 3"


def memory_history(extra: Mapping[str, Any]) -> list[MemoryVersion]:
    """The stored versions, oldest first (an unreadable entry is skipped, never fatal)."""
    found = extra.get(HISTORY_KEY)
    versions: list[MemoryVersion] = []
    for raw in found if isinstance(found, (list, tuple)) else ():
        try:
            versions.append(MemoryVersion.model_validate(raw))
        except ValidationError:
            continue
    return versions


def with_version(
    extra: Mapping[str, Any],
    text: str,
    *,
    author: Author,
    at_ms: int,
    redactions: int = 0,
    note: str = "",
) -> dict[str, Any]:
    """``extra`` with one more version at the end (and at most ``MAX_VERSIONS`` kept)."""
    versions = memory_history(extra)
    number = versions[-1].version + 1 if versions else 1
    versions.append(
        MemoryVersion(
            version=number, at_ms=at_ms, author=author, text=text, redactions=redactions, note=note
        )
    )
    kept = [v.model_dump(mode="json") for v in versions[-MAX_VERSIONS:]]
    return {**extra, HISTORY_KEY: kept}


def find_version(extra: Mapping[str, Any], number: int) -> MemoryVersion:
    """Version ``number``; ``KeyError`` naming the ones kept when it is not there."""
    versions = memory_history(extra)
    for v in versions:
        if v.version == number:
            return v
    kept = ", ".join(str(v.version) for v in versions) or "none"
    raise KeyError(f"no memory version {number} (kept: {kept})")


__all__ = [
    "HISTORY_KEY",
    "MAX_VERSIONS",
    "Author",
    "MemoryVersion",
    "find_version",
    "memory_history",
    "with_version",
]
