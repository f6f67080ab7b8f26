"""Replay's in-process stand-ins for the ccxt client: the recording as the simulator serves it.

``vigil replay`` runs the live daemon on a ``VirtualClock`` and plugs these in where the live
composition passes a ccxt ``binanceusdm``. They answer from the same ``SimFeed`` and the same
payload builders (``sim.rest_payloads``) as the simulator's REST server, at the clock's now, so the
decision path cannot tell it is a replay. They are plain coroutines: no socket, no thread, nothing
to wait for, so replay's driver sees the event loop go idle as soon as a request is answered.

- ``RecordedOhlcvExchange.fetch_ohlcv`` is ccxt's ``fetch_ohlcv`` over the sim's klines, CLOSED
  candles only (close time <= now; the candle in progress is never returned, unlike the REST
  endpoint, whose partial candle ``market.history`` asks to leave out anyway). ccxt's client rules
  apply on top of Binance's: ``limit`` defaults to 500 (1000 when both ``since`` and ``until`` are
  given) and is capped at 1000 (ccxt's cap, below the API's 1500); ``params["until"]`` (ccxt's
  name) or ``params["endTime"]`` bounds the candles' OPEN time, as Binance's ``endTime`` does.
  Values pass through the sim's string formatting and come back as ccxt parses them (floats at the
  recording's precision), so rows equal what ccxt reads from the simulator.
- ``RecordedPremiumIndex.fapiPublicGetPremiumIndex`` is ccxt's raw premiumIndex call: one entry per
  feed ticker (a dict for ``{"symbol": ...}``, else a list), exactly the sim's payload.

Errors are the ones ccxt raises for the simulator's answers (an unknown symbol: ``BadSymbol``; a bad
interval or parameter: ``BadRequest``), so ``market.ccxt_client.call_with_retries`` maps them as it
does live. A parameter this adapter does not implement is refused (``NotSupported``), never ignored.
ccxt itself (~4 s of imports) is imported on the first refusal only: a replay that asks nothing
wrong never loads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from core.clock import Clock
from market.timeframes import TIMEFRAME_MS, to_binance_symbol
from sim.feed import SimFeed
from sim.rest_errors import not_available
from sim.rest_payloads import kline_row, premium_index_row

EXCHANGE_ID: Final = "binanceusdm"
#: ccxt's binance fetch_ohlcv: default limit, the limit with since + until, and its cap
CCXT_OHLCV_DEFAULT_LIMIT: Final = 500
CCXT_OHLCV_MAX_LIMIT: Final = 1000
_OHLCV_PARAMS: Final = frozenset({"until", "endTime"})
_PREMIUM_INDEX_PARAMS: Final = frozenset({"symbol"})


def _ccxt_error(name: str, message: str) -> Exception:
    """ccxt's exception ``name`` (``ccxt.base.errors``) with ``message``."""
    from ccxt.base import errors as ccxt_errors  # only when refusing (see the module docstring)

    error: Exception = getattr(ccxt_errors, name)(message)
    return error


def _binance_error(kind: str, code: int, msg: str) -> Exception:
    """The exception ccxt raises for Binance's error body ``{"code", "msg"}``."""
    body = orjson.dumps({"code": code, "msg": msg}).decode()
    return _ccxt_error(kind, f"{EXCHANGE_ID} {body}")


def _refuse_unknown(params: Mapping[str, Any], known: frozenset[str], what: str) -> None:
    unknown = sorted(set(params) - known)
    if unknown:
        raise _ccxt_error(
            "NotSupported",
            f"{EXCHANGE_ID} {what}: parameters {unknown} are not implemented by the recorded "
            f"adapter (known: {sorted(known)})",
        )


def _as_int(params: Mapping[str, Any], name: str) -> int | None:
    raw = params.get(name)
    if raw is None:
        return None
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise _binance_error(
            "BadRequest",
            -1100,
            f"Illegal characters found in parameter '{name}'; legal range is '^[0-9]{{1,20}}$'.",
        ) from None


class RecordedOhlcvExchange:
    """``market.history.OhlcvExchange`` over a ``SimFeed``: closed candles as of ``clock``'s now."""

    def __init__(self, feed: SimFeed, clock: Clock) -> None:
        self._feed = feed
        self._clock = clock
        #: ccxt's unified perpetual name (what ``market.ccxt_client.to_ccxt_symbol`` gives)
        self._tickers = {f"{t}:{t.split('/', 1)[1]}": t for t in feed.tickers}

    async def fetch_ohlcv(
        self,
        symbol: str,
        timeframe: str = "1m",
        since: int | None = None,
        limit: int | None = None,
        params: dict[str, Any] | None = None,
    ) -> list[list[Any]]:
        """``[open_ms, open, high, low, close, volume]`` rows of closed candles, oldest first."""
        params = params or {}
        _refuse_unknown(params, _OHLCV_PARAMS, "fetch_ohlcv")
        ticker = self._tickers.get(symbol)
        if ticker is None:
            raise _ccxt_error("BadSymbol", f"{EXCHANGE_ID} does not have market symbol {symbol}")
        if timeframe not in TIMEFRAME_MS:
            raise _binance_error("BadRequest", -1120, "Invalid interval.")
        # ccxt sends ``until`` as endTime; an explicit endTime in params overrides it (ccxt
        # extends its request with the caller's params last)
        end_ms = _as_int(params, "endTime")
        if end_ms is None:
            end_ms = _as_int(params, "until")
        limit = self._ccxt_limit(limit, since, end_ms)
        if since is not None and end_ms is not None and since > end_ms:
            raise _binance_error("BadRequest", -1023, "Start time is greater than end time.")
        now_ms = self._clock.now_ms()
        if since is not None and since > now_ms:
            return []
        last_open_ms = now_ms if end_ms is None else min(end_ms, now_ms)
        close_bound_ms = min(last_open_ms + TIMEFRAME_MS[timeframe] - 1, now_ms)
        candles = self._feed.closed_candles(ticker, timeframe, since, close_bound_ms, limit)
        rows = []
        for candle in candles:
            sent = kline_row(self._feed, candle)  # the sim's strings, parsed as ccxt parses them
            rows.append([int(sent[0]), *(float(value) for value in sent[1:6])])
        return rows

    @staticmethod
    def _ccxt_limit(limit: int | None, since: int | None, end_ms: int | None) -> int:
        if limit is None:
            both = since is not None and end_ms is not None
            return CCXT_OHLCV_MAX_LIMIT if both else CCXT_OHLCV_DEFAULT_LIMIT
        if limit < 1:
            raise _binance_error(
                "BadRequest", -1130, "Data sent for parameter 'limit' is not valid."
            )
        return min(limit, CCXT_OHLCV_MAX_LIMIT)

    async def close(self) -> None:
        """Nothing to release (no session): here so the composition can close it like ccxt's."""


class RecordedPremiumIndex:
    """ccxt's raw ``fapiPublicGetPremiumIndex`` over a ``SimFeed`` at ``clock``'s now."""

    def __init__(self, feed: SimFeed, clock: Clock) -> None:
        self._feed = feed
        self._clock = clock
        self._tickers = {to_binance_symbol(t): t for t in feed.tickers}

    async def fapiPublicGetPremiumIndex(  # ccxt's raw method name
        self, params: dict[str, Any] | None = None
    ) -> dict[str, Any] | list[dict[str, Any]]:
        params = params or {}
        _refuse_unknown(params, _PREMIUM_INDEX_PARAMS, "premiumIndex")
        now_ms = self._clock.now_ms()
        symbol = params.get("symbol")
        if not symbol:  # the sim reads an empty symbol as none: every symbol
            rows = (premium_index_row(self._feed, t, now_ms) for t in self._feed.tickers)
            return [row for row in rows if row is not None]  # no price yet: left out, as the sim
        ticker = self._tickers.get(str(symbol))
        if ticker is None:
            raise _binance_error("BadSymbol", -1121, "Invalid symbol.")
        row = premium_index_row(self._feed, ticker, now_ms)
        if row is None:
            refusal = not_available(f"the {ticker} price at {now_ms}")
            raise _binance_error("BadRequest", refusal.code, refusal.msg)
        return row

    async def close(self) -> None:
        """Nothing to release (no session): here so the composition can close it like ccxt's."""


__all__ = [
    "CCXT_OHLCV_DEFAULT_LIMIT",
    "CCXT_OHLCV_MAX_LIMIT",
    "RecordedOhlcvExchange",
    "RecordedPremiumIndex",
]
