"""``vigil run --sim`` restarted on a state dir resumes its simulated time instead of rewinding it,
and a start outside the recording is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.clock import VirtualClock
from core.errors import EXIT_REFUSE_TO_START, RefuseToStartError
from runner.cli import main
from runner.sim_start import sim_start_ms
from sim.feed import SimFeed
from state.store import RunnerStateStore

MARCH_1 = 1_740_787_200_000  # 2025-03-01 00:00 UTC
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def feed() -> SimFeed:
    return SimFeed(("BTC/USDT",))


def _paths(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "logs").mkdir(exist_ok=True)
    return tmp_path / "runner_state.json", tmp_path / "logs" / "decisions.jsonl"


def test_a_fresh_state_dir_starts_where_asked(tmp_path: Path, feed: SimFeed) -> None:
    assert sim_start_ms(MARCH_1, *_paths(tmp_path), feed) == MARCH_1


def test_a_restart_resumes_from_the_state_dirs_last_time(tmp_path: Path, feed: SimFeed) -> None:
    state_path, decisions = _paths(tmp_path)
    store = RunnerStateStore(state_path, VirtualClock(MARCH_1 + 2 * HOUR_MS))
    store.load()
    store.replace(entry_prices={"BTC/USDT": 84_000.0}, entry_times_ms={"BTC/USDT": MARCH_1})
    store.save()
    assert sim_start_ms(MARCH_1, state_path, decisions, feed) == MARCH_1 + 2 * HOUR_MS

    # the journal went further than the state's last change; a torn last line is skipped
    decisions.write_text(
        json.dumps({"type": "decision", "at_ms": MARCH_1 + 5 * HOUR_MS}) + '\n{"type": "dec'
    )
    assert sim_start_ms(MARCH_1, state_path, decisions, feed) == MARCH_1 + 5 * HOUR_MS
    # a later --start is taken as asked
    later = MARCH_1 + 24 * HOUR_MS
    assert sim_start_ms(later, state_path, decisions, feed) == later


def test_a_start_outside_the_recording_is_refused(tmp_path: Path, feed: SimFeed) -> None:
    with pytest.raises(RefuseToStartError, match="outside the recording of BTC/USDT"):
        sim_start_ms(MARCH_1 - 400 * 24 * HOUR_MS, *_paths(tmp_path), feed)
    state_path, decisions = _paths(tmp_path)
    _, end_ms = feed.span_ms("BTC/USDT")
    decisions.write_text(json.dumps({"at_ms": end_ms + HOUR_MS}) + "\n")
    with pytest.raises(RefuseToStartError, match=r"resumed from the state dir.*fresh state dir"):
        sim_start_ms(MARCH_1, state_path, decisions, feed)


def test_vigil_run_sim_refuses_a_start_outside_the_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--state-dir", str(tmp_path), "run", "--sim", "--start", "2019-01-01T00:00:00Z"])
    assert code == EXIT_REFUSE_TO_START
    err = capsys.readouterr().err
    assert "2019-01-01T00:00:00Z" in err and "outside the recording" in err


@pytest.mark.parametrize("at_ms", [10**17, 2**62])
def test_a_journal_time_past_any_calendar_date_is_refused_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], at_ms: int
) -> None:
    """A last journal line's time past year 9999 (a person's edit) made the resume warning's date
    a ValueError: ``vigil run --sim`` was exit 1 with a traceback."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "decisions.jsonl").write_text(json.dumps({"at_ms": at_ms}) + "\n")
    code = main(["--state-dir", str(tmp_path), "run", "--sim"])
    err = capsys.readouterr().err
    assert code == EXIT_REFUSE_TO_START, err[-2000:]
    assert f"{at_ms} ms (no calendar date)" in err and "fresh state dir" in err
