"""A test that configures logging as the daemon does (an in-process ``vigil`` command) leaves
the next test's logging as it was: no handler writing to the first test's closed stderr (each of
whose lines would print a "Logging error" traceback), the same root level, the same filters.
The two tests run in this order (pytest keeps a file's order; ``--dist loadfile`` keeps a file
on one worker)."""

from __future__ import annotations

import logging

import pytest

from runner import logging_setup
from runner.logging_setup import configure_logging

LOG = logging.getLogger("vigil.tests.isolation")


def test_a_command_configures_logging_to_its_own_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("DEBUG", ["hunter2-isolation-value"])
    LOG.warning("configured hunter2-isolation-value")
    err = capsys.readouterr().err
    assert "configured" in err and "hunter2-isolation" not in err
    assert logging.getLogger().level == logging.DEBUG


def test_the_next_test_logs_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    LOG.warning("after")
    err = capsys.readouterr().err
    assert "Logging error" not in err
    assert logging.getLogger().level != logging.DEBUG
    assert not any(
        isinstance(h, logging.StreamHandler) and h.filters for h in logging.getLogger().handlers
    )  # configure_logging's handlers carry its redacting filter
    assert logging_setup._redacting.redactor.redact("hunter2-isolation-value")[1] == 0
