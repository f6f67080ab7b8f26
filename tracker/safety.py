"""The safety layer's rules, pure: stop loss, trailing-stop arming and trailing stop.

Thresholds are compared exactly: prices are taken at their exact binary value and percentages at
the decimal value written in the config (``Fraction(str(-10.0))`` is exactly -1/10), so "PnL <=
-10 %" means the real number, with no float rounding deciding a trade at the boundary.

Rules, in order, on every check:
1. the trailing high becomes ``max(trailing high, price)``;
2. the trailing stop arms once the peak PnL (trailing high vs entry) reaches ``trailing_arm_pct``,
   and stays armed (the flag is persisted);
3. PnL <= ``stop_loss_pct`` -> STOP LOSS. Checked first: the hard floor names the exit when a
   gap crosses both levels at once;
4. armed and price <= trailing high x (1 - ``trailing_stop_pct``) -> TRAILING STOP.
"""

from __future__ import annotations

import enum
from fractions import Fraction
from functools import cache

from pydantic import BaseModel, ConfigDict

from tracker.config import TrackerConfig


class ExitReason(enum.StrEnum):
    STOP_LOSS = "STOP LOSS"
    TRAILING_STOP = "TRAILING STOP"
    AGENT_EXIT = "AGENT EXIT"  # the reviewer (Claude) said EXIT
    FALLBACK_EXIT = "FALLBACK EXIT"  # the fallback score was below the exit cut-off
    DECISION_SELL = "DECISION SELL"  # a SELL from the decision routine

    @property
    def slug(self) -> str:
        """For decision ids: ``stop_loss``."""
        return self.value.lower().replace(" ", "_")


class SafetyVerdict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    exit: ExitReason | None
    pnl_pct: float
    peak_pnl_pct: float
    trailing_high: float
    armed: bool
    trailing_stop_price: float | None  # where the trailing stop fires, once armed


@cache
def _factor(pct: float) -> Fraction:
    """``1 + pct / 100`` with a config percentage as the decimal number written (``str``
    round-trips floats). Cached: the config holds three values, and parsing them on every safety
    check was a quarter of its cost."""
    return 1 + Fraction(str(pct)) / 100


def pnl_pct(entry_price: float, price: float) -> float:
    return (price / entry_price - 1.0) * 100.0


def safety_verdict(
    entry_price: float,
    price: float,
    trailing_high: float,
    armed: bool,
    config: TrackerConfig,
) -> SafetyVerdict:
    if not (entry_price > 0 and price > 0):
        raise ValueError(f"prices must be > 0, got entry {entry_price} and price {price}")
    entry, now = Fraction(entry_price), Fraction(price)
    high_value = max(trailing_high, price, entry_price)
    high = Fraction(high_value)
    armed = armed or high >= entry * _factor(config.trailing_arm_pct)
    stop_price = high * _factor(-config.trailing_stop_pct) if armed else None
    reason: ExitReason | None = None
    if now <= entry * _factor(config.stop_loss_pct):
        reason = ExitReason.STOP_LOSS
    elif stop_price is not None and now <= stop_price:
        reason = ExitReason.TRAILING_STOP
    return SafetyVerdict(
        exit=reason,
        pnl_pct=pnl_pct(entry_price, price),
        peak_pnl_pct=pnl_pct(entry_price, high_value),
        trailing_high=high_value,
        armed=armed,
        trailing_stop_price=None if stop_price is None else float(stop_price),
    )
