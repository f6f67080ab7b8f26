"""``vigil data fetch``'s days and pause refused as usage errors (exit 2) before any request: a day
past 9999-12-30 was a traceback from the date arithmetic, one outside the recording years a
request no exchange answers, and an infinite pause a fetch that hung after its first page."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.cli import main

#: nothing listens there: a fetch that got past its arguments would fail on the connection
NOWHERE = "http://127.0.0.1:9"


def fetch(tmp_path: Path, *extra: str, first: str = "2025-03-01", last: str = "2025-03-02") -> int:
    return main(
        [
            *("--state-dir", str(tmp_path / "state"), "data", "fetch", "--tickers", "BTC/USDT"),
            *("--from", first, "--to", last, "--out", str(tmp_path / "out")),
            *("--exchange-url", NOWHERE, *extra),
        ]
    )


@pytest.mark.parametrize(
    ("first", "last", "said"),
    [
        ("2025-03-01", "9999-12-31", "--to 9999-12-31 is outside 2010-01-01 .. 2099-12-31"),
        ("0001-01-01", "2025-03-01", "--from 0001-01-01 is outside 2010-01-01 .. 2099-12-31"),
        ("2025-03-01", "2100-01-01", "--to 2100-01-01 is outside"),
        ("2025-02-30", "2025-03-01", "--from '2025-02-30' is not a day like 2025-03-01"),
    ],
)
def test_a_day_outside_the_recording_years_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], first: str, last: str, said: str
) -> None:
    assert fetch(tmp_path, first=first, last=last) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("pause", ["inf", "nan", "-1", "1e300"])
def test_a_pause_between_pages_that_is_not_a_finite_wait_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pause: str
) -> None:
    with pytest.raises(SystemExit) as info:
        fetch(tmp_path, "--min-interval-secs", pause)
    assert info.value.code == 2
    assert "--min-interval-secs" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("ticker", ["BTC", "../../X/USDT", "btc/usdt", "BTC/USDT:USDT", ""])
def test_a_ticker_that_is_not_base_usdt_in_capitals_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ticker: str
) -> None:
    with pytest.raises(SystemExit) as info:
        main(
            [
                *("--state-dir", str(tmp_path / "state"), "data", "fetch"),
                *("--tickers", "ETH/USDT", ticker, "--from", "2025-03-01", "--to", "2025-03-01"),
                *("--out", str(tmp_path / "out"), "--exchange-url", NOWHERE),
            ]
        )
    assert info.value.code == 2
    assert "--tickers" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) in ([], [tmp_path / "state"])
