"""A peer's text (an exchange's error body, quoted by ccxt in its exception) reached the person's
terminal raw: ``vigil data fetch`` against a server answering ``ESC [2J`` (clear the screen),
U+009B (an 8-bit CSI) and a line break then a line of its own printed them as they came, in its
refusal and in the text log's retry warnings (``vigil.log`` too). Control characters in a message
are now written as escapes (``\\x1b``); a message's own line breaks and a traceback's are kept."""

from __future__ import annotations

import logging
import re
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from fakes.error_server import answering

from core.errors import EXIT_REFUSE_TO_START
from runner.cli import main
from runner.logging_setup import LogConfig, configure_logging

HOSTILE = "Invalid symbol.\x1b[2J\x9b31m\rvigil data fetch: all done"
#: C0 but the tab and the line break, DEL and C1: what a terminal acts on
_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def answering_401() -> AbstractContextManager[str]:
    """A loopback server answering every request 401 with ``HOSTILE`` in Binance's error shape."""
    return answering(401, '{"code":-2015,"msg":"' + HOSTILE + '"}')


def test_an_exchanges_error_text_reaches_the_terminal_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with answering_401() as url:
        code = main(
            [
                *("--state-dir", str(tmp_path / "state"), "data", "fetch"),
                *("--tickers", "BTC/USDT", "--from", "2025-03-01", "--to", "2025-03-01"),
                *("--out", str(tmp_path / "out"), "--exchange-url", url, "--no-funding"),
            ]
        )
    err = capsys.readouterr().err
    assert code == EXIT_REFUSE_TO_START and "refusing to start" in err, err
    assert _RAW_CONTROL.search(err) is None, err
    assert "\\x1b[2J" in err and "\\x9b31m" in err and "\\rvigil data fetch" in err


def test_a_text_log_line_writes_control_characters_as_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_file = tmp_path / "logs" / "vigil.log"
    configure_logging("INFO", config=LogConfig(), log_file=log_file)
    log = logging.getLogger("vigil.test")
    log.warning("retrying (%s)", HOSTILE)
    try:
        raise RuntimeError(HOSTILE)
    except RuntimeError:
        log.exception("failed")
    for text in (capsys.readouterr().err, log_file.read_text()):
        assert _RAW_CONTROL.search(text) is None, text
        assert text.count("\\x1b[2J") == 2 and "Traceback (most recent call last):\n" in text
