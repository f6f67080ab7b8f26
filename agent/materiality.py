"""Delta gating: a routine pass (candle close, agent timer) whose snapshot has not changed
materially since the last Claude answer is decided without a call (``decided_by: unchanged``).

"Material", against the snapshot of the last answered call (first match is the reason):
- the pass is not routine: an anomaly, a wake condition or the watchdog always calls;
- the last answer is ``max_unchanged_hours`` old or more;
- the portfolio changed: open positions (ticker, quantity) or resting orders;
- a regime changed: a ticker's crypto regime, the macro quadrant, the combined label, or
  exposure_scale by ``exposure_swing`` or more;
- a ticker's price moved ``price_move_sigmas`` hourly standard deviations or more (its own
  realised volatility, an EWMA over the prices of every pass; ``warmup_move_pct`` until
  ``warmup_observations`` passes have been seen; never less than ``min_move_pct``);
- a ticker's indicator state changed on a timeframe: trend (up / flat / down) or RSI zone
  (< 30, 30-70, > 70): the decider is told to read them;
- derivatives swung: derivatives_signal by ``derivatives_swing`` or more, a funding rate by
  ``funding_swing`` or more, or one of them became available or unavailable.
An unchanged decision places no order and keeps the last answer's timer and wake conditions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent.decision import AgentDecision

ROUTINE_LAYERS = frozenset({"candle_close", "agent_timer"})
RSI_LOW, RSI_HIGH = 30.0, 70.0
MS_PER_HOUR = 3_600_000
UNCHANGED_REASON = "no material change since the last answer"


class DeltaConfig(BaseModel):
    """Settings of delta gating (``[agent.delta]``); defaults measured by ``python -m bench cost``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    max_unchanged_hours: float = Field(4.0, gt=0)
    price_move_sigmas: float = Field(1.0, gt=0)
    min_move_pct: float = Field(0.25, ge=0)
    warmup_move_pct: float = Field(0.5, gt=0)
    warmup_observations: int = Field(8, ge=1)
    vol_halflife_hours: float = Field(24.0, gt=0)
    exposure_swing: float = Field(0.05, gt=0)
    derivatives_swing: float = Field(0.25, gt=0)
    funding_swing: float = Field(0.0001, gt=0)
    #: position reviews: a position whose mark moved less than this since Claude last reviewed
    #: it (same regime, review younger than review_max_unchanged_secs) keeps HOLD without a call
    review_min_move_pct: float = Field(0.5, ge=0)
    review_max_unchanged_secs: float = Field(1800.0, gt=0)
    #: ... except a position at risk (losing, in a regime other than its entry's): asked again
    #: once its loss deepened this much (P&L percentage points) since Claude last reviewed it
    review_at_risk_move_pct: float = Field(0.25, ge=0)


@dataclass
class _Vol:
    at_ms: int
    price: float
    var_per_hour: float = 0.0
    observations: int = 0


class VolatilityEstimate:
    """Per ticker: an EWMA of squared log returns per hour between consecutive passes."""

    def __init__(self, halflife_hours: float) -> None:
        self._halflife_hours = halflife_hours
        self._state: dict[str, _Vol] = {}

    def observe(self, at_ms: int, prices: Mapping[str, float | None]) -> None:
        for ticker, price in prices.items():
            if price is None or price <= 0:
                continue
            last = self._state.get(ticker)
            if last is None:
                self._state[ticker] = _Vol(at_ms, price)
                continue
            hours = (at_ms - last.at_ms) / MS_PER_HOUR
            if hours <= 0:
                continue
            sample = math.log(price / last.price) ** 2 / hours
            weight = 1.0 - 0.5 ** (hours / self._halflife_hours)
            if last.observations == 0:
                weight = 1.0
            last.var_per_hour += weight * (sample - last.var_per_hour)
            last.observations += 1
            last.at_ms, last.price = at_ms, price

    def sigma_pct(self, ticker: str, min_observations: int) -> float | None:
        """One hour's standard deviation of the price, in percent (None: not enough passes)."""
        state = self._state.get(ticker)
        if state is None or state.observations < min_observations:
            return None
        return math.sqrt(state.var_per_hour) * 100.0


def is_routine(reasons: list[str]) -> bool:
    return bool(reasons) and all(r.split(":", 1)[0] in ROUTINE_LAYERS for r in reasons)


def material_change(
    last: Mapping[str, Any], now: Mapping[str, Any], config: DeltaConfig, vol: VolatilityEstimate
) -> str | None:
    """Why ``now`` (a snapshot as sent) needs a call after ``last``; None: nothing material."""
    reasons = list(now.get("gate_wake_reasons") or [])
    if not is_routine(reasons):
        return f"not a routine pass ({', '.join(reasons) or 'no reason'})"
    age_hours = (int(now["at_ms"]) - int(last["at_ms"])) / MS_PER_HOUR
    if age_hours >= config.max_unchanged_hours:
        return f"last answer {age_hours:.1f} h old (max {config.max_unchanged_hours:g} h)"
    return (
        _portfolio_change(last, now)
        or _regime_change(last, now, config)
        or _ticker_change(last, now, config, vol)
        or _derivatives_change(last, now, config)
    )


def _portfolio_change(last: Mapping[str, Any], now: Mapping[str, Any]) -> str | None:
    def held(s: Mapping[str, Any]) -> set[tuple[str, float]]:
        return {(p["ticker"], p["quantity"]) for p in s.get("open_positions") or []}

    def resting(s: Mapping[str, Any]) -> set[tuple[str, str, float]]:
        return {(o["ticker"], o["side"], o["notional_usd"]) for o in s.get("pending_orders") or []}

    if held(last) != held(now):
        return "open positions changed"
    if resting(last) != resting(now):
        return "resting orders changed"
    return None


def _regime_change(
    last: Mapping[str, Any], now: Mapping[str, Any], config: DeltaConfig
) -> str | None:
    before, after = last.get("regime") or {}, now.get("regime") or {}
    for key in ("crypto", "macro", "combined"):
        if before.get(key) != after.get(key):
            return f"regime changed ({key}: {before.get(key)} -> {after.get(key)})"
    swing = abs(float(now.get("exposure_scale") or 0) - float(last.get("exposure_scale") or 0))
    if swing >= config.exposure_swing:
        return f"exposure_scale moved {swing:.2f}"
    return None


def _zone(rsi: float | None) -> str | None:
    if rsi is None:
        return None
    return "oversold" if rsi < RSI_LOW else "overbought" if rsi > RSI_HIGH else "neutral"


def _ticker_change(
    last: Mapping[str, Any], now: Mapping[str, Any], config: DeltaConfig, vol: VolatilityEstimate
) -> str | None:
    before, after = last.get("tickers") or {}, now.get("tickers") or {}
    if set(before) != set(after):
        return "tickers changed"
    for ticker in sorted(after):
        old, new = before[ticker], after[ticker]
        moved = _price_move(ticker, old.get("price"), new.get("price"), config, vol)
        if moved:
            return moved
        old_tf, new_tf = old.get("multi_tf") or {}, new.get("multi_tf") or {}
        for tf in sorted(new_tf):
            was, is_ = old_tf.get(tf) or {}, new_tf.get(tf) or {}
            if was.get("trend") != is_.get("trend"):
                return f"{ticker} {tf} trend {was.get('trend')} -> {is_.get('trend')}"
            if _zone(was.get("rsi")) != _zone(is_.get("rsi")):
                return f"{ticker} {tf} RSI {_zone(was.get('rsi'))} -> {_zone(is_.get('rsi'))}"
    return None


def _price_move(
    ticker: str,
    old: float | None,
    new: float | None,
    config: DeltaConfig,
    vol: VolatilityEstimate,
) -> str | None:
    if old is None or new is None or old <= 0 or new <= 0:
        return None if old == new else f"{ticker} price availability changed"
    move_pct = abs(math.log(new / old)) * 100.0
    sigma = vol.sigma_pct(ticker, config.warmup_observations)
    limit = config.warmup_move_pct if sigma is None else config.price_move_sigmas * sigma
    limit = max(limit, config.min_move_pct)
    if move_pct >= limit:
        return f"{ticker} moved {move_pct:.2f} % (limit {limit:.2f} %)"
    return None


def _derivatives_change(
    last: Mapping[str, Any], now: Mapping[str, Any], config: DeltaConfig
) -> str | None:
    old_signal, new_signal = last.get("derivatives_signal"), now.get("derivatives_signal")
    if (old_signal is None) != (new_signal is None):
        return "derivatives_signal availability changed"
    if old_signal is not None and abs(new_signal - old_signal) >= config.derivatives_swing:
        return f"derivatives_signal {old_signal:.2f} -> {new_signal:.2f}"
    old_funding, new_funding = last.get("funding_rates") or {}, now.get("funding_rates") or {}
    if set(old_funding) != set(new_funding):
        return "funding rates availability changed"
    for ticker, rate in sorted(new_funding.items()):
        if abs(rate - old_funding[ticker]) >= config.funding_swing:
            return f"{ticker} funding {old_funding[ticker]:.5f} -> {rate:.5f}"
    return None


class DeltaGate:
    """Remembers the last answered snapshot and decides whether the next one needs a call."""

    def __init__(self, config: DeltaConfig) -> None:
        self.config = config
        self._vol = VolatilityEstimate(config.vol_halflife_hours)
        self._last: Mapping[str, Any] | None = None
        self._answer: AgentDecision | None = None
        self.skipped = 0

    def unchanged(self, sent: Mapping[str, Any]) -> AgentDecision | None:
        """The decision without a call for ``sent`` (a snapshot as sent), or None: call."""
        prices = {t: v.get("price") for t, v in (sent.get("tickers") or {}).items()}
        self._vol.observe(int(sent["at_ms"]), prices)
        if not self.config.enabled or self._last is None or self._answer is None:
            return None
        if material_change(self._last, sent, self.config, self._vol) is not None:
            return None
        self.skipped += 1
        return AgentDecision(
            decided_by="unchanged",
            decider_reason=UNCHANGED_REASON,
            next_check_seconds=self._answer.next_check_seconds,
            wake_conditions=self._answer.wake_conditions,
        )

    def answered(self, sent: Mapping[str, Any], answer: AgentDecision) -> None:
        self._last, self._answer = sent, answer

    def reason(self, sent: Mapping[str, Any]) -> str | None:
        """Why ``sent`` is material (for tests and the journal); None when it is not."""
        if self._last is None:
            return "no answer yet"
        return material_change(self._last, sent, self.config, self._vol)
