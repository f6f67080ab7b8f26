"""The daemon's own copy of ``runner_state.json``: ``runner_state.last-good.json``.

``runner_state.json`` is shared with people, who may leave it broken (a partial save, a stray
comma) or drop daemon-owned fields from it; if the daemon then crashes before it writes the file
again, the file alone could not restart it. So before every write of ``runner_state.json`` the
store writes the same bytes here first (atomically), and on start it takes the daemon-owned fields
from this copy and only the person-editable ones (``agent_memory``, ``notes``) from
``runner_state.json``. A broken edit costs nothing: it is reported, kept aside as
``runner_state.json.rejected-<timestamp>``, and the last good notes stay in force.

People never need to touch this file; deleting it only brings back the old behaviour (the shared
file alone is trusted, and a broken one refuses to start).
"""

from __future__ import annotations

from pathlib import Path

from core.errors import RefuseToStartError
from core.regular_file import read_regular_file
from state.atomic import atomic_write_bytes, remove_stale_tmp_files
from state.models import InvalidStateFileError, RunnerState, parse_state_bytes
from state.state_file import STATE_FILE_MAX_BYTES


def last_good_path(state_path: Path) -> Path:
    return state_path.with_name(f"{state_path.stem}.last-good{state_path.suffix}")


def read_last_good(path: Path) -> tuple[RunnerState, bytes] | None:
    """The copy's state and bytes; None when there is none. Raises ``RefuseToStartError`` when
    it cannot be used (only vigil writes it, atomically: damage is not a person's edit)."""
    remove_stale_tmp_files(path)
    try:
        # a FIFO there blocked the start in read_bytes; a sparse file of gigabytes was read whole
        _, data = read_regular_file(path, max_bytes=STATE_FILE_MAX_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RefuseToStartError(f"cannot read {path}: {exc}") from None
    try:
        state, _ = parse_state_bytes(data)
    except InvalidStateFileError as exc:
        raise RefuseToStartError(
            f"the daemon's own state copy {path} cannot be used: {exc.problem}. vigil writes it "
            "atomically, so it was damaged outside vigil (or by a newer vigil); move it aside to "
            "trust runner_state.json alone. Nothing was changed or deleted."
        ) from None
    return state, data


def write_last_good(path: Path, data: bytes, *, durable: bool = True) -> None:
    atomic_write_bytes(path, data, durable=durable)


__all__ = ["last_good_path", "read_last_good", "write_last_good"]
