"""What ``RunnerStateStore.load`` starts from: ``runner_state.json`` and the daemon's own copy.

- No copy (``state.last_good``): the shared file, or defaults when there is none. A file that is
  unreadable, not JSON, invalid or from a newer vigil refuses the start and is left as it is.
- A copy: its daemon-owned fields always; the shared file's editable fields when it is valid (an
  edit for the store to merge); a broken file is an edit to report and keep aside before the next
  write, and the last good notes stay. A missing shared file is restored from the copy.

Nothing here changes the store: it reads and judges, the store applies (``StartingPoint``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from core.clock import Clock
from core.errors import RefuseToStartError
from state.atomic import remove_stale_tmp_files
from state.edit_checks import parse_edit
from state.edits import StateEditReport
from state.last_good import read_last_good
from state.models import (
    SCHEMA_VERSION,
    InvalidStateFileError,
    NewerSchemaError,
    RunnerState,
    parse_state_bytes,
)
from state.state_file import FileInFluxError, FileStamp, FileView, StateFile

# the store's parts log as one component, under the name operators already filter on
log = logging.getLogger("state.store")


@dataclass(frozen=True)
class RejectedEdit:
    """A person's edit that could not be used, with its report; copied aside before a write.
    ``too_large``: the stamp of a file too large to read (``data`` empty), moved aside instead."""

    data: bytes
    report: StateEditReport
    too_large: FileStamp | None = None


@dataclass(frozen=True)
class StartingPoint:
    """``state`` is both the live state and the baseline (what the file last held, as the
    daemon wrote it). ``edited``: the shared file's valid edit, to merge over ``state`` as
    detected at ``detected_at_ms``; ``rejected``: its broken edit, to report and keep aside."""

    state: RunnerState
    file: FileView
    last_good_data: bytes | None = None
    edited: RunnerState | None = None
    rejected: RejectedEdit | None = None
    detected_at_ms: int = 0


def read_starting_point(
    disk: StateFile, path: Path, last_good_path: Path, clock: Clock
) -> StartingPoint:
    """Raises ``RefuseToStartError`` when the state dir cannot be created or written, or when the
    file is unreadable, not JSON, invalid or from a newer schema."""
    disk.prepare_dir()
    for stale in remove_stale_tmp_files(path):
        log.warning("removed %s, left by a write that was interrupted", stale)
    try:
        stamp_and_data = disk.read_settled()
    except (OSError, FileInFluxError) as exc:
        raise RefuseToStartError(
            f"cannot read the state file {path}: {exc}. Fix its permissions or move "
            "it aside (without it the daemon starts with empty state)."
        ) from None
    last_good = read_last_good(last_good_path)
    if last_good is not None:
        good, good_data = last_good
        return _over_last_good(path, last_good_path, clock, stamp_and_data, good, good_data)
    if stamp_and_data is None:
        log.info("no state file at %s yet: starting with empty state", path)
        return StartingPoint(RunnerState(), FileView(None, None))
    stamp, data = stamp_and_data
    try:
        state, found_version = parse_state_bytes(data)
    except InvalidStateFileError as exc:
        raise RefuseToStartError(
            f"the state file {path} cannot be used: {exc.problem}. Fix the file, or "
            "move it aside to start with empty state (or run the vigil version that wrote "
            "it). Nothing was changed or deleted."
        ) from None
    if found_version < SCHEMA_VERSION:
        log.info(
            "state file %s is schema version %d; migrated to %d (rewritten on the next save)",
            path,
            found_version,
            SCHEMA_VERSION,
        )
    return StartingPoint(state, FileView(stamp, data))


def _over_last_good(
    path: Path,
    last_good_path: Path,
    clock: Clock,
    shared: tuple[FileStamp, bytes] | None,
    good: RunnerState,
    good_data: bytes,
) -> StartingPoint:
    """Start from the daemon's own copy; the shared file's edit, valid or not, goes with it."""
    if shared is None:
        log.warning(
            "%s is missing; restored from the daemon's copy %s (delete both to start empty)",
            path,
            last_good_path,
        )
        return StartingPoint(good, FileView(None, None), good_data)
    stamp, data = shared
    view = FileView(stamp, data)
    if data == good_data:
        return StartingPoint(good, view, good_data)
    now_ms = clock.now_ms()
    try:
        edited = parse_edit(data, good)
    except NewerSchemaError as exc:
        raise RefuseToStartError(
            f"the state file {path} cannot be used: {exc.problem}. Run the vigil "
            "version that wrote it. Nothing was changed or deleted."
        ) from None
    except InvalidStateFileError as exc:
        report = StateEditReport(
            path=path, detected_at_ms=now_ms, accepted=False, error=exc.problem
        )
        rejected = RejectedEdit(data, report)
        return StartingPoint(good, view, good_data, rejected=rejected, detected_at_ms=now_ms)
    return StartingPoint(good, view, good_data, edited=edited, detected_at_ms=now_ms)
