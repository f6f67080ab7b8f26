"""The daemon against its simulator makes journaled decisions with no API key: candle closes pass the
gate, the fallback decides and says why, caps hold, nulls carry reasons, every line is complete."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from fakes.daemon import LIGHT_MARKET, daemon_env, sim_daemon, stop, until_while_running
from fakes.journal_lines import journal_text

from market.recorded import load_fear_greed, load_funding

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
WANTED_DECISIONS = 5


async def _journal_lines(path: Path, proc: asyncio.subprocess.Process, wanted: int) -> None:
    """Until ``wanted`` decisions are journaled, one of them saw the derivatives monitor's data and
    one was triggered by a candle close (warm-up holds the simulated clock, so the first decisions
    can all come from the agent's timer before the first 15m close)."""

    def journaled() -> bool:
        text = path.read_bytes() if path.exists() else b""
        return (
            text.count(b"\n") >= wanted
            and b'"funding_rates":{' in text
            and b'"candle_close:' in text
        )

    await until_while_running(proc, journaled, f"{wanted} decisions")


@pytest.mark.timeout(240)
async def test_fallback_decisions_are_journaled_with_reasons_and_caps(tmp_path: Path) -> None:
    env = daemon_env(
        tmp_path / "state",
        VIGIL_SIM__START="2025-04-07T00:00:00Z",
        VIGIL_SIM__SPEED="900",
        **LIGHT_MARKET,
    )
    log_path = tmp_path / "daemon.log"
    journal = tmp_path / "state" / "logs" / "decisions.jsonl"
    async with sim_daemon(env, log_path) as proc:
        await _journal_lines(journal, proc, WANTED_DECISIONS)
        assert await stop(proc) == 0
    log = log_path.read_text()
    assert "Traceback" not in log, log

    lines = journal_text(journal).splitlines()
    records = [json.loads(line) for line in lines]  # every line complete JSON
    assert len(records) >= WANTED_DECISIONS
    for rec in records:
        assert "error" not in rec, rec.get("error")
        assert rec["decided_by"] == "fallback" and rec["decider_reason"] == "no_api_key"
        assert rec["trigger"], "a decision always says what triggered it"
        assert len(rec["snapshot_digest"]) == 16
        snap = rec["snapshot"]
        for field in ("open_interest", "taker_delta", "long_short_ratio", "basis", "liquidations"):
            assert snap[field] is None and snap["unavailable"][field]
        for field in ("funding_rates", "fear_greed"):  # filled once the monitor has polled
            assert (snap[field] is None) == (field in snap["unavailable"])
        for view in snap["ts_posteriors"]["tickers"].values():  # no regime has 3 trades yet
            assert view["in_force"] == "global" and view["regime_trades"] < 3, view
        assert isinstance(snap["recent_trades"], list)
        assert snap["regime"] is not None, snap["unavailable"].get("regime")
        gate = rec["gate_update"]
        assert 60 <= gate["next_check_secs"] <= 3600
        value = snap["portfolio_value"]
        for intent in rec["accepted"]:
            if intent["action"] == "BUY":
                assert intent["notional_usd"] <= 0.20 * value + 1e-6
    _check_recorded_context(records)
    triggers = [t for rec in records for t in rec["trigger"]]
    assert any(t.startswith("candle_close:") for t in triggers)
    assert len({rec["decision_id"] for rec in records}) == len(records)


def _check_recorded_context(records: list[dict[str, Any]]) -> None:
    """Funding and Fear & Greed in the snapshot are the recorded values at that instant."""
    funding = load_funding("BTC/USDT")
    fear_greed = load_fear_greed()
    filled = [r["snapshot"] for r in records if r["snapshot"]["funding_rates"] is not None]
    assert filled, "the derivatives monitor never filled funding"
    for snap in filled:
        at_ms = snap["at_ms"]
        recorded = funding[funding.index <= at_ms]["funding_rate"].iloc[-1]
        assert snap["funding_rates"]["BTC/USDT"] == pytest.approx(recorded)
        day_s = at_ms // 1000 // 86_400 * 86_400
        assert snap["fear_greed"]["value"] == int(fear_greed.loc[day_s, "value"])
