"""report.html: one self-contained, well-formed page with the charts, tables and escaped text."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from fakes.report_support import (
    DAY_MS,
    DECISIONS,
    FILLS,
    T0,
    decision_line,
    write_run,
    year_run_fills,
    year_run_lines,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from report.figures import build_report
from report.html import (
    BUY_COLOUR,
    EQUITY_COLOUR,
    HOLD_COLOURS,
    LABEL_FONT_PX,
    LEFT_MARGIN,
    SELL_COLOUR,
    axis_labels,
    render_html,
    write_report,
)

HOSTILE = "<script>alert('x')</script>"


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += attrs

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(page: str) -> _Collector:
    collector = _Collector()
    collector.feed(page)
    collector.close()
    return collector


def test_write_report_writes_json_and_a_self_contained_html(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    out = tmp_path / "out"
    report = write_report(run, out)
    page = (out / "report.html").read_text(encoding="utf-8")
    parsed = _parse(page)
    assert parsed.tags.count("svg") == 2  # equity vs buy-and-hold, drawdown
    assert parsed.tags.count("polyline") == 2  # the equity line and BTC buy-and-hold
    # a triangle per pixel column and side (the two buys, a second apart, share one), plus
    # the drawdown area
    assert parsed.tags.count("polygon") == len(FILLS) - 1 + 1
    assert "rect" not in parsed.tags  # five fills fit as triangles: no tick strip
    assert any("buy 0.1 BTC/USDT" in t and "buy 1 ETH/USDT" in t for t in parsed.text)
    assert "script" not in parsed.tags
    # nothing is fetched: no scripts, stylesheets, images or remote references
    assert not any(name in {"src", "href"} for name, _ in parsed.attrs)
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page
    text = " ".join(parsed.text)
    assert "10.250 %" in text  # total return in the figures table
    assert "claude" in text and "breaker_open" in text
    assert (out / "report.json").read_bytes().startswith(b"{")
    assert report.metrics.trades == len(FILLS)


def test_untrusted_journal_text_is_escaped(tmp_path: Path) -> None:
    lines = [decision_line(*d) for d in DECISIONS]
    lines[0]["decider_reason"] = HOSTILE
    lines[1]["trigger"] = [f"wake:{HOSTILE}"]
    lines[1]["snapshot"]["tickers"] = {HOSTILE: {"price": 1.0}}
    page = render_html(build_report(write_run(tmp_path, decisions=lines)))
    parsed = _parse(page)
    assert "script" not in parsed.tags
    assert HOSTILE not in page
    assert "&lt;script&gt;" in page
    assert any(HOSTILE in chunk for chunk in parsed.text)  # shown as text, intact


def test_empty_run_page_says_nothing_to_report(tmp_path: Path) -> None:
    page = render_html(build_report(write_run(tmp_path, decisions=[], fills=[])))
    parsed = _parse(page)
    assert "svg" not in parsed.tags
    assert "Nothing to report" in " ".join(parsed.text)


def test_long_runs_draw_the_downsampled_series(tmp_path: Path) -> None:
    lines = [
        decision_line(
            i * 300_000, 100.0 + i % 7, 10.0, False, ["agent_timer"], "fallback", "x", None
        )
        for i in range(5000)
    ]
    report = build_report(write_run(tmp_path, decisions=lines, fills=[]))
    assert report.equity_points == 5000 and len(report.equity) <= 2000
    charts = _charts(render_html(report))
    equity_line, hold_line = (
        charts[0].polylines[EQUITY_COLOUR],
        charts[0].polylines[HOLD_COLOURS[0]],
    )
    assert len(hold_line) == len(report.buy_and_hold["BTC/USDT"]) <= 2000
    # steps: one extra corner per change of value
    assert len(report.equity) <= len(equity_line) <= 2 * len(report.equity)


def test_equity_is_drawn_as_steps_and_triangles_sit_on_the_drawn_line(tmp_path: Path) -> None:
    chart = _charts(render_html(build_report(write_run(tmp_path))))[0]
    line = chart.polylines[EQUITY_COLOUR]
    for (x0, y0), (x1, y1) in itertools.pairwise(line):
        assert x0 == x1 or y0 == y1  # horizontal holds and vertical jumps only
    assert len(chart.triangles) == 4
    for x, y in chart.triangles:
        assert _on_polyline(line, x, y), (x, y)


def test_crowded_or_numerous_markers_become_ticks_under_the_axis(tmp_path: Path) -> None:
    lines = year_run_lines(2000)
    report = build_report(write_run(tmp_path, decisions=lines, fills=year_run_fills(400)))
    page = render_html(report)
    chart = _charts(page)[0]
    assert chart.triangles == []  # no triangles on the line
    assert len(chart.ticks) == 400  # fills ~2 px apart: each its own pixel column
    assert all(width <= 3 and top > chart.axis_y for top, width in chart.ticks)
    assert "400 fills are drawn as ticks" in page and "buy (tick, upper row)" in page


def test_two_markers_closer_than_their_width_become_ticks(tmp_path: Path) -> None:
    four_days_ms = 4 * 86_400_000
    near = [
        (T0 + DAY_MS, "BTC/USDT", "buy", 0.1, 50_000.0, 5.0),
        (T0 + DAY_MS + four_days_ms // 200, "BTC/USDT", "sell", 0.1, 50_000.0, 5.0),  # ~4 px
    ]
    chart = _charts(render_html(build_report(write_run(tmp_path / "a", fills=near))))[0]
    assert (len(chart.triangles), len(chart.ticks)) == (0, 2)
    apart = [near[0], (T0 + 2 * DAY_MS, *near[1][1:])]
    chart = _charts(render_html(build_report(write_run(tmp_path / "b", fills=apart))))[0]
    assert (len(chart.triangles), len(chart.ticks)) == (2, 0)


def test_drawdown_axis_tops_out_at_zero(tmp_path: Path) -> None:
    drawdown = _charts(render_html(build_report(write_run(tmp_path))))[1]
    values = [float(text.removesuffix(" %")) for text in drawdown.y_labels]
    assert max(values) == 0.0 and "-0" not in drawdown.y_labels[-1]
    assert min(values) < -10.0  # the 10 % drawdown with room below it


def test_large_equity_gets_compact_axis_labels_that_fit(tmp_path: Path) -> None:
    lines = [decision_line(*d) for d in DECISIONS]
    for line in lines:
        line["snapshot"]["portfolio_value"] *= 1000  # 10,000,000 and up
    equity = _charts(render_html(build_report(write_run(tmp_path, decisions=lines))))[0]
    assert equity.y_labels and all(label.endswith("M") for label in equity.y_labels)
    assert all(_fits_left_margin(label) for label in equity.y_labels)
    assert len(set(equity.y_labels)) == 3


@settings(max_examples=200, deadline=None)
@given(
    st.floats(min_value=-1e12, max_value=1e12),
    st.floats(min_value=1e-3, max_value=1e12),
    st.sampled_from(["", " %"]),
)
def test_axis_labels_always_fit_the_margin(low: float, spread: float, unit: str) -> None:
    high = low + spread
    labels = axis_labels(low, high, unit)
    assert [value for value, _ in labels] == [low, (low + high) / 2, high]
    assert all(_fits_left_margin(text) for _, text in labels), labels
    if spread >= 1e-3 * max(abs(low), abs(high), 1.0):
        assert labels[0][1] != labels[-1][1]  # bottom and top tell apart


def test_months_table_and_the_daily_table_folded_away(tmp_path: Path) -> None:
    page = render_html(build_report(write_run(tmp_path)))
    assert "<h2>Per month (UTC)</h2>" in page
    months_table = page.split("<h2>Per month (UTC)</h2>", 1)[1].split("</table>", 1)[0]
    assert "<td>2025-01</td>" in months_table and "+10.25 %" in months_table
    details = page.split("<details>", 1)[1].split("</details>", 1)[0]
    assert "Per day (UTC): 4 days" in details
    assert details.count("<tr>") == 1 + 4  # header and the four days
    assert "<details open" not in page  # folded until asked for


def test_charts_scale_down_with_the_window(tmp_path: Path) -> None:
    page = render_html(build_report(write_run(tmp_path)))
    css = page.split("<style>", 1)[1].split("</style>", 1)[0]
    svg_rule = css.split("svg {", 1)[1].split("}", 1)[0]
    assert "max-width: 100%" in svg_rule and "height: auto" in svg_rule
    assert page.count("viewBox='0 0 900 ") == 2


# --- chart parsing helpers ----------------------------------------------------------------


@dataclass
class _Chart:
    polylines: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    triangles: list[tuple[float, float]] = field(default_factory=list)  # the point on the line
    ticks: list[tuple[float, float]] = field(default_factory=list)  # (top, width)
    y_labels: list[str] = field(default_factory=list)
    axis_y: float = 0.0


class _ChartParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.charts: list[_Chart] = []
        self._text_anchor_end = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "svg":
            self.charts.append(_Chart())
        elif tag == "polyline":
            self.charts[-1].polylines[a["stroke"]] = _coords(a["points"])
        elif tag == "polygon" and a.get("fill") in (BUY_COLOUR, SELL_COLOUR):
            (tip_x, _tip_y), (_, base_y), _ = _coords(a["points"])
            on_line = base_y - 3 if a["fill"] == BUY_COLOUR else base_y + 3
            self.charts[-1].triangles.append((tip_x, on_line))
        elif tag == "rect":
            self.charts[-1].ticks.append((float(a["y"]), float(a["width"])))
        elif tag == "line" and a["y1"] == a["y2"]:
            self.charts[-1].axis_y = float(a["y1"])
        self._text_anchor_end = tag == "text" and a.get("text-anchor") == "end"

    def handle_data(self, data: str) -> None:
        if self._text_anchor_end and not data.endswith("Z"):
            self.charts[-1].y_labels.append(data)
        self._text_anchor_end = False


def _coords(points: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in (pair.split(",") for pair in points.split())]


def _charts(page: str) -> list[_Chart]:
    parser = _ChartParser()
    parser.feed(page)
    parser.close()
    return parser.charts


def _on_polyline(line: list[tuple[float, float]], x: float, y: float) -> bool:
    for (x0, y0), (x1, y1) in itertools.pairwise(line):
        if (
            min(x0, x1) - 0.11 <= x <= max(x0, x1) + 0.11
            and min(y0, y1) - 0.11 <= y <= max(y0, y1) + 0.11
        ):
            return True
    return False


def _fits_left_margin(label: str) -> bool:
    # a generous 0.62 em per character of an 11 px sans-serif label, 4 px from the axis
    return len(label) * 0.62 * LABEL_FONT_PX <= LEFT_MARGIN - 4
