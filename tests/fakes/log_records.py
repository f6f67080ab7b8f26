"""Reading what a test's code logged from pytest's ``caplog``.

``caplog`` holds every logger's records, asyncio's too: a client an earlier test in the same
worker process dropped unclosed is collected at any later moment, and asyncio then logs "Task
exception was never retrieved" with a traceback into whichever test runs. Counting tracebacks
of vigil's own loggers keeps such a test about its own code.
"""

from __future__ import annotations

import logging

import pytest

_NOT_OURS = ("asyncio",)


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The records logged with a traceback, but asyncio's (see the module's docstring)."""
    return [r for r in caplog.records if r.exc_info and r.name not in _NOT_OURS]
