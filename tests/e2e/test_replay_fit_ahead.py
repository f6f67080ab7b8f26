"""Regime fits computed ahead in a process pool (issue 18): the same replay with the pool and
with inline fits writes byte-identical run folders, and the pool's fits were the ones used.

Two days from 2025-09-01 (the regime models have their 180-day history and refit daily), BTC and
ETH, a cheaper HMM search (one restart) so the inline run stays short; each run gets its own
empty fit cache so both really fit.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from replay_support import DETERMINISTIC_FILES, default_settings, replay_options

from regime.config import CryptoHmmConfig
from regime.fit_ahead import FitAheadStats
from runner.config import Settings
from runner.replay.build import ReplayOptions, build_replay, replay_settings
from runner.replay.command import run_replay

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

DAY = "2025-09-01"
TICKERS = ("BTC/USDT", "ETH/USDT")


def _replay(
    settings: Settings, options: ReplayOptions, workers: int, cache: Path
) -> FitAheadStats | None:
    regime = settings.regime.model_copy(
        update={
            "hmm": CryptoHmmConfig(restarts=1),
            "fit_ahead_workers": workers,
            "fit_cache_dir": cache,
        }
    )
    configured = settings.model_copy(update={"regime": regime})

    async def run() -> FitAheadStats | None:
        replay = build_replay(replay_settings(configured, options), options)
        await run_replay(replay)
        return None if replay.fit_ahead is None else replay.fit_ahead.stats

    return asyncio.run(run())


def test_fits_ahead_in_a_pool_give_the_inline_fits_journals(tmp_path: Path) -> None:
    settings = default_settings(tmp_path)
    inline_dir, pool_dir = tmp_path / "inline", tmp_path / "pool"
    inline = _replay(
        settings, replay_options(inline_dir, DAY, 2, tickers=TICKERS), 0, tmp_path / "c1"
    )
    pooled = _replay(
        settings, replay_options(pool_dir, DAY, 2, tickers=TICKERS), 1, tmp_path / "c2"
    )
    assert inline is None  # no worker: no pool at all
    assert pooled is not None
    # per ticker: the start-up fit is inline (nothing to plan from); the daily refit (at the first
    # 4h close a day after it: 2025-09-02 03:58:45) came from the pool
    assert (pooled.hits, pooled.misses, pooled.failed) == (len(TICKERS), len(TICKERS), 0)
    for name in DETERMINISTIC_FILES:  # a run without an exit writes no learner file
        assert (pool_dir / name).exists() == (inline_dir / name).exists(), name
        if (pool_dir / name).exists():
            assert (pool_dir / name).read_bytes() == (inline_dir / name).read_bytes(), name
    assert len((pool_dir / "logs/decisions.jsonl").read_bytes().splitlines()) > 100
