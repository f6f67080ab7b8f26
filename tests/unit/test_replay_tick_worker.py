"""A replay starts its tick worker (``sim.tick_ahead``) only when it publishes enough ticks for the
worker to pay for its start: a day of three tickers is computed in the replay's own process, two
weeks of them ahead in the worker."""

from __future__ import annotations

from pathlib import Path

from runner.config import Settings
from runner.replay.build import ReplayOptions, replay_settings, replay_ticks
from sim.feed import SimFeed
from sim.tick_ahead import MIN_TICKS_AHEAD

DAY_MS = 86_400_000
START_MS = 1_740_787_200_000  # 2025-03-01
TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")


def _ticks(tmp_path: Path, days: int, tickers: tuple[str, ...] = TICKERS) -> int:
    options = ReplayOptions(
        start_ms=START_MS, end_ms=START_MS + days * DAY_MS, out_dir=tmp_path, tickers=tickers
    )
    settings = replay_settings(Settings(state_dir=tmp_path), options)
    feed = SimFeed(tickers, update_interval_ms=options.update_ms())
    return replay_ticks(settings, options, feed)


def test_every_stream_at_every_update_instant(tmp_path: Path) -> None:
    # 3 tickers x 3 timeframes, a kline update every 75 s (four a 5m bar): 1,152 instants a day
    assert _ticks(tmp_path, 1) == 9 * 1_152
    assert _ticks(tmp_path, 2, ("BTC/USDT",)) == 3 * 2 * 1_152


def test_a_day_is_computed_inline_and_two_weeks_ahead(tmp_path: Path) -> None:
    assert _ticks(tmp_path, 1) < MIN_TICKS_AHEAD
    assert _ticks(tmp_path, 7) < MIN_TICKS_AHEAD
    assert _ticks(tmp_path, 14) >= MIN_TICKS_AHEAD
