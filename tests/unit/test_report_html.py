"""report.html: one self-contained, well-formed page with the charts, tables and escaped text.

The charts are uPlot specs (JSON in the page, drawn by the inlined uPlot): these tests read the
specs, which hold every drawn figure; tests/e2e/test_report_browser.py checks the pixels."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

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
from property_budget import examples

from report.charts import (
    EQUITY_COLOUR,
    HOLD_COLOURS,
    LABEL_FONT_PX,
    LEFT_MARGIN,
    TICK_WIDTH_PX,
    axis_labels,
)
from report.figures import build_report
from report.html import render_html, write_report

HOSTILE = "<script>alert('x')</script>"


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.boxes: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += attrs
        if ("class", "chart") in attrs:
            self.boxes.append((tag, dict(attrs).get("id")))

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
    equity, drawdown = charts = _charts(page)
    assert [c.box_id for c in charts] == ["chart-equity", "chart-drawdown"]
    assert ("div", "chart-equity") in parsed.boxes and ("div", "chart-drawdown") in parsed.boxes
    # the equity line and BTC buy-and-hold (and the starting-equity baseline)
    assert set(equity.lines) == {EQUITY_COLOUR, HOLD_COLOURS[0], "#7a8394"}
    # a triangle per pixel column and side (the two buys, a second apart, share one)
    assert equity.mode == "triangles" and len(equity.markers) == len(FILLS) - 1
    assert drawdown.spec["series"][0]["fill"]  # the drawdown area
    titles = [m["title"] for m in equity.markers]
    assert any("buy 0.1 BTC/USDT" in t and "buy 1 ETH/USDT" in t for t in titles)
    # the chart data, uPlot and its drawing code: inline scripts, nothing else
    assert parsed.tags.count("script") == 3 and "uPlot" in page and "MIT License" in page
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
    assert parsed.tags.count("script") == 3  # the page's own three, none from the journal
    assert "<script>alert" not in page
    assert HOSTILE not in page
    hold = next(s for s in _charts(page)[0].spec["series"] if HOSTILE in s["label"])
    assert hold["label"] == f"buy-and-hold {HOSTILE}"  # intact in the data, escaped in the page
    assert "&lt;script&gt;" in page
    assert any(HOSTILE in chunk for chunk in parsed.text)  # shown as text, intact


def test_empty_run_page_says_nothing_to_report(tmp_path: Path) -> None:
    page = render_html(build_report(write_run(tmp_path, decisions=[], fills=[])))
    parsed = _parse(page)
    assert "script" not in parsed.tags and _charts(page) == []
    assert "Nothing to report" in " ".join(parsed.text)


def test_long_runs_draw_the_downsampled_series(tmp_path: Path) -> None:
    lines = [
        decision_line(
            T0 + i * 300_000, 100.0 + i % 7, 10.0, False, ["agent_timer"], "fallback", "x", None
        )
        for i in range(5000)
    ]
    report = build_report(write_run(tmp_path, decisions=lines, fills=[]))
    assert report.equity_points == 5000 and len(report.equity) <= 2000
    charts = _charts(render_html(report))
    equity_line, hold_line = charts[0].lines[EQUITY_COLOUR], charts[0].lines[HOLD_COLOURS[0]]
    assert len(hold_line) == len(report.buy_and_hold["BTC/USDT"]) <= 2000
    assert len(equity_line) == len(report.equity) <= 2000
    assert charts[0].steps == {EQUITY_COLOUR}  # equity as steps, the buy-and-hold as a line


def test_equity_is_drawn_as_steps_and_triangles_sit_on_the_drawn_line(tmp_path: Path) -> None:
    chart = _charts(render_html(build_report(write_run(tmp_path))))[0]
    line = chart.lines[EQUITY_COLOUR]
    assert EQUITY_COLOUR in chart.steps  # holds until the next decision, then a vertical jump
    assert chart.mode == "triangles" and len(chart.markers) == 4
    for marker in chart.markers:
        # on the drawn step line: the value of its last point at or before the fill
        held = [value for at_ms, value in line if at_ms <= marker["at_ms"]] or [line[0][1]]
        assert marker["value"] == held[-1], marker


def test_crowded_or_numerous_markers_become_ticks_under_the_axis(tmp_path: Path) -> None:
    lines = year_run_lines(2000)
    report = build_report(write_run(tmp_path, decisions=lines, fills=year_run_fills(400)))
    page = render_html(report)
    chart = _charts(page)[0]
    assert chart.mode == "ticks"  # no triangles on the line: ticks under the time axis
    assert len(chart.markers) == 400  # fills ~2 px apart: each its own pixel column
    assert chart.spec["markers"]["tick_width_px"] == TICK_WIDTH_PX <= 3
    assert "400 fills are drawn as ticks" in page and "buy (tick, upper row)" in page


def test_two_markers_closer_than_their_width_become_ticks(tmp_path: Path) -> None:
    four_days_ms = 4 * 86_400_000
    near = [
        (T0 + DAY_MS, "BTC/USDT", "buy", 0.1, 50_000.0, 5.0),
        (T0 + DAY_MS + four_days_ms // 200, "BTC/USDT", "sell", 0.1, 50_000.0, 5.0),  # ~4 px
    ]
    chart = _charts(render_html(build_report(write_run(tmp_path / "a", fills=near))))[0]
    assert (chart.mode, len(chart.markers)) == ("ticks", 2)
    apart = [near[0], (T0 + 2 * DAY_MS, *near[1][1:])]
    chart = _charts(render_html(build_report(write_run(tmp_path / "b", fills=apart))))[0]
    assert (chart.mode, len(chart.markers)) == ("triangles", 2)


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


@settings(max_examples=examples(200), deadline=None)
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
    chart_rule = css.split(".chart {", 1)[1].split("}", 1)[0]
    assert "max-width: 100%" in chart_rule and "width: 900px" in chart_rule
    # the script draws each chart at its box's width, at most 900 px, and again on resize
    assert [c.spec["width"] for c in _charts(page)] == [900, 900]
    assert "box.clientWidth" in page and 'addEventListener("resize"' in page


# --- chart parsing helpers ----------------------------------------------------------------


@dataclass
class _Chart:
    spec: dict[str, Any]
    box_id: str = ""
    lines: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # colour -> points
    steps: set[str] = field(default_factory=set)  # colours of the lines drawn as steps
    markers: list[dict[str, Any]] = field(default_factory=list)
    mode: str | None = None  # triangles / ticks
    y_labels: list[str] = field(default_factory=list)


def _charts(page: str) -> list[_Chart]:
    """The chart specs of the page's ``#vigil-charts`` data, as drawn figures."""
    if "id='vigil-charts'>" not in page:
        return []
    data = page.split("id='vigil-charts'>", 1)[1].split("</script>", 1)[0]
    charts = []
    for spec in json.loads(data):
        chart = _Chart(spec=spec, box_id=spec["id"], y_labels=[t[1] for t in spec["y_ticks"]])
        for series in spec["series"]:
            chart.lines[series["colour"]] = [
                (round(x * 1000), v)
                for x, v in zip(spec["x"], series["values"], strict=True)
                if v is not None
            ]
            if series["step"]:
                chart.steps.add(series["colour"])
        if spec["markers"] is not None:
            chart.markers, chart.mode = spec["markers"]["groups"], spec["markers"]["mode"]
        charts.append(chart)
    return charts


def _fits_left_margin(label: str) -> bool:
    # a generous 0.62 em per character of an 11 px sans-serif label, 4 px from the axis
    return len(label) * 0.62 * LABEL_FONT_PX <= LEFT_MARGIN - 4
