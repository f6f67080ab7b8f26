"""Binance ``markPriceUpdate`` frames (one symbol's, or the ``!markPrice@arr`` list) as
``MarkPrice`` messages."""

from __future__ import annotations

import math
from typing import Any

from market.wire import (
    FrameRejected,
    RejectReason,
    WireMessage,
    decode,
    number,
    payload_of,
    unified_ticker,
)


class MarkPrice(WireMessage):
    """A ``markPriceUpdate``; coin-margined and delivery contracts omit the index or funding."""

    ticker: str
    event_time_ms: int
    mark_price: float
    index_price: float | None
    estimated_settle_price: float | None
    funding_rate: float | None
    next_funding_time_ms: int | None


def parse_mark_prices(payload: Any) -> tuple[MarkPrice, ...]:
    """One ``markPriceUpdate`` or a ``!markPrice@arr`` list of them."""
    items = payload if type(payload) is list else [payload]
    out = []
    for item in items:
        if type(item) is not dict or item.get("e") != "markPriceUpdate":
            raise FrameRejected(RejectReason.NOT_KLINE, "not a markPriceUpdate")
        out.append(_mark_price(item))
    return tuple(out)


def parse_mark_price_frame(raw: bytes | str) -> tuple[MarkPrice, ...]:
    """A markPrice frame (single symbol or ``!markPrice@arr``) as MarkPrice messages."""
    _, payload = payload_of(decode(raw))
    return parse_mark_prices(payload)


def _mark_price(item: dict[str, Any]) -> MarkPrice:
    try:
        symbol, event_t, mark = item["s"], item["E"], number(item["p"])
        index = _optional_number(item.get("i"))
        settle = _optional_number(item.get("P"))
        funding = _optional_number(item.get("r"))
        next_funding = item.get("T")
    except (KeyError, TypeError, ValueError) as exc:
        raise FrameRejected(RejectReason.MALFORMED, f"markPriceUpdate field: {exc}") from None
    if type(symbol) is not str or type(event_t) is not int:
        raise FrameRejected(RejectReason.MALFORMED, "markPriceUpdate field of the wrong type")
    if next_funding is not None and type(next_funding) is not int:
        raise FrameRejected(RejectReason.MALFORMED, "next funding time is not an integer")
    numbers = [x for x in (mark, index, settle, funding) if x is not None]
    if not all(math.isfinite(x) for x in numbers):
        raise FrameRejected(RejectReason.NON_FINITE, f"markPriceUpdate of {symbol}")
    # funding may be negative; every price sent must be positive (absent ones stay None)
    if any(x is not None and x <= 0.0 for x in (mark, index, settle)):
        raise FrameRejected(
            RejectReason.NON_POSITIVE_PRICE, f"mark={mark} index={index} settle={settle}"
        )
    return MarkPrice(
        ticker=unified_ticker(symbol),
        event_time_ms=event_t,
        mark_price=mark,
        index_price=index,
        estimated_settle_price=settle,
        funding_rate=funding,
        next_funding_time_ms=next_funding or None,  # delivery contracts send 0: no funding
    )


def _optional_number(value: Any) -> float | None:
    """Absent or "" (Binance's empty funding rate on delivery contracts) -> None."""
    if value is None or value == "":
        return None
    return number(value)


__all__ = ["MarkPrice", "parse_mark_price_frame", "parse_mark_prices"]
