"""Every report figure against an independent recomputation from the run folder's raw files.

The recomputation below is written apart from ``report/`` (plain loops over the JSON lines and the
CSV, no import of the report's helpers), so a mistake in one does not hide in the other. Daily
returns start from the run's starting equity: the first day's return is its close against the
first equity point, not dropped.
"""

from __future__ import annotations

import csv
import math
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pytest
from fakes.report_support import DAY_MS, T0, decision_line, write_run
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from report.figures import Report, build_report

HOUR = 3_600_000


def _journal(run: Path) -> list[dict[str, Any]]:
    lines = (run / "logs" / "decisions.jsonl").read_bytes().splitlines()
    records = [orjson.loads(line) for line in lines if line.strip()]
    decisions = [r for r in records if r.get("type", "decision") == "decision"]
    return sorted(decisions, key=lambda r: r["at_ms"])


def _equity(run: Path) -> list[tuple[int, float]]:
    out = []
    for record in _journal(run):
        value = record["snapshot"].get("portfolio_value")
        if value is not None:
            out.append((record["at_ms"], float(value)))
    return out


def _hold_prices(run: Path, ticker: str) -> list[tuple[int, float]]:
    out = []
    for record in _journal(run):
        price = record["snapshot"]["tickers"].get(ticker, {}).get("price")
        if price:
            out.append((record["at_ms"], float(price)))
    return out


def _daily_returns(series: list[tuple[int, float]]) -> list[float]:
    """Each UTC day's last value against the previous day's (the first: against the start)."""
    closes: dict[str, float] = {}
    for at_ms, value in series:
        closes[datetime.fromtimestamp(at_ms / 1000, UTC).date().isoformat()] = value
    previous = series[0][1]
    returns = []
    for day in sorted(closes):
        returns.append(closes[day] / previous - 1)
        previous = closes[day]
    return returns


def _noise(mean: float) -> float:
    """The report's rule, restated: a deviation this small is the rounding of equal returns."""
    return max(1e-12, 1e-6 * abs(mean))


class _Ratio(NamedTuple):
    value: float | None
    rel: float  # how closely another float computation of it must agree


def _ratio(mean: float, spread: float) -> _Ratio:
    """``mean / spread`` annualised, None within rounding. Each daily return carries about 1e-16
    of absolute rounding, computed another way by the report, so the two ratios agree to about
    1e-15 over the smaller of the mean and the spread (returns of 1e-10 disagree by 1e-6)."""
    if not spread > _noise(mean):
        return _Ratio(None, 0.0)
    smaller = min(abs(mean), spread) or spread
    return _Ratio(mean / spread * math.sqrt(365), max(1e-9, 1e-14 / smaller))


def _sharpe(returns: list[float]) -> _Ratio:
    n = len(returns)
    if n < 2:
        return _Ratio(None, 0.0)
    mean = sum(returns) / n
    return _ratio(mean, math.sqrt(sum((r - mean) ** 2 for r in returns) / (n - 1)))


def _sortino(returns: list[float]) -> _Ratio:
    n = len(returns)
    if n < 2:
        return _Ratio(None, 0.0)
    mean = sum(returns) / n
    return _ratio(mean, math.sqrt(sum(min(r, 0.0) ** 2 for r in returns) / n))


def _agrees(got: float | None, expected: _Ratio) -> bool:
    return got == pytest.approx(expected.value, rel=expected.rel, abs=1e-12)


def _max_drawdown_pct(values: list[float]) -> float:
    worst, peak = 0.0, values[0]
    for v in values:
        peak = max(peak, v)
        worst = max(worst, (peak - v) / peak * 100)
    return worst


def _fills(run: Path) -> list[dict[str, str]]:
    with (run / "logs" / "trades.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def _check_equity_figures(report: Report, run: Path) -> None:
    m = report.metrics
    equity = _equity(run)
    values = [v for _, v in equity]
    assert m.start_equity_usd == values[0] and m.end_equity_usd == values[-1]
    assert m.total_return_pct == pytest.approx((values[-1] / values[0] - 1) * 100)
    assert m.max_drawdown_pct == pytest.approx(_max_drawdown_pct(values))
    assert m.span_days == pytest.approx((equity[-1][0] - equity[0][0]) / DAY_MS)
    returns = _daily_returns(equity)
    for name, expected in (("sharpe", _sharpe(returns)), ("sortino", _sortino(returns))):
        got = getattr(m, name)
        if expected.value is None:
            assert got is None and report.unavailable[name]
        else:
            assert _agrees(got, expected), (name, got, expected)
    fills = _fills(run)
    notional = sum(float(f["quantity"]) * float(f["price"]) for f in fills)
    assert m.trades == len(fills)
    assert m.fees_usd == pytest.approx(sum(float(f["fee_usd"]) for f in fills))
    assert m.traded_notional_usd == pytest.approx(notional)
    assert m.turnover == pytest.approx(notional / (sum(values) / len(values)))


def _check_hold_figures(report: Report, run: Path) -> None:
    for ticker in ("BTC/USDT", "ETH/USDT"):
        prices = _hold_prices(run, ticker)
        if not prices:
            assert ticker not in report.buy_and_hold_figures
            continue
        figures = report.buy_and_hold_figures[ticker]
        values = [p for _, p in prices]
        assert figures.total_return_pct == pytest.approx((values[-1] / values[0] - 1) * 100)
        assert figures.max_drawdown_pct == pytest.approx(_max_drawdown_pct(values))
        expected = _sharpe(_daily_returns(prices))
        if expected.value is None:
            assert figures.sharpe is None and figures.unavailable["sharpe"]
        else:
            assert _agrees(figures.sharpe, expected), (figures.sharpe, expected)


def _five_day_run(run: Path) -> Path:
    """The issue's shape: day 1 loses 0.22 %, the next four gain a little, the run ends at
    -0.015 %. Dropping day 1 made it a Sharpe of several with no losing day."""
    closes = [9_978.0, 9_983.0, 9_988.0, 9_993.0, 9_998.5]
    lines = [decision_line(T0, 10_000.0, 90_000.0, False, ["agent_timer"], "fallback", "x", None)]
    for day, close in enumerate(closes):
        at_ms = T0 + day * DAY_MS + 20 * HOUR
        lines.append(decision_line(at_ms, close, 90_000.0 + day, True, [], "fallback", "x", None))
    return write_run(run, decisions=lines, fills=[])


def test_first_day_counts_in_sharpe_and_sortino(tmp_path: Path) -> None:
    run = _five_day_run(tmp_path)
    report = build_report(run)
    m = report.metrics
    assert m.total_return_pct == pytest.approx(-0.015)
    # five daily returns, the first -0.22 %: a losing day, a negative Sharpe and Sortino
    assert m.sharpe is not None and m.sharpe < 0
    assert m.sortino is not None and m.sortino < 0
    _check_equity_figures(report, run)


def test_standard_run_matches_the_recomputation(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    report = build_report(run)
    _check_equity_figures(report, run)
    _check_hold_figures(report, run)


_walks = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=30 * HOUR),  # gap to the previous decision
        st.floats(min_value=-0.05, max_value=0.05),  # equity step
        st.floats(min_value=-0.05, max_value=0.05),  # BTC price step
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=examples(60), deadline=None)
@given(walk=_walks, start_hour=st.integers(min_value=0, max_value=23))
def test_random_runs_match_the_recomputation(
    walk: list[tuple[int, float, float]], start_hour: int
) -> None:
    at_ms, equity, price = T0 + start_hour * HOUR, 10_000.0, 50_000.0
    lines = [decision_line(at_ms, equity, price, False, [], "fallback", "x", None)]
    for gap, equity_step, price_step in walk:
        at_ms += gap
        equity *= 1 + equity_step
        price *= 1 + price_step
        lines.append(decision_line(at_ms, equity, price, False, [], "fallback", "x", None))
    with tempfile.TemporaryDirectory() as folder:
        run = write_run(Path(folder), decisions=lines, fills=[])
        report = build_report(run)
        _check_equity_figures(report, run)
        _check_hold_figures(report, run)
