"""The report shows what the learner learned: the posterior mean per signal over time (drawn in
report.html), the decisions the learned weights moved, and regime agreement counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakes.report_support import T0, decision_line, write_run

from report.compare import compare_runs
from report.figures import build_report
from report.html import render_html

HOUR_MS = 3_600_000


def _line(at_ms: int, learned: dict[str, dict[str, float]] | None, **raw: Any) -> dict[str, Any]:
    line = decision_line(at_ms, 10_000.0, 90_000.0, False, ["agent_timer"], "fallback", "x", None)
    if learned is not None:
        line["snapshot"]["ts_posteriors"] = {
            "draw_seed": "42:d",
            "tickers": {
                ticker: {"in_force": "global", "signals": {n: {"mean": m, "draw": 0.5}
                                                           for n, m in means.items()}}
                for ticker, means in learned.items()
            },
        }  # fmt: skip
    line["raw_decision"] = {"decisions": [], "regime_agreement": None, **raw}
    return line


def _run(tmp_path: Path) -> Path:
    moved = {"ticker": "BTC/USDT", "reasoning": "BUY: ... The learner moved this decision: ..."}
    lines = [
        _line(T0, None, regime_agreement=True),  # nothing learned yet / learner off: no point
        _line(T0 + HOUR_MS, {"BTC/USDT": {"rsi": 0.6}, "ETH/USDT": {"rsi": 0.4, "momentum": 0.7}},
              regime_agreement=False, decisions=[moved]),
        _line(T0 + 2 * HOUR_MS, {"BTC/USDT": {"rsi": 0.8}}),
    ]  # fmt: skip
    return write_run(tmp_path, decisions=lines, fills=[])


def test_learned_weights_are_a_series_per_signal(tmp_path: Path) -> None:
    report = build_report(_run(tmp_path))
    rsi = [(p.at_ms, p.value) for p in report.learned_weights["rsi"]]
    assert rsi == [(T0 + HOUR_MS, 0.5), (T0 + 2 * HOUR_MS, 0.8)]  # averaged over the tickers
    assert [(p.at_ms, p.value) for p in report.learned_weights["momentum"]] == [(T0 + HOUR_MS, 0.7)]
    assert report.learning == {
        "decisions_with_learner": 2,
        "moved_decisions": 1,
        "regime_agreement": {"agreed": 1, "disagreed": 1, "not said": 1},
    }


def test_the_html_draws_the_learned_weights_and_says_when_there_are_none(tmp_path: Path) -> None:
    page = render_html(build_report(_run(tmp_path / "a")))
    assert "What the learner learned" in page
    assert "aria-label='learned weights'" in page  # the chart is drawn
    assert "momentum" in page and "decisions the learned weights moved" in page
    off = write_run(tmp_path / "b", decisions=[_line(T0, None)], fills=[])
    assert "No learned weights" in render_html(build_report(off))


def test_compare_counts_the_learning(tmp_path: Path) -> None:
    off = write_run(tmp_path / "off", decisions=[_line(T0, None)], fills=[])
    text = compare_runs(_run(tmp_path / "on"), off)
    assert any(
        row.split()[:4] == ["decisions", "the", "learner", "moved"]
        and row.split()[4:6] == ["1", "0"]
        for row in text.splitlines()
    ), text
