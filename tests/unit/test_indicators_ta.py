"""Indicators against the ``ta`` library (test-only dependency) on recorded Binance candles.

Everything matches ``ta`` to 1e-9 relative except the first bars of RSI, where ``ta`` seeds its
averages differently (see ``agent.indicators``): that gap is checked to exist early and to have
decayed below 1e-9 by the documented warm-up.
"""

from __future__ import annotations

from collections.abc import Callable

import indicator_series as ref
import numpy as np
import pandas as pd
import pytest
import ta  # type: ignore[import-untyped]  # test-only reference, untyped
from test_fallback_support import recorded_4h, recorded_15m

from agent import indicators as ind

RTOL = 1e-9
#: (13/14) ** 400 ~ 1e-13: after this many bars the RSI seed no longer shows at 1e-9
RSI_WARMUP_BARS = 400

Loader = Callable[[], pd.Series]
SERIES = [
    pytest.param(lambda: recorded_4h("BTC/USDT")["close"], id="BTC-4h"),
    pytest.param(lambda: recorded_15m("BTC/USDT")["close"], id="BTC-15m"),
    pytest.param(lambda: recorded_4h("ETH/USDT")["close"], id="ETH-4h"),
    pytest.param(lambda: recorded_4h("SOL/USDT")["close"], id="SOL-4h"),
]


def _assert_same(ours: pd.Series, reference: pd.Series, atol: float = 0.0) -> None:
    """Same NaN positions, and the values equal to ``RTOL`` (``atol`` for values near 0)."""
    assert len(ours) == len(reference)
    np.testing.assert_array_equal(ours.isna().to_numpy(), reference.isna().to_numpy())
    mask = ours.notna().to_numpy()
    assert mask.sum() > 0
    np.testing.assert_allclose(
        ours.to_numpy()[mask], reference.to_numpy()[mask], rtol=RTOL, atol=atol
    )


@pytest.mark.parametrize("load", SERIES)
def test_ema_matches_ta(load: Loader) -> None:
    close = load()
    for window in (20, 50):
        _assert_same(ref.ema(close, window), ta.trend.EMAIndicator(close, window).ema_indicator())


@pytest.mark.parametrize("load", SERIES)
def test_rate_of_change_matches_ta(load: Loader) -> None:
    close = load()
    for window in (6, 12):
        # ROC crosses 0, where a relative tolerance means nothing: 1e-10 percentage points there
        _assert_same(
            ref.rate_of_change_pct(close, window),
            ta.momentum.ROCIndicator(close, window).roc(),
            atol=1e-10,
        )


@pytest.mark.parametrize("load", SERIES)
def test_bollinger_matches_ta(load: Loader) -> None:
    close = load()
    closes = close.to_numpy()
    reference = ta.volatility.BollingerBands(close, window=20, window_dev=2)
    columns = {
        "middle": reference.bollinger_mavg().to_numpy(),
        "upper": reference.bollinger_hband().to_numpy(),
        "lower": reference.bollinger_lband().to_numpy(),
        "percent_b": reference.bollinger_pband().to_numpy(),
    }
    for end in np.linspace(20, len(closes), 40).astype(int):
        ours = ind.bollinger_last(closes[:end], 20, 2.0)
        assert ours is not None
        assert ours.middle == pytest.approx(columns["middle"][end - 1], rel=RTOL)
        assert ours.upper == pytest.approx(columns["upper"][end - 1], rel=RTOL)
        assert ours.lower == pytest.approx(columns["lower"][end - 1], rel=RTOL)
        # ta's bands come from pandas' online rolling std, whose error grows with the series
        # (ours recompute each window, exact to ~1e-14 against fractions in
        # test_indicators.py): on 40k bars of 15m the two differ by up to 4e-9 on %B
        assert ours.percent_b == pytest.approx(columns["percent_b"][end - 1], abs=1e-8)


@pytest.mark.parametrize("load", SERIES)
def test_rsi_matches_ta_after_the_seed_has_decayed(load: Loader) -> None:
    close = load()
    ours = ref.rsi(close, 14)
    reference = ta.momentum.RSIIndicator(close, 14).rsi()
    _assert_same(ours.iloc[RSI_WARMUP_BARS:], reference.iloc[RSI_WARMUP_BARS:])
    # the documented convention gap: ta starts one bar earlier, from a different seed
    assert ours.iloc[:14].isna().all()
    assert reference.iloc[:13].isna().all()
    assert not np.isnan(reference.iloc[13])
    early_gap = (ours.iloc[14:40] / reference.iloc[14:40] - 1.0).abs().max()
    assert early_gap > 1e-6


@pytest.mark.parametrize("load", SERIES)
def test_last_value_helpers_match_ta_at_many_cut_points(load: Loader) -> None:
    close = load()
    closes = close.to_numpy()
    rsi = ta.momentum.RSIIndicator(close, 14).rsi().to_numpy()
    roc = ta.momentum.ROCIndicator(close, 6).roc().to_numpy()
    percent_b = ta.volatility.BollingerBands(close, 20, 2).bollinger_pband().to_numpy()
    ema = ta.trend.EMAIndicator(close, 50).ema_indicator().to_numpy()
    for end in np.linspace(RSI_WARMUP_BARS, len(closes), 25).astype(int):
        upto = closes[:end]
        assert ind.rsi_last(upto, 14) == pytest.approx(rsi[end - 1], rel=RTOL)
        assert ind.rate_of_change_last_pct(upto, 6) == pytest.approx(
            roc[end - 1], rel=RTOL, abs=1e-10
        )
        bands = ind.bollinger_last(upto, 20, 2.0)
        assert bands is not None
        assert bands.percent_b == pytest.approx(percent_b[end - 1], rel=RTOL, abs=1e-10)
        assert ref.ema_last(upto, 50) == pytest.approx(ema[end - 1], rel=RTOL)


def test_summary_on_recorded_frames_matches_ta() -> None:
    end_ms = int(recorded_4h("BTC/USDT").index[-1])
    frames = {
        "4h": recorded_4h("BTC/USDT").iloc[-1080:],
        "15m": recorded_15m("BTC/USDT").loc[:end_ms].iloc[-2000:],
    }
    summary = {tf: ref.summarise_closes(frame["close"].to_numpy()) for tf, frame in frames.items()}
    for tf, frame in frames.items():
        close = frame["close"]
        got = summary[tf]
        assert got.unavailable == {}
        assert got.rsi == pytest.approx(ta.momentum.RSIIndicator(close).rsi().iloc[-1], rel=RTOL)
        assert got.bollinger_position == pytest.approx(
            ta.volatility.BollingerBands(close).bollinger_pband().iloc[-1], rel=RTOL, abs=1e-10
        )
        fast = ta.trend.EMAIndicator(close, 20).ema_indicator().iloc[-1]
        slow = ta.trend.EMAIndicator(close, 50).ema_indicator().iloc[-1]
        assert got.trend == ind.trend_from_spread((fast / slow - 1.0) * 100.0)
