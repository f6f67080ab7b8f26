"""Something planted at ``logs/vigil.log`` after the start: the start refuses a symlink or a FIFO
there, but the rotation opened the file again by name, so a symlink planted by then had every
later line appended to whatever it named, and a FIFO held the logging call (the daemon's event
loop) in its open for good. The reopen now refuses either, says so once on the console, and the
file takes lines again once the name is free.

The link or FIFO is planted in the rotation's own window, between its rename of the full file and
its open of a new one, through the handler's ``rotator`` (the stdlib's hook for how a rotation
renames): a window no test can hit by timing."""

from __future__ import annotations

import logging
import logging.handlers
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fakes.fifo import outcome_beside_fifo_writer

from runner.logging_setup import LogConfig, configure_logging

_OTHER = b"someone else's file\n"
_SAID = "cannot be written"


@contextmanager
def logging_to(log_file: Path) -> Iterator[None]:
    """The console and ``log_file``, rotated at 2,000 bytes. Made in the test's body: the
    console handler takes ``sys.stderr`` when it is made, and only there is it ``capsys``'s."""
    configure_logging(
        "INFO", config=LogConfig(file_max_bytes=2000, file_backups=2), log_file=log_file
    )
    try:
        yield
    finally:
        configure_logging("INFO")  # the console only, as the other tests expect


def _plant_once(plant: Callable[[Path], None]) -> None:
    """The file handler's next rotation renames the full file, then ``plant``s at its name."""
    (handler,) = [
        h
        for h in logging.getLogger().handlers
        if isinstance(h, logging.handlers.BaseRotatingHandler)
    ]
    planted: list[bool] = []

    def rename_then_plant(source: str, dest: str) -> None:
        os.rename(source, dest)
        if not planted:
            planted.append(True)
            plant(Path(source))

    handler.rotator = rename_then_plant


def _lines(count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        logging.getLogger("vigil.test").info("line %d %s", n, "x" * 60)


def test_a_symlink_planted_by_the_rotation_is_not_written_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other, log_file = tmp_path / "other.txt", tmp_path / "logs" / "vigil.log"
    other.write_bytes(_OTHER)
    with logging_to(log_file):
        _plant_once(lambda name: name.symlink_to(other))
        _lines(100)
        assert other.read_bytes() == _OTHER
        assert log_file.is_symlink()
        err = capsys.readouterr().err
        assert err.count(_SAID) == 1, err  # once, not a traceback at each line
        assert "a symlink is there" in err and "Logging error" not in err
        assert "line 99 " in err  # the console still has every line
        log_file.unlink()  # a person moves it away: the file takes lines again
        _lines(1, start=100)
    assert "line 100 " in log_file.read_text() and not log_file.is_symlink()
    assert "takes lines again" in capsys.readouterr().err
    assert other.read_bytes() == _OTHER


def test_a_fifo_planted_by_the_rotation_does_not_hold_the_logging_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_file = tmp_path / "logs" / "vigil.log"
    with logging_to(log_file):
        _plant_once(os.mkfifo)
        outcome = outcome_beside_fifo_writer(lambda: _lines(100), log_file)
    assert outcome is None
    err = capsys.readouterr().err
    assert err.count(_SAID) == 1 and "is not a regular file (a FIFO)" in err, err
    assert "line 99 " in err
