"""``report.html``: one self-contained page (inline SVG, inline CSS, no scripts, no network).

Every string that came from a journal is escaped (``html.escape``): decision reasons and tickers
are untrusted text. ``write_report`` writes both ``report.json`` and ``report.html``.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from runner.report import Point, Report, TradeMarker, build_report, report_json_bytes
from state.atomic import atomic_write_bytes

CHART_WIDTH: Final = 900
EQUITY_HEIGHT: Final = 320
DRAWDOWN_HEIGHT: Final = 160
MARGIN: Final = 56
MAX_LINE_POINTS: Final = 2000
# the equity line, then one colour per buy-and-hold ticker (cycled)
EQUITY_COLOUR: Final = "#1f4e9c"
HOLD_COLOURS: Final = ("#d08a1c", "#5a9e4b", "#9b4f96", "#888888")
BUY_COLOUR: Final = "#1a8a3a"
SELL_COLOUR: Final = "#c0392b"

_CSS: Final = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2330;
       max-width: 980px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { padding: .25em .8em; border-bottom: 1px solid #e3e6ec; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.note { color: #5b6475; font-size: .9em; } svg { background: #fafbfc; border: 1px solid #e3e6ec; }
.legend span { margin-right: 1.2em; white-space: nowrap; }
"""


def write_report(run_dir: Path, out_dir: Path | None = None) -> Report:
    """Build the report of ``run_dir`` and write ``report.json`` and ``report.html`` to ``out_dir``
    (default: the run folder). Raises ``runner.report.RunFolderError`` for a bad run folder."""
    report = build_report(run_dir)
    target = out_dir if out_dir is not None else run_dir
    target.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target / "report.json", report_json_bytes(report))
    atomic_write_bytes(target / "report.html", render_html(report).encode("utf-8"))
    return report


def render_html(report: Report) -> str:
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>vigil report: {e(report.run_dir)}</title><style>{_CSS}</style></head><body>",
        f"<h1>vigil run report</h1><p class='note'>{e(report.run_dir)}</p>",
    ]
    parts += [f"<p class='note'>{e(note)}</p>" for note in report.notes]
    if report.empty:
        parts.append(
            "<p><strong>Nothing to report: this run has no decisions and no trades.</strong></p>"
        )
    else:
        parts.append("<h2>Equity against buy-and-hold</h2>")
        parts.append(_legend(report))
        parts.append(_equity_chart(report))
        parts.append("<h2>Drawdown</h2>")
        parts.append(_drawdown_chart(report.drawdown_pct))
    parts.append("<h2>Figures</h2>")
    parts.append(_metrics_table(report))
    parts.append("<h2>Who decided</h2>")
    parts.append(
        _table(
            ("decided by", "reason", "decisions"),
            [(d.decided_by, d.decider_reason, str(d.decisions)) for d in report.deciders],
        )
    )
    parts.append("<h2>Gate passes per layer</h2>")
    parts.append(_table(("layer", "passes"), [(k, str(v)) for k, v in report.gate_passes.items()]))
    parts.append("<h2>Per day (UTC)</h2>")
    parts.append(
        _table(
            ("day", "decisions", "reviews", "agent calls", "agent failures", "tokens", "cost USD"),
            [
                (
                    d.day,
                    str(d.decisions),
                    str(d.reviews),
                    str(d.agent_calls),
                    str(d.agent_failures),
                    str(d.tokens),
                    f"{d.cost_usd:.4f}",
                )
                for d in report.days
            ],
        )
    )
    if report.ledger is not None:
        parts.append("<h2>Paper ledger (final)</h2>")
        parts.append(_table(("figure", "value"), sorted(report.ledger.items())))
    parts.append("</body></html>\n")
    return "\n".join(parts)


# --- tables -----------------------------------------------------------------------------------


def _fmt(value: float | int | None, unit: str = "", digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    return f"{value:,.{digits}f}{unit}"


def _metrics_table(report: Report) -> str:
    m = report.metrics
    rows = [
        ("start equity", _fmt(m.start_equity_usd, " USD"), "start_equity_usd"),
        ("end equity", _fmt(m.end_equity_usd, " USD"), "end_equity_usd"),
        ("total return", _fmt(m.total_return_pct, " %", 3), "total_return_pct"),
        ("CAGR", _fmt(m.cagr_pct, " %"), "cagr_pct"),
        ("Sharpe (daily, 365 d)", _fmt(m.sharpe), "sharpe"),
        ("Sortino (daily, 365 d)", _fmt(m.sortino), "sortino"),
        ("max drawdown", _fmt(m.max_drawdown_pct, " %", 3), "max_drawdown_pct"),
        ("turnover", _fmt(m.turnover, " x", 3), "turnover"),
        ("trades (fills)", _fmt(m.trades), "trades"),
        ("round trips", _fmt(m.round_trips), "round_trips"),
        ("win rate", _fmt(m.win_rate_pct, " %", 1), "win_rate_pct"),
        ("fees paid", _fmt(m.fees_usd, " USD", 4), "fees_usd"),
        ("realised PnL (fees apart)", _fmt(m.realised_pnl_usd, " USD", 4), "realised_pnl_usd"),
        ("exposure time", _fmt(m.exposure_time_pct, " %", 1), "exposure_time_pct"),
        ("span", _fmt(m.span_days, " days", 2), "span_days"),
        ("agent calls", _fmt(sum(d.agent_calls for d in report.days)), ""),
        ("agent failures", _fmt(sum(d.agent_failures for d in report.days)), ""),
        ("tokens", _fmt(sum(d.tokens for d in report.days)), ""),
        ("agent cost", _fmt(sum(d.cost_usd for d in report.days), " USD", 4), ""),
    ]
    body = [(label, value, report.unavailable.get(key, "")) for label, value, key in rows]
    return _table(("figure", "value", "why n/a"), body)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    lines = [f"<table><thead><tr>{head}</tr></thead><tbody>"]
    for row in rows:
        cells = "".join(
            f"<td class='num'>{e(c)}</td>" if _numeric(c) else f"<td>{e(c)}</td>" for c in row
        )
        lines.append(f"<tr>{cells}</tr>")
    if not rows:
        lines.append(f"<tr><td colspan='{len(header)}' class='note'>none</td></tr>")
    lines.append("</tbody></table>")
    return "".join(lines)


def _numeric(text: str) -> bool:
    head = text.split(" ", maxsplit=1)[0].replace(",", "").lstrip("-")
    return head.replace(".", "", 1).isdigit()


# --- charts -----------------------------------------------------------------------------------


class _Scale:
    """Maps (time, value) to SVG coordinates inside the plot margins."""

    def __init__(self, points: Sequence[Point], height: int, floor_zero: bool = False) -> None:
        times = [p.at_ms for p in points]
        values = [p.value for p in points]
        self.t0, self.t1 = min(times), max(times)
        low, high = min(values), max(values)
        if floor_zero:
            low = min(low, 0.0)
        pad = (high - low) * 0.05 or max(abs(high) * 0.01, 1.0)
        self.v0, self.v1 = low - pad, high + pad
        self.height = height

    def x(self, at_ms: int) -> float:
        span = self.t1 - self.t0
        share = (at_ms - self.t0) / span if span else 0.5
        return MARGIN + share * (CHART_WIDTH - 2 * MARGIN)

    def y(self, value: float) -> float:
        share = (value - self.v0) / (self.v1 - self.v0)
        return self.height - MARGIN / 2 - share * (self.height - MARGIN)


def _thinned(points: Sequence[Point]) -> Sequence[Point]:
    """At most about MAX_LINE_POINTS points, keeping the last (a year of decisions is ~100k
    points, far more than the chart has pixels; report.json keeps them all)."""
    if len(points) <= MAX_LINE_POINTS:
        return points
    stride = math.ceil(len(points) / MAX_LINE_POINTS)
    return [*points[::stride], points[-1]]


def _polyline(points: Sequence[Point], scale: _Scale, colour: str, width: float = 1.5) -> str:
    coords = " ".join(f"{scale.x(p.at_ms):.1f},{scale.y(p.value):.1f}" for p in _thinned(points))
    return f"<polyline fill='none' stroke='{colour}' stroke-width='{width}' points='{coords}'/>"


def _axes(scale: _Scale, unit: str) -> str:
    e = html.escape
    bottom = scale.height - MARGIN / 2
    parts = [
        f"<line x1='{MARGIN}' y1='{bottom:.1f}' x2='{CHART_WIDTH - MARGIN}' y2='{bottom:.1f}' "
        "stroke='#aab'/>",
        f"<line x1='{MARGIN}' y1='{MARGIN / 2:.1f}' x2='{MARGIN}' y2='{bottom:.1f}' stroke='#aab'/>",
    ]
    for value in (scale.v0, (scale.v0 + scale.v1) / 2, scale.v1):
        parts.append(
            f"<text x='{MARGIN - 4}' y='{scale.y(value) + 4:.1f}' font-size='11' "
            f"text-anchor='end'>{e(_short(value))}{e(unit)}</text>"
        )
    for at_ms, anchor in ((scale.t0, "start"), (scale.t1, "end")):
        stamp = datetime.fromtimestamp(at_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")
        parts.append(
            f"<text x='{scale.x(at_ms):.1f}' y='{bottom + 16:.1f}' font-size='11' "
            f"text-anchor='{anchor}'>{e(stamp)}Z</text>"
        )
    return "".join(parts)


def _short(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"


def _svg(height: int, label: str, body: str) -> str:
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{CHART_WIDTH}' height='{height}' "
        f"viewBox='0 0 {CHART_WIDTH} {height}' role='img' aria-label='{html.escape(label)}'>"
        f"{body}</svg>"
    )


def _equity_chart(report: Report) -> str:
    everything = list(report.equity) + [p for line in report.buy_and_hold.values() for p in line]
    if not everything:
        return "<p class='note'>No equity recorded.</p>"
    scale = _Scale(everything, EQUITY_HEIGHT)
    body = [_axes(scale, "")]
    for index, line in enumerate(report.buy_and_hold.values()):
        body.append(_polyline(line, scale, HOLD_COLOURS[index % len(HOLD_COLOURS)], 1.0))
    body.append(_polyline(report.equity, scale, EQUITY_COLOUR, 2.0))
    body += [_marker(m, scale) for m in report.trade_markers if m.equity is not None]
    return _svg(EQUITY_HEIGHT, "equity against buy-and-hold", "".join(body))


def _marker(marker: TradeMarker, scale: _Scale) -> str:
    assert marker.equity is not None
    x, y = scale.x(marker.at_ms), scale.y(marker.equity)
    buy = marker.side == "buy"
    # a triangle pointing up for a buy, down for a sell
    tip = y - 7 if buy else y + 7
    base = y + 3 if buy else y - 3
    title = html.escape(f"{marker.side} {marker.quantity:g} {marker.ticker} @ {marker.price:g}")
    return (
        f"<polygon points='{x:.1f},{tip:.1f} {x - 5:.1f},{base:.1f} {x + 5:.1f},{base:.1f}' "
        f"fill='{BUY_COLOUR if buy else SELL_COLOUR}'><title>{title}</title></polygon>"
    )


def _drawdown_chart(drawdown: Sequence[Point]) -> str:
    if not drawdown:
        return "<p class='note'>No equity recorded.</p>"
    negated = [Point(at_ms=p.at_ms, value=-p.value) for p in drawdown]
    scale = _Scale(negated, DRAWDOWN_HEIGHT, floor_zero=True)
    zero = scale.y(0.0)
    coords = " ".join(f"{scale.x(p.at_ms):.1f},{scale.y(p.value):.1f}" for p in _thinned(negated))
    first, last = scale.x(negated[0].at_ms), scale.x(negated[-1].at_ms)
    area = (
        f"<polygon fill='#e8a09a' fill-opacity='0.6' stroke='{SELL_COLOUR}' stroke-width='1' "
        f"points='{first:.1f},{zero:.1f} {coords} {last:.1f},{zero:.1f}'/>"
    )
    return _svg(DRAWDOWN_HEIGHT, "drawdown", _axes(scale, " %") + area)


def _legend(report: Report) -> str:
    e = html.escape
    items = [f"<span style='color:{EQUITY_COLOUR}'>&#9644; equity</span>"]
    for index, ticker in enumerate(report.buy_and_hold):
        colour = HOLD_COLOURS[index % len(HOLD_COLOURS)]
        items.append(f"<span style='color:{colour}'>&#9644; buy-and-hold {e(ticker)}</span>")
    items.append(f"<span style='color:{BUY_COLOUR}'>&#9650; buy</span>")
    items.append(f"<span style='color:{SELL_COLOUR}'>&#9660; sell</span>")
    return f"<p class='legend'>{''.join(items)}</p>"
