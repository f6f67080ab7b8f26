"""report.html: one self-contained, well-formed page with the charts, tables and escaped text."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from fakes.report_support import DECISIONS, FILLS, decision_line, write_run

from runner.report import build_report
from runner.report_html import render_html, write_report

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
    # one marker triangle per fill, plus the drawdown area
    assert parsed.tags.count("polygon") == len(FILLS) + 1
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


def test_long_runs_are_thinned_for_the_chart_but_kept_in_full(tmp_path: Path) -> None:
    lines = [
        decision_line(
            i * 300_000, 100.0 + i % 7, 10.0, False, ["agent_timer"], "fallback", "x", None
        )
        for i in range(5000)
    ]
    report = build_report(write_run(tmp_path, decisions=lines, fills=[]))
    assert len(report.equity) == 5000
    page = render_html(report)
    collector = _Collector()
    collector.feed(page)
    polylines = [v for k, v in collector.attrs if k == "points" and v and v.count(",") > 100]
    assert polylines and all(v.count(",") <= 2001 for v in polylines)
