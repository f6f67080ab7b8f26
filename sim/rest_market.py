"""What the simulator's REST side answers from the recorded market: klines as ``/fapi/v1/klines``
serves them, the rolling 24 h ticker, and the recorded funding settlements."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from core.clock import DAY_MS
from market.timeframes import TIMEFRAME_MS, to_binance_symbol
from sim.feed import KlineState, SimFeed
from sim.rest_payloads import format_price, format_qty


def klines(
    feed: SimFeed,
    ticker: str,
    timeframe: str,
    start_ms: int | None,
    end_ms: int | None,
    limit: int,
    now_ms: int,
) -> list[KlineState]:
    """What ``/fapi/v1/klines`` serves at ``now_ms``: closed candles plus the one in progress."""
    if start_ms is not None and start_ms > now_ms:
        return []
    last_open_ms = now_ms if end_ms is None else min(end_ms, now_ms)
    tf_ms = TIMEFRAME_MS[timeframe]
    # closed_candles bounds CLOSE times; Binance's endTime bounds OPEN times
    candles = feed.closed_candles(
        ticker, timeframe, start_ms, min(last_open_ms + tf_ms - 1, now_ms), limit
    )
    current = feed.kline_state(ticker, timeframe, now_ms)
    if (
        current is not None
        and current.open_time_ms <= last_open_ms
        and (start_ms is None or current.open_time_ms >= start_ms)
        and (not candles or current.open_time_ms > candles[-1].open_time_ms)
        and (start_ms is None or len(candles) < limit)
    ):
        candles.append(current)
    return candles if start_ms is not None else candles[-limit:]


def rolling_24h(feed: SimFeed, ticker: str, now_ms: int) -> dict[str, Any] | None:
    base, bar_ms = feed.base_interval, feed.bar_ms
    current = feed.kline_state(ticker, base, now_ms)
    if current is None:
        return None
    first_open_ms = -(-(now_ms - DAY_MS) // bar_ms) * bar_ms
    bars = feed.closed_candles(ticker, base, first_open_ms, now_ms, DAY_MS // bar_ms)
    if not bars or current.open_time_ms > bars[-1].open_time_ms:
        bars.append(current)
    open_price, last_price = bars[0].open, current.close
    change = last_price - open_price
    return {
        "symbol": to_binance_symbol(ticker),
        "priceChange": format_price(feed, ticker, change),
        "priceChangePercent": f"{100.0 * change / open_price:.3f}",
        "weightedAvgPrice": "0",  # needs quote volume: not recorded
        "lastPrice": format_price(feed, ticker, last_price),
        "lastQty": "0",  # not recorded
        "openPrice": format_price(feed, ticker, open_price),
        "highPrice": format_price(feed, ticker, max(b.high for b in bars)),
        "lowPrice": format_price(feed, ticker, min(b.low for b in bars)),
        "volume": format_qty(feed, ticker, sum(b.volume for b in bars)),
        "quoteVolume": "0",  # not recorded
        "openTime": bars[0].open_time_ms,
        "closeTime": now_ms,
        "firstId": 0,  # trade ids: not recorded
        "lastId": 0,
        "count": 0,  # trade count: not recorded
    }


class FundingBook:
    """The recorded funding settlements of every ticker the feed serves."""

    def __init__(self, feed: SimFeed) -> None:
        self._feed = feed
        # the feed's own, loaded with the bars: none for a ticker without a funding file
        # (optional, as in a replay; loading it again here was a traceback at start)
        self._rates = {ticker: feed.funding_series(ticker) for ticker in feed.tickers}

    def rows(
        self, tickers: Iterable[str], start_ms: int | None, last_ms: int
    ) -> Iterable[dict[str, Any]]:
        for ticker in tickers:
            times, rates = self._rates[ticker]
            lo = 0 if start_ms is None else int(np.searchsorted(times, start_ms, side="left"))
            hi = int(np.searchsorted(times, last_ms, side="right"))
            for i in range(lo, hi):
                at_ms = int(times[i])
                row: dict[str, Any] = {
                    "symbol": to_binance_symbol(ticker),
                    "fundingTime": at_ms,
                    "fundingRate": f"{rates.item(i):.8f}",
                }
                price = self._feed.last_price(ticker, at_ms)
                if price is not None:
                    row["markPrice"] = format_price(self._feed, ticker, price)
                yield row


__all__ = ["DAY_MS", "FundingBook", "klines", "rolling_24h"]
