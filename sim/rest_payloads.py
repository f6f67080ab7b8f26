"""Payloads the simulated REST API answers with: pure functions of the recording and sim time.

``exchange_info`` is Binance USDⓈ-M's /fapi/v1/exchangeInfo for the simulated symbols (order-size
limits are exchange configuration, approximately Binance's published values; tick and step sizes come
from the recording's precision). ``kline_row`` and ``premium_index_row`` are one kline and one
premiumIndex entry as Binance sends them (prices and quantities as strings at the recording's
precision). ``FearGreedBook`` answers alternative.me's /fng/ from the recorded daily index, never past
the simulated now. The REST server and replay's in-process adapters (``sim.inprocess``) both build
their answers here, so replay sees exactly what the simulator serves.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

import numpy as np
import pandas as pd

from market.timeframes import to_binance_symbol
from sim.feed import KlineState, SimFeed
from sim.order_book import PERCENT_PRICE_DOWN, PERCENT_PRICE_UP

PERPETUAL_DELIVERY_DATE_MS: Final = 4_133_404_800_000  # Binance's "no delivery" date
FNG_NAME: Final = "Fear and Greed Index"
FNG_DAY_SECS: Final = 86_400

#: order-size limits per symbol (exchange configuration, not market data; approximately Binance's
#: published values for these perpetuals): min notional, LOT_SIZE max qty, MARKET_LOT_SIZE max qty
_SYMBOL_LIMITS: Final[dict[str, tuple[str, str, str]]] = {
    "BTCUSDT": ("100", "1000", "120"),
    "ETHUSDT": ("20", "10000", "2000"),
    "SOLUSDT": ("5", "1000000", "5000"),
}
_DEFAULT_LIMITS: Final = ("5", "1000000", "10000")

_FNG_DATE_FORMATS: Final = {
    "us": "%m-%d-%Y",
    "cn": "%Y-%m-%d",
    "kr": "%Y-%m-%d",
    "world": "%d-%m-%Y",
}


def exchange_info(
    now_ms: int, weight_limit_1m: int, symbols: Mapping[str, str], feed: SimFeed
) -> dict[str, Any]:
    """``symbols``: Binance symbol -> unified ticker."""
    return {
        "timezone": "UTC",
        "serverTime": now_ms,
        "futuresType": "U_MARGINED",
        "rateLimits": [
            {
                "rateLimitType": "REQUEST_WEIGHT",
                "interval": "MINUTE",
                "intervalNum": 1,
                "limit": weight_limit_1m,
            },
            {"rateLimitType": "ORDERS", "interval": "MINUTE", "intervalNum": 1, "limit": 1200},
            {"rateLimitType": "ORDERS", "interval": "SECOND", "intervalNum": 10, "limit": 300},
        ],
        "exchangeFilters": [],
        "assets": [{"asset": "USDT", "marginAvailable": True, "autoAssetExchange": "-10000"}],
        "symbols": [symbol_info(symbol, t, feed) for symbol, t in symbols.items()],
    }


def symbol_info(symbol: str, ticker: str, feed: SimFeed) -> dict[str, Any]:
    price_decimals = feed.price_decimals(ticker)
    qty_decimals = feed.quantity_decimals(ticker)
    tick = f"{10.0**-price_decimals:.{price_decimals}f}"
    step = f"{10.0**-qty_decimals:.{qty_decimals}f}"
    min_notional, max_qty, market_max_qty = _SYMBOL_LIMITS.get(symbol, _DEFAULT_LIMITS)
    base = ticker.split("/", maxsplit=1)[0]
    return {
        "symbol": symbol,
        "pair": symbol,
        "contractType": "PERPETUAL",
        "deliveryDate": PERPETUAL_DELIVERY_DATE_MS,
        "status": "TRADING",
        "maintMarginPercent": "2.5000",
        "requiredMarginPercent": "5.0000",
        "baseAsset": base,
        "quoteAsset": "USDT",
        "marginAsset": "USDT",
        "pricePrecision": price_decimals,
        "quantityPrecision": qty_decimals,
        "baseAssetPrecision": 8,
        "quotePrecision": 8,
        "underlyingType": "COIN",
        "underlyingSubType": [],
        "filters": [
            {
                "filterType": "PRICE_FILTER",
                "minPrice": tick,
                "maxPrice": "10000000",
                "tickSize": tick,
            },
            {"filterType": "LOT_SIZE", "minQty": step, "maxQty": max_qty, "stepSize": step},
            {
                "filterType": "MARKET_LOT_SIZE",
                "minQty": step,
                "maxQty": market_max_qty,
                "stepSize": step,
            },
            {"filterType": "MAX_NUM_ORDERS", "limit": 200},
            {"filterType": "MAX_NUM_ALGO_ORDERS", "limit": 10},
            {"filterType": "MIN_NOTIONAL", "notional": min_notional},
            {
                "filterType": "PERCENT_PRICE",
                "multiplierUp": PERCENT_PRICE_UP,
                "multiplierDown": PERCENT_PRICE_DOWN,
                "multiplierDecimal": "4",
            },
        ],
        "orderTypes": [
            "LIMIT",
            "MARKET",
            "STOP",
            "STOP_MARKET",
            "TAKE_PROFIT",
            "TAKE_PROFIT_MARKET",
            "TRAILING_STOP_MARKET",
        ],
        "timeInForce": ["GTC", "IOC", "FOK", "GTX"],
    }


def format_price(feed: SimFeed, ticker: str, value: float) -> str:
    """A price as Binance sends it: a string at the symbol's tick precision."""
    return f"{value:.{feed.price_decimals(ticker)}f}"


def format_qty(feed: SimFeed, ticker: str, value: float) -> str:
    """A quantity as Binance sends it: a string at the symbol's step precision."""
    return f"{value:.{feed.quantity_decimals(ticker)}f}"


def kline_row(feed: SimFeed, candle: KlineState) -> list[Any]:
    """One ``/fapi/v1/klines`` row."""
    t = candle.ticker
    return [
        candle.open_time_ms,
        format_price(feed, t, candle.open),
        format_price(feed, t, candle.high),
        format_price(feed, t, candle.low),
        format_price(feed, t, candle.close),
        format_qty(feed, t, candle.volume),
        candle.close_time_ms,
        "0",  # quote asset volume: not recorded
        0,  # number of trades: not recorded
        "0",  # taker buy base volume: not recorded
        "0",  # taker buy quote volume: not recorded
        "0",
    ]


def premium_index_row(feed: SimFeed, ticker: str, now_ms: int) -> dict[str, Any] | None:
    """One ``/fapi/v1/premiumIndex`` entry at ``now_ms``; None when there is no price then.

    ``markPrice`` is the last price; ``indexPrice``, ``estimatedSettlePrice`` and ``interestRate``
    are not recorded and are left out (never sent as zeros); ``lastFundingRate`` only once a
    recorded settlement has passed.
    """
    price = feed.last_price(ticker, now_ms)
    if price is None:
        return None
    row: dict[str, Any] = {
        "symbol": to_binance_symbol(ticker),
        "markPrice": format_price(feed, ticker, price),
        "nextFundingTime": feed.next_funding_time_ms(now_ms),
        "time": now_ms,
    }
    funding = feed.funding_rate_at(ticker, now_ms)
    if funding is not None:
        row["lastFundingRate"] = f"{funding.rate:.8f}"
    return row


class FearGreedBook:
    """The recorded daily index, answered as alternative.me does (newest first, ``limit`` 0 = all)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self._ts = frame.index.to_numpy(dtype=np.int64)
        self._values = frame["value"].to_numpy(dtype=np.int64)
        self._labels = frame["classification"].astype(str).to_list()

    def answer(self, query: Mapping[str, str], now_secs: int) -> dict[str, Any]:
        raw_limit = query.get("limit", "1")
        date_format = query.get("date_format", "")
        # isdigit takes "²", which int() refuses, and int() refuses 5,000 digits: both were a
        # ValueError in the handler (HTTP 500); a limit past the days recorded is all of them
        if not (raw_limit.isascii() and raw_limit.isdigit()) or len(raw_limit) > 9:
            return _fng_error(f"limit must be a non-negative integer, got {raw_limit[:40]!r}")
        if date_format and date_format not in _FNG_DATE_FORMATS:
            return _fng_error(f"date_format must be one of {sorted(_FNG_DATE_FORMATS)}")
        if query.get("format", "json") != "json":
            return _fng_error("the simulator serves format=json only")
        upto = int(np.searchsorted(self._ts, now_secs, side="right"))
        if upto == 0 or now_secs >= int(self._ts[-1]) + FNG_DAY_SECS:
            first = datetime.fromtimestamp(int(self._ts[0]), UTC).date()
            last = datetime.fromtimestamp(int(self._ts[-1]), UTC).date()
            return _fng_error(
                f"no Fear & Greed value recorded for this date; the recording covers "
                f"{first} .. {last}"
            )
        limit = int(raw_limit)
        rows = range(upto - 1, -1 if limit == 0 else max(-1, upto - 1 - limit), -1)
        data = []
        for i in rows:
            ts = int(self._ts[i])
            entry = {
                "value": str(int(self._values[i])),
                "value_classification": self._labels[i],
                "timestamp": _fng_date(ts, date_format),
            }
            if i == upto - 1:
                entry["time_until_update"] = str(max(0, ts + FNG_DAY_SECS - now_secs))
            data.append(entry)
        return {"name": FNG_NAME, "data": data, "metadata": {"error": None}}


def _fng_date(ts_secs: int, date_format: str) -> str:
    if not date_format:
        return str(ts_secs)
    return datetime.fromtimestamp(ts_secs, UTC).strftime(_FNG_DATE_FORMATS[date_format])


def _fng_error(message: str) -> dict[str, Any]:
    return {"name": FNG_NAME, "data": [], "metadata": {"error": message}}


def fear_greed_missing(why: str) -> dict[str, Any]:
    """/fng/'s answer when the data dir has no index (optional, as in a replay): why, in
    alternative.me's error shape, which the daemon's parser reports as unavailable."""
    return _fng_error(why)
