"""``vigil memory add|list|search --ticker`` takes a ticker as the config does, BASE/USDT in
capitals (exit 2 otherwise, nothing stored). ``memory add --ticker BTC`` (or ``btc/usdt``) stored a
lesson no decision on BTC/USDT is ever sent, and ``memory list --ticker btc`` listed nothing, both
exiting 0 without a word."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.cli import main

LESSON = "Funding spikes on BTC fade within a day."


def _code(*args: str) -> int:
    try:
        return main(list(args))
    except SystemExit as exc:  # argparse's refusal
        return int(exc.code or 0)


@pytest.mark.parametrize(
    "ticker", ["BTC", "btc/usdt", "BTC/USD", "", "ÉTH/USDT", "BTC/USDT\nforged line", "X" * 5000]
)
@pytest.mark.parametrize("command", [["add", LESSON], ["list"], ["search", "funding"]])
def test_a_ticker_that_is_not_base_usdt_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], ticker: str
) -> None:
    state = tmp_path / "state"
    assert _code("--state-dir", str(state), "memory", *command, "--ticker", ticker) == 2
    err = capsys.readouterr().err
    assert "is not BASE/USDT in capitals, e.g. BTC/USDT" in err and len(err) < 1000
    assert not state.exists()  # no store made, nothing stored


def test_a_lesson_for_a_ticker_is_listed_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = str(tmp_path / "state")
    assert _code("--state-dir", state, "memory", "add", LESSON, "--ticker", "BTC/USDT") == 0
    capsys.readouterr()
    assert _code("--state-dir", state, "memory", "list", "--ticker", "BTC/USDT") == 0
    assert LESSON in capsys.readouterr().out
