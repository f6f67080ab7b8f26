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
- **Daily series**: last equity value per UTC day; daily returns r_i = v_i / v_(i-1) - 1.
- ``sharpe`` = mean(r) / stdev(r, sample) x sqrt(365), risk-free 0. ``sortino`` = mean(r) /
  sqrt(mean(min(r, 0)^2)) x sqrt(365). None (with a reason) with fewer than 2 daily returns
  (a run spanning < 2 UTC day changes), a zero deviation, or no losing day (Sortino).
- ``max_drawdown_pct`` = max over t of (1 - v_t / max_{s<=t} v_s) x 100, on the equity series.
- ``trades`` = fills in trades.csv. ``round_trips``: sells matched FIFO against earlier buys of the
  same ticker; one round trip per sell fill, its PnL = sum(qty x (sell - buy price)) minus the sell
  fee and the matched share of the buy fees. ``win_rate_pct`` = winning round trips / round trips.
- ``realised_pnl_usd`` = sum over sells of qty x (sell - FIFO buy price), fees apart (the ledger's
  convention). ``fees_usd`` = sum of ``fee_usd``.
- ``turnover`` (x) = traded notional (sum qty x price) / mean equity of the series.
- ``exposure_time_pct`` = share of the time between the first and last decision during which the
  previous decision's snapshot had an open position.
- Gate passes per layer: each ``trigger`` reason counted by its prefix before the first ``:``.
- Per UTC day: decisions; Claude position reviews (``review`` lines); agent calls (decision and
  review lines that were billed (``usage``) or list tries (``attempts``)); ``agent_failure``
  lines; tokens (input + output + cache creation + cache read) and cost (USD) from ``usage``.
- Per UTC month: the days' activity summed, the month's last equity value and its return
  ``return_pct`` = (that value / the previous month's last value - 1) x 100 (the run's first
  value for the first month); None for a month without an equity point.
- Who decided: decision counts by (``decided_by``, ``decider_reason``).

The series in the report (``equity``, ``drawdown_pct``, ``buy_and_hold``) are what the charts
draw: at most ``MAX_SERIES_POINTS`` points each (``downsample``: the first, the last and each
bucket's lowest and highest point, so peaks and troughs survive). A year of decisions is ~100k
points, far more than a chart has pixels, and nothing reads the full series back from
report.json. Every figure above is computed on the full series (``equity_points`` says how
many points that was); trade markers carry the full series' equity at their fill.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import statistics
from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import orjson
from pydantic import BaseModel, ConfigDict

from broker.paper_store import InvalidPaperStateError, PaperBookDocument, parse_document
from state.records import (
    DecisionRecord,
    JournalLineError,
    JournalReader,
    JournalRecord,
    ReviewRecord,
    TradesFileError,
    read_trades,
)

DAYS_PER_YEAR: Final = 365
MS_PER_DAY: Final = 86_400_000
MIN_CAGR_SPAN_DAYS: Final = 30
MAX_SERIES_POINTS: Final = 2000
EQUITY_SAMPLING_NOTE: Final = (
    "Equity is sampled at decisions (plus the final ledger value): moves between two decisions "
    "are not seen, so drawdown may be deeper than shown."
)

# (at_ms, value): the full series stay plain tuples; only the downsampled ones become Points
_Series = list[tuple[int, float]]


class RunFolderError(ValueError):
    """The run folder lacks a required file or holds one that cannot be read; nothing to report."""


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


class DayActivity(_Frozen):
    day: str  # YYYY-MM-DD, UTC
    decisions: int
    reviews: int  # the tracker's Claude position reviews
    agent_calls: int  # Claude calls by decisions and reviews (billed or tried)
    agent_failures: int  # agent_failure lines
    tokens: int
    cost_usd: float


class MonthSummary(_Frozen):
    month: str  # YYYY-MM, UTC
    active_days: int  # days with a journal line
    decisions: int
    reviews: int
    agent_calls: int
    agent_failures: int
    tokens: int
    cost_usd: float
    end_equity_usd: float | None  # the month's last equity point
    return_pct: float | None  # against the previous month's last point (the run's first)


class DeciderCount(_Frozen):
    decided_by: str
    decider_reason: str
    decisions: int


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
    trade_markers: tuple[TradeMarker, ...]
    gate_passes: dict[str, int]
    days: tuple[DayActivity, ...]
    months: tuple[MonthSummary, ...]
    deciders: tuple[DeciderCount, ...]
    ledger: dict[str, str] | None  # the paper ledger's own figures (Decimal strings) if present


class _Fill(_Frozen):
    at_ms: int
    ticker: str
    side: str
    quantity: float
    price: float
    fee_usd: float


def build_report(run_dir: Path) -> Report:
    """Read the run folder and compute every figure. Raises ``RunFolderError`` for missing files."""
    decisions_path = run_dir / "logs" / "decisions.jsonl"
    trades_path = run_dir / "logs" / "trades.csv"
    missing = [str(p) for p in (decisions_path, trades_path) if not p.is_file()]
    if missing:
        raise RunFolderError(f"not a run folder: missing {', '.join(missing)}")
    notes = [EQUITY_SAMPLING_NOTE]
    records, torn = _read_journal(decisions_path)
    if torn:
        notes.append(f"skipped an incomplete last line of {decisions_path.name} ({torn} bytes)")
    decisions = sorted(
        (r for r in records if r.get("type", "decision") == "decision" and "at_ms" in r),
        key=lambda r: int(r["at_ms"]),
    )
    fills = _read_fills(trades_path)
    ledger_doc = _read_ledger(run_dir / "paper_broker.json")
    equity = _equity_series(decisions, ledger_doc, notes)
    if not decisions and not fills:
        notes.append("nothing to report: no decisions and no trades in this run")
    unavailable: dict[str, str] = {}
    drawdown = _drawdown_series(equity)
    metrics = _metrics(equity, drawdown, decisions, fills, unavailable)
    hold = _buy_and_hold(decisions, equity)
    longest = max([len(equity), len(drawdown), *(len(line) for line in hold.values())])
    if longest > MAX_SERIES_POINTS:
        notes.append(
            f"the charts and report.json's series hold at most {MAX_SERIES_POINTS:,} points each "
            "(the first, the last and each stretch's lowest and highest); every figure uses all "
            f"{len(equity):,} equity points"
        )
    days = _days(records)
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
        trade_markers=tuple(_markers(fills, equity)),
        gate_passes=dict(sorted(_gate_passes(decisions).items())),
        days=tuple(days),
        months=tuple(_months(days, equity)),
        deciders=tuple(_deciders(decisions)),
        ledger=_ledger_figures(ledger_doc),
    )


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


# --- reading ----------------------------------------------------------------------------------


def _read_journal(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The report's fields of each record of a journal (``_projected``), and the byte length of a
    torn last line it skipped (a report reads a possibly live or crashed run: it says so instead
    of failing; the daemon repairs the tail when it opens the journal)."""
    reader = JournalReader(path)
    try:
        records = [_projected(record) for record in reader]
    except JournalLineError as exc:
        raise RunFolderError(str(exc)) from None
    return records, reader.torn_bytes


def _projected(record: JournalRecord) -> dict[str, Any]:
    """Only what the report reads: a real decision line is ~8 kB of JSON (the whole snapshot
    and agent answer), and a year holds ~100k of them, too many to keep whole in memory."""
    kept: dict[str, Any] = {"type": record.type}
    if record.at_ms is not None:
        kept["at_ms"] = record.at_ms
    if isinstance(record, ReviewRecord):
        kept.update(usage=record.usage, attempts=record.attempts)
    if not isinstance(record, DecisionRecord):
        return kept
    kept.update(
        decided_by=record.decided_by,
        decider_reason=record.decider_reason,
        trigger=record.trigger,
        usage=record.usage,
        attempts=record.attempts,
    )
    snapshot = record.snapshot
    if snapshot is not None:
        tickers = snapshot.get("tickers")
        kept["snapshot"] = {
            "portfolio_value": snapshot.get("portfolio_value"),
            "open_positions": bool(snapshot.get("open_positions")),
            "tickers": {
                ticker: {"price": view.get("price")}
                for ticker, view in (tickers.items() if isinstance(tickers, dict) else ())
                if isinstance(view, dict)
            },
        }
    return kept


def _read_fills(path: Path) -> list[_Fill]:
    try:
        rows = read_trades(path)
    except TradesFileError as exc:
        raise RunFolderError(str(exc)) from None
    fills = [
        _Fill(
            at_ms=row.at_ms,
            ticker=row.ticker,
            side=row.side,
            quantity=row.quantity,
            price=row.price,
            fee_usd=row.fee_usd or 0.0,  # a fee not known yet counts as none
        )
        for row in rows
    ]
    return sorted(fills, key=lambda f: f.at_ms)


def _read_ledger(path: Path) -> PaperBookDocument | None:
    if not path.is_file():
        return None
    try:
        return parse_document(path.read_bytes())
    except InvalidPaperStateError as exc:
        raise RunFolderError(f"{path}: {exc}") from None


def _ledger_value(doc: PaperBookDocument) -> float | None:
    """Cash + reserved + each position at its last mark; None if a position has no mark."""
    ledger = doc.ledger
    value = float(ledger.cash_usd + ledger.reserved_usd)
    for ticker, position in ledger.positions.items():
        mark = doc.marks.get(ticker)
        if mark is None:
            return None
        value += float(position.quantity) * mark.price
    return value


def _ledger_figures(doc: PaperBookDocument | None) -> dict[str, str] | None:
    if doc is None:
        return None
    ledger = doc.ledger
    return {
        "starting_cash_usd": str(ledger.starting_cash_usd),
        "cash_usd": str(ledger.cash_usd),
        "fees_paid_usd": str(ledger.fees_paid_usd),
        "realised_pnl_usd": str(ledger.realised_pnl_usd),
        "open_positions": str(len(ledger.positions)),
    }


# --- series -----------------------------------------------------------------------------------


def _equity_series(
    decisions: list[dict[str, Any]], ledger_doc: PaperBookDocument | None, notes: list[str]
) -> _Series:
    """From decisions sorted by time."""
    points = []
    for record in decisions:
        value = (record.get("snapshot") or {}).get("portfolio_value")
        if isinstance(value, (int, float)) and math.isfinite(value):
            points.append((int(record["at_ms"]), float(value)))
    if ledger_doc is None:
        return points
    final = _ledger_value(ledger_doc)
    if final is None:
        notes.append("final ledger value left out: an open position has no mark price")
    elif points and ledger_doc.saved_at_ms < points[-1][0]:
        notes.append("final ledger value left out: paper_broker.json predates the last decision")
    else:
        points.append((ledger_doc.saved_at_ms, final))
    return points


def _drawdown_series(equity: _Series) -> _Series:
    peak = -math.inf
    series = []
    for at_ms, value in equity:
        peak = max(peak, value)
        series.append((at_ms, (1.0 - value / peak) * 100.0 if peak > 0 else 0.0))
    return series


def _buy_and_hold(decisions: list[dict[str, Any]], equity: _Series) -> dict[str, _Series]:
    """From decisions sorted by time."""
    if not equity:
        return {}
    start = equity[0][1]
    first_price: dict[str, float] = {}
    lines: dict[str, _Series] = defaultdict(list)
    for record in decisions:
        tickers = (record.get("snapshot") or {}).get("tickers") or {}
        for ticker, view in sorted(tickers.items()):
            price = (view or {}).get("price")
            if not isinstance(price, (int, float)) or price <= 0:
                continue
            base = first_price.setdefault(ticker, float(price))
            lines[ticker].append((int(record["at_ms"]), start * price / base))
    return dict(sorted(lines.items()))


def _markers(fills: list[_Fill], equity: _Series) -> list[TradeMarker]:
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


def _daily_closes(equity: _Series) -> list[float]:
    by_day: dict[int, float] = {}
    for at_ms, value in equity:
        by_day[at_ms // MS_PER_DAY] = value  # sorted input: the last one wins
    return [by_day[day] for day in sorted(by_day)]


# --- metrics ----------------------------------------------------------------------------------


def _metrics(
    equity: _Series,
    drawdown: _Series,
    decisions: list[dict[str, Any]],
    fills: list[_Fill],
    unavailable: dict[str, str],
) -> Metrics:
    first = equity[0][1] if equity else None
    last = equity[-1][1] if equity else None
    span_days = (equity[-1][0] - equity[0][0]) / MS_PER_DAY if equity else 0.0
    total_return = None
    if first is not None and last is not None and first > 0:
        total_return = (last / first - 1.0) * 100.0
    else:
        unavailable["total_return_pct"] = "no equity recorded (no decision had a portfolio value)"
    cagr = _cagr(first, last, span_days, unavailable) if total_return is not None else None
    sharpe, sortino = _risk_ratios(_daily_closes(equity), unavailable)
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


def _risk_ratios(
    closes: list[float], unavailable: dict[str, str]
) -> tuple[float | None, float | None]:
    returns = [b / a - 1.0 for a, b in itertools.pairwise(closes) if a > 0]
    if len(returns) < 2:
        reason = f"{len(returns)} daily return(s): need at least 2 (a run spanning >= 2 days)"
        unavailable["sharpe"] = unavailable["sortino"] = reason
        return None, None
    mean = statistics.fmean(returns)
    stdev = statistics.stdev(returns)
    downside = math.sqrt(statistics.fmean(min(r, 0.0) ** 2 for r in returns))
    sharpe = mean / stdev * math.sqrt(DAYS_PER_YEAR) if stdev > 0 else None
    sortino = mean / downside * math.sqrt(DAYS_PER_YEAR) if downside > 0 else None
    if sharpe is None:
        unavailable["sharpe"] = "daily returns have zero deviation"
    if sortino is None:
        unavailable["sortino"] = "no losing day: downside deviation is zero"
    return sharpe, sortino


def _round_trips(fills: list[_Fill]) -> tuple[list[float], float]:
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


def _gate_passes(decisions: list[dict[str, Any]]) -> Counter[str]:
    passes: Counter[str] = Counter()
    for record in decisions:
        for reason in record.get("trigger") or []:
            passes[str(reason).split(":", 1)[0]] += 1
    return passes


def _day(at_ms: int) -> str:
    return _day_name(at_ms // MS_PER_DAY)


@functools.cache
def _day_name(day_number: int) -> str:
    """YYYY-MM-DD of a UTC day counted from the epoch (a year's 100k lines fall on 365 days)."""
    return datetime.fromtimestamp(day_number * 86_400, tz=UTC).strftime("%Y-%m-%d")


_DAY_FIELDS: Final = ("decisions", "reviews", "agent_calls", "agent_failures", "tokens", "cost_usd")


_TOKEN_FIELDS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def _days(records: list[dict[str, Any]]) -> list[DayActivity]:
    """Per UTC day: decisions, Claude calls (decisions and position reviews), tokens, cost."""
    rows: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(_DAY_FIELDS, 0.0))
    for record in records:
        kind = record.get("type", "decision")
        if "at_ms" not in record or kind not in {"decision", "review", "agent_failure"}:
            continue
        row = rows[_day(int(record["at_ms"]))]
        if kind == "agent_failure":
            row["agent_failures"] += 1
            continue
        row["decisions"] += kind == "decision"
        row["reviews"] += kind == "review"
        usage = record.get("usage")
        if _called_claude(record):
            row["agent_calls"] += 1
        if isinstance(usage, dict):
            row["tokens"] += sum(int(usage.get(k) or 0) for k in _TOKEN_FIELDS)
            row["cost_usd"] += float(usage.get("cost_usd") or 0.0)
    return [
        DayActivity(
            day=day,
            decisions=int(r["decisions"]),
            reviews=int(r["reviews"]),
            agent_calls=int(r["agent_calls"]),
            agent_failures=int(r["agent_failures"]),
            tokens=int(r["tokens"]),
            cost_usd=r["cost_usd"],
        )
        for day, r in sorted(rows.items())
    ]


def _months(days: list[DayActivity], equity: _Series) -> list[MonthSummary]:
    """The days' activity per UTC month, with each month's last equity point and its return."""
    activity: dict[str, list[DayActivity]] = defaultdict(list)
    for day in days:
        activity[day.day[:7]].append(day)
    month_end: dict[str, float] = {}
    for at_ms, value in equity:
        month_end[_day(at_ms)[:7]] = value  # sorted input: the last one wins
    previous = equity[0][1] if equity else None
    summaries = []
    for month in sorted(activity.keys() | month_end.keys()):
        rows = activity.get(month, [])
        end = month_end.get(month)
        change = None
        if end is not None and previous is not None and previous > 0:
            change = (end / previous - 1.0) * 100.0
        previous = end if end is not None else previous
        summaries.append(
            MonthSummary(
                month=month,
                active_days=len(rows),
                decisions=sum(d.decisions for d in rows),
                reviews=sum(d.reviews for d in rows),
                agent_calls=sum(d.agent_calls for d in rows),
                agent_failures=sum(d.agent_failures for d in rows),
                tokens=sum(d.tokens for d in rows),
                cost_usd=sum(d.cost_usd for d in rows),
                end_equity_usd=end,
                return_pct=change,
            )
        )
    return summaries


def _called_claude(record: dict[str, Any]) -> bool:
    """A decision or review that asked Claude: it was billed or it lists tries."""
    return isinstance(record.get("usage"), dict) or bool(record.get("attempts"))


def _deciders(decisions: list[dict[str, Any]]) -> list[DeciderCount]:
    counts = Counter(
        (str(r.get("decided_by") or "unknown"), str(r.get("decider_reason") or ""))
        for r in decisions
    )
    return [
        DeciderCount(decided_by=by, decider_reason=why, decisions=n)
        for (by, why), n in sorted(counts.items())
    ]


def report_json_bytes(report: Report) -> bytes:
    """report.json's exact bytes: sorted keys, indented, final newline (equal reports, equal bytes)."""
    return (
        orjson.dumps(
            report.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2
        )
        + b"\n"
    )
