"""The run report's figures against hand-computed values and an independent recomputation."""

from __future__ import annotations

import csv
import itertools
import math
import tempfile
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest
from fakes.report_support import DAY_MS, DECISIONS, EXPECTED, T0, decision_line, write_run
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.ledger import Ledger
from broker.orders import Mark
from broker.paper_store import PaperBookDocument, render_document
from runner.report import RunFolderError, build_report, report_json_bytes


def test_standard_run_figures_match_hand_computation(tmp_path: Path) -> None:
    m = build_report(write_run(tmp_path)).metrics
    assert m.start_equity_usd == 10_000.0 and m.end_equity_usd == 11_025.0
    assert m.total_return_pct == pytest.approx(EXPECTED["total_return_pct"])
    assert m.cagr_pct == pytest.approx(EXPECTED["cagr_pct"])
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


@settings(max_examples=25, deadline=None)
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
