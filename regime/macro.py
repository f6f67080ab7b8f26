"""Macro regime: the growth x inflation quadrant, from monthly FRED series. Pure logic, no I/O.

Series (monthly, seasonally adjusted; monthly rather than quarterly GDPC1 so the view is at most a
month or two old):

- growth: ``INDPRO`` (industrial production index). ``growth_yoy_pct`` = % change over 12 months;
  growth is *rising* when the latest YoY change is above its trend, the mean of the last
  ``growth_trend_months`` (12) YoY values (the latest included).
- inflation: ``CPIAUCSL`` (CPI, all urban consumers). Inflation is *rising* when the latest YoY
  change is above the YoY change ``inflation_lookback_months`` (3) observations earlier.

Equal counts as not rising. Quadrants and the exposure they allow:

==================  ==============  =================  ========
growth              inflation       quadrant           exposure
==================  ==============  =================  ========
rising              not rising      GOLDILOCKS         1.2
rising              rising          REFLATION          1.0
not rising          rising          STAGFLATION        0.6
not rising          not rising      DEFLATION          0.9
==================  ==============  =================  ========

Point in time: an observation dated the first of month M is only used once ``publication_lag_days``
(45) have passed since that date (CPI and INDPRO are published about mid month M+1), so a replay over
a snapshot never sees a figure before it was public. Revisions are not modelled: a snapshot holds the
latest vintage. A view whose newest usable observation is older than ``max_staleness_days`` (120) is
unavailable rather than stale. When nothing can be computed the quadrant is UNAVAILABLE with exposure
1.0 and a reason; a number is never invented.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from regime.config import MacroRule


class MacroQuadrant(StrEnum):
    GOLDILOCKS = "GOLDILOCKS"
    REFLATION = "REFLATION"
    STAGFLATION = "STAGFLATION"
    DEFLATION = "DEFLATION"
    UNAVAILABLE = "UNAVAILABLE"


MACRO_EXPOSURE: dict[MacroQuadrant, float] = {
    MacroQuadrant.GOLDILOCKS: 1.2,
    MacroQuadrant.REFLATION: 1.0,
    MacroQuadrant.STAGFLATION: 0.6,
    MacroQuadrant.DEFLATION: 0.9,
    MacroQuadrant.UNAVAILABLE: 1.0,  # no view: leave sizing to the other caps
}

# (growth rising, inflation rising) -> quadrant
_QUADRANTS = {
    (True, False): MacroQuadrant.GOLDILOCKS,
    (True, True): MacroQuadrant.REFLATION,
    (False, True): MacroQuadrant.STAGFLATION,
    (False, False): MacroQuadrant.DEFLATION,
}


class MacroRegime(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    quadrant: MacroQuadrant
    exposure: float
    source: str  # "fred", "snapshot", "none"
    reason: str | None = None  # set when UNAVAILABLE
    as_of_ms: int | None = None  # date of the older of the two newest observations used
    growth_yoy_pct: float | None = None
    growth_trend_yoy_pct: float | None = None
    inflation_yoy_pct: float | None = None
    inflation_prior_yoy_pct: float | None = None

    @classmethod
    def unavailable(cls, reason: str, *, source: str) -> MacroRegime:
        return cls(
            quadrant=MacroQuadrant.UNAVAILABLE,
            exposure=MACRO_EXPOSURE[MacroQuadrant.UNAVAILABLE],
            source=source,
            reason=reason,
        )


class MacroDataError(ValueError):
    """The series cannot support the rule (too short, gaps, stale)."""


def classify_macro(
    growth: pd.Series,
    inflation: pd.Series,
    *,
    now_ms: int,
    source: str,
    rule: MacroRule | None = None,
) -> MacroRegime:
    """Quadrant from two monthly series indexed by observation date (first of the month)."""
    rule = rule or MacroRule()
    try:
        growth_m = _published_monthly(growth, rule.growth_series, now_ms, rule)
        inflation_m = _published_monthly(inflation, rule.inflation_series, now_ms, rule)
        growth_yoy = _latest_yoy(growth_m, rule.growth_series, rule.growth_trend_months)
        inflation_yoy = _latest_yoy(
            inflation_m, rule.inflation_series, rule.inflation_lookback_months + 1
        )
    except MacroDataError as exc:
        return MacroRegime.unavailable(str(exc), source=source)
    growth_now, growth_trend = float(growth_yoy.iloc[-1]), float(growth_yoy.mean())
    inflation_now, inflation_prior = float(inflation_yoy.iloc[-1]), float(inflation_yoy.iloc[0])
    quadrant = _QUADRANTS[(growth_now > growth_trend, inflation_now > inflation_prior)]
    as_of = min(growth_m.index[-1], inflation_m.index[-1]).to_timestamp()
    return MacroRegime(
        quadrant=quadrant,
        exposure=MACRO_EXPOSURE[quadrant],
        source=source,
        as_of_ms=int(as_of.tz_localize(UTC).timestamp() * 1000),
        growth_yoy_pct=growth_now,
        growth_trend_yoy_pct=growth_trend,
        inflation_yoy_pct=inflation_now,
        inflation_prior_yoy_pct=inflation_prior,
    )


def _published_monthly(series: pd.Series, name: str, now_ms: int, rule: MacroRule) -> pd.Series:
    """Observations public at ``now_ms``, on a gap-free monthly index (missing months are NaN)."""
    values = pd.to_numeric(series, errors="coerce").astype(np.float64)
    dates = pd.DatetimeIndex(pd.to_datetime(series.index))
    if dates.tz is not None:
        dates = dates.tz_convert(UTC).tz_localize(None)
    now = datetime.fromtimestamp(now_ms / 1000, tz=UTC).replace(tzinfo=None)
    public = dates + pd.Timedelta(days=rule.publication_lag_days) <= pd.Timestamp(now)
    kept = pd.Series(values.to_numpy()[public], index=dates[public].to_period("M")).dropna()
    if kept.empty:
        raise MacroDataError(f"{name}: no observation published by {now:%Y-%m-%d}")
    if not kept.index.is_unique:
        raise MacroDataError(f"{name}: more than one observation in a month (not a monthly series)")
    kept = kept.sort_index()
    age_days = (pd.Timestamp(now) - kept.index[-1].to_timestamp()).days
    if age_days > rule.max_staleness_days:
        raise MacroDataError(
            f"{name}: newest usable observation {kept.index[-1]} is {age_days} days old "
            f"(limit {rule.max_staleness_days})"
        )
    months = pd.period_range(kept.index[0], kept.index[-1], freq="M")
    return kept.reindex(months)


def _latest_yoy(monthly: pd.Series, name: str, count: int) -> pd.Series:
    """The last ``count`` year-over-year % changes; every one of them must exist."""
    yoy = 100.0 * (monthly / monthly.shift(12) - 1.0)
    tail = yoy.iloc[-count:]
    if len(tail) < count or tail.isna().any():
        raise MacroDataError(
            f"{name}: need {count} consecutive year-over-year changes up to {monthly.index[-1]}, "
            f"have {int(tail.notna().sum())} (too few or missing monthly observations)"
        )
    return tail


__all__ = [
    "MACRO_EXPOSURE",
    "MacroDataError",
    "MacroQuadrant",
    "MacroRegime",
    "MacroRule",
    "classify_macro",
]
