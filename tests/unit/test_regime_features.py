"""regime.features: warm-up, hand-checked values, gaps, bad input; properties over wide inputs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from test_regime_support import STEP_4H_MS, candles_from_returns, recorded_4h

import regime.features as features_module
from regime.features import (
    FEATURE_COLUMNS,
    BadCandlesError,
    feature_rows,
    regime_features,
    segment_lengths,
    warm_up_rows,
)


def test_warm_up_is_eleven_rows_at_the_default_windows() -> None:
    assert warm_up_rows() == 11
    frame = candles_from_returns(np.linspace(-0.01, 0.01, 39))  # 40 candles
    features = regime_features(frame)
    assert tuple(features.columns) == FEATURE_COLUMNS
    assert len(features) == 40 - 11
    assert features.index[0] == frame.index[11]
    assert features.index[-1] == frame.index[-1]


def test_values_match_a_hand_computation() -> None:
    rng = np.random.default_rng(3)
    frame = candles_from_returns(rng.normal(0, 0.01, 30))
    close = frame["close"].to_numpy()
    features = regime_features(frame, rv_window_bars=4, vov_window_bars=3)
    t = 20  # any row past the warm-up
    returns = [math.log(close[i] / close[i - 1]) for i in range(1, len(close))]
    expected_return = returns[t - 1]
    # candle j carries returns[j - 1]; its realised vol is over candles j-3..j
    rv = [float(np.std(returns[j - 4 : j], ddof=1)) for j in range(t - 2, t + 1)]
    row = features.loc[frame.index[t]]
    assert row["log_return"] == pytest.approx(expected_return, rel=1e-12)
    assert row["realised_vol"] == pytest.approx(rv[-1], rel=1e-9)
    assert row["vol_of_vol"] == pytest.approx(float(np.std(rv[-3:], ddof=1)), rel=1e-9)


def test_a_gap_restarts_the_warm_up_and_splits_the_segments() -> None:
    frame = candles_from_returns(np.full(59, 0.001) * np.resize([1, -2, 3], 59))
    gapped = frame.drop(frame.index[30])  # one missing 4h candle
    features = regime_features(gapped)
    # before the gap: candles 0..29 -> 19 rows; after: candles 31..59 (29) -> 18 rows
    assert len(features) == 19 + 18
    assert segment_lengths(features.index) == [19, 18]
    assert features.index[19] == frame.index[31 + 11]


def test_unsorted_input_gives_the_same_features() -> None:
    frame = recorded_4h("ETH/USDT").iloc[:200]
    shuffled = frame.sample(frac=1.0, random_state=1)
    pd.testing.assert_frame_equal(regime_features(shuffled), regime_features(frame))


@pytest.mark.parametrize("bad_close", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_closes_are_refused(bad_close: float) -> None:
    frame = candles_from_returns(np.zeros(20))
    frame.loc[frame.index[5], "close"] = bad_close
    with pytest.raises(BadCandlesError):
        regime_features(frame)


def test_missing_close_column_and_duplicate_times_are_refused() -> None:
    frame = candles_from_returns(np.zeros(20))
    with pytest.raises(BadCandlesError, match="close"):
        regime_features(frame.drop(columns="close"))
    with pytest.raises(BadCandlesError, match="duplicate"):
        regime_features(pd.concat([frame, frame.iloc[:1]]))


def test_too_short_windows_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        regime_features(candles_from_returns(np.zeros(20)), rv_window_bars=1)


def test_empty_and_short_frames_give_no_rows() -> None:
    frame = candles_from_returns(np.zeros(10))  # 11 candles: all warm-up but one row short
    assert regime_features(frame.iloc[:0]).empty
    assert len(regime_features(frame)) == 0
    assert segment_lengths(pd.Index([], dtype=np.int64)) == []


@settings(max_examples=examples(60), deadline=None)
@given(
    returns=st.lists(
        st.floats(min_value=-0.2, max_value=0.2, allow_nan=False), min_size=12, max_size=120
    ),
    dropped=st.sets(st.integers(min_value=0, max_value=120), max_size=6),
)
def test_every_row_comes_from_an_unbroken_run_of_candles(
    returns: list[float], dropped: set[int]
) -> None:
    frame = candles_from_returns(np.asarray(returns))
    frame = frame.drop(frame.index[[i for i in sorted(dropped) if i < len(frame)]])
    features = regime_features(frame)
    assert np.isfinite(features.to_numpy()).all()
    assert (features["realised_vol"] >= 0).all() and (features["vol_of_vol"] >= 0).all()
    present = set(frame.index.tolist())
    for open_ms in features.index:
        run = [open_ms - k * STEP_4H_MS for k in range(warm_up_rows() + 1)]
        assert all(ms in present for ms in run)
    # and every candle with such a run gets a row
    expected = [
        ms
        for ms in frame.index
        if all(ms - k * STEP_4H_MS in present for k in range(warm_up_rows() + 1))
    ]
    assert features.index.tolist() == expected
    assert sum(segment_lengths(features.index)) == len(features)


def _pandas_features(frame: pd.DataFrame, rv: int, vov: int) -> pd.DataFrame:
    """The features through ``Series.rolling`` (what ``feature_rows`` computes with pandas'
    kernel directly, without building Series and frames)."""
    frame = frame.sort_index()
    close = frame["close"].to_numpy(dtype=np.float64)
    open_ms = frame.index.to_numpy(dtype=np.int64)
    returns = np.full(len(close), np.nan)
    if len(close) > 1:
        contiguous = np.diff(open_ms) == STEP_4H_MS
        returns[1:] = np.where(contiguous, np.diff(np.log(close)), np.nan)
    log_return = pd.Series(returns, index=frame.index)
    realised_vol = log_return.rolling(rv, min_periods=rv).std(ddof=1)
    vol_of_vol = realised_vol.rolling(vov, min_periods=vov).std(ddof=1)
    features = pd.DataFrame(
        {"log_return": log_return, "realised_vol": realised_vol, "vol_of_vol": vol_of_vol}
    )
    return features.dropna()


@settings(max_examples=examples(80), deadline=None)
@given(
    returns=st.lists(
        st.one_of(
            st.floats(min_value=-0.2, max_value=0.2, allow_nan=False),
            st.just(0.0),  # flat runs: pandas answers 0 for a window of equal values
            st.sampled_from([1e-9, -1e-9, 0.05]),
        ),
        min_size=0,
        max_size=160,
    ),
    dropped=st.sets(st.integers(min_value=0, max_value=160), max_size=6),
    windows=st.sampled_from([(6, 6), (2, 2), (4, 3), (10, 5)]),
    shuffled=st.booleans(),
)
def test_the_rows_are_pandas_rolling_std_to_the_bit(
    returns: list[float], dropped: set[int], windows: tuple[int, int], shuffled: bool
) -> None:
    frame = candles_from_returns(np.asarray(returns, dtype=np.float64))
    frame = frame.drop(frame.index[[i for i in sorted(dropped) if i < len(frame)]])
    if shuffled:
        frame = frame.sample(frac=1.0, random_state=7)
    rv, vov = windows
    expected = _pandas_features(frame, rv, vov)
    values, open_ms = feature_rows(frame, rv_window_bars=rv, vov_window_bars=vov)
    assert values.shape == (len(expected), 3)
    assert values.tobytes() == np.ascontiguousarray(expected.to_numpy()).tobytes()
    assert open_ms.tolist() == expected.index.tolist()
    features = regime_features(frame, rv_window_bars=rv, vov_window_bars=vov)
    pd.testing.assert_frame_equal(features, expected, check_exact=True)
    # laid out alike: the fit's column means and deviations sum in the same order
    got, want = features.to_numpy(), expected.to_numpy()
    assert (got.flags.c_contiguous, got.flags.f_contiguous, got.strides) == (
        want.flags.c_contiguous,
        want.flags.f_contiguous,
        want.strides,
    )


def test_the_rows_of_recorded_candles_are_pandas_rolling_std_to_the_bit() -> None:
    frame = recorded_4h("SOL/USDT")
    expected = _pandas_features(frame, 6, 6)
    values, open_ms = feature_rows(frame)
    assert len(values) > 1000
    assert values.tobytes() == np.ascontiguousarray(expected.to_numpy()).tobytes()
    assert open_ms.tolist() == expected.index.tolist()


def test_without_pandas_private_kernel_the_public_path_gives_the_same_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frame = recorded_4h("BTC/USDT")
    kernel_values, kernel_open_ms = feature_rows(frame)
    monkeypatch.setattr(features_module, "_roll_var", None)  # a pandas that moved it
    values, open_ms = feature_rows(frame)
    assert values.tobytes() == kernel_values.tobytes()
    assert open_ms.tolist() == kernel_open_ms.tolist()
