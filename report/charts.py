"""The report's charts as specs (plain JSON) that ``static/report_charts.js`` draws with uPlot.

Every figure is decided here, so it is tested without a browser: the x and y ranges, the y axis's
three labels (``axis_labels``: compact, and short enough for the axis's width), which series are
steps, and the trade markers. Equity is sampled at decisions, so its line is drawn as steps (each
value holds until the next decision) and a marker sits on that drawn line. Markers are 10 px
triangles while they fit; when they would touch each other on the 900 px chart or there are more
than ``MAX_TRIANGLES``, each becomes a 2 px tick in a strip under the time axis so a long run's
markers do not bury the line. A dashed line marks the starting equity.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from report.figures import Point, Report, TradeMarker
from report.tables import stamp

CHART_WIDTH: Final = 900
EQUITY_HEIGHT: Final = 320
DRAWDOWN_HEIGHT: Final = 160
LEFT_MARGIN: Final = 76  # the y axis: room for a label of AXIS_LABEL_CHARS at 11 px
RIGHT_MARGIN: Final = 40  # room for half the last time label
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
BASELINE_COLOUR: Final = "#7a8394"
BUY_COLOUR: Final = "#1a8a3a"
SELL_COLOUR: Final = "#c0392b"
DRAWDOWN_FILL: Final = "rgba(232, 160, 154, 0.6)"
LEARNED_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")
_SUFFIXES: Final = ((1e9, "B"), (1e6, "M"))


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


def _padded(low: float, high: float) -> tuple[float, float]:
    pad = (high - low) * 0.05 or max(abs(high) * 0.01, 1.0)
    return low - pad, high + pad


@dataclass(frozen=True)
class Line:
    label: str
    colour: str
    points: Sequence[Point]
    width: float = 1.0
    step: bool = False
    fill: str | None = None
    dash: tuple[int, int] | None = None


def chart_spec(
    chart_id: str,
    label: str,
    lines: Sequence[Line],
    y_range: tuple[float, float],
    *,
    height: int,
    bottom_px: int,
    unit: str = "",
    x_range_ms: tuple[int, int] | None = None,
    markers: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One chart: the series on the union of their instants (null where a series has no point;
    the lines span those gaps), in seconds as uPlot's time axis takes them."""
    times = sorted({p.at_ms for line in lines for p in line.points})
    t0, t1 = x_range_ms or (times[0], times[-1])
    series = []
    for line in lines:
        by_ms = {p.at_ms: p.value for p in line.points}
        series.append(
            {
                "label": line.label,
                "colour": line.colour,
                "width": line.width,
                "step": line.step,
                "fill": line.fill,
                "dash": list(line.dash) if line.dash else None,
                "values": [by_ms.get(t) for t in times],
            }
        )
    return {
        "id": chart_id,
        "label": label,
        "unit": unit,
        "width": CHART_WIDTH,
        "height": height,
        "left_px": LEFT_MARGIN,
        "right_px": RIGHT_MARGIN,
        "top_px": TOP_MARGIN,
        "bottom_px": bottom_px,
        "x": [t / 1000 for t in times],
        "x_range": [t0 / 1000, max(t1, t0 + 1) / 1000],
        "y_range": list(y_range),
        "y_ticks": [[v, text] for v, text in axis_labels(*y_range, unit)],
        "series": series,
        "markers": markers,
    }


# --- the equity chart and its markers ---------------------------------------------------------


@dataclass(frozen=True)
class MarkerGroup:
    """The fills of one side that land on the same pixel column: drawn as one marker."""

    x: float
    side: str
    fills: tuple[TradeMarker, ...]


def equity_spec(report: Report) -> tuple[dict[str, Any], bool]:
    """The equity chart, and whether its markers became ticks."""
    equity = report.equity
    holds = list(report.buy_and_hold.items())
    times = [p.at_ms for p in equity] + [m.at_ms for m in report.trade_markers]
    t0, t1 = min(times), max(times)
    values = [p.value for p in equity] + [p.value for _, line in holds for p in line]
    y_range = _padded(min(values), max(values))
    groups = marker_groups(report.trade_markers, t0, t1)
    as_ticks = crowded(groups)
    start = equity[0].value
    lines = [
        Line(f"buy-and-hold {ticker}", HOLD_COLOURS[i % len(HOLD_COLOURS)], line)
        for i, (ticker, line) in enumerate(holds)
    ]
    baseline = (Point(at_ms=t0, value=start), Point(at_ms=t1, value=start))
    lines.append(Line("starting equity", BASELINE_COLOUR, baseline, dash=(6, 4)))
    lines.append(Line("equity", EQUITY_COLOUR, equity, width=2.0, step=True))
    markers = {
        "mode": "ticks" if as_ticks else "triangles",
        "size_px": MARKER_WIDTH_PX,
        "tick_width_px": TICK_WIDTH_PX,
        "tick_height_px": TICK_HEIGHT_PX,
        "buy_colour": BUY_COLOUR,
        "sell_colour": SELL_COLOUR,
        "groups": [
            {
                "at_ms": g.fills[0].at_ms,
                "side": g.side,
                "value": drawn_value(equity, g.fills[0].at_ms),
                "title": marker_title(g),
            }
            for g in groups
        ],
    }
    spec = chart_spec(
        "chart-equity",
        "equity against buy-and-hold",
        lines,
        y_range,
        height=EQUITY_HEIGHT,
        bottom_px=EQUITY_BOTTOM,
        x_range_ms=(t0, t1),
        markers=markers,
    )
    return spec, as_ticks


def _x(at_ms: int, t0: int, t1: int) -> float:
    """The pixel column of an instant on the 900 px chart (where markers would touch)."""
    share = (at_ms - t0) / (t1 - t0) if t1 > t0 else 0.5
    return LEFT_MARGIN + share * (CHART_WIDTH - LEFT_MARGIN - RIGHT_MARGIN)


def marker_groups(markers: Sequence[TradeMarker], t0: int, t1: int) -> list[MarkerGroup]:
    by_column: dict[tuple[int, str], list[TradeMarker]] = {}
    for marker in markers:
        by_column.setdefault((round(_x(marker.at_ms, t0, t1)), marker.side), []).append(marker)
    return sorted(
        (
            MarkerGroup(x=_x(fills[0].at_ms, t0, t1), side=side, fills=tuple(fills))
            for (_, side), fills in by_column.items()
        ),
        key=lambda g: g.x,
    )


def crowded(groups: Sequence[MarkerGroup]) -> bool:
    """Triangles would overlap each other (or be too many to leave the line visible)."""
    if len(groups) > MAX_TRIANGLES:
        return True
    return any(b.x - a.x < MARKER_WIDTH_PX for a, b in itertools.pairwise(groups))


def drawn_value(equity: Sequence[Point], at_ms: int) -> float:
    """The drawn step line's value at ``at_ms``: its last point at or before (else its first)."""
    index = bisect.bisect_right([p.at_ms for p in equity], at_ms) - 1
    return equity[max(index, 0)].value


def marker_title(group: MarkerGroup) -> str:
    shown = [
        f"{m.side} {m.quantity:g} {m.ticker} @ {m.price:g} ({stamp(m.at_ms)})"
        for m in group.fills[:MARKER_TITLE_FILLS]
    ]
    if len(group.fills) > MARKER_TITLE_FILLS:
        shown.append(f"and {len(group.fills) - MARKER_TITLE_FILLS} more")
    return "; ".join(shown)


# --- drawdown and learned weights -------------------------------------------------------------


def drawdown_spec(drawdown: Sequence[Point]) -> dict[str, Any]:
    negated = [Point(at_ms=p.at_ms, value=-p.value) for p in drawdown]
    deepest = min(p.value for p in negated)
    # drawdown is never above zero: pad below the trough only, so the top of the axis is 0 %
    pad = -deepest * 0.05 or 1.0
    line = Line("drawdown", SELL_COLOUR, negated, step=True, fill=DRAWDOWN_FILL)
    return chart_spec(
        "chart-drawdown",
        "drawdown",
        [line],
        (deepest - pad, 0.0),
        height=DRAWDOWN_HEIGHT,
        bottom_px=DRAWDOWN_BOTTOM,
        unit=" %",
    )


def learned_spec(lines: dict[str, tuple[Point, ...]]) -> dict[str, Any]:
    drawn = [
        Line(name, LEARNED_COLOURS[i % len(LEARNED_COLOURS)], line, width=1.5, step=True)
        for i, (name, line) in enumerate(lines.items())
    ]
    return chart_spec(
        "chart-learned",
        "learned weights",
        drawn,
        (0.0, 1.0),
        height=DRAWDOWN_HEIGHT,
        bottom_px=DRAWDOWN_BOTTOM,
    )


__all__ = [
    "BUY_COLOUR",
    "CHART_WIDTH",
    "EQUITY_COLOUR",
    "HOLD_COLOURS",
    "LEFT_MARGIN",
    "RIGHT_MARGIN",
    "SELL_COLOUR",
    "axis_labels",
    "chart_spec",
    "drawdown_spec",
    "equity_spec",
    "learned_spec",
]
