"""Liquidations from Binance's ``forceOrder`` stream: the frame parser and a rolling 1 h window.

Binance pushes at most one liquidation per symbol per second on ``<symbol>@forceOrder`` (the
latest in that second), so totals are a lower bound; they are labelled as such. The simulator does
not serve this stream (liquidations are not recorded): with no window attached the source says so.

A frame is a number of USD only if it is one: a price or quantity that is not a finite positive
number, a notional beyond ``MAX_NOTIONAL_USD``, or (``LiquidationStream``) a time more than
``MAX_FUTURE_MS`` ahead of the daemon's clock is refused. One frame of "Infinity" or of a
far-future time would otherwise have flagged a cascade for good.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from derivatives.cache import SourceFailedError, SourceNotAvailableError
from market.timeframes import from_binance_symbol

WINDOW_MS: Final = 3_600_000
CASCADE_WINDOW_MS: Final = 300_000
#: no single liquidation comes near this (Binance's largest days total a few US$ billion)
MAX_NOTIONAL_USD: Final = 1e11
#: a frame's time may run this far ahead of the daemon's clock (as the kline frames' skew)
MAX_FUTURE_MS: Final = 300_000
#: an hour of Binance's at most one a symbol a second, for 13 symbols: a frame flood beyond it
#: pushes out the oldest instead of growing the window until the next poll prunes it
MAX_EVENTS: Final = 50_000
NOT_CONNECTED: Final = "no forceOrder stream connected (liquidations are not in the recorded data the simulator serves)"


class Liquidation(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    ticker: str
    side: Literal["long", "short"]  # the position that was liquidated
    price: float = Field(gt=0)
    quantity: float = Field(gt=0)
    notional_usd: float
    at_ms: int


class _Order(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    s: str
    S: Literal["BUY", "SELL"]
    ap: float = Field(gt=0, allow_inf_nan=False)
    z: float = Field(gt=0, allow_inf_nan=False)
    T: int = Field(ge=0)


class _Frame(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    e: Literal["forceOrder"]
    o: _Order


def parse_force_order(raw: bytes | str) -> Liquidation:
    """A raw or combined-stream ``forceOrder`` frame; anything else is ``SourceFailedError``."""
    try:
        payload: Any = orjson.loads(raw)
        if isinstance(payload, dict) and "stream" in payload and "data" in payload:
            payload = payload["data"]
        order = _Frame.model_validate(payload).o
        ticker = from_binance_symbol(order.s)
    except (orjson.JSONDecodeError, ValidationError, ValueError) as exc:
        raise SourceFailedError(f"malformed forceOrder frame: {type(exc).__name__}") from None
    if not order.ap * order.z <= MAX_NOTIONAL_USD:
        raise SourceFailedError(
            f"malformed forceOrder frame: a notional of {order.ap * order.z:.3g} USD is no liquidation"
        )
    return Liquidation(
        ticker=ticker,
        side="long" if order.S == "SELL" else "short",  # a SELL liquidation closes a long
        price=order.ap,
        quantity=order.z,
        notional_usd=order.ap * order.z,
        at_ms=order.T,
    )


class LiquidationWindow:
    """The last hour of liquidations; a cascade is >= ``cascade_usd`` within 5 minutes."""

    def __init__(self, cascade_usd: float = 10_000_000.0) -> None:
        self.cascade_usd = cascade_usd
        self._events: deque[Liquidation] = deque(maxlen=MAX_EVENTS)

    def add(self, liquidation: Liquidation) -> None:
        self._events.append(liquidation)

    def summary(self, now_ms: int) -> dict[str, Any]:
        # by time, not arrival order: a late frame of an older liquidation ages out all the same
        self._events = deque(
            (e for e in self._events if e.at_ms > now_ms - WINDOW_MS), maxlen=MAX_EVENTS
        )
        recent = [e for e in self._events if e.at_ms > now_ms - CASCADE_WINDOW_MS]
        burst = sum(e.notional_usd for e in recent)
        return {
            "window_secs": WINDOW_MS // 1000,
            "long_usd_1h": sum(e.notional_usd for e in self._events if e.side == "long"),
            "short_usd_1h": sum(e.notional_usd for e in self._events if e.side == "short"),
            "count_1h": len(self._events),
            "usd_5m": burst,
            "cascade": burst >= self.cascade_usd,
            "note": "lower bound: Binance sends at most one liquidation per symbol per second",
        }


async def fetch_liquidations(window: LiquidationWindow | None, now_ms: int) -> dict[str, Any]:
    if window is None:
        raise SourceNotAvailableError(NOT_CONNECTED)
    return window.summary(now_ms)


__all__ = [
    "MAX_EVENTS",
    "MAX_FUTURE_MS",
    "MAX_NOTIONAL_USD",
    "Liquidation",
    "LiquidationWindow",
    "fetch_liquidations",
    "parse_force_order",
]
