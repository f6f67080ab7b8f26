"""``vigil replay``'s arguments and refusals: dates, speed, cadence, tickers, the Claude budget,
an occupied output folder, a span outside the recording."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from fakes.report_support import write_run
from pydantic import SecretStr

from agent.config import AgentConfig
from core.errors import EXIT_REFUSE_TO_START, RefuseToStartError
from gate.gate import GateConfig
from regime.config import SEED_MAX
from runner.cli import EXIT_USAGE, main
from runner.config import Settings
from runner.replay.args import options_from_args, parse_speed
from runner.replay.build import (
    ReplayOptions,
    check_out_dir,
    check_span,
    replay_settings,
)
from runner.replay.estimate import expected_calls_text
from sim.feed import SimFeed
from tracker.config import TrackerConfig

DAY_MS = 86_400_000
MARCH_1_MS = 1_740_787_200_000
TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")


def _args(**overrides: object) -> argparse.Namespace:
    values: dict[str, object] = {
        "replay_from": "2025-03-01",
        "replay_to": "2025-03-14",
        "out": Path("runs/march"),
        "tickers": None,
        "decider": "fallback",
        "no_memory": False,
        "replay_speed": "max",
        "seed": 42,
        "update_secs": 75.0,
    }
    return argparse.Namespace(**(values | overrides))


def _options(tmp_path: Path, **overrides: object) -> ReplayOptions:
    fields: dict[str, object] = {
        "start_ms": MARCH_1_MS,
        "end_ms": MARCH_1_MS + 2 * DAY_MS,
        "out_dir": tmp_path / "run",
        "tickers": TICKERS,
    }
    return ReplayOptions(**(fields | overrides))  # type: ignore[arg-type]


def test_to_is_inclusive_and_the_defaults_are_the_configured_tickers_at_max_speed() -> None:
    options = options_from_args(_args(), TICKERS)
    assert options.start_ms == MARCH_1_MS
    assert options.end_ms == MARCH_1_MS + 14 * DAY_MS  # through the end of 2025-03-14
    assert options.days == 14
    assert options.tickers == TICKERS
    assert options.speed is None and options.memory and options.update_interval_ms == 75_000
    subset = options_from_args(_args(tickers=["ETH/USDT"], no_memory=True), TICKERS)
    assert subset.tickers == ("ETH/USDT",) and not subset.memory


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"replay_from": None}, "--from is required"),
        ({"replay_to": "14 March"}, "not a day like"),
        ({"replay_to": "2025-02-01"}, "before --from"),
        ({"out": None}, "--out is required"),
        ({"update_secs": 70.0}, "must divide 300"),
        ({"replay_speed": "fast"}, "'max' or a number"),
        ({"replay_speed": "0"}, "must be > 0"),
        # past numpy's seeds a traceback; -1 was taken and the fits failed at INFO
        ({"seed": 10**23}, "--seed 100000000000000000000000 is not 0 to"),
        ({"seed": -1}, "--seed -1 is not 0 to"),
        ({"seed": 2**32 - 1}, "is not 0 to 4,294,967,276"),
    ],
)
def test_bad_arguments_say_what_is_wrong(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        options_from_args(_args(**overrides), TICKERS)


def test_speed_is_max_or_a_factor() -> None:
    assert parse_speed("max") is None
    assert parse_speed("600") == 600.0


def test_replay_settings_write_into_the_run_folder_without_keys(tmp_path: Path) -> None:
    settings = Settings(
        state_dir=tmp_path / "live",
        anthropic_api_key=SecretStr("sk-test"),
        fred_api_key=SecretStr("fred"),
    )
    options = _options(tmp_path, tickers=("BTC/USDT",), seed=7)
    replayed = replay_settings(settings, options)
    assert replayed.state_dir == options.out_dir
    assert replayed.market.tickers == ("BTC/USDT",)
    assert replayed.anthropic_api_key is None  # --decider fallback: Claude is never asked
    assert replayed.fred_api_key is None  # the recording has no macro series
    assert replayed.regime.hmm.seed == 7
    assert not replayed.state.fsync_journals


def test_claude_needs_a_key_and_a_daily_budget_and_says_how_many_calls(tmp_path: Path) -> None:
    options = _options(tmp_path, decider="claude")
    with pytest.raises(RefuseToStartError, match="ANTHROPIC_API_KEY"):
        replay_settings(Settings(state_dir=tmp_path), options)
    keyed = Settings(state_dir=tmp_path, anthropic_api_key=SecretStr("sk-test"))
    with pytest.raises(RefuseToStartError, match="daily budget") as refused:
        replay_settings(keyed, options)
    assert "at least 192 decision calls" in str(refused.value)  # 2 days of 15m closes
    budgeted = keyed.model_copy(update={"agent": AgentConfig(daily_budget_usd=5.0)})
    assert replay_settings(budgeted, options).anthropic_api_key is not None
    assert "at most about 1440" in expected_calls_text(options, keyed)  # one per 120 s cooldown
    assert "up to 960 position reviews" in expected_calls_text(options, keyed)  # one per 180 s


def test_the_call_estimate_reads_the_cooldown_and_review_cadence_from_settings(
    tmp_path: Path,
) -> None:
    options = _options(tmp_path, decider="claude")
    slower = Settings(
        state_dir=tmp_path,
        gate=GateConfig(cooldown_secs=600.0),
        tracker=TrackerConfig(agent_interval_secs=360.0),
    )
    text = expected_calls_text(options, slower)
    assert "at most about 288 (one per 600 s cooldown)" in text
    assert "up to 480 position reviews (one per 360 s" in text


def test_an_unconfigured_ticker_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RefuseToStartError, match="DOGE/USDT"):
        replay_settings(Settings(state_dir=tmp_path), _options(tmp_path, tickers=("DOGE/USDT",)))


def test_a_folder_holding_a_run_is_refused_and_an_empty_one_is_fine(tmp_path: Path) -> None:
    check_out_dir(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    check_out_dir(tmp_path / "empty")
    run = write_run(tmp_path / "old")
    with pytest.raises(RefuseToStartError, match="already holds a run"):
        check_out_dir(run)


def test_a_span_outside_the_recording_names_what_it_covers(tmp_path: Path) -> None:
    feed = SimFeed(("BTC/USDT",))
    first_ms, _ = feed.span_ms("BTC/USDT")
    before = _options(tmp_path, start_ms=first_ms - DAY_MS, tickers=("BTC/USDT",))
    with pytest.raises(RefuseToStartError, match="the recording covers 2024-12-31"):
        check_span(feed, before)
    backwards = _options(tmp_path, end_ms=MARCH_1_MS, tickers=("BTC/USDT",))
    with pytest.raises(RefuseToStartError, match="--to must be after --from"):
        check_span(feed, backwards)


def test_the_cli_exits_2_on_bad_arguments_and_78_on_a_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    out = tmp_path / "run"
    assert main(["replay", "--from", "2025-03-02", "--to", "2025-03-01", "--out", str(out)]) == (
        EXIT_USAGE
    )
    assert "before --from" in capsys.readouterr().err
    claude = ["--decider", "claude"]
    code = main(
        ["replay", "--from", "2025-03-01", "--to", "2025-03-01", "--out", str(out), *claude]
    )
    assert code == EXIT_REFUSE_TO_START
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err
    assert not out.exists()  # refused before anything was written


def test_replay_compare_prints_two_runs_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b")
    assert main(["replay", "--compare", str(a), str(b)]) == 0
    printed = capsys.readouterr().out
    assert f"a: {a}" in printed and f"b: {b}" in printed
    total = next(line for line in printed.splitlines() if line.startswith("total return %"))
    assert total.split()[3:5] == ["10.2500", "10.2500"]  # the standard run's hand-worked figure


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        ({"update_secs": float("nan")}, "--update-secs nan must divide 300"),
        ({"update_secs": float("inf")}, "--update-secs inf must divide 300"),
        # divides every bar, but 300,000 updates a 5m bar held Ctrl-C off while memory grew
        ({"update_secs": 0.001}, "--update-secs 0.001 is under 1 s between kline updates"),
        ({"update_secs": 0.5}, "--update-secs 0.5 is under 1 s"),
        ({"replay_from": "9999-12-31", "replay_to": "9999-12-31"}, "outside 2010-01-01"),
        ({"replay_from": "0001-01-01"}, "--from 0001-01-01 is outside"),
    ],
)
def test_non_finite_cadences_and_days_no_recording_holds_are_usage_errors(
    overrides: dict[str, object], said: str
) -> None:
    with pytest.raises(ValueError, match=said):
        options_from_args(_args(**overrides), TICKERS)


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        ({"seed": -1}, f"--seed -1: the EM seed must be 0 .. {SEED_MAX}"),
        ({"seed": SEED_MAX + 1}, f"--seed {SEED_MAX + 1}:"),
        ({"tickers": ("BTC/USDT", "BTC/USDT")}, "lists BTC/USDT more than once"),
    ],
)
def test_a_seed_numpy_cannot_take_or_a_repeated_ticker_is_refused(
    tmp_path: Path, overrides: dict[str, object], said: str
) -> None:
    with pytest.raises(RefuseToStartError, match=said):
        replay_settings(Settings(), _options(tmp_path, **overrides))


def test_an_out_folder_it_cannot_write_names_where_to_point_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal named only VIGIL_STATE_DIR, which a replay's folder is not set by."""
    taken = tmp_path / "a-file"
    taken.write_text("")
    argv = ["replay", "--from", "2025-03-01", "--to", "2025-03-01", "--out", str(taken)]
    assert main(argv) == EXIT_REFUSE_TO_START
    assert "(a replay's --out) at a writable directory" in capsys.readouterr().err


@pytest.mark.parametrize("ticker", ["btc/usdt", "BTC", "", "X" * 10_000, "BTC/USDT\nforged"])
def test_a_ticker_that_is_not_base_usdt_is_a_usage_error_shown_short(
    ticker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was refused later as not configured, echoing the whole of it (10 KB on the terminal
    for a 10,000-character one); the config's and data fetch's check now refuses it at once."""
    with pytest.raises(SystemExit) as stopped:
        main(["replay", "--from", "2025-03-01", "--to", "2025-03-01", "--tickers", ticker])
    assert stopped.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "is not BASE/USDT in capitals" in err and len(err) < 1_000
