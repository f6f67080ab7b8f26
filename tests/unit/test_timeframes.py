"""Timeframes, candle alignment and symbol names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from market.timeframes import (
    TIMEFRAME_MS,
    candle_open_ms,
    from_binance_symbol,
    timeframe_ms,
    to_binance_symbol,
)

MAR_1_2025_MS = 1_740_787_200_000  # 2025-03-01 00:00 UTC, a 4h (and daily) boundary


def test_timeframe_lengths() -> None:
    assert TIMEFRAME_MS == {"5m": 300_000, "15m": 900_000, "1h": 3_600_000, "4h": 14_400_000}
    assert timeframe_ms("4h") == 4 * timeframe_ms("1h") == 48 * timeframe_ms("5m")


def test_an_unknown_timeframe_is_refused_with_the_known_ones_listed() -> None:
    with pytest.raises(ValueError, match="unknown timeframe '1d'") as info:
        timeframe_ms("1d")
    assert "4h" in str(info.value)
    with pytest.raises(ValueError, match="unknown timeframe"):
        candle_open_ms(MAR_1_2025_MS, "1H")


@pytest.mark.parametrize(
    ("at_ms", "timeframe", "expected_ms"),
    [
        (MAR_1_2025_MS, "4h", MAR_1_2025_MS),  # exactly on the open
        (MAR_1_2025_MS + 14_400_000 - 1, "4h", MAR_1_2025_MS),  # last ms of the candle
        (MAR_1_2025_MS + 14_400_000, "4h", MAR_1_2025_MS + 14_400_000),  # the next one
        (MAR_1_2025_MS + 3 * 3_600_000 + 59 * 60_000, "4h", MAR_1_2025_MS),  # 03:59 -> 00:00
        (MAR_1_2025_MS + 5 * 3_600_000 + 1, "4h", MAR_1_2025_MS + 4 * 3_600_000),  # 05:00 -> 04:00
        (MAR_1_2025_MS + 29 * 60_000 + 59_999, "15m", MAR_1_2025_MS + 15 * 60_000),
        (MAR_1_2025_MS + 7 * 60_000, "5m", MAR_1_2025_MS + 5 * 60_000),
        (MAR_1_2025_MS + 61 * 60_000, "1h", MAR_1_2025_MS + 3_600_000),
        (0, "1h", 0),
    ],
)
def test_candle_open_ms_examples(at_ms: int, timeframe: str, expected_ms: int) -> None:
    assert candle_open_ms(at_ms, timeframe) == expected_ms


@given(
    at_ms=st.integers(min_value=0, max_value=4_102_444_800_000),  # 1970 .. 2100
    timeframe=st.sampled_from(sorted(TIMEFRAME_MS)),
)
def test_candle_open_ms_is_the_aligned_open_of_the_containing_candle(
    at_ms: int, timeframe: str
) -> None:
    step = TIMEFRAME_MS[timeframe]
    open_ms = candle_open_ms(at_ms, timeframe)
    assert open_ms % step == 0
    assert open_ms <= at_ms < open_ms + step
    assert candle_open_ms(open_ms, timeframe) == open_ms  # idempotent


@pytest.mark.parametrize(
    ("ticker", "symbol"),
    [
        ("BTC/USDT", "BTCUSDT"),
        ("ETH/USDT", "ETHUSDT"),
        ("SOL/USDT:USDT", "SOLUSDT"),  # ccxt's unified swap symbol
        ("btc/usdt", "BTCUSDT"),
        ("1000PEPE/USDT", "1000PEPEUSDT"),
    ],
)
def test_to_binance_symbol(ticker: str, symbol: str) -> None:
    assert to_binance_symbol(ticker) == symbol


@pytest.mark.parametrize("ticker", ["BTCUSDT", "BTC/", "/USDT", "", "/", "BTC/:USDT"])
def test_to_binance_symbol_refuses_what_is_not_base_slash_quote(ticker: str) -> None:
    with pytest.raises(ValueError, match="BASE/QUOTE"):
        to_binance_symbol(ticker)


@pytest.mark.parametrize(
    ("symbol", "ticker"),
    [("BTCUSDT", "BTC/USDT"), ("ethusdt", "ETH/USDT"), ("1000PEPEUSDT", "1000PEPE/USDT")],
)
def test_from_binance_symbol(symbol: str, ticker: str) -> None:
    assert from_binance_symbol(symbol) == ticker


@pytest.mark.parametrize("symbol", ["USDT", "", "BTCUSDC", "BTCBUSD", "BTC/USDT"])
def test_from_binance_symbol_refuses_non_usdt_margined_names(symbol: str) -> None:
    with pytest.raises(ValueError, match="USDT-margined"):
        from_binance_symbol(symbol)


@given(base=st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=1, max_size=12))
def test_symbol_conversions_round_trip(base: str) -> None:
    ticker = f"{base}/USDT"
    symbol = to_binance_symbol(ticker)
    assert symbol == f"{base}USDT"
    assert from_binance_symbol(symbol) == ticker
    assert from_binance_symbol(symbol.lower()) == ticker
    assert to_binance_symbol(f"{ticker}:USDT") == symbol
