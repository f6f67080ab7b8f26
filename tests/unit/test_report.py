"""The run report's figures against hand-computed values and an independent recomputation."""

from __future__ import annotations

import csv
import itertools
import math
import tempfile
from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import orjson
import pytest
from fakes.report_support import (
    DAY_MS,
    DECISIONS,
    EXPECTED,
    T0,
    decision_line,
    write_run,
    year_run_fills,
    year_run_lines,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from broker.ledger import Ledger
from broker.orders import Mark
from broker.paper_store import PaperBookDocument, render_document
from report.figures import (
    MAX_SERIES_POINTS,
    MIN_CAGR_SPAN_DAYS,
    RunFolderError,
    build_report,
    downsample,
    report_json_bytes,
)


def test_standard_run_figures_match_hand_computation(tmp_path: Path) -> None:
    m = build_report(write_run(tmp_path)).metrics
    assert m.start_equity_usd == 10_000.0 and m.end_equity_usd == 11_025.0
    assert m.total_return_pct == pytest.approx(EXPECTED["total_return_pct"])
    assert m.cagr_pct is EXPECTED["cagr_pct"] is None
    assert m.max_drawdown_pct == pytest.approx(EXPECTED["max_drawdown_pct"])
    assert m.fees_usd == pytest.approx(EXPECTED["fees_usd"])
    assert m.realised_pnl_usd == pytest.approx(EXPECTED["realised_pnl_usd"])
    assert m.trades == 5
    assert m.round_trips == EXPECTED["round_trips"]
    assert m.win_rate_pct == pytest.approx(EXPECTED["win_rate_pct"])
    assert m.turnover == pytest.approx(EXPECTED["turnover"])
    assert m.exposure_time_pct == pytest.approx(EXPECTED["exposure_time_pct"])
    assert m.span_days == pytest.approx(4.0)


def test_sharpe_and_sortino_follow_the_documented_daily_formula(tmp_path: Path) -> None:
    report = build_report(write_run(tmp_path))
    closes = EXPECTED["daily_closes"]
    assert isinstance(closes, list)
    returns = [b / a - 1 for a, b in itertools.pairwise(closes)]
    mean = sum(returns) / len(returns)
    sample_sd = math.sqrt(sum((r - mean) ** 2 for r in returns) / (len(returns) - 1))
    downside = math.sqrt(sum(min(r, 0) ** 2 for r in returns) / len(returns))
    assert report.metrics.sharpe == pytest.approx(mean / sample_sd * math.sqrt(365))
    assert report.metrics.sortino == pytest.approx(mean / downside * math.sqrt(365))


def test_fees_and_realised_pnl_equal_an_independent_recomputation(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    fees = Decimal(0)
    realised = Decimal(0)
    lots: dict[str, list[list[Decimal]]] = defaultdict(list)
    with (run / "logs" / "trades.csv").open(newline="") as fh:
        for row in csv.DictReader(fh):
            qty, price = Decimal(row["quantity"]), Decimal(row["price"])
            fees += Decimal(row["fee_usd"])
            if row["side"] == "buy":
                lots[row["ticker"]].append([qty, price])
                continue
            while qty > 0:
                lot = lots[row["ticker"]][0]
                taken = min(qty, lot[0])
                realised += taken * (price - lot[1])
                lot[0] -= taken
                qty -= taken
                if lot[0] == 0:
                    lots[row["ticker"]].pop(0)
    metrics = build_report(run).metrics
    assert metrics.fees_usd == pytest.approx(float(fees))
    assert metrics.realised_pnl_usd == pytest.approx(float(realised))


def test_buy_and_hold_is_normalised_to_the_starting_equity(tmp_path: Path) -> None:
    report = build_report(write_run(tmp_path))
    line = report.buy_and_hold["BTC/USDT"]
    assert line[0].value == pytest.approx(10_000.0)
    assert line[-1].value == pytest.approx(11_000.0)  # 55000 / 50000


def test_activity_gate_passes_and_deciders(tmp_path: Path) -> None:
    report = build_report(write_run(tmp_path))
    assert report.gate_passes == {
        "agent_timer": 1,
        "anomaly": 1,
        "candle_close": 2,
        "wake": 1,
        "watchdog_no_market_data": 1,
    }
    day0 = report.days[0]
    assert (day0.day, day0.decisions, day0.agent_calls, day0.tokens) == ("2025-01-01", 2, 2, 1850)
    assert day0.cost_usd == pytest.approx(0.015)
    assert [d.day for d in report.days] == ["2025-01-01", "2025-01-02", "2025-01-03", "2025-01-05"]
    assert sum(d.decisions for d in report.days) == 5
    counts = {(d.decided_by, d.decider_reason): d.decisions for d in report.deciders}
    assert counts == {
        ("claude", "ok"): 2,
        ("fallback", "breaker_open"): 1,
        ("fallback", "no_api_key"): 2,
    }
    markers = report.trade_markers
    assert [m.side for m in markers] == ["buy", "buy", "sell", "sell", "sell"]
    assert markers[0].equity == 10_000.0  # the equity line's value at the fill


def test_reviews_and_failures_count_as_agent_activity(tmp_path: Path) -> None:
    lines = [decision_line(*d) for d in DECISIONS]
    # a fallback decision after a failed, unbilled Claude call still asked Claude once
    lines[2]["raw_decision"] = {"attempts": [{"kind": "timeout"}]}
    review = {
        "type": "review",
        "at_ms": T0 + 60_000,
        "tickers": ["BTC/USDT"],
        "decided_by": "claude",
        "usage": {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.001},
        "attempts": [{"kind": "ok"}],
    }
    failure = {"type": "agent_failure", "at_ms": T0 + DAY_MS + 1, "kind": "timeout", "detail": ""}
    report = build_report(write_run(tmp_path, decisions=[*lines, review, failure]))
    day0, day1 = report.days[0], report.days[1]
    assert (day0.decisions, day0.reviews, day0.agent_calls, day0.tokens) == (2, 1, 3, 1865)
    assert day0.cost_usd == pytest.approx(0.016)
    assert (day1.decisions, day1.agent_calls, day1.agent_failures) == (1, 1, 1)
    assert len(report.equity) == 5  # review and failure lines are not decisions


def test_json_is_byte_identical_across_builds(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    assert report_json_bytes(build_report(run)) == report_json_bytes(build_report(run))


def test_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match=r"decisions\.jsonl.*trades\.csv"):
        build_report(tmp_path)
    write_run(tmp_path)
    (tmp_path / "logs" / "trades.csv").unlink()
    with pytest.raises(RunFolderError, match=r"trades\.csv"):
        build_report(tmp_path)


def test_empty_run_says_there_is_nothing_to_report(tmp_path: Path) -> None:
    report = build_report(write_run(tmp_path, decisions=[], fills=[]))
    assert report.empty
    assert any("nothing to report" in note for note in report.notes)
    assert report.metrics.total_return_pct is None and "total_return_pct" in report.unavailable
    assert report.metrics.trades == 0 and report.equity == ()


def test_torn_last_line_is_skipped_with_a_note(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    with (run / "logs" / "decisions.jsonl").open("ab") as fh:
        fh.write(b'{"type":"decision","at_ms":17')
    report = build_report(run)
    assert len(report.equity) == 5
    assert any("incomplete last line" in note for note in report.notes)


def test_short_run_gives_reasons_instead_of_annualised_figures(tmp_path: Path) -> None:
    lines = [
        decision_line(T0, 100.0, 10.0, False, ["agent_timer"], "fallback", "no_api_key", None),
        decision_line(T0 + 3_600_000, 101.0, 10.0, False, ["agent_timer"], "fallback", "x", None),
        decision_line(T0 + 7_200_000, None, 10.0, False, ["agent_timer"], "fallback", "x", None),
    ]
    report = build_report(write_run(tmp_path, decisions=lines, fills=[]))
    assert len(report.equity) == 2  # the null portfolio value is skipped
    assert report.metrics.total_return_pct == pytest.approx(1.0)
    for name in ("cagr_pct", "sharpe", "sortino", "win_rate_pct"):
        assert getattr(report.metrics, name) is None
        assert report.unavailable[name]


def test_final_paper_ledger_value_ends_the_equity_series(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    ledger = Ledger(
        starting_cash_usd=Decimal("10000"),
        cash_usd=Decimal("5000"),
        reserved_usd=Decimal("0"),
        positions={
            "BTC/USDT": {
                "ticker": "BTC/USDT",
                "quantity": Decimal("0.1"),
                "cost_basis_usd": Decimal("5000"),
                "opened_at_ms": T0,
            }
        },
    )
    saved_at_ms = T0 + 5 * DAY_MS
    document = PaperBookDocument(
        saved_at_ms=saved_at_ms,
        ledger=ledger,
        marks={"BTC/USDT": Mark(price=60_000.0, at_ms=saved_at_ms)},
    )
    (run / "paper_broker.json").write_bytes(render_document(document))
    report = build_report(run)
    assert report.equity[-1].at_ms == saved_at_ms
    assert report.equity[-1].value == pytest.approx(5000 + 0.1 * 60_000)
    assert report.ledger is not None and report.ledger["open_positions"] == "1"


@settings(max_examples=examples(25), deadline=None)
@given(st.lists(st.floats(min_value=1.0, max_value=1e6), min_size=1, max_size=30))
def test_max_drawdown_equals_brute_force(values: list[float]) -> None:
    lines = [
        decision_line(T0 + i * 3_600_000, v, 10.0, False, ["agent_timer"], "fallback", "x", None)
        for i, v in enumerate(values)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        report = build_report(write_run(Path(tmp), decisions=lines, fills=[]))
    brute = max((1 - values[j] / max(values[: j + 1])) * 100 for j in range(len(values)))
    assert report.metrics.max_drawdown_pct == pytest.approx(brute)
    assert min(p.value for p in report.drawdown_pct) >= 0.0
    assert report.metrics.total_return_pct == pytest.approx((values[-1] / values[0] - 1) * 100)


def test_cagr_is_unavailable_below_thirty_days_with_the_reason(tmp_path: Path) -> None:
    report = build_report(write_run(tmp_path))  # the standard run spans 4 days
    assert report.metrics.cagr_pct is None
    reason = report.unavailable["cagr_pct"]
    assert "4.00 days" in reason and f"< {MIN_CAGR_SPAN_DAYS}" in reason


@pytest.mark.parametrize(
    ("span_days", "expected"),
    [
        (73.0, (1.1**5 - 1) * 100),  # 365 / 73 = 5 years' worth of +10 %: +61.051 %
        (365.0, 10.0),  # a year: CAGR is the total return
        (MIN_CAGR_SPAN_DAYS, (1.1 ** (365 / 30) - 1) * 100),  # the shortest span annualised
        (MIN_CAGR_SPAN_DAYS - 0.01, None),
    ],
)
def test_cagr_from_thirty_days_on(tmp_path: Path, span_days: float, expected: float | None) -> None:
    lines = [
        decision_line(T0, 10_000.0, 10.0, False, ["agent_timer"], "fallback", "x", None),
        decision_line(
            T0 + round(span_days * DAY_MS),
            11_000.0,
            10.0,
            False,
            ["agent_timer"],
            "fallback",
            "x",
            None,
        ),
    ]
    metrics = build_report(write_run(tmp_path, decisions=lines, fills=[])).metrics
    assert metrics.total_return_pct == pytest.approx(10.0)
    if expected is None:
        assert metrics.cagr_pct is None
    else:
        assert metrics.cagr_pct == pytest.approx(expected)


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=0, max_size=400),
    st.integers(min_value=4, max_value=60),
)
def test_downsample_keeps_ends_and_every_buckets_extremes(
    values: list[float], max_points: int
) -> None:
    points = [(i * 1000, v) for i, v in enumerate(values)]
    kept = downsample(points, max_points)
    assert len(kept) <= max_points
    assert kept == sorted(set(kept))  # a subsequence of the input, in time order
    assert set(kept) <= set(points)
    if len(points) <= max_points:
        assert kept == points
        return
    assert kept[0] == points[0] and kept[-1] == points[-1]
    assert min(v for _, v in kept) == min(values) and max(v for _, v in kept) == max(values)
    buckets, inner = (max_points - 2) // 2, len(points) - 2
    for b in range(buckets):
        chunk = points[1 + b * inner // buckets : 1 + (b + 1) * inner // buckets]
        in_chunk = [v for p, v in kept if chunk and chunk[0][0] <= p <= chunk[-1][0]]
        if chunk:
            assert min(in_chunk) == min(v for _, v in chunk)
            assert max(in_chunk) == max(v for _, v in chunk)


def test_a_long_run_is_drawn_downsampled_but_measured_in_full(tmp_path: Path) -> None:
    lines = year_run_lines(10_000)
    # a one-decision crash and a one-decision spike: a stride sample would likely miss both
    lines[6_001]["snapshot"]["portfolio_value"] = 1_000.0
    lines[2_999]["snapshot"]["portfolio_value"] = 50_000.0
    run = write_run(tmp_path, decisions=lines, fills=year_run_fills(40))
    report = build_report(run)
    full = [line["snapshot"]["portfolio_value"] for line in lines]
    assert report.equity_points == len(full) == 10_000
    assert len(report.equity) <= MAX_SERIES_POINTS and len(report.drawdown_pct) <= MAX_SERIES_POINTS
    assert all(len(line) <= MAX_SERIES_POINTS for line in report.buy_and_hold.values())
    assert set(report.buy_and_hold) == {"BTC/USDT", "ETH/USDT", "SOL/USDT"}
    # the figures come from all 10,000 points
    brute_dd = max((1 - v / max(full[: i + 1])) * 100 for i, v in enumerate(full))
    assert report.metrics.max_drawdown_pct == pytest.approx(brute_dd)
    assert report.metrics.total_return_pct == pytest.approx((full[-1] / full[0] - 1) * 100)
    assert report.metrics.turnover == pytest.approx(40 * 0.01 * 90_000 / (sum(full) / len(full)))
    # and the drawn series still reach the trough, the spike and the deepest drawdown
    drawn = [p.value for p in report.equity]
    assert min(drawn) == 1_000.0 and max(drawn) == 50_000.0
    assert max(p.value for p in report.drawdown_pct) == pytest.approx(brute_dd)
    assert report.equity[0].at_ms == lines[0]["at_ms"]
    assert report.equity[-1].at_ms == lines[-1]["at_ms"]
    # a marker carries the full series' equity at its fill, not the drawn one
    times = [line["at_ms"] for line in lines]
    for marker in report.trade_markers:
        index = max(i for i, t in enumerate(times) if t <= marker.at_ms)
        assert marker.equity == full[index]
    assert any("at most 2,000 points" in note and "10,000" in note for note in report.notes)
    document = orjson.loads(report_json_bytes(report))
    assert len(document["equity"]) == len(report.equity) and document["equity_points"] == 10_000


def test_monthly_summary_sums_days_and_chains_month_end_returns(tmp_path: Path) -> None:
    def at(month: int, day: int) -> int:
        return int(datetime(2025, month, day, 12, tzinfo=UTC).timestamp() * 1000)

    usage = {"input_tokens": 100, "output_tokens": 20, "cost_usd": 0.5}
    lines = [
        decision_line(at(1, 1), 100.0, 10.0, False, ["agent_timer"], "claude", "ok", usage),
        decision_line(at(1, 20), 110.0, 10.0, False, ["agent_timer"], "claude", "ok", usage),
        decision_line(at(2, 10), 99.0, 10.0, False, ["agent_timer"], "fallback", "x", None),
        {"type": "agent_failure", "at_ms": at(3, 3), "kind": "timeout", "detail": ""},
        decision_line(at(4, 5), 120.0, 10.0, False, ["agent_timer"], "fallback", "x", None),
    ]
    months = build_report(write_run(tmp_path, decisions=lines, fills=[])).months
    assert [m.month for m in months] == ["2025-01", "2025-02", "2025-03", "2025-04"]
    january, february, march, april = months
    assert (january.active_days, january.decisions, january.agent_calls) == (2, 2, 2)
    assert january.tokens == 240 and january.cost_usd == pytest.approx(1.0)
    assert january.end_equity_usd == 110.0 and january.return_pct == pytest.approx(10.0)
    assert february.return_pct == pytest.approx(-10.0)  # 110 -> 99
    assert (march.agent_failures, march.decisions, march.end_equity_usd) == (1, 0, None)
    assert march.return_pct is None
    assert april.return_pct == pytest.approx((120 / 99 - 1) * 100)  # from February's end


def test_the_standard_run_is_one_month(tmp_path: Path) -> None:
    (month,) = build_report(write_run(tmp_path)).months
    assert (month.month, month.active_days, month.decisions) == ("2025-01", 4, 5)
    assert month.end_equity_usd == 11_025.0
    assert month.return_pct == pytest.approx(EXPECTED["total_return_pct"])
