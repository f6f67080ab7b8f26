"""The run's figures from its equity series and fills, and buy-and-hold's from a price line.

The formulas (units in the names) are documented in ``report.figures``. Daily returns start from
the series' first point: day 1's return is its last value against the starting equity, so a run
that lost on its first day shows that loss in Sharpe and Sortino (dropping it once showed a Sharpe
of 9.55 beside a -0.015 % run with "no losing day").
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict, deque
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

DAYS_PER_YEAR: Final = 365
#: a daily-return deviation at or under this, or under this fraction of the mean return, is the
#: float rounding of equal returns, not risk (a real one is 1e-4 or more, and a million times the
#: mean is an annual Sharpe of 2e7): divided into the mean it made Sharpes of -5e15 and 4e11
NOISE_DEVIATION: Final = 1e-12
NOISE_DEVIATION_OF_MEAN: Final = 1e-6
MS_PER_DAY: Final = 86_400_000
MIN_CAGR_SPAN_DAYS: Final = 30

# (at_ms, value): the full series stay plain tuples; only the downsampled ones become Points
Series = list[tuple[int, float]]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Metrics(_Frozen):
    start_equity_usd: float | None
    end_equity_usd: float | None
    total_return_pct: float | None
    cagr_pct: float | None
    sharpe: float | None
    sortino: float | None
    max_drawdown_pct: float | None
    turnover: float | None
    trades: int
    round_trips: int
    win_rate_pct: float | None
    fees_usd: float
    realised_pnl_usd: float
    traded_notional_usd: float
    exposure_time_pct: float | None
    span_days: float


class Fill(_Frozen):
    at_ms: int
    ticker: str
    side: str
    quantity: float
    price: float
    fee_usd: float


class HoldFigures(_Frozen):
    """Buy-and-hold of one ticker over the run, on the same rules as the run's own figures."""

    start_price: float
    end_price: float
    total_return_pct: float
    max_drawdown_pct: float
    sharpe: float | None
    sortino: float | None
    unavailable: dict[str, str] = Field(default_factory=dict)


def drawdown_series(equity: Series) -> Series:
    peak = -math.inf
    series = []
    for at_ms, value in equity:
        peak = max(peak, value)
        series.append((at_ms, (1.0 - value / peak) * 100.0 if peak > 0 else 0.0))
    return series


def daily_returns(series: Series) -> list[float]:
    """Each UTC day's last value against the previous day's; the first day's against the series'
    first point (the starting equity), so no day of the run is left out."""
    if not series:
        return []
    by_day: dict[int, float] = {}
    for at_ms, value in series:
        by_day[at_ms // MS_PER_DAY] = value  # sorted input: the last one wins
    closes = [series[0][1], *(by_day[day] for day in sorted(by_day))]
    return [b / a - 1.0 for a, b in itertools.pairwise(closes) if a > 0]


def hold_figures(line: Series) -> HoldFigures:
    """Return, max drawdown, Sharpe and Sortino of a (normalised or raw) price line."""
    unavailable: dict[str, str] = {}
    sharpe, sortino = risk_ratios(daily_returns(line), unavailable)
    drawdown = drawdown_series(line)
    return HoldFigures(
        start_price=line[0][1],
        end_price=line[-1][1],
        total_return_pct=(line[-1][1] / line[0][1] - 1.0) * 100.0,
        max_drawdown_pct=max(value for _, value in drawdown),
        sharpe=sharpe,
        sortino=sortino,
        unavailable=unavailable,
    )


def compute_metrics(
    equity: Series,
    drawdown: Series,
    decisions: list[dict[str, Any]],
    fills: list[Fill],
    unavailable: dict[str, str],
) -> Metrics:
    first = equity[0][1] if equity else None
    last = equity[-1][1] if equity else None
    span_days = (equity[-1][0] - equity[0][0]) / MS_PER_DAY if equity else 0.0
    total_return = None
    if first is not None and last is not None and first > 0:
        total_return = (last / first - 1.0) * 100.0
        if not math.isfinite(total_return):
            total_return = None
            unavailable["total_return_pct"] = f"the first equity value {first!r} is ~0: no return"
    else:
        unavailable["total_return_pct"] = "no equity recorded (no decision had a portfolio value)"
    cagr = None
    if total_return is not None:
        cagr = _cagr(first, last, span_days, unavailable)
    else:
        unavailable["cagr_pct"] = unavailable["total_return_pct"]
    sharpe, sortino = risk_ratios(daily_returns(equity), unavailable)
    notional = sum(f.quantity * f.price for f in fills)
    mean_equity = statistics.fmean(value for _, value in equity) if equity else 0.0
    turnover = notional / mean_equity if mean_equity > 0 else None
    if turnover is None:
        unavailable["turnover"] = "no equity recorded to divide the traded notional by"
    trips, realised = _round_trips(fills)
    win_rate = sum(1 for pnl in trips if pnl > 0) / len(trips) * 100.0 if trips else None
    if win_rate is None:
        unavailable["win_rate_pct"] = "no round trip (no sell matched an earlier buy)"
    exposure = _exposure_pct(decisions)
    if exposure is None:
        unavailable["exposure_time_pct"] = "fewer than two decisions: no time span to measure"
    return Metrics(
        start_equity_usd=first,
        end_equity_usd=last,
        total_return_pct=total_return,
        cagr_pct=cagr,
        sharpe=sharpe,
        sortino=sortino,
        max_drawdown_pct=max(value for _, value in drawdown) if drawdown else None,
        turnover=turnover,
        trades=len(fills),
        round_trips=len(trips),
        win_rate_pct=win_rate,
        fees_usd=sum(f.fee_usd for f in fills),
        realised_pnl_usd=realised,
        traded_notional_usd=notional,
        exposure_time_pct=exposure,
        span_days=span_days,
    )


def _cagr(
    first: float | None, last: float | None, span_days: float, unavailable: dict[str, str]
) -> float | None:
    if span_days < MIN_CAGR_SPAN_DAYS:
        unavailable["cagr_pct"] = (
            f"the run spans {span_days:.2f} days (< {MIN_CAGR_SPAN_DAYS}): annualising so short "
            "a run gives a meaningless figure"
        )
        return None
    if first is None or last is None or first <= 0 or last < 0:
        unavailable["cagr_pct"] = "equity ended below zero: no growth rate to annualise"
        return None
    growth: float = (last / first) ** (DAYS_PER_YEAR / span_days)
    return (growth - 1.0) * 100.0


def risk_ratios(
    returns: list[float], unavailable: dict[str, str]
) -> tuple[float | None, float | None]:
    if len(returns) < 2:
        reason = f"{len(returns)} daily return(s): need at least 2 (a run on >= 2 UTC days)"
        unavailable["sharpe"] = unavailable["sortino"] = reason
        return None, None
    if not all(math.isfinite(r) for r in returns):
        # a point of ~0 or ~1e308 (a corrupt journal value) overflows a return: statistics would
        # fail on it, and no ratio of it means anything
        reason = "a daily return is not finite (a value of ~0 or ~1e308 in the series)"
        unavailable["sharpe"] = unavailable["sortino"] = reason
        return None, None
    mean = statistics.fmean(returns)
    stdev = statistics.stdev(returns)
    downside = math.sqrt(statistics.fmean(min(r, 0.0) ** 2 for r in returns))
    noise = max(NOISE_DEVIATION, NOISE_DEVIATION_OF_MEAN * abs(mean))
    sharpe = mean / stdev * math.sqrt(DAYS_PER_YEAR) if stdev > noise else None
    sortino = mean / downside * math.sqrt(DAYS_PER_YEAR) if downside > noise else None
    if sharpe is None:
        unavailable["sharpe"] = "daily returns have no deviation beyond rounding"
    if sortino is None:
        unavailable["sortino"] = "no losing day beyond rounding: downside deviation is zero"
    return sharpe, sortino


def _round_trips(fills: list[Fill]) -> tuple[list[float], float]:
    """Net PnL of each sell matched FIFO against earlier buys, and the gross realised PnL."""
    lots: dict[str, deque[list[float]]] = defaultdict(deque)  # [quantity, price, fee per unit]
    trips: list[float] = []
    realised = 0.0
    for fill in fills:
        if fill.side == "buy":
            unit_fee = fill.fee_usd / fill.quantity if fill.quantity > 0 else 0.0
            lots[fill.ticker].append([fill.quantity, fill.price, unit_fee])
            continue
        remaining, gross, buy_fees = fill.quantity, 0.0, 0.0
        queue = lots[fill.ticker]
        while remaining > 1e-12 and queue:
            lot = queue[0]
            taken = min(remaining, lot[0])
            gross += taken * (fill.price - lot[1])
            buy_fees += taken * lot[2]
            lot[0] -= taken
            remaining -= taken
            if lot[0] <= 1e-12:
                queue.popleft()
        if remaining < fill.quantity:
            realised += gross
            trips.append(gross - buy_fees - fill.fee_usd)
    return trips, realised


def _exposure_pct(decisions: list[dict[str, Any]]) -> float | None:
    ordered = sorted(decisions, key=lambda r: int(r["at_ms"]))
    if len(ordered) < 2 or ordered[-1]["at_ms"] == ordered[0]["at_ms"]:
        return None
    exposed_ms = 0
    for record, following in itertools.pairwise(ordered):
        if (record.get("snapshot") or {}).get("open_positions"):
            exposed_ms += int(following["at_ms"]) - int(record["at_ms"])
    return exposed_ms / (int(ordered[-1]["at_ms"]) - int(ordered[0]["at_ms"])) * 100.0
