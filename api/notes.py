"""``PUT /api/memory/notes``: a person's edit of runner_state.json's editable fields, made the way
an editor would make it (the file, atomically) and validated the same way the daemon validates a
file edit. With a daemon running, its store looks at the file at once and merges the edit."""

from __future__ import annotations

from pydantic import ValidationError

from api.files import StateDirFiles
from api.models import NotesEdit, NotesEditResult
from api.ports import LiveDaemon
from state.atomic import atomic_write_bytes
from state.edit_checks import edit_problem
from state.models import RunnerState, describe_validation_error, render_state


class NotesRejectedError(ValueError):
    """The edit is not valid; the message says why (the file is left as it was)."""


class NotesUnwritableError(RuntimeError):
    """The edit is valid but runner_state.json cannot be written (a full disk): not saved."""


def apply_notes_edit(
    files: StateDirFiles, edit: NotesEdit, daemon: LiveDaemon | None
) -> NotesEditResult:
    current = files.runner_state()  # StateFileError when the file itself is broken
    changes = edit.model_dump(exclude_none=True)
    if not changes:
        raise NotesRejectedError("nothing to change: give agent_memory and/or notes")
    try:
        edited = RunnerState.model_validate({**current.model_dump(), **changes})
    except ValidationError as exc:
        raise NotesRejectedError(describe_validation_error(exc)) from None
    problem = edit_problem(current, edited)  # the daemon judges the file's edit by the same rules
    if problem is not None:
        raise NotesRejectedError(problem)
    changed = [f for f in changes if getattr(edited, f) != getattr(current, f)]
    if not changed:
        return NotesEditResult(
            accepted=True, changed=[], merged_by_daemon=False, detail="no change"
        )
    try:
        atomic_write_bytes(files.runner_state_path, render_state(edited))
    except OSError as exc:  # was a 500 with no reason; the old file stays whole
        raise NotesUnwritableError(
            f"{files.runner_state_path} cannot be written ({exc.strerror or exc}): "
            "the edit was not saved"
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


__all__ = ["NotesRejectedError", "NotesUnwritableError", "apply_notes_edit"]
