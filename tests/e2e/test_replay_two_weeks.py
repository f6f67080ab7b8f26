"""Two weeks of replay, its report checked against an independent recomputation (issue #8).

One replay of 2025-03-01 .. 2025-03-14 (3 tickers, fallback decider, in process, run once for the
module), its report written as ``vigil replay`` writes it. Then, from ``logs/trades.csv`` and the
recording only (``sim.feed.SimFeed``: what the kline stream showed at an instant), never from the
daemon's snapshots, the tests recompute the fees, the equity at every decision instant, the total
return, drawdown, ratios, exposure and the round trips, and compare them with report.json
(see ``replay_support`` for the accounting rules and why they are the paper broker's).

Alongside (in a subprocess, while the two weeks run) ``vigil replay`` runs the first day from the
command line with a clean environment: its exit code, progress lines, summary and run folder are
checked, and its journals must equal the first day of the two weeks line for line (a different
process and hash seed, and nothing in the replay may look past its own end).

The two weeks run with memory on (the default); the same two weeks with ``--no-memory`` run once
more for the module's last tests: the memory ON run writes Trades and Insights that later
snapshots carry, and it differs from the OFF run for a reason the compare report names.
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from replay_support import (
    DAY_MS,
    DETERMINISTIC_FILES,
    TICKERS,
    daily_sharpe,
    default_settings,
    exposure_pct,
    holdings_after,
    iso_day,
    max_drawdown_pct,
    read_decisions,
    read_json,
    read_trades,
    relative_gap,
    replay_in_process,
    replay_options,
    round_trip_pnls,
    total_return_pct,
)
from two_weeks_run import DAYS, FIRST_DAY, TwoWeeks, run_two_weeks

from memory.outbox import MemoryOutbox
from report.compare import compare_runs
from report.html import write_report

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

#: equity is a sum of a few float products of ~1e4 USD: float rounding is ~1e-12 relative
EQUITY_REL_TOL = 1e-9


@pytest.fixture(scope="module")
def two_weeks(tmp_path_factory: pytest.TempPathFactory) -> TwoWeeks:
    return run_two_weeks(tmp_path_factory.mktemp("two_weeks"))


# --- the run itself ----------------------------------------------------------------------------


def test_the_two_weeks_ran_to_the_end_and_traded(two_weeks: TwoWeeks) -> None:
    outcome, options = two_weeks.outcome, two_weeks.options
    assert outcome.finished
    assert DAYS - 0.01 < outcome.simulated_days <= DAYS
    # the fallback decides at least at every 15m close
    assert len(two_weeks.decisions) == outcome.decisions >= DAYS * 96
    assert all(options.start_ms <= d.at_ms < options.end_ms for d in two_weeks.decisions)
    assert len(two_weeks.trades) == outcome.fills >= 10
    assert {t.ticker for t in two_weeks.trades} <= set(TICKERS)
    assert all(d.portfolio_value is not None for d in two_weeks.decisions)


def test_a_regime_with_three_trades_puts_its_posteriors_in_force(two_weeks: TwoWeeks) -> None:
    """Exits are learned under the ticker's crypto regime and each ticker's snapshot looks its
    posteriors up under the same key: once that regime has 3 trades they are in force, and the
    Thompson draw the decision used sits beside each mean."""
    model = read_json(two_weeks.run_dir / "models" / "online_learner.json")
    assert max(model["regime_counts"].values()) >= 3, model["regime_counts"]
    in_force_regime = 0
    for raw in (two_weeks.run_dir / "logs" / "decisions.jsonl").read_bytes().splitlines():
        snapshot = orjson.loads(raw)["snapshot"]
        posteriors = snapshot["ts_posteriors"]
        for ticker, view in posteriors["tickers"].items():
            label = (snapshot["regime"] or {}).get("crypto", {}).get(ticker)
            if label in (None, "unknown"):
                assert view["in_force"] == "global", (ticker, view)
                continue
            assert view["regime"] == label
            expected = "regime" if view["regime_trades"] >= 3 else "global"
            assert view["in_force"] == expected, (ticker, view)
            in_force_regime += expected == "regime"
            for signal in view["signals"].values():
                assert 0.0 <= signal["draw"] <= 1.0 and 0.0 < signal["mean"] < 1.0
    assert in_force_regime > 0, "no snapshot ever used a regime's own posteriors"


# --- (a) fees ----------------------------------------------------------------------------------


def test_fees_paid_are_the_sum_of_the_fills_fees(two_weeks: TwoWeeks) -> None:
    fees = sum(t.fee_usd for t in two_weeks.trades)
    assert fees > 0
    assert relative_gap(two_weeks.metrics["fees_usd"], fees) < 1e-12
    assert relative_gap(float(two_weeks.report["ledger"]["fees_paid_usd"]), fees) < 1e-9


def test_every_fee_follows_the_configured_fee_model(two_weeks: TwoWeeks) -> None:
    """BUY limits pay the maker fee, SELLs the taker fee, on the notional, to 1e-8 USD."""
    terms = two_weeks.settings.broker
    for trade in two_weeks.trades:
        rate_pct = terms.maker_fee_pct if trade.side == "buy" else terms.taker_fee_pct
        expected = trade.notional_usd * rate_pct / 100.0
        assert abs(trade.fee_usd - expected) <= 0.5e-8 + 1e-12 * expected, trade


def test_fill_prices_follow_the_recording(two_weeks: TwoWeeks) -> None:
    """A SELL fills at the recorded price then minus the slippage; a BUY limit at its limit,
    at the first update after it was placed that traded strictly below it, within its life.

    When a BUY was placed is the broker's record (paper_broker.json): the tracker's position
    adds are placed outside any decision line."""
    terms, feed = two_weeks.settings.broker, two_weeks.feed
    orders = read_json(two_weeks.run_dir / "paper_broker.json")["orders"]
    placed = {o["client_order_id"]: int(o["placed_at_ms"]) for o in orders}
    interval_ms = two_weeks.options.update_ms()
    for trade in two_weeks.trades:
        if trade.side == "sell":
            market = feed.last_price(trade.ticker, trade.at_ms)
            assert market is not None
            assert relative_gap(trade.price, market * (1 - terms.slippage_pct / 100)) < 1e-12
            continue
        placed_ms = placed[trade.client_order_id]
        assert trade.at_ms % interval_ms == 0, "a BUY fills on a kline update"
        assert 0 < trade.at_ms - placed_ms <= terms.limit_ttl_secs * 1000
        before = range(placed_ms - placed_ms % interval_ms + interval_ms, trade.at_ms, interval_ms)
        seen = [feed.last_price(trade.ticker, at) for at in before]
        assert all(price is not None and price >= trade.price for price in seen), trade
        fill_price = feed.last_price(trade.ticker, trade.at_ms)
        assert fill_price is not None and fill_price < trade.price, trade


# --- (b) equity at every decision --------------------------------------------------------------


def test_equity_at_every_decision_matches_the_recomputation(two_weeks: TwoWeeks) -> None:
    """The report's equity series is the decision lines' portfolio value (its docstring): all
    of them match the recomputation, and so does every point report.json keeps for drawing."""
    mine = two_weeks.recomputed
    assert [d.at_ms for d in two_weeks.decisions] == [p.at_ms for p in mine]
    for decision, point in zip(two_weeks.decisions, mine, strict=True):
        assert decision.portfolio_value is not None
        gap = relative_gap(decision.portfolio_value, point.equity_usd)
        assert gap < EQUITY_REL_TOL, f"{decision.portfolio_value} vs {point}"
    # the paper broker saves its book with the latest marks at shutdown, after the last
    # decision: the report ends its series with that ledger value, recomputed here too
    report, final = two_weeks.report, two_weeks.final
    assert final.at_ms > mine[-1].at_ms
    assert not any("final ledger value left out" in note for note in report["notes"])
    assert report.get("equity_points", len(report["equity"])) == len(mine) + 1
    by_instant = {p.at_ms: p.equity_usd for p in two_weeks.series}
    assert report["equity"][0]["at_ms"] == mine[0].at_ms
    assert report["equity"][-1]["at_ms"] == final.at_ms
    for shown in report["equity"]:
        assert relative_gap(shown["value"], by_instant[shown["at_ms"]]) < EQUITY_REL_TOL, shown
    # the series moves: positions were marked, not just cash carried
    assert max(two_weeks.values) - min(two_weeks.values) > 1.0


def test_cash_after_the_last_fill_is_the_ledgers(two_weeks: TwoWeeks) -> None:
    ledger = read_json(two_weeks.run_dir / "paper_broker.json")["ledger"]
    holdings = holdings_after(
        two_weeks.settings.broker.starting_cash_usd,
        two_weeks.trades,
        until_ms=two_weeks.options.end_ms,
        skip=frozenset(),
    )
    assert abs(holdings.cash_usd - float(ledger["cash_usd"]) - float(ledger["reserved_usd"])) < 1e-6
    assert set(holdings.quantities) == set(ledger["positions"])
    for ticker, quantity in holdings.quantities.items():
        assert quantity == pytest.approx(float(ledger["positions"][ticker]["quantity"]), abs=1e-9)


# --- (c) returns, drawdown, ratios -------------------------------------------------------------


def test_total_return_and_max_drawdown_match(two_weeks: TwoWeeks) -> None:
    metrics, values = two_weeks.metrics, two_weeks.values
    assert values[0] == two_weeks.settings.broker.starting_cash_usd  # nothing filled before
    assert metrics["start_equity_usd"] == pytest.approx(values[0], rel=EQUITY_REL_TOL)
    assert metrics["end_equity_usd"] == pytest.approx(values[-1], rel=EQUITY_REL_TOL)
    assert metrics["total_return_pct"] == pytest.approx(total_return_pct(values), abs=1e-6)
    drawdown = max_drawdown_pct(values)
    assert drawdown > 0
    assert metrics["max_drawdown_pct"] == pytest.approx(drawdown, abs=1e-6)
    assert max(p["value"] for p in two_weeks.report["drawdown_pct"]) == pytest.approx(
        drawdown, abs=1e-6
    )
    for month in two_weeks.report.get("months", []):  # one month: the run's own return
        assert month["month"] == FIRST_DAY[:7]
        assert month["end_equity_usd"] == pytest.approx(values[-1], rel=EQUITY_REL_TOL)
        assert month["return_pct"] == pytest.approx(total_return_pct(values), abs=1e-6)


def test_annualised_figures_turnover_and_exposure_match(two_weeks: TwoWeeks) -> None:
    metrics, points = two_weeks.metrics, two_weeks.series
    span_days = (points[-1].at_ms - points[0].at_ms) / DAY_MS
    assert metrics["span_days"] == pytest.approx(span_days, rel=1e-12)
    if metrics["cagr_pct"] is None:  # the report declines to annualise short runs
        assert "cagr_pct" in two_weeks.report["unavailable"]
    else:
        growth = two_weeks.values[-1] / two_weeks.values[0]
        cagr = (growth ** (365 / span_days) - 1) * 100
        assert metrics["cagr_pct"] == pytest.approx(cagr, rel=1e-6)
    sharpe = daily_sharpe([(p.at_ms, p.equity_usd) for p in points])
    assert metrics["sharpe"] == pytest.approx(sharpe, rel=1e-6)
    notional = sum(t.notional_usd for t in two_weeks.trades)
    assert metrics["traded_notional_usd"] == pytest.approx(notional, rel=1e-12)
    mean_equity = sum(two_weeks.values) / len(points)
    assert metrics["turnover"] == pytest.approx(notional / mean_equity, rel=1e-9)
    exposure = exposure_pct(two_weeks.recomputed)  # the report's exposure reads decisions
    assert 0 < exposure < 100
    assert metrics["exposure_time_pct"] == pytest.approx(exposure, abs=1e-9)


# --- (d) trades, round trips, win rate ---------------------------------------------------------


def test_trades_round_trips_and_win_rate_match(two_weeks: TwoWeeks) -> None:
    metrics, trades = two_weeks.metrics, two_weeks.trades
    pnls = round_trip_pnls(trades)
    assert metrics["trades"] == len(trades)
    assert metrics["round_trips"] == len(pnls) == sum(1 for t in trades if t.side == "sell")
    wins = sum(1 for pnl in pnls if pnl > 0)
    assert 0 < wins < len(pnls)  # both kinds, or the rate checks little
    assert metrics["win_rate_pct"] == pytest.approx(wins / len(pnls) * 100, abs=1e-9)
    markers = two_weeks.report["trade_markers"]
    assert [(m["at_ms"], m["ticker"], m["side"]) for m in markers] == [
        (t.at_ms, t.ticker, t.side) for t in trades
    ]


def test_realised_pnl_matches_the_ledger_when_every_sell_closes_its_position(
    two_weeks: TwoWeeks,
) -> None:
    """The report matches sells FIFO, the ledger by average cost: the two agree when each sell
    closes the whole position, which is how this span's exits go (checked here). A position
    still open at the end (the tracker no longer pushes winners out by age alone) has realised
    nothing: its buys since its ticker's last sell are left out."""
    trades = two_weeks.trades
    for sell in (t for t in trades if t.side == "sell"):
        held = holdings_after(0.0, trades, until_ms=sell.at_ms - 1, skip=frozenset())
        before_sell = held.quantities.get(sell.ticker, 0.0)
        assert sell.quantity == pytest.approx(before_sell, abs=1e-9), sell
    bought_since_sell: dict[str, float] = defaultdict(float)
    gross = 0.0
    for trade in trades:  # each sell closes its position: it realises what was bought since
        if trade.side == "buy":
            bought_since_sell[trade.ticker] += trade.notional_usd
        else:
            gross += trade.notional_usd - bought_since_sell.pop(trade.ticker, 0.0)
    assert any(t.side == "sell" for t in trades)
    assert two_weeks.metrics["realised_pnl_usd"] == pytest.approx(gross, abs=1e-6)
    ledger = two_weeks.report["ledger"]
    assert float(ledger["realised_pnl_usd"]) == pytest.approx(gross, abs=1e-6)


# --- the command line --------------------------------------------------------------------------

PROGRESS = re.compile(
    r"^(?P<when>\d{4}-\d\d-\d\d \d\d:\d\d) \[[#-]{24}\]\s+(?P<pct>\d+)%  equity [\d,.]+  "
    r"decisions (?P<decisions>[\d,]+)  fills (?P<fills>[\d,]+)  [\d.]+ days/s$",
    re.MULTILINE,
)
SUMMARY = re.compile(
    r"^replayed 1\.0 days in [\d.]+ s \([\d.]+ days/s, (?P<ticks>[\d,]+) ticks, [\d,]+ ticks/s\): "
    r"(?P<decisions>[\d,]+) decisions, (?P<fills>[\d,]+) fills, total return [+-]\d+\.\d\d %$",
    re.MULTILINE,
)


def _count(text: str) -> int:
    return int(text.replace(",", ""))


def test_the_cli_replays_a_day_with_progress_summary_and_run_folder(two_weeks: TwoWeeks) -> None:
    cli = two_weeks.cli
    assert cli.returncode == 0, cli.stderr[-3000:]
    progress = list(PROGRESS.finditer(cli.stderr))
    assert len(progress) >= 5, cli.stderr[-3000:]
    assert all(m["when"].startswith(FIRST_DAY) for m in progress)
    percents = [int(m["pct"]) for m in progress]
    assert percents == sorted(percents) and percents[-1] >= 90
    summary = SUMMARY.search(cli.stderr)
    assert summary is not None, cli.stderr[-3000:]
    assert f"report: {cli.run_dir / 'report.html'}" in cli.stderr
    for name in (*DETERMINISTIC_FILES, "report.json", "report.html", "replay.json"):
        assert (cli.run_dir / name).is_file(), name
    decisions = read_decisions(cli.run_dir)
    trades = read_trades(cli.run_dir)
    assert _count(summary["decisions"]) == len(decisions) > 0
    assert _count(summary["fills"]) == len(trades)
    assert _count(progress[-1]["decisions"]) <= len(decisions)
    replay_json = read_json(cli.run_dir / "replay.json")
    assert replay_json["finished"] is True
    assert replay_json["decisions"] == len(decisions)
    assert replay_json["to_ms"] - replay_json["from_ms"] == DAY_MS
    assert read_json(cli.run_dir / "report.json")["metrics"]["trades"] == len(trades)
    assert "<html" in (cli.run_dir / "report.html").read_text()


def test_the_cli_day_equals_the_first_day_of_the_two_weeks(two_weeks: TwoWeeks) -> None:
    """Another process (another hash seed), a shorter span: the same lines up to its end."""
    day_end_ms = two_weeks.options.start_ms + DAY_MS
    cli_lines = (two_weeks.cli.run_dir / "logs" / "decisions.jsonl").read_bytes().splitlines()
    long_lines = (two_weeks.run_dir / "logs" / "decisions.jsonl").read_bytes().splitlines()
    first_day = [d for d in two_weeks.decisions if d.at_ms < day_end_ms]
    assert cli_lines == long_lines[: len(first_day)]
    assert iso_day(first_day[-1].at_ms) == FIRST_DAY
    cli_trades = (two_weeks.cli.run_dir / "logs" / "trades.csv").read_text().splitlines()
    long_trades = (two_weeks.run_dir / "logs" / "trades.csv").read_text().splitlines()
    day_trades = [t for t in two_weeks.trades if t.at_ms < day_end_ms]
    assert len(day_trades) > 0
    assert cli_trades == long_trades[: 1 + len(day_trades)]


# --- memory ON (the two weeks) against memory OFF ----------------------------------------------


@pytest.fixture(scope="module")
def without_memory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same two weeks replayed with ``--no-memory``, its report written."""
    root = tmp_path_factory.mktemp("two_weeks_without_memory")
    options = replay_options(root / "off", FIRST_DAY, DAYS, memory=False)
    replay_in_process(default_settings(root), options)
    write_report(options.out_dir)
    return options.out_dir


def _decisions(run: Path) -> list[dict[str, Any]]:
    lines = (run / "logs" / "decisions.jsonl").read_bytes().splitlines()
    return [r for r in map(orjson.loads, lines) if r.get("type", "decision") == "decision"]


def test_exits_become_trades_and_insights(two_weeks: TwoWeeks) -> None:
    with sqlite3.connect(two_weeks.run_dir / "memory.db") as db:
        trades = db.execute("SELECT COUNT(*) FROM trades").fetchone()[0]
        insights = db.execute("SELECT COUNT(*) FROM insights").fetchone()[0]
        situations = db.execute("SELECT COUNT(*) FROM trades WHERE vector IS NOT NULL").fetchone()[
            0
        ]
    sells = sum(
        1
        for line in (two_weeks.run_dir / "logs" / "trades.csv").read_text().splitlines()
        if ",sell," in line
    )
    assert trades == sells > 0
    assert insights >= 1 and situations == trades
    outbox = MemoryOutbox(two_weeks.run_dir / "outbox" / "memory.jsonl")
    assert outbox.path.stat().st_size > 0 and outbox.pending_count() == 0  # all written


def test_later_snapshots_carry_what_earlier_exits_wrote(
    two_weeks: TwoWeeks, without_memory: Path
) -> None:
    decisions = _decisions(two_weeks.run_dir)
    first = decisions[0]["snapshot"]
    assert first["historical_insights"] is None
    assert first["unavailable"]["historical_insights"].startswith("memory is empty")
    carrying = [d for d in decisions if d["snapshot"]["historical_insights"]]
    assert carrying, "no snapshot carried memory"
    items = carrying[-1]["snapshot"]["historical_insights"]
    kinds = {item["kind"] for item in items}
    assert {"posterior", "regime_stats", "insight"} <= kinds
    insight = next(item for item in items if item["kind"] == "insight")
    assert {"sim", "role_weight", "age_days", "salience", "score"} <= set(insight)
    assert sum(len(orjson.dumps(item)) for item in items) <= 1500  # the character budget


def test_no_memory_neither_reads_nor_writes(without_memory: Path) -> None:
    assert not (without_memory / "memory.db").exists()
    for decision in _decisions(without_memory):
        assert decision["snapshot"]["historical_insights"] is None
        assert "memory is off" in decision["snapshot"]["unavailable"]["historical_insights"]


def test_compare_says_which_decisions_memory_changed_and_why(
    two_weeks: TwoWeeks, without_memory: Path
) -> None:
    text = compare_runs(two_weeks.run_dir, without_memory)
    assert "memory rule changes" in text
    assert "the memory rule changed" in text and "posterior win rate" in text
    changed = [
        d for d in _decisions(two_weeks.run_dir)
        for t in d["raw_decision"]["decisions"] if "memory rule: size x" in t["reasoning"]
    ]  # fmt: skip
    assert changed
