"""Binance USDⓈ-M derivatives data over ccxt's ``binanceusdm`` (raw endpoints, Binance's shapes).

One ``BinanceDerivatives`` per exchange client; each ``fetch_*`` asks one endpoint per ticker (or
one for all) and returns the snapshot field's value keyed by ticker. Calls go through
``market.ccxt_client.call_with_retries`` with ONE attempt: ccxt's rate limiter keeps requests inside
Binance's weights, and the retrying (backoff, ``Retry-After`` of a 429/418) belongs to the
``CachedSource`` around each fetch. Errors come out as ``derivatives.cache`` errors:

- the endpoint refuses the request (the simulator's 404 ``-1020`` "not available in the recorded
  data", a bad symbol): ``SourceNotAvailableError`` with Binance's message;
- network trouble, 429/418, 5xx, timeouts: ``SourceFailedError`` (with ``Retry-After``);
- a body that is not JSON (ccxt's ``BadResponse``) or not the documented shape:
  ``SourceFailedError`` "malformed body".

Nothing needs an API key. Prices and ratios Binance sends as strings are parsed to floats; fields the
answer lacks (the simulator never sends ``indexPrice``) stay absent, never zero.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Final

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from core.clock import EARLIEST_TIME_MS, LATEST_TIME_MS
from derivatives.cache import SourceFailedError, SourceNotAvailableError
from derivatives.http import parse_body, snippet
from derivatives.liquidations import MAX_FUTURE_MS
from market.ccxt_client import (
    CcxtRequestRejectedError,
    CcxtRetryableError,
    RetryPolicy,
    call_with_retries,
    retry_after_secs,
)
from market.guard import DEFAULT_MAX_PRICE, DEFAULT_MAX_VOLUME
from market.recorded import FUNDING_RATE_MAX
from market.timeframes import to_binance_symbol

ONE_ATTEMPT: Final = RetryPolicy(max_attempts=1)
OI_PERIOD: Final = "1h"
OI_ROWS: Final = 25  # 24 h of hourly rows: the change is last vs first
#: a 100-fold move in a day: beyond it the first row is no market (US$ 1e-321 before US$ 1e12 made
#: an infinite change, and the gate's open-interest metric with it)
MAX_OI_CHANGE_PCT: Final = 10_000.0
TAKER_PERIOD: Final = "5m"
TAKER_ROWS: Final = 12  # one hour of 5-minute rows for the cumulative volume delta
LONG_SHORT_PERIOD: Final = "1h"
LONG_SHORT_ROWS: Final = 30  # the z-score's history
MIN_ZSCORE_ROWS: Final = 5
BASIS_CONTRACT: Final = "CURRENT_QUARTER"


def _blank_is_none(value: Any) -> Any:
    return None if value == "" else value


#: Binance sends "" for fields that do not apply (``annualizedBasisRate`` of a perpetual)
OptionalFloat = Annotated[float | None, BeforeValidator(_blank_is_none)]
#: seconds, microseconds, a negative or a 30-digit "time" is a unit slip or a hostile row, never a
#: time (an int past 64 bits would even stop the snapshot's JSON being written)
EpochMs = Annotated[int, Field(ge=EARLIEST_TIME_MS, lt=LATEST_TIME_MS)]
# Numbers no market answers with are a malformed body, not a value: a zero or negative price, a
# negative amount, a funding rate past 10 % an interval (Binance caps a contract's at a few %), a
# long/short share over 1. The caps keep the sums and the z-score finite (1e300 overflowed them).
Price = Annotated[float, Field(gt=0, le=DEFAULT_MAX_PRICE)]
Amount = Annotated[float, Field(ge=0, le=DEFAULT_MAX_VOLUME)]
Ratio = Annotated[float, Field(ge=0, le=1e6)]
Share = Annotated[float, Field(ge=0, le=1)]
# (bounded inside the union: put on OptionalFloat, a bound was compared with the None of a "")
FundingRate = Annotated[
    Annotated[float, Field(ge=-FUNDING_RATE_MAX, le=FUNDING_RATE_MAX)] | None,
    BeforeValidator(_blank_is_none),
]
AnnualizedRate = Annotated[
    Annotated[float, Field(ge=-1e3, le=1e3)] | None, BeforeValidator(_blank_is_none)
]


class _Row(BaseModel):
    # "NaN" and "Infinity" are strings pydantic's float would take: Binance never means them
    model_config = ConfigDict(frozen=True, extra="ignore", allow_inf_nan=False)


class PremiumIndexRow(_Row):
    symbol: str
    markPrice: Price
    lastFundingRate: FundingRate = None
    indexPrice: OptionalFloat = None
    nextFundingTime: Annotated[int, Field(ge=0, lt=LATEST_TIME_MS)] | None = None  # 0: none
    time: EpochMs


class OpenInterestRow(_Row):
    symbol: str
    sumOpenInterest: Amount
    sumOpenInterestValue: Amount
    timestamp: EpochMs


class TakerRow(_Row):
    buySellRatio: Ratio
    buyVol: Amount
    sellVol: Amount
    timestamp: EpochMs


class LongShortRow(_Row):
    symbol: str
    longShortRatio: Ratio
    longAccount: Share
    shortAccount: Share
    timestamp: EpochMs


class BasisRow(_Row):
    pair: str
    contractType: str
    futuresPrice: Price
    indexPrice: Price
    basis: Annotated[float, Field(ge=-DEFAULT_MAX_PRICE, le=DEFAULT_MAX_PRICE)]
    basisRate: Annotated[float, Field(ge=-1, le=1)]  # the future at 0 to 2 times the index
    annualizedBasisRate: AnnualizedRate = None
    timestamp: EpochMs


class BinanceDerivatives:
    def __init__(
        self, exchange: Any, tickers: Sequence[str], *, now_ms: Callable[[], int] | None = None
    ) -> None:
        """``now_ms``: the daemon's clock, to refuse rows from its future (None: not checked)."""
        self._ex = exchange
        self._tickers = tuple(tickers)
        self._symbols = {to_binance_symbol(t): t for t in self._tickers}
        self._now_ms = now_ms

    async def fetch_premium_index(self) -> dict[str, dict[str, Any]]:
        """``{ticker: {mark_price, funding_rate?, index_price?, next_funding_time_ms?}}``."""
        what = "premiumIndex"
        payload = await self._call(what, self._ex.fapiPublicGetPremiumIndex, {})
        # every contract is listed: only the traded ones are read, so an odd row of another
        # (a NaN or a zero) does not make the traded ones' funding unavailable
        mine = [r for r in _as_list(payload, what) if not self._of_another(r)]
        rows = [parse_body(PremiumIndexRow, r, what=what) for r in mine]
        self._not_ahead(what, [row.time for row in rows])
        out: dict[str, dict[str, Any]] = {}
        for row in rows:
            ticker = self._symbols.get(row.symbol)
            if ticker is None:
                continue
            entry: dict[str, Any] = {"mark_price": row.markPrice, "at_ms": row.time}
            if row.lastFundingRate is not None:
                entry["funding_rate"] = row.lastFundingRate
            if row.indexPrice is not None and row.indexPrice > 0:
                entry["index_price"] = row.indexPrice
            if row.nextFundingTime:
                entry["next_funding_time_ms"] = row.nextFundingTime
            out[ticker] = entry
        missing = [t for t in self._tickers if t not in out]
        if missing:
            raise SourceNotAvailableError(f"{what}: no row for {missing}")
        return out

    async def fetch_funding_rates(self) -> dict[str, float]:
        """``{ticker: last settled funding rate}`` (fraction per 8 h) from premiumIndex."""
        index = await self.fetch_premium_index()
        rates = {t: e["funding_rate"] for t, e in index.items() if "funding_rate" in e}
        if not rates:
            raise SourceNotAvailableError("premiumIndex: no lastFundingRate for any ticker")
        return rates

    async def fetch_open_interest(self) -> dict[str, dict[str, Any]]:
        """Per ticker: open interest (contracts, USD) and its change over the last 24 h, in %."""
        out: dict[str, dict[str, Any]] = {}
        for symbol, ticker in self._symbols.items():
            params = {"symbol": symbol, "period": OI_PERIOD, "limit": OI_ROWS}
            rows = await self._rows(
                "openInterestHist", self._ex.fapiDataGetOpenInterestHist, params, OpenInterestRow
            )
            # by time, as the other fetches: rows sent newest first flipped the change's sign
            rows = sorted(rows, key=lambda r: r.timestamp)
            first, last = rows[0], rows[-1]
            change = (
                (last.sumOpenInterestValue / first.sumOpenInterestValue - 1.0) * 100.0
                if first.sumOpenInterestValue > 0 and len(rows) > 1
                else None
            )
            if change is not None and not abs(change) <= MAX_OI_CHANGE_PCT:
                raise SourceFailedError(
                    f"openInterestHist: malformed body: {symbol} open interest from "
                    f"{first.sumOpenInterestValue:g} to {last.sumOpenInterestValue:g} USD in 24 h"
                )
            out[ticker] = {
                "contracts": last.sumOpenInterest,
                "value_usd": last.sumOpenInterestValue,
                "change_24h_pct": change,
                "first_value_usd": first.sumOpenInterestValue,
                "at_ms": last.timestamp,
            }
        return out

    async def fetch_taker_delta(self) -> dict[str, dict[str, Any]]:
        """Per ticker: the latest 5 m taker buy/sell ratio and the 1 h cumulative volume delta."""
        out: dict[str, dict[str, Any]] = {}
        for symbol, ticker in self._symbols.items():
            params = {"symbol": symbol, "period": TAKER_PERIOD, "limit": TAKER_ROWS}
            rows = await self._rows(
                "takerlongshortRatio", self._ex.fapiDataGetTakerlongshortRatio, params, TakerRow
            )
            last = max(rows, key=lambda r: r.timestamp)
            out[ticker] = {
                "buy_sell_ratio": last.buySellRatio,
                "buy_volume": last.buyVol,
                "sell_volume": last.sellVol,
                "cvd": sum(r.buyVol - r.sellVol for r in rows),
                "cvd_rows": len(rows),
                "at_ms": last.timestamp,
            }
        return out

    async def fetch_long_short(self) -> dict[str, dict[str, Any]]:
        """Per ticker: the top-trader account long/short ratio and its z-score over 30 hours."""
        out: dict[str, dict[str, Any]] = {}
        for symbol, ticker in self._symbols.items():
            params = {"symbol": symbol, "period": LONG_SHORT_PERIOD, "limit": LONG_SHORT_ROWS}
            rows = await self._rows(
                "topLongShortAccountRatio",
                self._ex.fapiDataGetTopLongShortAccountRatio,
                params,
                LongShortRow,
            )
            rows = sorted(rows, key=lambda r: r.timestamp)
            out[ticker] = {
                "ratio": rows[-1].longShortRatio,
                "long_account": rows[-1].longAccount,
                "short_account": rows[-1].shortAccount,
                "zscore": zscore([r.longShortRatio for r in rows]),
                "at_ms": rows[-1].timestamp,
            }
        return out

    async def fetch_basis(self) -> dict[str, dict[str, Any]]:
        """Per ticker: the quarterly future's basis vs the index (rate, and Binance's annualised)."""
        out: dict[str, dict[str, Any]] = {}
        for symbol, ticker in self._symbols.items():
            params = {"pair": symbol, "contractType": BASIS_CONTRACT, "period": "5m", "limit": 1}
            rows = await self._rows("basis", self._ex.fapiDataGetBasis, params, BasisRow)
            last = max(rows, key=lambda r: r.timestamp)
            out[ticker] = {
                "contract": last.contractType,
                "futures_price": last.futuresPrice,
                "index_price": last.indexPrice,
                "basis": last.basis,
                "basis_rate": last.basisRate,
                "annualized_basis_rate": last.annualizedBasisRate,
                "at_ms": last.timestamp,
            }
        return out

    async def _rows(
        self,
        what: str,
        method: Callable[[dict[str, Any]], Awaitable[Any]],
        params: dict[str, Any],
        model: type[Any],
    ) -> list[Any]:
        payload = await self._call(what, method, params)
        rows = [parse_body(model, r, what=what) for r in _as_list(payload, what)]
        if not rows:
            raise SourceNotAvailableError(
                f"{what}: no rows for {params.get('symbol') or params.get('pair')}"
            )
        self._not_ahead(what, [row.timestamp for row in rows])
        return rows

    def _of_another(self, row: Any) -> bool:
        """A row that names a contract not traded (one without a name is read, and refused)."""
        symbol = row.get("symbol") if isinstance(row, dict) else None
        return isinstance(symbol, str) and symbol not in self._symbols

    def _not_ahead(self, what: str, times: list[int]) -> None:
        # a row from the clock's future would be taken as the latest, its time as the value's
        if self._now_ms is None or not times:
            return
        ahead_ms = max(times) - self._now_ms()
        if ahead_ms > MAX_FUTURE_MS:
            raise SourceFailedError(
                f"{what}: malformed body: a row {ahead_ms} ms ahead of the clock"
            )

    async def _call(
        self, what: str, method: Callable[[dict[str, Any]], Awaitable[Any]], params: dict[str, Any]
    ) -> Any:
        try:
            return await call_with_retries(
                None,
                lambda: method(params),
                what=f"Binance {what}",
                policy=ONE_ATTEMPT,
                retry_after=lambda: retry_after_secs(self._ex),
            )
        except CcxtRetryableError as exc:  # ccxt quotes a 5xx's or 429's body whole
            raise SourceFailedError(
                snippet(str(exc)), retry_after_secs=exc.retry_after_secs
            ) from exc
        except CcxtRequestRejectedError as exc:
            raise SourceNotAvailableError(snippet(str(exc))) from exc


def zscore(values: Sequence[float]) -> float | None:
    """How many standard deviations the last value sits from the series' mean; None if undefined."""
    if len(values) < MIN_ZSCORE_ROWS:
        return None
    spread = statistics.pstdev(values)
    if spread <= 0:
        return None
    return (values[-1] - statistics.fmean(values)) / spread


def _as_list(payload: Any, what: str) -> list[Any]:
    if isinstance(payload, dict):
        return [payload]
    if isinstance(payload, list):
        return payload
    raise SourceFailedError(
        f"Binance {what}: malformed body: expected a JSON list, got {snippet(str(payload))}"
    )


__all__ = ["BinanceDerivatives", "zscore"]
