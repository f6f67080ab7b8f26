"""The other readers of runner_state.json (the simulator's start, ``vigil status`` and the API
through ``api.files.StateDirFiles``, ``vigil prompt``'s notes) on a FIFO or a sparse file of
gigabytes there: the simulator's start blocked on the FIFO in ``read_bytes`` before the store
could refuse it, and each read a huge file whole. Each now reads at most the store's bound."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from fakes.allocation_peak import allocation_peak
from fakes.fifo import outcome_beside_fifo

from api.files import StateDirFiles, StateFileError
from runner.prompt_cmd import _person_notes
from runner.sim_start import last_state_time_ms
from state.state_file import STATE_FILE_MAX_BYTES

HUGE = 256 << 20


def _not_a_state(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    else:
        with path.open("wb") as handle:
            handle.truncate(HUGE)


def _outcome(call: Callable[[], object], path: Path) -> tuple[object, int]:
    with allocation_peak() as allocated:
        outcome = outcome_beside_fifo(call, path)
    return outcome, allocated.peak_bytes


@pytest.mark.parametrize("kind", ["fifo", "huge"])
def test_the_simulators_start_leaves_it_to_the_store(tmp_path: Path, kind: str) -> None:
    state = tmp_path / "runner_state.json"
    _not_a_state(state, kind)
    outcome, peak = _outcome(lambda: last_state_time_ms(state, tmp_path / "decisions.jsonl"), state)
    assert outcome is None and peak < 2 * STATE_FILE_MAX_BYTES


@pytest.mark.parametrize("kind", ["fifo", "huge"])
def test_status_and_the_api_say_it_cannot_be_read(tmp_path: Path, kind: str) -> None:
    state = tmp_path / "runner_state.json"
    _not_a_state(state, kind)
    outcome, peak = _outcome(StateDirFiles(tmp_path).runner_state, state)
    assert isinstance(outcome, StateFileError), outcome
    assert ("not a regular file" if kind == "fifo" else "over the") in str(outcome)
    assert peak < 2 * STATE_FILE_MAX_BYTES


def test_the_prompts_notes_are_none(tmp_path: Path) -> None:
    state = tmp_path / "runner_state.json"
    _not_a_state(state, "huge")
    outcome, peak = _outcome(lambda: _person_notes(state), state)
    assert outcome == "" and peak < 2 * STATE_FILE_MAX_BYTES
