"""The API of a running daemon whose broker cannot answer (the exchange down: a RetryableError;
disagreeing: a HaltTradingError). The routes that show the account say it is unavailable and
why, with every other figure; they were 500s with a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.api_support import IdleDaemon, serve_api, write_state_dir

from api.metrics import DaemonCounts, DaemonMetrics
from api.models import AccountBody
from core.errors import HaltTradingError, RetryableError, VigilError


class BrokerDown(IdleDaemon):
    def __init__(self, error: VigilError) -> None:
        self.error = error

    async def account(self) -> AccountBody:
        raise self.error


@pytest.mark.parametrize(
    "error",
    [RetryableError("account: the exchange answered 503"), HaltTradingError("a short on BTC")],
)
async def test_a_broker_that_cannot_answer_leaves_the_account_unavailable(
    tmp_path: Path, error: VigilError
) -> None:
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    daemon = BrokerDown(error)
    async with serve_api(state_dir, daemon=daemon) as api:
        code, status = await api.get("/api/status")
        positions_code, positions = await api.get("/api/positions")
    assert code == 200 and isinstance(status, dict)
    assert status["equity_usd"] is None and status["open_positions"] is None
    assert str(error) in status["unavailable"]["equity_usd"]
    assert status["last_decision"] is not None and status["loops"] == []
    assert positions_code == 200 and isinstance(positions, dict)
    assert positions["positions"] == [] and str(error) in positions["unavailable"]["account"]


class CountingBrokerDown(BrokerDown):
    def counts(self) -> DaemonCounts:
        return DaemonCounts(ticks=3, frames=3)


async def test_a_scrape_while_the_broker_cannot_answer_leaves_out_the_account(
    tmp_path: Path,
) -> None:
    """/metrics was a 500: Prometheus lost every figure of the scrape, the ticks included."""
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    daemon = CountingBrokerDown(RetryableError("account: the exchange answered 503"))
    async with serve_api(state_dir, daemon=daemon, metrics=DaemonMetrics()) as api:
        scrape = await api.session.get(api.url + "/metrics", headers=api.auth)
        code, text = scrape.status, await scrape.text()
    assert code == 200
    assert "vigil_ticks_total 3.0" in text
    assert "vigil_equity_usd" not in text and "vigil_open_positions" not in text
