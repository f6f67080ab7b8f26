"""The run report opens in a real browser: headless Chromium renders report.html.

A run folder from the report tests' builders (hand-worked figures) goes through ``write_report``;
Chromium then takes a 1280x2800 screenshot and dumps the rendered DOM. The screenshot is decoded
and must show the charts in their colours inside the page; the DOM must hold both charts and the
figures table with report.json's numbers; the page must log no console message (no script error,
no failed load). A page that throws proves the console check can see an error at all.

Chromium missing is a failure, not a skip: run scripts/ensure-chromium (``make test`` does).
Set VIGIL_KEEP_SCREENSHOT=1 to also copy the screenshot to runs/screenshots/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Final

import numpy as np
import pytest
from browser_support import BrowserRun, decode_png, read_png_header, run_chromium
from cdp_support import open_browser
from fakes import report_support
from numpy.typing import NDArray

from report.charts import (
    BUY_COLOUR,
    CHART_WIDTH,
    EQUITY_COLOUR,
    HOLD_COLOURS,
    LEFT_MARGIN,
    RIGHT_MARGIN,
    SELL_COLOUR,
)
from report.html import write_report

pytestmark = pytest.mark.e2e

WIDTH: Final = 1280
HEIGHT: Final = 4400  # the whole report: run, buy-and-hold, learning, cost and memory tables
SCREENSHOTS_DIR: Final = Path(__file__).resolve().parents[2] / "runs" / "screenshots"
WHITE: Final = 255
CHART_BACKGROUND: Final = "#fafbfc"  # the chart boxes' background in report.html's CSS
CHART_BORDER: Final = "#e3e6ec"  # and its border
NARROW_WIDTH: Final = 600
NARROW_HEIGHT: Final = 3000


@dataclass(frozen=True)
class RenderedReport:
    fills: int
    expected: dict[str, Any]  # the standard run's hand-worked figures
    report_json: dict[str, Any]
    png: bytes
    pixels: NDArray[np.uint8]
    screenshot_run: BrowserRun
    dom_run: BrowserRun


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> RenderedReport:
    root = tmp_path_factory.mktemp("report_browser")
    run = report_support.write_run(root / "run")
    write_report(run)
    page = (run / "report.html").as_uri()
    png_path = root / "report.png"
    screenshot_run = run_chromium(
        root / "profile-screenshot",
        [f"--screenshot={png_path}", f"--window-size={WIDTH},{HEIGHT}", page],
    )
    dom_run = run_chromium(root / "profile-dom", ["--virtual-time-budget=5000", "--dump-dom", page])
    assert png_path.is_file(), f"chromium wrote no screenshot:\n{screenshot_run.stderr[-2000:]}"
    if os.environ.get("VIGIL_KEEP_SCREENSHOT"):
        SCREENSHOTS_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png_path, SCREENSHOTS_DIR / "report-browser.png")
    return RenderedReport(
        fills=len(report_support.FILLS),
        expected=report_support.EXPECTED,
        report_json=json.loads((run / "report.json").read_bytes()),
        png=png_path.read_bytes(),
        pixels=decode_png(png_path.read_bytes()),
        screenshot_run=screenshot_run,
        dom_run=dom_run,
    )


def test_screenshot_has_the_window_size_and_shows_the_charts(rendered: RenderedReport) -> None:
    header = read_png_header(rendered.png)
    assert (header.width, header.height) == (WIDTH, HEIGHT)
    pixels = rendered.pixels
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    # anti-aliased text and lines give thousands of colours; a blank page gives one
    assert len(np.unique(pixels[..., :3].reshape(-1, 3), axis=0)) > 500

    equity_band, drawdown_band = _chart_bands(pixels)
    equity_chart = pixels[equity_band]
    chart_columns = np.nonzero(_matches(equity_chart, CHART_BACKGROUND).any(axis=0))[0]
    chart_width = chart_columns.max() - chart_columns.min()
    # both lines run across most of the plot, not a dot in a corner
    for line_colour in (EQUITY_COLOUR, HOLD_COLOURS[0]):  # equity, BTC buy-and-hold
        columns = np.nonzero(_ink(equity_chart, line_colour).any(axis=0))[0]
        assert columns.size and columns.max() - columns.min() > 0.8 * chart_width, line_colour
    assert _ink(equity_chart, BUY_COLOUR).sum() > 30  # the two buys, a second apart: one triangle
    assert _ink(equity_chart, SELL_COLOUR).sum() > 3 * 30  # three sell triangles
    # the drawdown area is filled (a translucent red over the chart background)
    drawdown = pixels[drawdown_band].astype(np.int16)
    assert ((drawdown[..., 0] - drawdown[..., 1]) > 30).sum() > 2000


def test_page_fits_the_window_without_overflow(rendered: RenderedReport) -> None:
    pixels = rendered.pixels
    ink_rows, ink_columns = np.nonzero((pixels[..., :3] != WHITE).any(axis=2))
    # centred column of at most ~980 px: nothing reaches the window's edges, and the whole
    # report (down to the last table) is inside the screenshot
    assert ink_columns.min() > 100 and ink_columns.max() < WIDTH - 100
    assert ink_rows.max() < HEIGHT - 50


def test_rendered_dom_holds_both_charts_and_the_real_figures(rendered: RenderedReport) -> None:
    dom = _Dom()
    dom.feed(rendered.dom_run.stdout)
    dom.close()
    # uPlot drew both charts (equity vs buy-and-hold, drawdown): a canvas each, in its box,
    # with the legend that shows the hovered values; the lines, markers and area are checked
    # in the screenshot, their data in tests/unit/test_report_html.py
    assert dom.chart_boxes == ["chart-equity", "chart-drawdown"]
    assert dom.tags.count("canvas") == 2
    assert dom.classes.count("uplot") == 2 and dom.classes.count("u-legend") == 2
    assert dom.tags.count("details") == 1  # the per-day table, folded
    assert dom.title.startswith("vigil report")
    figures = {row[0]: row[1] for row in dom.rows if len(row) >= 2}
    metrics = rendered.report_json["metrics"]
    assert figures["total return"] == f"{metrics['total_return_pct']:,.3f} %"
    assert figures["total return"] == f"{rendered.expected['total_return_pct']:.3f} %"  # 10.250 %
    assert figures["max drawdown"] == f"{rendered.expected['max_drawdown_pct']:.3f} %"
    assert figures["end equity"] == f"{metrics['end_equity_usd']:,.2f} USD"
    assert figures["trades (fills)"] == str(rendered.fills)


def test_narrow_window_shows_everything_inside_its_width(tmp_path: Path) -> None:
    """At 600 px wide the 900 px charts shrink to the page (CSS max-width) and wide tables
    scroll inside their own box: nothing reaches past the window's right edge."""
    for name, run in (
        ("standard", report_support.write_run(tmp_path / "standard")),
        *_long(tmp_path),
    ):
        write_report(run)
        pixels = _screenshot(tmp_path / name, run, NARROW_WIDTH, NARROW_HEIGHT)
        ink_columns = np.nonzero((pixels[..., :3] != WHITE).any(axis=2))[1]
        # the body's 1 em padding stays white on the right; an overflowing chart would not
        assert ink_columns.max() < NARROW_WIDTH - 10, name
        for band in _chart_bands(pixels):
            chart = pixels[band]
            columns = np.nonzero(_matches(chart, CHART_BACKGROUND).any(axis=0))[0]
            # the chart's right border (one column past its background) is on screen
            assert columns.max() + 1 < NARROW_WIDTH - 10, name
            assert _matches(chart[:, columns.max() + 1 : columns.max() + 2], CHART_BORDER).any()


def test_four_hundred_fills_leave_the_equity_line_visible(tmp_path: Path) -> None:
    """A long run's fills become ticks under the axis: the line keeps its colour across the
    plot instead of disappearing under 400 triangles."""
    ((name, run),) = _long(tmp_path)
    write_report(run)
    pixels = _screenshot(tmp_path / name, run, WIDTH, HEIGHT)
    equity_band, _ = _chart_bands(pixels)
    chart = pixels[equity_band]
    columns = np.nonzero(_matches(chart, CHART_BACKGROUND).any(axis=0))[0]
    left = columns.min() + LEFT_MARGIN  # the chart is at its natural 900 px at this width
    right = columns.min() + CHART_WIDTH - RIGHT_MARGIN
    covered = _ink(chart[:, left:right], EQUITY_COLOUR).any(axis=0)
    assert covered.mean() > 0.9, f"the equity line shows in {covered.mean():.0%} of the plot"
    assert _ink(chart, BUY_COLOUR).sum() > 200 and _ink(chart, SELL_COLOUR).sum() > 200


def test_page_logs_no_console_message(rendered: RenderedReport) -> None:
    for run in (rendered.screenshot_run, rendered.dom_run):
        assert run.console_messages() == []
        assert "Uncaught" not in run.stderr


def test_console_check_sees_a_script_error(tmp_path: Path) -> None:
    """The control for the check above: the same flags do report a page's uncaught error."""
    page = tmp_path / "throws.html"
    page.write_text(
        "<!DOCTYPE html><html><body><script>"
        "document.body.insertAdjacentHTML('beforeend', '<p id=ran>ran</p>');"
        "throw new Error('vigil-control');"
        "</script></body></html>"
    )
    run = run_chromium(
        tmp_path / "profile", ["--virtual-time-budget=5000", "--dump-dom", page.as_uri()]
    )
    assert '<p id="ran">ran</p>' in run.stdout  # the script ran before it threw
    assert any("Uncaught Error: vigil-control" in line for line in run.console_messages())


# --- helpers ----------------------------------------------------------------------------------


def _long(tmp_path: Path) -> list[tuple[str, Path]]:
    """A year of 2,000 decisions and 400 fills, its equity above a million (long axis labels)."""
    lines = report_support.year_run_lines(2000)
    for line in lines:
        line["snapshot"]["portfolio_value"] *= 150
    fills = report_support.year_run_fills(400)
    return [("year", report_support.write_run(tmp_path / "year", decisions=lines, fills=fills))]


def _screenshot(root: Path, run: Path, width: int, height: int) -> NDArray[np.uint8]:
    png_path = root / "shot.png"
    root.mkdir(parents=True, exist_ok=True)
    run_chromium(
        root / "profile",
        [
            "--hide-scrollbars",
            f"--screenshot={png_path}",
            f"--window-size={width},{height}",
            (run / "report.html").as_uri(),
        ],
    )
    assert png_path.is_file(), "chromium wrote no screenshot"
    pixels = decode_png(png_path.read_bytes())
    assert pixels.shape[:2] == (height, width)
    return pixels


def _rgb(colour: str) -> NDArray[np.uint8]:
    return np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.uint8)


def _matches(pixels: NDArray[np.uint8], colour: str) -> NDArray[np.bool_]:
    return np.asarray((pixels[..., :3] == _rgb(colour)).all(axis=-1))


def _ink(pixels: NDArray[np.uint8], colour: str) -> NDArray[np.bool_]:
    """Pixels drawn in ``colour`` over the chart background, at least half covered: anti-aliased
    edges are blends ``a * colour + (1 - a) * background``, so find ``a`` and require the pixel
    to lie on that blend (a thin line has few pixels of exactly its colour)."""
    background = _rgb(CHART_BACKGROUND).astype(np.float64)
    towards = _rgb(colour).astype(np.float64) - background
    offset = pixels[..., :3].astype(np.float64) - background
    share = offset @ towards / (towards @ towards)
    off_blend = np.linalg.norm(offset - share[..., None] * towards, axis=-1)
    return np.asarray((share >= 0.5) & (off_blend <= 12.0))


def _chart_bands(pixels: NDArray[np.uint8]) -> tuple[slice, slice]:
    """The row ranges of the two charts: runs of rows holding the chart background colour (a
    few rows inside a chart, such as the x axis line, hide it: only a wide gap parts two)."""
    rows = np.nonzero(_matches(pixels, CHART_BACKGROUND).sum(axis=1) > 100)[0]
    assert rows.size, "no chart background in the screenshot"
    breaks = np.nonzero(np.diff(rows) > 20)[0]
    starts = [int(rows[0]), *(int(rows[b + 1]) for b in breaks)]
    ends = [*(int(rows[b]) + 1 for b in breaks), int(rows[-1]) + 1]
    assert len(starts) == 2, (
        f"expected two charts, found row bands {list(zip(starts, ends, strict=True))}"
    )
    return slice(starts[0], ends[0]), slice(starts[1], ends[1])


class _Dom(HTMLParser):
    """Tags, the title and each table row's cell texts of a dumped DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.title = ""
        self.rows: list[list[str]] = []
        self.classes: list[str] = []
        self.chart_boxes: list[str] = []
        self._in: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        named = dict(attrs)
        self.classes += (named.get("class") or "").split()
        if "chart" in (named.get("class") or "").split():
            self.chart_boxes.append(named.get("id") or "")
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th") and self.rows:
            self.rows[-1].append("")
        self._in.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._in:
            del self._in[len(self._in) - 1 - self._in[::-1].index(tag) :]

    def handle_data(self, data: str) -> None:
        if self._in and self._in[-1] == "title":
            self.title += data
        elif self._in and self._in[-1] in ("td", "th") and self.rows and self.rows[-1]:
            self.rows[-1][-1] += data


async def test_hovering_the_equity_chart_shows_a_24_hour_utc_time(tmp_path: Path) -> None:
    """The legend names the hovered instant as the axis does, ``YYYY-MM-DD HH:MM`` UTC, and it
    is one of the chart's own instants (uPlot's default would be ``1:00pm``, local time)."""
    run = report_support.write_run(tmp_path / "run")
    write_report(run)
    async with open_browser(tmp_path / "profile", WIDTH, 1800) as page:
        await page.send("Page.navigate", url=(run / "report.html").as_uri())
        await page.wait_for("!!document.querySelector('#chart-equity .u-over')", 30)
        specs = await page.evaluate(
            "JSON.parse(document.getElementById('vigil-charts').textContent)"
        )
        x, y = await page.evaluate(
            "(() => { const r = document.querySelector('#chart-equity .u-over')"
            ".getBoundingClientRect(); return [r.x + r.width * 0.7, r.y + r.height / 2]; })()"
        )
        await page.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        shown = await page.wait_for(
            "(t => t !== '-' && t)(document.querySelector("
            "'#chart-equity .u-legend .u-series:first-child .u-value').textContent)",
            30,
        )
        assert page.errors() == []
    (equity,) = [spec for spec in specs if spec["id"] == "chart-equity"]
    instants = {datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M") for ts in equity["x"]}
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", shown), shown
    assert shown in instants
