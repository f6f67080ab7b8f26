"""DerivativesSignal: the seed's weighted-tanh score of funding, taker flow and crowd positioning.

Per ticker, from whichever inputs are present (a missing input drops out of the sum, it is never
taken as zero):

- funding: ``-tanh(funding / 0.0005) * 0.35`` (crowded longs pay, a contrarian bearish lean);
- taker buy/sell ratio: ``+tanh((ratio - 1) * 2) * 0.30`` (aggressive buying, bullish);
- top-trader long/short z-score: when ``|z| > 1``, ``-tanh(0.15 * z) * 0.25`` (a crowded side fades).

The per-ticker sums are averaged over the tickers that had at least one input and clamped to
[-1, 1]. The result names the inputs used for each ticker so a reader can tell a neutral market
from missing data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from pydantic import BaseModel, ConfigDict

FUNDING_SCALE: Final = 0.0005
FUNDING_WEIGHT: Final = 0.35
TAKER_WEIGHT: Final = 0.30
TAKER_GAIN: Final = 2.0
LONG_SHORT_WEIGHT: Final = 0.25
LONG_SHORT_GAIN: Final = 0.15
LONG_SHORT_Z_THRESHOLD: Final = 1.0

FUNDING: Final = "funding_rate"
TAKER: Final = "taker_ratio"
LONG_SHORT_Z: Final = "long_short_z"


class SignalInputs(BaseModel):
    """One ticker's inputs; None means unavailable (it drops out of the sum)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    funding_rate: float | None = None  # fraction per 8 h (0.0001 = 0.01 %)
    taker_ratio: float | None = None  # taker buy volume / taker sell volume
    long_short_z: float | None = None  # z-score of the top-trader long/short ratio


class DerivativesSignal(BaseModel):
    """The averaged signal in [-1, 1], or None with a reason when no ticker had any input."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    value: float | None
    per_ticker: dict[str, float]
    inputs_used: dict[str, tuple[str, ...]]
    reason: str | None = None


def ticker_score(inputs: SignalInputs) -> tuple[float, tuple[str, ...]] | None:
    """The un-clamped score of one ticker and the inputs it used; None when it has none."""
    score = 0.0
    used: list[str] = []
    if _usable(inputs.funding_rate):
        assert inputs.funding_rate is not None
        score -= math.tanh(inputs.funding_rate / FUNDING_SCALE) * FUNDING_WEIGHT
        used.append(FUNDING)
    if _usable(inputs.taker_ratio):
        assert inputs.taker_ratio is not None
        score += math.tanh((inputs.taker_ratio - 1.0) * TAKER_GAIN) * TAKER_WEIGHT
        used.append(TAKER)
    if _usable(inputs.long_short_z):
        z = inputs.long_short_z
        assert z is not None
        if abs(z) > LONG_SHORT_Z_THRESHOLD:
            score -= math.tanh(LONG_SHORT_GAIN * z) * LONG_SHORT_WEIGHT
        used.append(LONG_SHORT_Z)  # used even when inside the dead band: it said "not crowded"
    return (score, tuple(used)) if used else None


def derivatives_signal(inputs: Mapping[str, SignalInputs]) -> DerivativesSignal:
    """Average of the tickers' scores, clamped to [-1, 1]."""
    per_ticker: dict[str, float] = {}
    used: dict[str, tuple[str, ...]] = {}
    for ticker in sorted(inputs):
        scored = ticker_score(inputs[ticker])
        if scored is not None:
            per_ticker[ticker], used[ticker] = scored
    if not per_ticker:
        return DerivativesSignal(
            value=None,
            per_ticker={},
            inputs_used={},
            reason="no funding, taker ratio or long/short input for any ticker",
        )
    mean = sum(per_ticker.values()) / len(per_ticker)
    return DerivativesSignal(
        value=max(-1.0, min(1.0, mean)), per_ticker=per_ticker, inputs_used=used
    )


def _usable(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


__all__ = ["DerivativesSignal", "SignalInputs", "derivatives_signal", "ticker_score"]
