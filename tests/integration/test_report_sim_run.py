"""The report of a real short simulator run: the daemon trades on loopback, then the report's
figures are checked against the run's own files (journal line count, trades.csv, paper ledger)."""

from __future__ import annotations

import asyncio
import csv
import json
from decimal import Decimal
from pathlib import Path

import pytest
from fakes.daemon import LIGHT_MARKET, daemon_env, sim_daemon, stop, until_while_running

from report.html import write_report

REPO = Path(__file__).resolve().parents[2]
WANTED_DECISIONS = 6


async def _until_traded(state: Path, proc: asyncio.subprocess.Process) -> None:
    """Until the run has a fill and a few decisions (from 05:00 the fallback buys ETH at once)."""
    journal, trades = state / "logs" / "decisions.jsonl", state / "logs" / "trades.csv"

    def traded() -> bool:
        decisions = journal.read_bytes().count(b"\n") if journal.exists() else 0
        fills = trades.read_bytes().count(b"\n") - 1 if trades.exists() else 0
        return decisions >= WANTED_DECISIONS and fills >= 1

    await until_while_running(proc, traded, "trading")


@pytest.mark.timeout(300)
async def test_report_of_a_real_simulator_run(tmp_path: Path) -> None:
    state = tmp_path / "state"
    # ETH's regime turned medium at the 04:00 close: the fallback buys it at the first closes. The
    # speed is low enough for a loaded machine to keep up: a daemon behind its clock places limit
    # BUYs at stale prices that expire unfilled, and the run never gets its fill.
    env = daemon_env(
        state, VIGIL_SIM__START="2025-03-01T05:00:00Z", VIGIL_SIM__SPEED="600", **LIGHT_MARKET
    )
    async with sim_daemon(env, tmp_path / "daemon.log") as proc:
        await _until_traded(state, proc)
        assert await stop(proc) == 0

    report = write_report(state, tmp_path / "out")
    lines = [json.loads(x) for x in (state / "logs" / "decisions.jsonl").read_text().splitlines()]
    decisions = [x for x in lines if x.get("type") == "decision"]
    assert sum(d.decisions for d in report.days) == len(decisions)
    assert sum(d.decisions for d in report.deciders) == len(decisions)
    assert {d.decided_by for d in report.deciders} == {"fallback"}
    assert report.gate_passes.get("candle_close", 0) >= 1
    assert report.metrics.start_equity_usd == pytest.approx(10_000.0)
    assert report.metrics.max_drawdown_pct is not None and report.metrics.max_drawdown_pct >= 0

    with (state / "logs" / "trades.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert report.metrics.trades == len(rows) >= 1
    fees = sum(Decimal(r["fee_usd"]) for r in rows)
    assert report.metrics.fees_usd == pytest.approx(float(fees))
    ledger = json.loads((state / "paper_broker.json").read_text())["ledger"]
    assert Decimal(ledger["fees_paid_usd"]) == fees  # the broker's own books agree
    if all(r["side"] == "buy" for r in rows):
        assert report.metrics.realised_pnl_usd == 0.0
        assert Decimal(ledger["realised_pnl_usd"]) == 0
    page = (tmp_path / "out" / "report.html").read_text()
    # the two charts (equity, drawdown): a uPlot box each, and their data in the page
    assert page.count("<div class='chart'") == 2
    assert "id='chart-equity'" in page and "id='chart-drawdown'" in page
    assert page.count("<script") == 3 and "id='vigil-charts'" in page
