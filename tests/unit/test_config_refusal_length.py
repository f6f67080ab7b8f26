"""A configuration refusal names the value it refuses, cut to a line a terminal shows: a ticker of
10,000 characters in ``VIGIL_MARKET__TICKERS`` (echoed twice, by the line and by the ticker's own
check) wrote 20 KB to the terminal."""

from __future__ import annotations

import pytest

from core.errors import EXIT_REFUSE_TO_START
from runner.cli import main

pytestmark = pytest.mark.usefixtures("no_host_settings")


def test_a_huge_value_is_named_in_a_line_of_bounded_length(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VIGIL_MARKET__TICKERS", '["' + "X" * 10_000 + '"]')
    assert main(["config", "show"]) == EXIT_REFUSE_TO_START
    err = capsys.readouterr().err
    assert "market.tickers = ['XXXX" in err
    assert "characters)" in err and len(err) < 1_000


def test_a_short_value_is_shown_whole(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VIGIL_MARKET__TICKERS", '["btc/usdt"]')
    assert main(["config", "show"]) == EXIT_REFUSE_TO_START
    err = capsys.readouterr().err
    assert "market.tickers = ['btc/usdt']" in err and "is not BASE/USDT" in err
    assert "characters)" not in err
