"""``report.html``: one self-contained page (inline SVG, inline CSS, no scripts, no network).

Every string that came from a journal is escaped (``html.escape``): decision reasons and tickers
are untrusted text. ``write_report`` writes both ``report.json`` and ``report.html``.

The charts draw the report's (already downsampled) series. Equity is sampled at decisions, so its
line is drawn as steps (each value holds until the next decision) and a trade marker sits on that
drawn line. Markers are 10 px triangles while they fit; when they would touch each other or there
are more than ``MAX_TRIANGLES``, each becomes a 2 px tick in a strip under the time axis so a long
run's markers do not bury the line. The SVGs scale down with the window (CSS ``max-width``).
"""

from __future__ import annotations

import bisect
import html
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from report.figures import Point, Report, TradeMarker, build_report, report_json_bytes
from report.tables import (
    cost_table,
    days_table,
    hold_table,
    metrics_table,
    months_table,
    parameters_table,
    stamp,
    table,
)
from state.atomic import atomic_write_bytes

CHART_WIDTH: Final = 900
EQUITY_HEIGHT: Final = 320
DRAWDOWN_HEIGHT: Final = 160
LEFT_MARGIN: Final = 76  # room for a y label of AXIS_LABEL_CHARS at 11 px
RIGHT_MARGIN: Final = 16
TOP_MARGIN: Final = 12
EQUITY_BOTTOM: Final = 48  # below the plot: the marker tick strip, then the dates
DRAWDOWN_BOTTOM: Final = 30
AXIS_LABEL_CHARS: Final = 10
LABEL_FONT_PX: Final = 11
MARKER_WIDTH_PX: Final = 10
MAX_TRIANGLES: Final = 100
TICK_WIDTH_PX: Final = 2
TICK_HEIGHT_PX: Final = 6
MARKER_TITLE_FILLS: Final = 5
# the equity line, then one colour per buy-and-hold ticker (cycled)
EQUITY_COLOUR: Final = "#1f4e9c"
HOLD_COLOURS: Final = ("#d08a1c", "#5a9e4b", "#9b4f96", "#888888")
BUY_COLOUR: Final = "#1a8a3a"
SELL_COLOUR: Final = "#c0392b"
_SUFFIXES: Final = ((1e9, "B"), (1e6, "M"))

_CSS: Final = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2330;
       max-width: 980px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { padding: .25em .8em; border-bottom: 1px solid #e3e6ec; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td:first-child { white-space: nowrap; }
.note { color: #5b6475; font-size: .9em; overflow-wrap: anywhere; }
svg { background: #fafbfc; border: 1px solid #e3e6ec; max-width: 100%; height: auto;
      display: block; }
.scroll { overflow-x: auto; max-width: 100%; }
.legend span { margin-right: 1.2em; white-space: nowrap; } .legend { overflow-wrap: anywhere; }
summary { cursor: pointer; font-weight: 600; margin: .5em 0; }
"""


def write_report(run_dir: Path, out_dir: Path | None = None) -> Report:
    """Build the report of ``run_dir`` and write ``report.json`` and ``report.html`` to ``out_dir``
    (default: the run folder). Raises ``report.figures.RunFolderError`` for a bad run folder."""
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
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>vigil report: {e(report.run_dir)}</title><style>{_CSS}</style></head><body>",
        f"<h1>vigil run report</h1><p class='note'>{e(report.run_dir)}</p>",
    ]
    parts += [f"<p class='note'>{e(note)}</p>" for note in report.notes]
    parts.append("<h2>Run</h2>")
    parts.append(parameters_table(report.parameters))
    if report.empty:
        parts.append(
            "<p><strong>Nothing to report: this run has no decisions and no trades.</strong></p>"
        )
    else:
        parts.append("<h2>Equity against buy-and-hold</h2>")
        parts += _equity_section(report)
        parts.append("<h2>Drawdown</h2>")
        parts.append(_drawdown_chart(report.drawdown_pct))
    parts.append("<h2>Figures</h2>")
    parts.append(metrics_table(report))
    parts.append("<h2>Run against buy-and-hold</h2>")
    parts.append(hold_table(report))
    parts.append("<h2>Who decided</h2>")
    parts.append(
        table(
            ("decided by", "reason", "decisions"),
            [(d.decided_by, d.decider_reason, str(d.decisions)) for d in report.deciders],
        )
    )
    if report.cost is not None:
        parts.append("<h2>Model calls per day: by gate layer, model and decider</h2>")
        parts.append(cost_table(report.cost))
    parts.append("<h2>Gate passes per layer</h2>")
    parts.append(table(("layer", "passes"), [(k, str(v)) for k, v in report.gate_passes.items()]))
    parts.append("<h2>Per month (UTC)</h2>")
    parts.append(months_table(report))
    parts.append(
        f"<details><summary>Per day (UTC): {len(report.days):,} days</summary>"
        f"{days_table(report)}</details>"
    )
    parts.append("<h2>What the learner learned</h2>")
    parts += _learning_section(report)
    if report.ledger is not None:
        parts.append("<h2>Paper ledger (final)</h2>")
        parts.append(table(("figure", "value"), sorted(report.ledger.items())))
    parts.append("</body></html>\n")
    return "\n".join(parts)


# --- scales and axes --------------------------------------------------------------------------


class _Scale:
    """Maps (time, value) to SVG coordinates inside the plot area of a chart."""

    def __init__(self, t0: int, t1: int, v0: float, v1: float, height: int, bottom_px: int) -> None:
        self.t0, self.t1, self.v0, self.v1 = t0, t1, v0, v1
        self.height = height
        self.bottom = float(height - bottom_px)  # the time axis

    def x(self, at_ms: int) -> float:
        span = self.t1 - self.t0
        share = (at_ms - self.t0) / span if span else 0.5
        return LEFT_MARGIN + share * (CHART_WIDTH - LEFT_MARGIN - RIGHT_MARGIN)

    def y(self, value: float) -> float:
        share = (value - self.v0) / (self.v1 - self.v0)
        return self.bottom - share * (self.bottom - TOP_MARGIN)


def _padded(low: float, high: float) -> tuple[float, float]:
    pad = (high - low) * 0.05 or max(abs(high) * 0.01, 1.0)
    return low - pad, high + pad


def axis_labels(v0: float, v1: float, unit: str = "") -> list[tuple[float, str]]:
    """Labels for the bottom, middle and top of a value axis: compact (1.23M, 4.5B) for
    magnitudes of a million and up, with one decimal more than tells the labels apart, and at
    most AXIS_LABEL_CHARS characters (unit included) where dropping decimals can make it so:
    a longer label would run past the chart's left edge."""
    values = (v0, (v0 + v1) / 2, v1)
    magnitude = max(abs(v0), abs(v1))
    divisor, suffix = next(((d, s) for d, s in _SUFFIXES if magnitude >= d), (1.0, ""))
    step = (v1 - v0) / 2 / divisor
    decimals = 2 if step <= 0 else min(6, max(0, math.ceil(-math.log10(step)) + 1))
    while True:
        # + 0.0 turns a rounded -0.0 into 0.0 (no "-0.00 %" at the top of the drawdown axis)
        texts = [
            f"{round(v / divisor, decimals) + 0.0:,.{decimals}f}{suffix}{unit}" for v in values
        ]
        if decimals == 0 or max(len(t) for t in texts) <= AXIS_LABEL_CHARS:
            return list(zip(values, texts, strict=True))
        decimals -= 1


def _axes(scale: _Scale, unit: str) -> str:
    e = html.escape
    right = CHART_WIDTH - RIGHT_MARGIN
    parts = [
        f"<line x1='{LEFT_MARGIN}' y1='{scale.bottom:.1f}' x2='{right}' y2='{scale.bottom:.1f}' "
        "stroke='#aab'/>",
        f"<line x1='{LEFT_MARGIN}' y1='{TOP_MARGIN}' x2='{LEFT_MARGIN}' y2='{scale.bottom:.1f}' "
        "stroke='#aab'/>",
    ]
    for value, text in axis_labels(scale.v0, scale.v1, unit):
        parts.append(
            f"<text x='{LEFT_MARGIN - 4}' y='{scale.y(value) + 4:.1f}' "
            f"font-size='{LABEL_FONT_PX}' text-anchor='end'>{e(text)}</text>"
        )
    for at_ms, anchor in ((scale.t0, "start"), (scale.t1, "end")):
        parts.append(
            f"<text x='{scale.x(at_ms):.1f}' y='{scale.height - 6}' font-size='{LABEL_FONT_PX}' "
            f"text-anchor='{anchor}'>{e(stamp(at_ms))}</text>"
        )
    return "".join(parts)


def _svg(height: int, label: str, body: str) -> str:
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{CHART_WIDTH}' height='{height}' "
        f"viewBox='0 0 {CHART_WIDTH} {height}' role='img' aria-label='{html.escape(label)}'>"
        f"{body}</svg>"
    )


def _line_coords(points: Sequence[Point], scale: _Scale) -> str:
    return " ".join(f"{scale.x(p.at_ms):.1f},{scale.y(p.value):.1f}" for p in points)


def _step_coords(points: Sequence[Point], scale: _Scale) -> str:
    """Each value held until the next point, then a vertical jump: how a series sampled at
    decisions really behaves as far as the report knows."""
    coords: list[str] = []
    previous_y = ""
    for p in points:
        x, y = f"{scale.x(p.at_ms):.1f}", f"{scale.y(p.value):.1f}"
        if previous_y and previous_y != y:
            coords.append(f"{x},{previous_y}")
        coords.append(f"{x},{y}")
        previous_y = y
    return " ".join(coords)


def _polyline(coords: str, colour: str, width: float) -> str:
    return f"<polyline fill='none' stroke='{colour}' stroke-width='{width}' points='{coords}'/>"


# --- the equity chart and its markers ---------------------------------------------------------


@dataclass(frozen=True)
class _MarkerGroup:
    """The fills of one side that land on the same pixel column: drawn as one marker."""

    x: float
    side: str
    fills: tuple[TradeMarker, ...]


def _equity_section(report: Report) -> list[str]:
    """The legend, the chart and, when markers became ticks, a note saying so."""
    equity = report.equity
    if not equity:
        return ["<p class='note'>No equity recorded.</p>"]
    lines = list(report.buy_and_hold.values())
    times = [p.at_ms for p in equity] + [m.at_ms for m in report.trade_markers]
    values = [p.value for p in equity] + [p.value for line in lines for p in line]
    low, high = _padded(min(values), max(values))
    scale = _Scale(min(times), max(times), low, high, EQUITY_HEIGHT, EQUITY_BOTTOM)
    groups = _marker_groups(report.trade_markers, scale)
    as_ticks = _crowded(groups)
    body = [_axes(scale, "")]
    for index, line in enumerate(lines):
        colour = HOLD_COLOURS[index % len(HOLD_COLOURS)]
        body.append(_polyline(_line_coords(line, scale), colour, 1.0))
    body.append(_polyline(_step_coords(equity, scale), EQUITY_COLOUR, 2.0))
    if as_ticks:
        body += [_tick(group, scale) for group in groups]
    else:
        body += [_triangle(group, scale, equity) for group in groups]
    chart = _svg(EQUITY_HEIGHT, "equity against buy-and-hold", "".join(body))
    section = [_legend(report, as_ticks), chart]
    if as_ticks:
        section.append(
            f"<p class='note'>{len(report.trade_markers):,} fills are drawn as ticks under the "
            "time axis (buys in the upper row, sells in the lower): as triangles on the line "
            "they would overlap and hide it.</p>"
        )
    return section


def _marker_groups(markers: Sequence[TradeMarker], scale: _Scale) -> list[_MarkerGroup]:
    by_column: dict[tuple[int, str], list[TradeMarker]] = {}
    for marker in markers:
        by_column.setdefault((round(scale.x(marker.at_ms)), marker.side), []).append(marker)
    return sorted(
        (
            _MarkerGroup(x=scale.x(fills[0].at_ms), side=side, fills=tuple(fills))
            for (_, side), fills in by_column.items()
        ),
        key=lambda g: g.x,
    )


def _crowded(groups: Sequence[_MarkerGroup]) -> bool:
    """Triangles would overlap each other (or be too many to leave the line visible)."""
    if len(groups) > MAX_TRIANGLES:
        return True
    return any(b.x - a.x < MARKER_WIDTH_PX for a, b in itertools.pairwise(groups))


def _drawn_value(equity: Sequence[Point], at_ms: int) -> float:
    """The drawn step line's value at ``at_ms``: its last point at or before (else its first)."""
    index = bisect.bisect_right([p.at_ms for p in equity], at_ms) - 1
    return equity[max(index, 0)].value


def _triangle(group: _MarkerGroup, scale: _Scale, equity: Sequence[Point]) -> str:
    x, y = group.x, scale.y(_drawn_value(equity, group.fills[0].at_ms))
    buy = group.side == "buy"
    half = MARKER_WIDTH_PX / 2
    # a triangle pointing up for a buy, down for a sell, its base centre on the line
    tip = y - 7 if buy else y + 7
    base = y + 3 if buy else y - 3
    return (
        f"<polygon points='{x:.1f},{tip:.1f} {x - half:.1f},{base:.1f} {x + half:.1f},"
        f"{base:.1f}' fill='{_side_colour(group.side)}'>{_title(group)}</polygon>"
    )


def _tick(group: _MarkerGroup, scale: _Scale) -> str:
    row = 0 if group.side == "buy" else 1
    top = scale.bottom + 3 + row * (TICK_HEIGHT_PX + 2)
    return (
        f"<rect x='{group.x - TICK_WIDTH_PX / 2:.1f}' y='{top:.1f}' width='{TICK_WIDTH_PX}' "
        f"height='{TICK_HEIGHT_PX}' fill='{_side_colour(group.side)}'>{_title(group)}</rect>"
    )


def _side_colour(side: str) -> str:
    return BUY_COLOUR if side == "buy" else SELL_COLOUR


def _title(group: _MarkerGroup) -> str:
    shown = [
        f"{m.side} {m.quantity:g} {m.ticker} @ {m.price:g} ({stamp(m.at_ms)})"
        for m in group.fills[:MARKER_TITLE_FILLS]
    ]
    if len(group.fills) > MARKER_TITLE_FILLS:
        shown.append(f"and {len(group.fills) - MARKER_TITLE_FILLS} more")
    return f"<title>{html.escape('; '.join(shown))}</title>"


def _legend(report: Report, as_ticks: bool) -> str:
    e = html.escape
    items = [
        f"<span style='color:{EQUITY_COLOUR}'>&#9644; equity (steps: sampled at decisions)</span>"
    ]
    for index, ticker in enumerate(report.buy_and_hold):
        colour = HOLD_COLOURS[index % len(HOLD_COLOURS)]
        items.append(f"<span style='color:{colour}'>&#9644; buy-and-hold {e(ticker)}</span>")
    if as_ticks:
        items.append(f"<span style='color:{BUY_COLOUR}'>&#10073; buy (tick, upper row)</span>")
        items.append(f"<span style='color:{SELL_COLOUR}'>&#10073; sell (tick, lower row)</span>")
    else:
        items.append(f"<span style='color:{BUY_COLOUR}'>&#9650; buy</span>")
        items.append(f"<span style='color:{SELL_COLOUR}'>&#9660; sell</span>")
    return f"<p class='legend'>{''.join(items)}</p>"


# --- the drawdown chart -----------------------------------------------------------------------


LEARNED_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")


def _learning_section(report: Report) -> list[str]:
    """The posterior mean per signal over time (a line each) and the learning counts."""
    counts = report.learning
    agreement = counts.get("regime_agreement", {})
    section = [
        table(
            ("figure", "value"),
            [
                (
                    "decisions whose snapshot had the learner",
                    str(counts.get("decisions_with_learner", 0)),
                ),
                ("decisions the learned weights moved", str(counts.get("moved_decisions", 0))),
                *((f"regime agreement: {k}", str(v)) for k, v in agreement.items()),
            ],
        )
    ]
    lines = report.learned_weights
    if not lines:
        section.append(
            "<p class='note'>No learned weights: the learner was off (--no-memory) or no trade "
            "had closed.</p>"
        )
        return section
    times = [p.at_ms for line in lines.values() for p in line]
    scale = _Scale(min(times), max(times), 0.0, 1.0, DRAWDOWN_HEIGHT, DRAWDOWN_BOTTOM)
    body = [_axes(scale, "")]
    legend = []
    for index, (name, line) in enumerate(lines.items()):
        colour = LEARNED_COLOURS[index % len(LEARNED_COLOURS)]
        body.append(_polyline(_step_coords(line, scale), colour, 1.5))
        legend.append(f"<span style='color:{colour}'>&#9632; {html.escape(name)}</span>")
    section.append(f"<p>{' '.join(legend)}</p>")
    section.append(_svg(DRAWDOWN_HEIGHT, "learned weights", "".join(body)))
    section.append(
        "<p class='note'>Posterior mean per signal (averaged over the tickers' tables in force). "
        "The rule-based decider scales a signal's weight by 0.5 + a Thompson draw from it: above "
        "0.5 the signal gets more say than the fixed regime blend gives it.</p>"
    )
    return section


def _drawdown_chart(drawdown: Sequence[Point]) -> str:
    if not drawdown:
        return "<p class='note'>No equity recorded.</p>"
    negated = [Point(at_ms=p.at_ms, value=-p.value) for p in drawdown]
    deepest = min(p.value for p in negated)
    # drawdown is never above zero: pad below the trough only, so the top of the axis is 0 %
    pad = -deepest * 0.05 or 1.0
    times = [p.at_ms for p in negated]
    scale = _Scale(min(times), max(times), deepest - pad, 0.0, DRAWDOWN_HEIGHT, DRAWDOWN_BOTTOM)
    zero = scale.y(0.0)
    first, last = scale.x(negated[0].at_ms), scale.x(negated[-1].at_ms)
    area = (
        f"<polygon fill='#e8a09a' fill-opacity='0.6' stroke='{SELL_COLOUR}' stroke-width='1' "
        f"points='{first:.1f},{zero:.1f} {_step_coords(negated, scale)} {last:.1f},{zero:.1f}'/>"
    )
    return _svg(DRAWDOWN_HEIGHT, "drawdown", _axes(scale, " %") + area)
