"""What a person's edit of ``runner_state.json`` may not bring in, beyond what ``RunnerState``
itself checks, and the parse of an edit that applies both.

These rules judge only what the edit changes, against the live state, never what the file already
held: a state written before a rule existed (a halt reason quoting a multi-line error, notes over
the cap) still loads and is written back as it is. Put in ``RunnerState``, such a rule would make
that file, and the daemon's own copy of it (``state.last_good``), refuse the start.
"""

from __future__ import annotations

from typing import Final

from state.line_text import line_text_problem
from state.models import InvalidStateFileError, RunnerState, parse_state_bytes

#: the longest ``notes`` an edit may bring: what the API's 1 MiB body ceiling
#: (``api.bodylimit.MAX_BODY_BYTES``) lets ``PUT /api/memory/notes`` carry. Unbounded, an editor
#: could save 100 MB of notes, which the daemon then held and rewrote at every save.
NOTES_MAX_CHARS: Final = 1 << 20


def edit_problem(live: RunnerState, edited: RunnerState) -> str | None:
    """Why ``edited`` cannot replace ``live`` as a person's edit; None when it can."""
    if edited.notes != live.notes and len(edited.notes) > NOTES_MAX_CHARS:
        return (
            f"field 'notes' is {len(edited.notes):,} characters, over the {NOTES_MAX_CHARS:,} "
            "an edit may hold (as much as the API's 1 MiB body can carry)"
        )
    for field in ("reason", "by"):
        new = getattr(edited.trading, field)
        if new != getattr(live.trading, field):
            problem = line_text_problem(new)
            if problem is not None:
                return f"field 'trading.{field}' {problem}"
    return None


def parse_edit(data: bytes, live: RunnerState) -> RunnerState:
    """``parse_state_bytes`` of a person's edit, then ``edit_problem`` against ``live``: either
    raises ``InvalidStateFileError`` (``NewerSchemaError`` for a newer file) saying why."""
    edited, _ = parse_state_bytes(data)
    problem = edit_problem(live, edited)
    if problem is not None:
        raise InvalidStateFileError(problem)
    return edited
