"""``PUT /api/memory/notes``: a person's edit of runner_state.json's editable fields, made the way
an editor would make it (the file, atomically) and validated the same way the daemon validates a
file edit. With a daemon running, its store looks at the file at once and merges the edit.

The write is ``state.merge_write``'s, as ``vigil trading``'s: a save landing between the read and
the write (a person's, the daemon's, ``vigil trading halt``) was overwritten by the state read
before it; the edit is now made again in that save."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from api.files import StateDirFiles, StateFileError
from api.models import NotesEdit, NotesEditResult
from api.ports import LiveDaemon
from state.edit_checks import edit_problem
from state.merge_write import MergeConflictError, merge_write
from state.models import (
    InvalidStateFileError,
    RunnerState,
    describe_validation_error,
    parse_state_bytes,
    render_state,
)
from state.state_file import STATE_FILE_MAX_BYTES


class NotesRejectedError(ValueError):
    """The edit is not valid; the message says why (the file is left as it was)."""


class NotesUnwritableError(RuntimeError):
    """The edit is valid but runner_state.json cannot be written (a full disk): not saved."""


class NotesConflictError(ValueError):
    """A field the edit changes is stored otherwise than the edit's ``based_on`` says it was: a
    decision or another editor saved since the editor loaded it. Nothing is saved."""


class _NoChange(Exception):
    """The file already holds the edit: nothing to write."""


def apply_notes_edit(
    files: StateDirFiles, edit: NotesEdit, daemon: LiveDaemon | None
) -> NotesEditResult:
    changes = edit.model_dump(exclude_none=True, exclude={"based_on"})
    if not changes:
        raise NotesRejectedError("nothing to change: give agent_memory and/or notes")
    based_on = {} if edit.based_on is None else edit.based_on.model_dump(exclude_none=True)
    _edited(files.runner_state(), changes)  # StateFileError when the file itself is broken
    changed: list[str] = []

    def merge(data: bytes | None) -> bytes:
        current = RunnerState() if data is None else _parse(files, data)
        _check_based_on(current, changes, based_on)  # in the merge: a save since counts too
        edited = _edited(current, changes)
        changed[:] = [f for f in changes if getattr(edited, f) != getattr(current, f)]
        if not changed:
            raise _NoChange
        return render_state(edited)

    path = files.runner_state_path
    try:
        merge_write(path, merge, max_bytes=STATE_FILE_MAX_BYTES)
    except _NoChange:
        return NotesEditResult(
            accepted=True, changed=[], merged_by_daemon=False, detail="no change"
        )
    except MergeConflictError as exc:
        raise StateFileError(f"{exc}: the edit was not saved") from None
    except OSError as exc:  # was a 500 with no reason; the old file stays whole
        raise NotesUnwritableError(
            f"{path} cannot be written ({exc.strerror or exc}): the edit was not saved"
        ) from None
    if daemon is None:
        return NotesEditResult(
            accepted=True,
            changed=changed,
            merged_by_daemon=False,
            detail="written; a daemon started on this state dir reads it",
        )
    report = daemon.poll_state()
    if report is not None and not report.accepted:
        raise NotesRejectedError(report.error or "the daemon rejected the edit")
    return NotesEditResult(
        accepted=True,
        changed=changed,
        merged_by_daemon=report is not None,
        detail=report.summary() if report is not None else "written; the daemon merges it",
    )


def _check_based_on(
    current: RunnerState, changes: dict[str, Any], based_on: dict[str, Any]
) -> None:
    moved = [f for f in changes if f in based_on and getattr(current, f) != based_on[f]]
    if moved:
        raise NotesConflictError(
            f"{' and '.join(moved)} changed since the edit's based_on was loaded (a decision or "
            "another editor saved it): nothing saved; load it again and make the edit on it"
        )


def _edited(current: RunnerState, changes: dict[str, Any]) -> RunnerState:
    try:
        edited = RunnerState.model_validate({**current.model_dump(), **changes})
    except ValidationError as exc:
        raise NotesRejectedError(describe_validation_error(exc)) from None
    problem = edit_problem(current, edited)  # the daemon judges the file's edit by the same rules
    if problem is not None:
        raise NotesRejectedError(problem)
    return edited


def _parse(files: StateDirFiles, data: bytes) -> RunnerState:
    try:
        return parse_state_bytes(data)[0]
    except InvalidStateFileError as exc:  # a broken save landed since the first read
        raise StateFileError(f"{files.runner_state_path}: {exc.problem}") from None


__all__ = ["NotesConflictError", "NotesRejectedError", "NotesUnwritableError", "apply_notes_edit"]
