"""``StateEditReport``: what the store found when a person edited ``runner_state.json``."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict

from state.models import DAEMON_FIELDS, EDITABLE_FIELDS, RunnerState
from state.trading import TradingState

_PREVIEW_CHARS = 80
#: daemon-owned fields a person's edit is compared on, to report the ones it ignored
_COMPARED_DAEMON_FIELDS: Final = (*DAEMON_FIELDS, "updated_at_ms")


class FieldChange(BaseModel):
    """One editable field a person changed, with its value before and after."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    field: str
    old: str
    new: str


class StateEditReport(BaseModel):
    """One external change of the state file, as the store judged it.

    ``accepted``: the edit was valid and its editable fields are now live (``changes`` lists the
    ones that differed). ``ignored_fields``: daemon-owned fields the person changed; the daemon's
    values stay. Rejected edits carry ``error``; ``preserved_as`` is set once the rejected text has
    been copied aside (the store does that before it next writes the state file).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    path: Path
    detected_at_ms: int
    accepted: bool
    changes: tuple[FieldChange, ...] = ()
    ignored_fields: tuple[str, ...] = ()
    error: str | None = None
    preserved_as: Path | None = None

    @property
    def changed_fields(self) -> tuple[str, ...]:
        return tuple(change.field for change in self.changes)

    def summary(self) -> str:
        """One line for a log or a status page."""
        if not self.accepted:
            where = (
                f"; the rejected text is kept in {self.preserved_as}"
                if self.preserved_as
                else "; it will be copied aside before the daemon next writes the file"
            )
            return f"edit of {self.path} rejected ({self.error}); last good state kept{where}"
        parts = [
            f"{c.field}: {_preview(c.old)} -> {_preview(c.new)} ({len(c.old)} -> {len(c.new)} chars)"
            for c in self.changes
        ]
        changed = "; ".join(parts) if parts else "no editable field changed"
        ignored = (
            f"; ignored changes to daemon-owned {', '.join(self.ignored_fields)}"
            if self.ignored_fields
            else ""
        )
        return f"edit of {self.path} merged: {changed}{ignored}"


def _preview(text: str) -> str:
    shown = text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 3] + "..."
    return repr(shown)


def compare_edit(
    current: RunnerState, baseline: RunnerState, edited: RunnerState
) -> tuple[tuple[FieldChange, ...], tuple[str, ...]]:
    """A person's edit against the live state: the editable fields it changed, and the
    daemon-owned fields it changed against what the file last held (those are ignored)."""
    changes = tuple(
        FieldChange(field=f, old=_as_text(getattr(current, f)), new=_as_text(getattr(edited, f)))
        for f in EDITABLE_FIELDS
        if getattr(edited, f) != getattr(current, f)
    )
    ignored = tuple(
        f for f in _COMPARED_DAEMON_FIELDS if getattr(edited, f) != getattr(baseline, f)
    )
    return changes, ignored


def _as_text(value: str | TradingState) -> str:
    """An editable field as a report shows it (the trading state as its one-line description)."""
    return value if isinstance(value, str) else value.describe()
