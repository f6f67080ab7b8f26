"""``vigil data fetch`` giving up on an exchange that keeps failing, its error text in the last
line printed: that text is a peer's (ccxt quotes the body), so a control character in it (ESC [2J,
U+009B, a carriage return) must reach the terminal escaped, as in the refusal of a 4xx
(``test_peer_text_in_terminal``). Both ways of giving up: told to wait longer than a ban is worth
(429 with a long Retry-After), and still failing after every retry (503s)."""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from fakes.error_server import answering

from core.scaled_clock import ScaledClock
from runner.cli import main
from runner.commands import _parser
from runner.data.command import EXIT_PROBLEMS, run_data
from runner.logging_setup import configure_logging

HOSTILE = "Too many requests.\x1b[2J\x9b31m\rvigil data fetch: all done"
#: C0 but the tab and the line break, DEL and C1: what a terminal acts on
_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _banned(status: int, headers: dict[str, str]) -> AbstractContextManager[str]:
    return answering(status, '{"code":-1003,"msg":"' + HOSTILE + '"}', headers)


def _argv(tmp_path: Path, url: str) -> list[str]:
    return [
        *("--state-dir", str(tmp_path / "state"), "data", "fetch"),
        *("--tickers", "BTC/USDT", "--from", "2025-03-01", "--to", "2025-03-01"),
        *("--out", str(tmp_path / "out"), "--exchange-url", url, "--no-funding"),
    ]


def _assert_escaped(err: str) -> None:
    assert _RAW_CONTROL.search(err) is None, err
    assert "\\x1b[2J" in err and "\\x9b31m" in err and "\\rvigil data fetch" in err, err


def test_giving_up_on_a_ban_prints_the_exchange_s_text_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _banned(429, {"Retry-After": "86400"}) as url:
        code = main(_argv(tmp_path, url))
    err = capsys.readouterr().err
    assert code == EXIT_PROBLEMS and "giving up for now" in err, err
    assert "run the same command again to resume" in err
    _assert_escaped(err)


@pytest.mark.timeout(120)
def test_giving_up_after_every_retry_prints_the_exchange_s_text_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through ``run_data`` with a fast clock (``main`` waits the retries on the wall's), the
    console logging as ``main`` sets it: the retries' warnings quote the text too."""
    args = _parser().parse_args(_argv(tmp_path, "URL"))
    clock = ScaledClock(1_741_000_000_000, speed=10_000.0)  # the retries' minute of backoff: ms
    configure_logging("INFO")  # its console is this test's stderr
    try:
        with _banned(503, {}) as url:
            args.exchange_url = url
            code = run_data(args, clock=clock)
    finally:
        configure_logging("INFO")
    err = capsys.readouterr().err
    assert code == EXIT_PROBLEMS and "still failing after 6 attempts" in err, err
    assert err.count("retry ") == 5, err  # each retry's warning, then the line giving up
    _assert_escaped(err)
