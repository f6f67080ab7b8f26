"""``tracker.btc_ticker`` names the ticker whose fall scores the altcoins' correlation risk. It is
checked as ``market.tickers`` are, BASE/USDT in capitals: a typo (``BTCUSDT``, ``btc/usdt``) matched
no ticker's features, and that risk was off without a word."""

from __future__ import annotations

import pytest

from core.errors import EXIT_REFUSE_TO_START
from runner.cli import main

pytestmark = pytest.mark.usefixtures("no_host_settings")


@pytest.mark.parametrize("ticker", ["BTCUSDT", "btc/usdt", "", "-1", "BTC/USDT\n"])
def test_a_btc_ticker_that_is_not_base_usdt_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], ticker: str
) -> None:
    monkeypatch.setenv("VIGIL_TRACKER__BTC_TICKER", ticker)
    assert main(["config", "show"]) == EXIT_REFUSE_TO_START
    err = capsys.readouterr().err
    assert f"tracker.btc_ticker = {ticker!r}: String should match pattern" in err


def test_another_ticker_of_that_form_is_taken(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VIGIL_TRACKER__BTC_TICKER", "ETH/USDT")
    assert main(["config", "show"]) == 0
    assert '"btc_ticker": "ETH/USDT"' in capsys.readouterr().out
