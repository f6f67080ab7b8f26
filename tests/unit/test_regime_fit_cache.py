"""The regime fit cache: a hit gives the very report and predictions a fit would, keys follow every
input, and a torn entry is fitted again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from market.recorded import load_klines, resample
from regime.config import CryptoHmmConfig
from regime.crypto_hmm import CryptoRegimeModel
from regime.fit_cache import FitCache, candle_bytes


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return resample(load_klines("BTC/USDT", "1h"), "1h", "4h").iloc[:1080]  # 180 days


def test_a_cached_fit_equals_a_fresh_one_and_skips_fitting(
    frame: pd.DataFrame, tmp_path: Path
) -> None:
    cache = FitCache(tmp_path)
    config = CryptoHmmConfig(restarts=1)
    fresh = CryptoRegimeModel(config)
    expected = fresh.fit(frame, fitted_at_ms=123)
    first = CryptoRegimeModel(config, cache=cache)
    assert first.fit(frame, fitted_at_ms=123) == expected
    assert (cache.hits, cache.misses) == (0, 1)
    second = CryptoRegimeModel(config, cache=cache)
    assert second.fit(frame, fitted_at_ms=123) == expected
    assert (cache.hits, cache.misses) == (1, 1)
    tail = frame.iloc[-300:]
    assert second.predict(tail) == fresh.predict(tail)
    for end in range(300, len(frame) + 1, 100):
        assert second.predict(frame.iloc[:end]) == fresh.predict(frame.iloc[:end])


def test_the_key_follows_candles_and_settings(frame: pd.DataFrame, tmp_path: Path) -> None:
    cache = FitCache(tmp_path)
    config = CryptoHmmConfig().model_dump_json()
    base = cache.key(frame, config)
    assert cache.key(frame.copy(), config) == base
    assert cache.key(frame, CryptoHmmConfig(seed=7).model_dump_json()) != base
    nudged = frame.copy()
    nudged["close"] = nudged["close"].where(nudged.index != nudged.index[-1], 1.0)
    assert cache.key(nudged, config) != base
    assert cache.key(frame.iloc[1:], config) != base


def test_a_fit_cached_at_one_instant_serves_another_as_a_fit_then_would(
    frame: pd.DataFrame, tmp_path: Path
) -> None:
    """The instant only labels a fit: a daemon restarted (or a second one started) on the same
    candles loads the fit and stamps it with its own instant, exactly as fitting then would."""
    cache = FitCache(tmp_path)
    config = CryptoHmmConfig(restarts=1)
    CryptoRegimeModel(config, cache=cache).fit(frame, fitted_at_ms=123)
    later = CryptoRegimeModel(config, cache=cache)
    report = later.fit(frame, fitted_at_ms=456)
    assert (cache.hits, cache.misses) == (1, 1)
    assert report == CryptoRegimeModel(config).fit(frame, fitted_at_ms=456)
    assert report.fitted_at_ms == 456
    assert later.predict(frame).fitted_at_ms == 456
    unstamped = CryptoRegimeModel(config, cache=cache).fit(frame)
    assert unstamped == CryptoRegimeModel(config).fit(frame)  # the last candle's close


def test_a_torn_entry_is_a_miss_and_is_rewritten(frame: pd.DataFrame, tmp_path: Path) -> None:
    cache = FitCache(tmp_path)
    config = CryptoHmmConfig(restarts=1)
    key = cache.key(frame, config.model_dump_json())
    torn = tmp_path / key[:2] / f"{key}.pickle"
    torn.parent.mkdir(parents=True)
    torn.write_bytes(b"\x80\x05torn")
    report = CryptoRegimeModel(config, cache=cache).fit(frame, fitted_at_ms=5)
    assert report.fitted and cache.misses == 1
    assert cache.load(key) is not None


OHLCV = ["open", "high", "low", "close", "volume"]


def _selected_bytes(frame: pd.DataFrame) -> bytes:
    """The candles' bytes as the key took them before: the five columns selected, always."""
    times = np.ascontiguousarray(frame.index.to_numpy(dtype=np.int64)).tobytes()
    return times + np.ascontiguousarray(frame[OHLCV].to_numpy(dtype=np.float64)).tobytes()


@settings(max_examples=examples(150), deadline=None)
@given(
    n_rows=st.integers(min_value=0, max_value=30),
    order=st.permutations(OHLCV),
    extra=st.booleans(),
    int_volume=st.booleans(),
    split_blocks=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_candle_bytes_are_the_selected_columns_bytes(
    n_rows: int, order: list[str], extra: bool, int_volume: bool, split_blocks: bool, seed: int
) -> None:
    """A frame of exactly the five columns is read whole; any other (reordered, an extra column,
    an int column, columns in separate blocks) gives the bytes the selection gives."""
    rng = np.random.default_rng(seed)
    data: dict[str, object] = {name: rng.normal(size=n_rows) * 100 for name in order}
    if int_volume:
        data["volume"] = rng.integers(0, 10**6, size=n_rows)
    if extra:
        data["trades"] = rng.normal(size=n_rows)
    index = pd.Index(rng.integers(0, 10**12, size=n_rows), name="open_time_ms")
    frame = pd.DataFrame(data, index=index)
    if not split_blocks:
        frame = frame.copy()  # consolidated into one block per dtype
    assert candle_bytes(frame) == _selected_bytes(frame)
