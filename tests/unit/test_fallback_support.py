"""Shared helpers for the indicator and fallback tests (no tests here).

Recorded frames are loaded once per test session; 4h candles are resampled from the recorded 1h
series and 15m from the 5m series, exactly as the daemon's history would hold them.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime

import pandas as pd

from agent.fallback_inputs import TickerInputs
from agent.fallback_nodes import OpenPosition
from agent.fallback_score import BlendedScore
from broker.port import PositionDetail
from market.recorded import load_klines, resample
from market.timeframes import timeframe_ms

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
#: 180 days of 4h candles: what the decision path's history cache holds
HISTORY_BARS_4H = 180 * 6


@functools.cache
def recorded_4h(ticker: str) -> pd.DataFrame:
    return resample(load_klines(ticker, "1h"), "1h", "4h")


@functools.cache
def recorded_15m(ticker: str) -> pd.DataFrame:
    return resample(load_klines(ticker, "5m"), "5m", "15m")


def utc_ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp() * 1000)


def closed_history(
    frame: pd.DataFrame, at_ms: int, timeframe: str = "4h", bars: int = HISTORY_BARS_4H
) -> pd.DataFrame:
    """The last ``bars`` candles that had closed by ``at_ms``."""
    closed = frame[frame.index.to_numpy() + timeframe_ms(timeframe) <= at_ms]
    return closed.iloc[-bars:]


def ticker_at(
    ticker: str,
    at_ms: int,
    *,
    regime_label: str = "medium_volatility",
    regime_exposure: float = 1.0,
    derivatives_signal: float | None = None,
    position: OpenPosition | None = None,
) -> TickerInputs:
    """A ticker as the runner would hand it over at ``at_ms``: closed 4h history, and the price
    of the newest closed 4h candle as the current price."""
    history = closed_history(recorded_4h(ticker), at_ms)
    return TickerInputs.from_frame(
        ticker,
        history,
        price=float(history["close"].iloc[-1]),
        regime_label=regime_label,
        regime_exposure=regime_exposure,
        derivatives_signal=derivatives_signal,
        position=position,
    )


def open_position(
    ticker: str, entry_price: float, peak_price: float, quantity: float = 0.1
) -> OpenPosition:
    detail = PositionDetail(
        ticker=ticker,
        quantity=quantity,
        entry_price=entry_price,
        mark_price=None,
        opened_at_ms=0,
    )
    return OpenPosition(detail=detail, peak_price=peak_price)


def bare_blend(score: float | None, confidence: float) -> BlendedScore:
    """A blend of only a score and a confidence: what the entry and exit sizing read."""
    return BlendedScore(
        score=score,
        confidence=confidence,
        signals={},
        weights={},
        indicators={},
        unavailable={},
        summary="",
    )
