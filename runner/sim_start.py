"""Where ``vigil run --sim`` starts simulated time, so a restart never rewinds it.

A state dir remembers a simulated instant: the state's last change, its held positions' entry
times, the last line of ``decisions.jsonl``. Restarting the simulator at an earlier ``--start`` would
make the journal's time go backwards and a held position "opened in the future", so the daemon
resumes from that instant instead (and says so). A start outside the recording is refused, like a
replay outside it: the streams would be silent and health would fail for no visible reason.
"""

from __future__ import annotations

import logging
from pathlib import Path

from core.jsonread import loads_json
from core.regular_file import read_regular_file
from core.utc_text import iso_utc
from sim.feed import SimFeed
from sim.start_span import refuse_outside_recording
from state.models import InvalidStateFileError, parse_state_bytes
from state.segments import recent_lines
from state.state_file import STATE_FILE_MAX_BYTES

log = logging.getLogger(__name__)

_TAIL_BYTES = 1 << 16


def sim_start_ms(requested_ms: int, state_path: Path, decisions_path: Path, feed: SimFeed) -> int:
    """``requested_ms``, or the state dir's last simulated instant when that is later; refuses a
    start outside the recording of any ticker."""
    start_ms = resumed_start_ms(requested_ms, state_path, decisions_path)
    refuse_outside_recording(start_ms, requested_ms, feed)
    return start_ms


def resumed_start_ms(requested_ms: int, state_path: Path, decisions_path: Path) -> int:
    """``requested_ms``, or the state dir's last simulated instant when that is later (said)."""
    last_ms = last_state_time_ms(state_path, decisions_path)
    if last_ms is None or last_ms <= requested_ms:
        return requested_ms
    log.warning(
        "sim: the state dir was last at %s, after the requested start %s; resuming from %s "
        "so simulated time does not run backwards (use a fresh state dir to start over)",
        iso_utc(last_ms),
        iso_utc(requested_ms),
        iso_utc(last_ms),
    )
    return last_ms


def last_state_time_ms(state_path: Path, decisions_path: Path) -> int | None:
    """The latest instant the state dir records, None for a fresh one. An unreadable state file
    is left for the store to refuse with its own message."""
    times: list[int] = []
    try:
        # a FIFO there blocked the start in read_bytes before the store could refuse it
        _, data = read_regular_file(state_path, max_bytes=STATE_FILE_MAX_BYTES)
        state, _ = parse_state_bytes(data)
        times += [state.updated_at_ms, *state.entry_times_ms.values()]
    except (OSError, InvalidStateFileError):
        pass
    last = _last_journal_time_ms(decisions_path)
    if last is not None:
        times.append(last)
    times = [t for t in times if t > 0]
    return max(times) if times else None


def _last_journal_time_ms(path: Path) -> int | None:
    try:  # across rotated segments: a rotation may just have left the live file empty
        tail = recent_lines(path, _TAIL_BYTES)
    except OSError as exc:  # the state file's own times still count
        log.warning("resume: the decisions journal's last time is not known: %s", exc)
        return None
    for line in reversed(tail):
        try:
            at_ms = loads_json(line).get("at_ms")
        except (ValueError, AttributeError):
            continue  # a torn or cut-off line
        if isinstance(at_ms, int):
            return at_ms
    return None
