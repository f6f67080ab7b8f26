"""The regime fit-ahead pool: it plans the tracker's next refits, a planned fit is used only for
the very frame it was computed on (and equals the inline fit), a changed plan drops the old one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from test_regime_support import STEP_4H_MS, recorded_4h

from regime.config import CryptoHmmConfig
from regime.crypto_hmm import CryptoRegimeModel
from regime.fit_ahead import FitAhead
from regime.fit_cache import FitCache
from regime.hmm_fit import fit_hmm

CONFIG = CryptoHmmConfig(n_states_max=2, restarts=1)
DAY_MS = 86_400_000
LAG_MS = 75_000  # a close is observed at its last update, 75 s before the boundary


class Frames:
    """A recording's future: closes every 4h, and the candles opened before each."""

    def __init__(self, candles: pd.DataFrame) -> None:
        self.candles = candles
        self.asked: list[int] = []

    def close_times_ms(self, ticker: str, from_ms: int) -> Iterator[int]:
        at = int(self.candles.index[0]) + STEP_4H_MS - LAG_MS
        while True:
            if at >= from_ms:
                yield at
            at += STEP_4H_MS

    def frame_at(self, ticker: str, now_ms: int) -> pd.DataFrame:
        self.asked.append(now_ms)
        return self.candles[self.candles.index + STEP_4H_MS <= now_ms + LAG_MS - STEP_4H_MS]


@pytest.fixture(scope="module")
def candles() -> pd.DataFrame:
    return recorded_4h("BTC/USDT").iloc[:600]


@pytest.fixture
def ahead(candles: pd.DataFrame) -> Iterator[FitAhead]:
    pool = FitAhead(CONFIG, Frames(candles), refit_every_ms=DAY_MS, workers=1)
    yield pool
    pool.close()


def test_the_next_refits_are_fitted_ahead_and_equal_inline_fits(
    ahead: FitAhead, candles: pd.DataFrame
) -> None:
    frames = ahead.frames
    assert isinstance(frames, Frames)
    start = int(candles.index[300])
    ahead.after_fit("BTC/USDT", start, fitted=True)
    # a day after the fit (at a boundary), the next observed close is 75 s before the one after
    first = start + DAY_MS + STEP_4H_MS - LAG_MS
    assert frames.asked == [first, first + DAY_MS]
    assert ahead.stats.submitted == 2
    frame = frames.frame_at("BTC/USDT", frames.asked[0])
    taken = ahead.take(CONFIG, frame.copy())
    assert taken is not None and ahead.stats.hits == 1
    assert taken[0] == fit_hmm(CONFIG, frame)[0]
    assert ahead.take(CONFIG, frame) is None  # taken once: a second ask is fitted inline


def test_a_frame_nobody_planned_or_other_settings_are_not_served(
    ahead: FitAhead, candles: pd.DataFrame
) -> None:
    ahead.after_fit("BTC/USDT", int(candles.index[300]), fitted=True)
    frames = ahead.frames
    assert isinstance(frames, Frames)
    planned = frames.frame_at("BTC/USDT", frames.asked[0])
    nudged = planned.copy()
    nudged["close"] = nudged["close"].where(nudged.index != nudged.index[-1], 1.0)
    assert ahead.take(CONFIG, nudged) is None
    assert ahead.take(CONFIG.model_copy(update={"seed": 7}), planned) is None
    assert ahead.stats.misses == 1 and ahead.stats.hits == 0


def test_a_new_fit_replans_and_drops_what_it_no_longer_needs(
    ahead: FitAhead, candles: pd.DataFrame
) -> None:
    ahead.after_fit("BTC/USDT", int(candles.index[300]), fitted=True)
    ahead.after_fit("BTC/USDT", int(candles.index[300]) + DAY_MS, fitted=True)  # a day on
    assert ahead.stats.submitted == 3  # the second day's plan was kept, the first dropped
    assert ahead.stats.dropped == 1
    ahead.after_fit("BTC/USDT", int(candles.index[400]), fitted=False)  # nothing to plan from
    assert ahead.stats.submitted == 3


def test_warm_start_or_no_worker_turns_it_off(candles: pd.DataFrame) -> None:
    warm = FitAhead(CONFIG.model_copy(update={"warm_start": True}), Frames(candles), DAY_MS, 1)
    idle = FitAhead(CONFIG, Frames(candles), DAY_MS, 0)
    for pool in (warm, idle):
        assert not pool.active
        pool.after_fit("BTC/USDT", int(candles.index[300]), fitted=True)
        assert pool.stats.submitted == 0 and pool.take(pool.config, candles) is None


def test_a_fit_the_disk_cache_holds_is_not_fitted_ahead_again(
    candles: pd.DataFrame, tmp_path: Path
) -> None:
    cache = FitCache(tmp_path)
    frames = Frames(candles)
    ahead = FitAhead(CONFIG, frames, refit_every_ms=DAY_MS, workers=1, cache=cache)
    try:
        start = int(candles.index[300])
        first = start + DAY_MS + STEP_4H_MS - LAG_MS
        # the model's own fit at that instant (cold, as a replay makes it) fills the cache
        CryptoRegimeModel(CONFIG, cache=cache).fit(
            frames.frame_at("BTC/USDT", first), fitted_at_ms=first
        )
        ahead.after_fit("BTC/USDT", start, fitted=True)
        assert (ahead.stats.cached, ahead.stats.submitted) == (1, 1)  # only the second day's
        assert ahead.take(CONFIG, frames.frame_at("BTC/USDT", first)) is None
    finally:
        ahead.close()
