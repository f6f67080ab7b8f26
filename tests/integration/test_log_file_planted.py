"""Something planted at ``logs/vigil.log`` at the start: the log file was opened by name for
appending, so a symlink there had every log line appended to whatever it named, and a FIFO held
the start for good (before any loop, the watchdog included). Either now refuses the start naming
the file; a symlinked ``logs/`` folder keeps working."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from fakes.daemon import daemon_env, refused_sim_start
from fakes.fifo import outcome_beside_fifo_writer

from core.errors import RefuseToStartError
from runner.logging_setup import configure_logging

_OTHER = b"someone else's file\n"


@pytest.mark.parametrize("dangling", [False, True])
def test_a_symlinked_log_file_refuses_the_start_naming_it(tmp_path: Path, dangling: bool) -> None:
    other = tmp_path / "other.txt"
    if not dangling:
        other.write_bytes(_OTHER)
    log_file = tmp_path / "logs" / "vigil.log"
    log_file.parent.mkdir()
    log_file.symlink_to(other)
    try:
        with pytest.raises(RefuseToStartError) as refused:
            configure_logging("INFO", log_file=log_file)
            logging.getLogger("vigil.test").warning("a line for the file")
    finally:
        configure_logging("INFO")  # the console only, as the other tests expect
    assert str(log_file) in str(refused.value) and " is a symlink" in str(refused.value)
    assert other.read_bytes() == _OTHER if not dangling else not other.exists()


def test_a_fifo_at_the_log_file_refuses_the_start_without_waiting(tmp_path: Path) -> None:
    log_file = tmp_path / "logs" / "vigil.log"
    log_file.parent.mkdir()
    os.mkfifo(log_file)
    try:
        outcome = outcome_beside_fifo_writer(
            lambda: configure_logging("INFO", log_file=log_file), log_file
        )
    finally:
        configure_logging("INFO")
    assert isinstance(outcome, RefuseToStartError), outcome
    assert "is not a regular file (a FIFO)" in str(outcome)


def test_a_symlinked_logs_folder_keeps_working(tmp_path: Path) -> None:
    disk = tmp_path / "other-disk"
    disk.mkdir()
    (tmp_path / "logs").symlink_to(disk, target_is_directory=True)
    try:
        configure_logging("INFO", log_file=tmp_path / "logs" / "vigil.log")
        logging.getLogger("vigil.test").warning("a line for the file")
    finally:
        configure_logging("INFO")
    assert "a line for the file" in (disk / "vigil.log").read_text()


@pytest.mark.timeout(150)
def test_the_daemon_refuses_with_exit_78_and_no_traceback(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    (state_dir / "logs").mkdir(parents=True)
    os.mkfifo(state_dir / "logs" / "vigil.log")
    stderr = refused_sim_start(daemon_env(state_dir))
    assert str(state_dir / "logs" / "vigil.log") in stderr and "a FIFO" in stderr
