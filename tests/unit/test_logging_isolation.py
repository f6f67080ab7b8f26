"""A test that configures logging as the daemon does (an in-process ``vigil`` command) leaves
the next test's logging as it was before it: the same root handlers (none writing to the first
test's closed stderr, each of whose lines would print a "Logging error" traceback), the same
root level, the same redactor. The two tests run in this order (pytest keeps a file's order;
``--dist loadfile`` keeps a file on one worker)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from runner import logging_setup
from runner.logging_setup import configure_logging

LOG = logging.getLogger("vigil.tests.isolation")
#: the logging the first test found (the second test compares)
BEFORE: dict[str, Any] = {}


def _own_handlers() -> list[logging.Handler]:
    """The root logger's handlers but pytest's capture handlers (it adds them per phase)."""
    return [h for h in logging.getLogger().handlers if not type(h).__module__.startswith("_pytest")]


def test_a_command_configures_logging_to_its_own_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    BEFORE.update(
        handlers=_own_handlers(),
        level=logging.getLogger().level,
        redactor=logging_setup._redacting.redactor,
    )
    configure_logging("DEBUG", ["hunter2-isolation-value"])
    LOG.warning("configured hunter2-isolation-value")
    err = capsys.readouterr().err
    assert "configured" in err and "hunter2-isolation" not in err
    assert logging.getLogger().level == logging.DEBUG
    assert _own_handlers() != BEFORE["handlers"]


def test_the_next_test_logs_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    if not BEFORE:
        pytest.skip("runs after test_a_command_configures_logging_to_its_own_stderr")
    LOG.warning("after")
    assert "Logging error" not in capsys.readouterr().err
    assert _own_handlers() == BEFORE["handlers"]
    assert logging.getLogger().level == BEFORE["level"]
    assert logging_setup._redacting.redactor is BEFORE["redactor"]
