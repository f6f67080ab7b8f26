"""The run report: figures of one run folder (a daemon state dir), computed from its journals.

Inputs (in ``run_dir``): ``logs/decisions.jsonl`` and ``logs/trades.csv`` (required),
``paper_broker.json`` (optional: the paper ledger; a live run has none).

Every figure and its unit:

- **Equity series** (USD): one point per decision line, ``snapshot.portfolio_value`` at ``at_ms``
  (null values skipped), plus the final paper-ledger value (cash + reserved + quantity x last mark
  of each position) at its ``saved_at_ms`` when present. Equity is *sampled at decisions*, so
  moves between two decisions are not seen (drawdown can be deeper than reported).
- **Buy-and-hold** per ticker (USD): ``start_equity * price_t / price_0`` from the snapshots'
  ``tickers[t].price``, ``price_0`` the ticker's first recorded price.
- ``total_return_pct`` = (last / first - 1) x 100.
- ``cagr_pct`` = ((last / first) ** (365 / span_days) - 1) x 100; None (with a reason) when the
  run spans < 30 days (``MIN_CAGR_SPAN_DAYS``): raising a few days' return to the power 365/days
  gives absurd figures (a 4-day +10 % is +736,000 % a year), so short runs are not annualised.
- **Daily series**: last equity value per UTC day with an equity point, preceded by the run's
  first value (the starting equity); daily returns r_i = v_i / v_(i-1) - 1, so r_1 is day 1's
  close against the start: no day is left out.
- ``sharpe`` = mean(r) / stdev(r, sample) x sqrt(365), risk-free 0. ``sortino`` = mean(r) /
  sqrt(mean(min(r, 0)^2)) x sqrt(365). None (with a reason) with fewer than 2 daily returns
  (a run on a single UTC day), a zero deviation, or no losing day (Sortino).
- ``max_drawdown_pct`` = max over t of (1 - v_t / max_{s<=t} v_s) x 100, on the equity series.
- ``trades`` = fills in trades.csv. ``round_trips``: sells matched FIFO against earlier buys of the
  same ticker; one round trip per sell fill, its PnL = sum(qty x (sell - buy price)) minus the sell
  fee and the matched share of the buy fees. ``win_rate_pct`` = winning round trips / round trips.
- ``realised_pnl_usd`` = sum over sells of qty x (sell - FIFO buy price), fees apart (the ledger's
  convention). ``fees_usd`` = sum of ``fee_usd``.
- ``turnover`` (x) = traded notional (sum qty x price) / mean equity of the series.
- ``exposure_time_pct`` = share of the time between the first and last decision during which the
  previous decision's snapshot had an open position.
- ``buy_and_hold_figures`` per ticker: total return, max drawdown, Sharpe and Sortino of its
  buy-and-hold line, by the same formulas as the run's (from the first decision with a price).
- ``parameters``: what the run was asked (``report.params``): span, tickers, decider, seed, data
  dir, memory on/off, config digest; from ``replay.json``, "n/a" with a reason where a live state
  dir has no record of one.
- Gate passes per layer: each ``trigger`` reason counted by its prefix before the first ``:``.
- Per UTC day: decisions; Claude position reviews (``review`` lines); agent calls (decision and
  review lines that were billed (``usage``) or list tries (``attempts``)); ``agent_failure``
  lines; tokens (input + output + cache creation + cache read) and cost (USD) from ``usage``.
- Per UTC month: the days' activity summed, the month's last equity value and its return
  ``return_pct`` = (that value / the previous month's last value - 1) x 100 (the run's first
  value for the first month); None for a month without an equity point.
- Who decided: decision counts by (``decided_by``, ``decider_reason``).
- What was learned (``learning``): the learner's posterior mean per signal over time, decisions
  the learned weights moved, regime agreement counts; see ``report.learning``.

The series in the report (``equity``, ``drawdown_pct``, ``buy_and_hold``) are what the charts
draw: at most ``MAX_SERIES_POINTS`` points each (``downsample``: the first, the last and each
bucket's lowest and highest point, so peaks and troughs survive). A year of decisions is ~100k
points, far more than a chart has pixels, and nothing reads the full series back from
report.json. Every figure above is computed on the full series (``equity_points`` says how
many points that was); trade markers carry the full series' equity at their fill.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

import orjson
from pydantic import BaseModel, ConfigDict

from broker.paper_store import PaperBookDocument
from core.clock import RECORDING_YEARS, is_recording_time
from market.guard import is_price
from report.activity import (
    DayActivity,
    DeciderCount,
    MonthSummary,
    day_activity,
    decider_counts,
    gate_passes,
    month_summaries,
)
from report.cost import CostSummary, cost_summary
from report.learning import LearningFigures, learning_figures
from report.memory_section import memory_section
from report.metrics import (
    DAYS_PER_YEAR,
    MIN_CAGR_SPAN_DAYS,
    MS_PER_DAY,
    Fill,
    HoldFigures,
    Metrics,
    compute_metrics,
    drawdown_series,
    hold_figures,
)
from report.metrics import Series as _Series
from report.params import RunParameters, run_parameters
from report.run_files import (
    RunFolderError,
    cycles_not_collected,
    ledger_figures,
    ledger_value,
    read_fills,
    read_journal,
    read_ledger,
)
from state.line_text import terminal_safe_json_bytes
from state.segments import segments

MAX_SERIES_POINTS: Final = 2000
#: more than all the money there is: a portfolio value above it is a corrupt journal value
MAX_EQUITY_USD: Final = 1e15
EQUITY_SAMPLING_NOTE: Final = (
    "Equity is sampled at decisions (plus the final ledger value): moves between two decisions "
    "are not seen, so drawdown may be deeper than shown."
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Point(_Frozen):
    at_ms: int
    value: float


class TradeMarker(_Frozen):
    at_ms: int
    ticker: str
    side: str
    quantity: float
    price: float
    equity: float | None  # the full equity series' value at the fill (last point at or before it)


class Report(_Frozen):
    run_dir: str
    empty: bool
    notes: tuple[str, ...]
    unavailable: dict[str, str]  # metric -> why it is None
    metrics: Metrics
    equity_points: int  # points of the full equity series the figures use
    equity: tuple[Point, ...]  # downsampled for drawing (see the module docstring)
    drawdown_pct: tuple[Point, ...]  # of the full series, then downsampled
    buy_and_hold: dict[str, tuple[Point, ...]]  # downsampled
    buy_and_hold_figures: dict[str, HoldFigures]  # of each full buy-and-hold line
    parameters: RunParameters  # what the run was asked (replay.json), "n/a" with a reason
    trade_markers: tuple[TradeMarker, ...]
    gate_passes: dict[str, int]
    days: tuple[DayActivity, ...]
    months: tuple[MonthSummary, ...]
    deciders: tuple[DeciderCount, ...]
    #: model calls per gate layer, model and decider, per day of the run (None: no model call)
    cost: CostSummary | None = None
    ledger: dict[str, str] | None  # the paper ledger's own figures (Decimal strings) if present
    learned_weights: dict[str, tuple[Point, ...]]  # signal -> posterior mean, downsampled
    learning: dict[str, Any]  # decisions_with_learner, moved_decisions, regime_agreement
    memory: dict[str, Any] | None = None  # report/memory_section.py


def build_report(run_dir: Path) -> Report:
    """Read the run folder and compute every figure. Raises ``RunFolderError`` for missing files."""
    with cycles_not_collected():
        return _build_report(run_dir)


def _build_report(run_dir: Path) -> Report:
    decisions_path = run_dir / "logs" / "decisions.jsonl"
    trades_path = run_dir / "logs" / "trades.csv"
    # a journal may be rotated: its segments count, even with no live file (a crash mid-rotation)
    missing = [str(p) for p in (decisions_path, trades_path) if not segments(p)]
    if missing:
        raise RunFolderError(f"not a run folder: missing {', '.join(missing)}")
    notes = [EQUITY_SAMPLING_NOTE]
    records, torn = read_journal(decisions_path)
    if torn:
        notes.append(f"skipped an incomplete last line of {decisions_path.name} ({torn} bytes)")
    decisions = sorted(
        (r for r in records if r.get("type", "decision") == "decision" and "at_ms" in r),
        key=lambda r: int(r["at_ms"]),
    )
    fills = read_fills(trades_path)
    ledger_doc = read_ledger(run_dir / "paper_broker.json")
    equity = _equity_series(decisions, ledger_doc, notes)
    if not decisions and not fills:
        notes.append("nothing to report: no decisions and no trades in this run")
    unavailable: dict[str, str] = {}
    drawdown = drawdown_series(equity)
    metrics = compute_metrics(equity, drawdown, decisions, fills, unavailable)
    hold = _buy_and_hold(decisions, equity)
    longest = max([len(equity), len(drawdown), *(len(line) for line in hold.values())])
    if longest > MAX_SERIES_POINTS:
        notes.append(
            f"the charts and report.json's series hold at most {MAX_SERIES_POINTS:,} points each "
            "(the first, the last and each stretch's lowest and highest); every figure uses all "
            f"{len(equity):,} equity points"
        )
    days = day_activity(records)
    learned = learning_figures(decisions)
    return Report(
        run_dir=str(run_dir),
        empty=not decisions and not fills,
        notes=tuple(notes),
        unavailable=unavailable,
        metrics=metrics,
        equity_points=len(equity),
        equity=_points(downsample(equity)),
        drawdown_pct=_points(downsample(drawdown)),
        buy_and_hold={ticker: _points(downsample(line)) for ticker, line in hold.items()},
        buy_and_hold_figures={ticker: hold_figures(line) for ticker, line in hold.items()},
        parameters=run_parameters(run_dir, decisions),
        trade_markers=tuple(_markers(fills, equity)),
        gate_passes=dict(sorted(gate_passes(decisions).items())),
        days=tuple(days),
        months=tuple(month_summaries(days, equity)),
        deciders=tuple(decider_counts(decisions)),
        cost=_cost(records, len(days)),
        ledger=ledger_figures(ledger_doc),
        learned_weights={name: _points(downsample(line)) for name, line in learned.weights.items()},
        learning=_learning_counts(learned),
        memory=memory_section(run_dir, records),
    )


def _learning_counts(learned: LearningFigures) -> dict[str, Any]:
    return learned.model_dump(exclude={"weights"})


def _cost(records: list[dict[str, Any]], days: int) -> CostSummary | None:
    summary = cost_summary(records, float(days))
    return summary if summary.total.calls else None


def downsample(
    points: Sequence[tuple[int, float]], max_points: int = MAX_SERIES_POINTS
) -> list[tuple[int, float]]:
    """At most ``max_points`` of ``points``, in their order: the first, the last, and the lowest
    and highest point of each of (max_points - 2) // 2 equal-count buckets of the rest. Keeping
    both extremes (not every n-th point) is what lets a drawn drawdown trough or equity peak
    survive: the chart's line still reaches every bucket's range."""
    if max_points < 4:
        raise ValueError(f"max_points must be at least 4, got {max_points}")
    if len(points) <= max_points:
        return list(points)
    inner = len(points) - 2
    buckets = (max_points - 2) // 2
    values = [p[1] for p in points]
    kept = [points[0]]
    for bucket in range(buckets):
        start = 1 + bucket * inner // buckets
        end = 1 + (bucket + 1) * inner // buckets
        if start == end:
            continue
        low = min(range(start, end), key=values.__getitem__)
        high = max(range(start, end), key=values.__getitem__)
        kept += [points[i] for i in sorted({low, high})]
    kept.append(points[-1])
    return kept


def _points(series: Iterable[tuple[int, float]]) -> tuple[Point, ...]:
    return tuple(Point(at_ms=at_ms, value=value) for at_ms, value in series)


# --- series -----------------------------------------------------------------------------------


def _equity_series(
    decisions: list[dict[str, Any]], ledger_doc: PaperBookDocument | None, notes: list[str]
) -> _Series:
    """From decisions sorted by time."""
    points = []
    corrupt = 0
    for record in decisions:
        value = (record.get("snapshot") or {}).get("portfolio_value")
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            if 0 <= value <= MAX_EQUITY_USD:
                points.append((int(record["at_ms"]), float(value)))
            else:
                corrupt += 1
    if corrupt:
        notes.append(
            f"left out {corrupt} portfolio value(s) outside 0 .. {MAX_EQUITY_USD:g} USD "
            "(not an equity: a corrupt journal value)"
        )
    if ledger_doc is None:
        return points
    final = ledger_value(ledger_doc)
    saved_at_ms = ledger_doc.saved_at_ms
    if final is None:
        notes.append("final ledger value left out: an open position has no usable mark price")
    elif not is_recording_time(saved_at_ms):
        notes.append(
            f"final ledger value left out: paper_broker.json's saved_at_ms {saved_at_ms} is not "
            f"a time within {RECORDING_YEARS}"
        )
    elif not 0 <= final <= MAX_EQUITY_USD:  # also NaN: cash or a quantity of 1e400 and the like
        notes.append(
            f"final ledger value left out: {final!r} USD is not an equity (paper_broker.json "
            "holds a corrupt amount)"
        )
    elif points and saved_at_ms < points[-1][0]:
        notes.append("final ledger value left out: paper_broker.json predates the last decision")
    else:
        points.append((ledger_doc.saved_at_ms, final))
    return points


def _buy_and_hold(decisions: list[dict[str, Any]], equity: _Series) -> dict[str, _Series]:
    """From decisions sorted by time."""
    if not equity:
        return {}
    start = equity[0][1]
    first_price: dict[str, float] = {}
    lines: dict[str, _Series] = defaultdict(list)
    for record in decisions:
        tickers = (record.get("snapshot") or {}).get("tickers") or {}
        at_ms = int(record["at_ms"])
        # each ticker's line only takes its own points: no order among a record's tickers needed
        for ticker, view in tickers.items():
            price = (view or {}).get("price")
            if not is_price(price):
                continue  # the market guard's bound: a price past it never reached a decision
            base = first_price.get(ticker)
            if base is None:
                base = first_price[ticker] = float(price)
            value = start * price / base
            if math.isfinite(value):  # a first price of ~1e-300 makes later points overflow
                lines[ticker].append((at_ms, value))
    return dict(sorted(lines.items()))


def _markers(fills: list[Fill], equity: _Series) -> list[TradeMarker]:
    """Each fill with the equity line's value: the last point at or before it (else the first)."""
    times = [at_ms for at_ms, _ in equity]
    markers = []
    for f in fills:
        index = max(bisect.bisect_right(times, f.at_ms) - 1, 0)
        markers.append(
            TradeMarker(
                at_ms=f.at_ms,
                ticker=f.ticker,
                side=f.side,
                quantity=f.quantity,
                price=f.price,
                equity=equity[index][1] if equity else None,
            )
        )
    return markers


def report_json_bytes(report: Report) -> bytes:
    """report.json's exact bytes: sorted keys, indented, final newline (equal reports, equal bytes)."""
    data = orjson.dumps(
        report.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2
    )
    return terminal_safe_json_bytes(data) + b"\n"  # orjson writes U+009B (CSI) raw


__all__ = [
    "DAYS_PER_YEAR",
    "MAX_SERIES_POINTS",
    "MIN_CAGR_SPAN_DAYS",
    "MS_PER_DAY",
    "DayActivity",
    "DeciderCount",
    "HoldFigures",
    "Metrics",
    "MonthSummary",
    "Point",
    "Report",
    "RunFolderError",
    "RunParameters",
    "TradeMarker",
    "build_report",
    "downsample",
    "report_json_bytes",
]
