"""Indicators on hand-made series with hand-computed values, and properties over wide inputs."""

from __future__ import annotations

import itertools
import math
import statistics

import indicator_series as ref
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from agent import indicators as ind

# --- hand-computed values ---------------------------------------------------------------------


def test_ema_by_hand() -> None:
    close = pd.Series([1.0, 2.0, 3.0, 4.0, 5.0])
    # alpha = 2 / (3 + 1) = 0.5, seeded with the first close: 1, 1.5, 2.25, 3.125, 4.0625
    assert ref.ema(close, 3).tolist()[2:] == [2.25, 3.125, 4.0625]
    assert ref.ema(close, 3).iloc[:2].isna().all()
    assert ref.ema_last(close.to_numpy(), 3) == pytest.approx(4.0625, rel=1e-15)
    assert ref.ema_last([1.0, 2.0], 3) is None


def test_rsi_wilder_by_hand() -> None:
    # changes +1, -0.5, +1, -0.5, +1; window 3
    close = pd.Series([10.0, 11.0, 10.5, 11.5, 11.0, 12.0])
    # seed: gain (1 + 0 + 1) / 3 = 2/3, loss 0.5 / 3 = 1/6 -> RS 4 -> RSI 80
    # then gain 4/9, loss 5/18 -> RS 1.6 -> 100 - 100 / 2.6; gain 17/27, loss 5/27 -> RS 3.4
    expected = [80.0, 100.0 - 100.0 / 2.6, 100.0 - 100.0 / 4.4]
    values = ref.rsi(close, 3)
    assert values.iloc[:3].isna().all()
    assert values.iloc[3:].to_numpy() == pytest.approx(expected, rel=1e-12)
    assert ind.rsi_last(close.to_numpy(), 3) == pytest.approx(expected[-1], rel=1e-12)


def test_rsi_edge_conventions() -> None:
    rising = np.arange(1.0, 31.0)
    assert ind.rsi_last(rising) == 100.0  # no losses
    assert ind.rsi_last(rising[::-1].copy()) == 0.0  # no gains
    assert ind.rsi_last(np.full(30, 7.0)) == 50.0  # nothing moved: neutral, not 100
    assert ind.rsi_last(rising[:14]) is None  # 14 closes are only 13 changes
    assert ind.rsi_last(rising[:15]) == 100.0
    assert ref.rsi(pd.Series(rising[:14])).isna().all()


def test_rate_of_change_by_hand() -> None:
    close = pd.Series([100.0, 110.0, 121.0])
    assert ref.rate_of_change_pct(close, 1).tolist()[1:] == pytest.approx([10.0, 10.0])
    assert ref.rate_of_change_pct(close, 2).iloc[-1] == pytest.approx(21.0)
    assert ind.rate_of_change_last_pct(close.to_numpy(), 2) == pytest.approx(21.0)
    assert ind.rate_of_change_last_pct(close.to_numpy(), 3) is None


def test_bollinger_by_hand() -> None:
    close = pd.Series([1.0, 2.0, 3.0, 4.0])
    # mean 2.5, population variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25
    half_width = 2.0 * math.sqrt(1.25)
    last = ind.bollinger_last(close.to_numpy(), window=4, num_std=2.0)
    assert last is not None
    assert last.middle == pytest.approx(2.5)
    assert last.upper == pytest.approx(2.5 + half_width)
    assert last.lower == pytest.approx(2.5 - half_width)
    assert last.percent_b == pytest.approx(0.5 + 1.5 / (2 * half_width), rel=1e-12)
    assert ind.bollinger_last(close.to_numpy(), window=5) is None


def test_bollinger_flat_window_has_no_position() -> None:
    flat = pd.Series(np.full(25, 3.0))
    last = ind.bollinger_last(flat.to_numpy())
    assert last is not None
    assert last.percent_b is None
    assert last.upper == last.lower == 3.0


def test_realised_vol_by_hand() -> None:
    close = [100.0, 110.0, 99.0, 108.9]
    log_returns = [math.log(1.1), math.log(0.9), math.log(1.1)]
    expected = statistics.stdev(log_returns)
    assert ref.realised_vol(pd.Series(close), 3).iloc[-1] == pytest.approx(expected, rel=1e-12)
    annual = ref.realised_vol(pd.Series(close), 3, periods_per_year=2190).iloc[-1]
    assert annual == pytest.approx(expected * math.sqrt(2190), rel=1e-12)
    assert ref.realised_vol(pd.Series(close), 4).isna().all()


def test_trend_labels() -> None:
    rising = 100.0 * 1.01 ** np.arange(80)
    falling = rising[::-1].copy()
    assert ref.trend_last(rising) == "up"
    assert ref.trend_last(falling) == "down"
    assert ref.trend_last(np.full(80, 5.0)) == "flat"
    assert ref.trend_last(rising[:49]) is None  # the slow EMA needs 50 closes
    assert ind.trend_from_spread(0.6) == "up"
    assert ind.trend_from_spread(-0.6) == "down"
    assert ind.trend_from_spread(0.5) == "flat"  # the band edge is still flat
    # a spread just inside the band: EMA 20 / EMA 50 of a slow drift, checked by hand
    drift = 100.0 * 1.0001 ** np.arange(80)
    fast, slow = ref.ema_last(drift, 20), ref.ema_last(drift, 50)
    assert fast is not None
    assert slow is not None
    assert 0.0 < (fast / slow - 1.0) * 100.0 < 0.5
    assert ref.trend_last(drift) == "flat"


def test_bad_windows_are_refused() -> None:
    with pytest.raises(ValueError, match="window"):
        ref.ema_last([1.0], 0)
    with pytest.raises(ValueError, match="shorter"):
        ref.trend_last([1.0] * 60, fast=50, slow=20)
    with pytest.raises(ValueError, match="1-D"):
        ind.as_closes(np.ones((2, 2)))


def test_summary_reports_what_is_missing() -> None:
    long = 100.0 * 1.002 ** np.arange(60)
    summary = {
        "4h": ref.summarise_closes(long),
        "1h": ref.summarise_closes([1.0, 2.0, 3.0]),
        "15m": ref.summarise_closes(np.full(30, 4.0)),
    }
    full = summary["4h"]
    assert full.unavailable == {}
    assert full.trend == ref.trend_last(long)
    assert full.rsi == 100.0
    tail = long[-20:].tolist()
    lower = statistics.fmean(tail) - 2.0 * statistics.pstdev(tail)
    assert full.bollinger_position == pytest.approx(
        (long[-1] - lower) / (4.0 * statistics.pstdev(tail)), rel=1e-9
    )
    assert summary["1h"].trend is None
    assert summary["1h"].rsi is None
    assert summary["1h"].bollinger_position is None
    assert summary["1h"].unavailable == {
        "trend": "needs 50 closes, have 3",
        "bollinger_position": "needs 20 closes, have 3",
        "rsi": "needs 15 closes, have 3",
    }
    assert summary["15m"].unavailable == {
        "trend": "needs 50 closes, have 30",
        "bollinger_position": "flat window: the bands have no width",
    }
    assert summary["15m"].rsi == 50.0


# --- properties -------------------------------------------------------------------------------


def _wilder_rsi_loop(closes: list[float], window: int) -> float:
    """The textbook recursion, one step at a time: the reference for the vectorised forms."""
    changes = [b - a for a, b in itertools.pairwise(closes)]
    gain = sum(max(c, 0.0) for c in changes[:window]) / window
    loss = sum(max(-c, 0.0) for c in changes[:window]) / window
    for change in changes[window:]:
        gain = (gain * (window - 1) + max(change, 0.0)) / window
        loss = (loss * (window - 1) + max(-change, 0.0)) / window
    if loss == 0.0:
        return 50.0 if gain == 0.0 else 100.0
    return 100.0 - 100.0 / (1.0 + gain / loss)


price_paths = st.lists(
    st.floats(min_value=-0.2, max_value=0.2, allow_nan=False), min_size=1, max_size=150
).map(lambda moves: (100.0 * np.exp(np.cumsum([0.0, *moves]))).tolist())


@settings(max_examples=examples(150), deadline=None)
@given(closes=price_paths, window=st.integers(min_value=2, max_value=20))
def test_rsi_matches_the_textbook_recursion(closes: list[float], window: int) -> None:
    series = ref.rsi(pd.Series(closes), window)
    last = ind.rsi_last(closes, window)
    if len(closes) <= window:
        assert last is None
        assert series.isna().all()
        return
    expected = _wilder_rsi_loop(closes, window)
    assert last is not None
    assert 0.0 <= last <= 100.0
    assert last == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert series.iloc[-1] == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert series.iloc[window:].notna().all()


@settings(max_examples=examples(150), deadline=None)
@given(closes=price_paths, window=st.integers(min_value=2, max_value=30))
def test_last_value_helpers_agree_with_the_series(closes: list[float], window: int) -> None:
    series = pd.Series(closes)
    pairs = [
        (ref.ema_last(closes, window), ref.ema(series, window)),
        (ind.rate_of_change_last_pct(closes, window), ref.rate_of_change_pct(series, window)),
    ]
    for last, full in pairs:
        if math.isnan(full.iloc[-1]):
            assert last is None
        else:
            assert last == pytest.approx(full.iloc[-1], rel=1e-9, abs=1e-12)


# Both the series and the last-value helpers against exact arithmetic (``statistics`` sums in
# fractions): an online rolling std would fail these on a flat window after a volatile stretch.


@settings(max_examples=examples(150), deadline=None)
@given(closes=price_paths, window=st.integers(min_value=2, max_value=30))
def test_realised_vol_matches_exact_arithmetic(closes: list[float], window: int) -> None:
    full = ref.realised_vol(pd.Series(closes), window)
    if len(closes) <= window:
        assert math.isnan(full.iloc[-1])
        return
    returns = np.diff(np.log(np.asarray(closes)))
    exact = statistics.stdev(returns[-window:].tolist())
    assert full.iloc[-1] == pytest.approx(exact, rel=1e-9, abs=1e-15)


@settings(max_examples=examples(150), deadline=None)
@given(closes=price_paths, window=st.integers(min_value=2, max_value=30))
def test_bollinger_matches_exact_arithmetic(closes: list[float], window: int) -> None:
    last_bands = ind.bollinger_last(closes, window)
    if len(closes) < window:
        assert last_bands is None
        return
    assert last_bands is not None
    tail = closes[-window:]
    middle, deviation = statistics.fmean(tail), statistics.pstdev(tail)
    assert last_bands.middle == pytest.approx(middle, rel=1e-12)
    assert last_bands.upper == pytest.approx(middle + 2.0 * deviation, rel=1e-12)
    assert last_bands.lower == pytest.approx(middle - 2.0 * deviation, rel=1e-12)
    width = last_bands.upper - last_bands.lower
    if last_bands.percent_b is not None and width > 1e-9:
        # %B places the close between the bands
        rebuilt = last_bands.lower + last_bands.percent_b * width
        assert rebuilt == pytest.approx(closes[-1], rel=1e-9)
