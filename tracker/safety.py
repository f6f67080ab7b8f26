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

from core.unvalidated import require_plain, unvalidated
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


_VERDICT_ORDER = (
    "exit",
    "pnl_pct",
    "peak_pnl_pct",
    "trailing_high",
    "armed",
    "trailing_stop_price",
)
require_plain(SafetyVerdict, frozenset(_VERDICT_ORDER))
_VERDICT_NAMES = set(_VERDICT_ORDER)


@cache
def _factor(pct: float) -> tuple[int, int]:
    """``1 + pct / 100`` as (numerator, denominator), with a config percentage as the decimal
    number written (``str`` round-trips floats). Cached: the config holds three values, and
    parsing them on every safety check was a quarter of its cost."""
    factor = 1 + Fraction(str(pct)) / 100
    return factor.numerator, factor.denominator


def _compare_scaled(value: float, base: float, factor: tuple[int, int]) -> int:
    """The sign of ``value - base x factor``, exactly: a float is a binary fraction, so this is
    integer cross-multiplication (``Fraction``'s comparison, without building Fractions)."""
    value_num, value_den = value.as_integer_ratio()
    base_num, base_den = base.as_integer_ratio()
    factor_num, factor_den = factor
    left = value_num * base_den * factor_den
    right = base_num * factor_num * value_den
    return (left > right) - (left < right)


def _scaled(base: float, factor: tuple[int, int]) -> float:
    """``base x factor`` rounded once (integer true division is correctly rounded)."""
    base_num, base_den = base.as_integer_ratio()
    return (base_num * factor[0]) / (base_den * factor[1])


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
    high_value = max(trailing_high, price, entry_price)
    armed = armed or _compare_scaled(high_value, entry_price, _factor(config.trailing_arm_pct)) >= 0
    stop_factor = _factor(-config.trailing_stop_pct)
    reason: ExitReason | None = None
    if _compare_scaled(price, entry_price, _factor(config.stop_loss_pct)) <= 0:
        reason = ExitReason.STOP_LOSS
    elif armed and _compare_scaled(price, high_value, stop_factor) <= 0:
        reason = ExitReason.TRAILING_STOP
    fields = {
        "exit": reason,
        "pnl_pct": pnl_pct(entry_price, price),
        "peak_pnl_pct": pnl_pct(entry_price, high_value),
        "trailing_high": high_value,
        "armed": armed,
        "trailing_stop_price": _scaled(high_value, stop_factor) if armed else None,
    }
    # every field is of its type already unless a price came in as an int (validation makes the
    # high a float) or ``armed`` as another truthy value: checks every 30 s of each position
    # validated what they had just built
    if type(high_value) is float and type(armed) is bool:
        return unvalidated(SafetyVerdict, fields, _VERDICT_NAMES)
    return SafetyVerdict(**fields)
