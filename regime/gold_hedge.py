"""The gold hedge in the regime context: is money leaving crypto for gold right now?

PAXG (tokenised gold, ``derivatives.hedge``) is context, never traded. What it says about the
regime is its 4h return against BTC's over the same candle: gold up while BTC falls is a flight to
safety, the classic risk-off tell that the volatility HMM (BTC's own candles) and the monthly macro
quadrant both see late. The thresholds are one standard deviation of each in the bundled 2025
recording: PAXG's 4h returns have a standard deviation of 0.45 % (+0.3 % is their 84th
percentile), BTC's 0.96 %. Together they mark 66 of 2,488 4h candles as a flight to safety and 43
as risk-on; the two 4h returns correlate at only 0.09, which is why gold adds something.

The reading is context for the decider and the journal; it does not change the combined label or
the exposure scale, so the learner's per-regime keys stay what they were.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

GOLD_UP_4H_PCT = 0.3
BTC_DOWN_4H_PCT = -1.0


class GoldSignal(StrEnum):
    FLIGHT_TO_SAFETY = "flight_to_safety"  # gold up, BTC down
    RISK_ON = "risk_on"  # gold down, BTC up
    NEUTRAL = "neutral"
    UNAVAILABLE = "unavailable"


class GoldHedge(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    signal: GoldSignal
    paxg_price: float | None
    paxg_return_4h_pct: float | None
    btc_return_4h_pct: float | None
    reason: str


def read_gold_hedge(paxg: dict[str, Any] | None, btc_return_4h_pct: float | None) -> GoldHedge:
    """The regime reading of the snapshot's ``paxg`` value beside BTC's 4h return."""
    price = _number(paxg, "price")
    gold = _number(paxg, "return_4h_pct")
    if gold is None or btc_return_4h_pct is None:
        missing = "PAXG 4h return" if gold is None else "BTC 4h return"
        return GoldHedge(
            signal=GoldSignal.UNAVAILABLE,
            paxg_price=price,
            paxg_return_4h_pct=gold,
            btc_return_4h_pct=btc_return_4h_pct,
            reason=f"{missing} unavailable",
        )
    if gold >= GOLD_UP_4H_PCT and btc_return_4h_pct <= BTC_DOWN_4H_PCT:
        signal, why = GoldSignal.FLIGHT_TO_SAFETY, "gold up while BTC falls"
    elif gold <= -GOLD_UP_4H_PCT and btc_return_4h_pct >= -BTC_DOWN_4H_PCT:
        signal, why = GoldSignal.RISK_ON, "gold down while BTC rises"
    else:
        signal, why = GoldSignal.NEUTRAL, "no opposite moves of gold and BTC"
    return GoldHedge(
        signal=signal,
        paxg_price=price,
        paxg_return_4h_pct=gold,
        btc_return_4h_pct=btc_return_4h_pct,
        reason=f"{why} (4h: PAXG {gold:+.2f} %, BTC {btc_return_4h_pct:+.2f} %)",
    )


def _number(value: dict[str, Any] | None, key: str) -> float | None:
    raw = None if value is None else value.get(key)
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    number = float(raw)
    return number if math.isfinite(number) else None


__all__ = ["GoldHedge", "GoldSignal", "read_gold_hedge"]
