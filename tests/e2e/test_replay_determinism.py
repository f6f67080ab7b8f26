"""Replay determinism (issue #8): the same inputs and seed give byte-identical run folders.

Two replays of the same day (3 tickers, fallback decider, memory on, seed 42), in process and one
after the other, into two folders: every journal and state file must be equal byte for byte, and
the day must be eventful enough for that to mean something (decisions, fills, an open/closed
position). A folder that already holds a run is refused and left exactly as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from replay_support import (
    DETERMINISTIC_FILES,
    TICKERS,
    default_settings,
    equity_at_decisions,
    read_decisions,
    read_json,
    read_trades,
    relative_gap,
    replay_in_process,
    replay_options,
)

from core.errors import RefuseToStartError
from report.figures import build_report
from runner.config import Settings
from runner.replay.build import ReplayOptions, build_replay, replay_settings
from runner.replay.command import ReplayOutcome
from sim.feed import SimFeed

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

#: 2025-03-01 has fills in the first day: an ETH buy, a tracker exit and a second buy
DAY = "2025-03-01"


@dataclass(frozen=True)
class Runs:
    settings: Settings
    options: ReplayOptions
    first: ReplayOutcome
    second: ReplayOutcome
    first_dir: Path
    second_dir: Path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    root = tmp_path_factory.mktemp("determinism")
    settings = default_settings(root)
    first_dir, second_dir = root / "first", root / "second"
    options = replay_options(first_dir, DAY, 1)
    first = replay_in_process(settings, options)
    second = replay_in_process(settings, replay_options(second_dir, DAY, 1))
    return Runs(settings, options, first, second, first_dir, second_dir)


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: its bytes and modification time."""
    return {
        str(path.relative_to(folder)): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_same_inputs_and_seed_give_byte_identical_run_files(runs: Runs) -> None:
    assert runs.first.finished and runs.second.finished
    for name in DETERMINISTIC_FILES:
        first = (runs.first_dir / name).read_bytes()
        second = (runs.second_dir / name).read_bytes()
        assert first, f"{name} is empty"
        assert first == second, f"{name} differs between two replays of the same inputs"
    assert runs.first.decisions == runs.second.decisions
    assert runs.first.fills == runs.second.fills
    assert runs.first.ticks == runs.second.ticks


def test_the_compared_run_is_eventful(runs: Runs) -> None:
    """Byte equality of near-empty files would prove little: the day trades and decides."""
    decisions = read_decisions(runs.first_dir)
    trades = read_trades(runs.first_dir)
    # the fallback decides at least every 15m close (96 a day) and at most once per cooldown
    assert 96 <= len(decisions) == runs.first.decisions <= 720
    assert all(runs.options.start_ms <= d.at_ms < runs.options.end_ms for d in decisions)
    assert len(trades) == runs.first.fills >= 2
    assert {t.side for t in trades} == {"buy", "sell"}
    ledger = read_json(runs.first_dir / "paper_broker.json")["ledger"]
    assert float(ledger["fees_paid_usd"]) == pytest.approx(sum(t.fee_usd for t in trades))
    learner = read_json(runs.first_dir / "models" / "online_learner.json")
    assert learner, "the learner saved an empty model"


def test_the_reports_of_both_runs_are_equal(runs: Runs) -> None:
    """report.json names its folder; every figure in it is equal."""
    first = build_report(runs.first_dir).model_dump(exclude={"run_dir"})
    second = build_report(runs.second_dir).model_dump(exclude={"run_dir"})
    assert first == second
    assert first["metrics"]["trades"] == runs.first.fills


def test_a_folder_holding_a_run_is_refused_and_left_untouched(runs: Runs) -> None:
    before = _snapshot(runs.first_dir)
    assert set(DETERMINISTIC_FILES) <= set(before)
    with pytest.raises(RefuseToStartError, match="already holds a run"):
        build_replay(replay_settings(runs.settings, runs.options), runs.options)
    assert _snapshot(runs.first_dir) == before


@pytest.mark.parametrize("name", ["logs/decisions.jsonl", "logs/trades.csv", "runner_state.json"])
def test_any_journal_of_an_earlier_run_is_enough_to_refuse(
    runs: Runs, tmp_path: Path, name: str
) -> None:
    target = tmp_path / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes((runs.first_dir / name).read_bytes())
    options = replay_options(tmp_path, DAY, 1)
    with pytest.raises(RefuseToStartError, match=name.rsplit("/", 1)[-1]):
        build_replay(replay_settings(runs.settings, options), options)
    assert [p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()] == [Path(name)]


@pytest.mark.parametrize("name", ["paper_broker.json", "models/online_learner.json"])
def test_an_earlier_runs_account_or_model_alone_is_refused(
    runs: Runs, tmp_path: Path, name: str
) -> None:
    target = tmp_path / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes((runs.first_dir / name).read_bytes())
    options = replay_options(tmp_path, DAY, 1)
    try:
        replay = build_replay(replay_settings(runs.settings, options), options)
    except RefuseToStartError:
        return
    replay.journals.decisions.close()
    replay.journals.trades.close()
    raise AssertionError(f"a folder holding only {name} of an earlier run was not refused")


def test_another_seed_without_memory_is_internally_consistent(runs: Runs, tmp_path: Path) -> None:
    """Another seed and --no-memory may decide differently; what it writes must still add up:
    every decision's portfolio value is the cash and positions its trades.csv implies, marked at
    the recorded prices, and the fees are the ledger's."""
    options = replay_options(tmp_path / "other", DAY, 1, seed=7, memory=False)
    outcome = replay_in_process(runs.settings, options)
    assert outcome.finished and outcome.decisions > 0 and outcome.fills > 0
    decisions, trades = read_decisions(options.out_dir), read_trades(options.out_dir)
    assert len(decisions) == outcome.decisions and len(trades) == outcome.fills
    feed = SimFeed(TICKERS, update_interval_ms=options.update_ms())
    recomputed = equity_at_decisions(
        decisions, trades, feed, runs.settings.broker.starting_cash_usd
    )
    for decision, point in zip(decisions, recomputed, strict=True):
        assert decision.portfolio_value is not None
        assert relative_gap(decision.portfolio_value, point.equity_usd) < 1e-9, point
    ledger = read_json(options.out_dir / "paper_broker.json")["ledger"]
    assert float(ledger["fees_paid_usd"]) == pytest.approx(sum(t.fee_usd for t in trades))
