"""PAXG, the gold hedge: context for the decider, never a traded ticker.

The snapshot field ``paxg`` holds the latest PAXGUSDT spot price and its 1h and 4h returns, read
from Binance spot klines (``GET /api/v3/klines``, public, no key). Live it asks Binance spot
REST; against the simulator and in replay the same payload is built from the recording
(``data/binance-spot/PAXGUSDT-{1h,4h}.csv.gz``, ``sim.recorded_spot``), and the same parser reads
both, so the field means one thing everywhere:

- ``price``: the close of the newest kline in the answer (live: the candle in progress, i.e. the
  last trade; from the recording: the newest candle closed at now, since an unfinished recorded
  candle's close would be a price from the future) at ``price_at_ms``;
- ``return_1h_pct`` / ``return_4h_pct``: the last CLOSED candle's close against the one before it
  (candles whose close time is before now), in percent.

Fewer than two closed candles of a timeframe leave that return None with a reason in
``unavailable`` inside the value; no kline at all is ``SourceNotAvailableError``.
"""

from __future__ import annotations

import math
from typing import Any, Final

from pydantic import RootModel

from derivatives.cache import SourceFailedError, SourceNotAvailableError
from derivatives.http import get_json, parse_body
from market.wire import number as wire_number

PAXG_SYMBOL: Final = "PAXGUSDT"
SPOT_KLINES_PATH: Final = "/api/v3/klines"
PAXG_WHAT: Final = "PAXG (gold hedge, Binance spot)"
#: enough candles for the return of the last closed one, with the one in progress beside it
KLINES_ASKED: Final = 3
HOURLY: Final = ("1h", "return_1h_pct")
FOUR_HOURLY: Final = ("4h", "return_4h_pct")


class _Klines(RootModel[list[list[Any]]]):
    """Binance kline rows: [open time, open, high, low, close, volume, close time, ...]."""


def _closes(payload: Any, *, what: str) -> list[tuple[int, float]]:
    """(close time ms, close) of each row, in time order."""
    rows = parse_body(_Klines, payload, what=what).root
    out = []
    for row in rows:
        try:
            close_ms, close = int(row[6]), wire_number(row[4])
        except (IndexError, TypeError, ValueError, OverflowError):
            raise SourceFailedError(f"{what}: malformed kline row: {row!r:.120}") from None
        if not (math.isfinite(close) and close > 0):  # a price of NaN, inf or 0 is no price
            raise SourceFailedError(f"{what}: a close that is no price: {row!r:.120}")
        out.append((close_ms, close))
    return sorted(out)


def paxg_from_klines(hourly: Any, four_hourly: Any, now_ms: int) -> dict[str, Any]:
    """The ``paxg`` value from two /api/v3/klines answers (1h and 4h) at ``now_ms``."""
    what = PAXG_WHAT
    by_timeframe = {"1h": _closes(hourly, what=what), "4h": _closes(four_hourly, what=what)}
    newest = by_timeframe["1h"] or by_timeframe["4h"]
    if not newest:
        raise SourceNotAvailableError(f"{what}: no {PAXG_SYMBOL} kline at this time")
    value: dict[str, Any] = {
        "symbol": PAXG_SYMBOL,
        "price": newest[-1][1],
        "price_at_ms": min(newest[-1][0], now_ms),
    }
    unavailable: dict[str, str] = {}
    for timeframe, name in (HOURLY, FOUR_HOURLY):
        closed = [close for close_ms, close in by_timeframe[timeframe] if close_ms < now_ms]
        if len(closed) >= 2 and closed[-2] > 0:
            value[name] = (closed[-1] / closed[-2] - 1.0) * 100.0
        else:
            value[name] = None
            unavailable[name] = f"needs 2 closed {timeframe} candles, have {len(closed)}"
    if unavailable:
        value["unavailable"] = unavailable
    return value


async def fetch_paxg(base_url: str | None, now_ms: int) -> dict[str, Any]:
    """Ask Binance spot REST (``base_url``, e.g. https://api.binance.com) for PAXGUSDT."""
    if base_url is None:
        raise SourceNotAvailableError(f"{PAXG_WHAT}: no base URL configured (source disabled)")
    url = base_url.rstrip("/") + SPOT_KLINES_PATH
    answers = []
    for timeframe in ("1h", "4h"):
        params = {"symbol": PAXG_SYMBOL, "interval": timeframe, "limit": str(KLINES_ASKED)}
        answers.append(await get_json(url, params, what=PAXG_WHAT))
    return paxg_from_klines(answers[0], answers[1], now_ms)


__all__ = [
    "KLINES_ASKED",
    "PAXG_SYMBOL",
    "PAXG_WHAT",
    "SPOT_KLINES_PATH",
    "fetch_paxg",
    "paxg_from_klines",
]
