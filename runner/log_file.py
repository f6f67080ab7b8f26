"""The daemon's size-rotated log file (``logs/vigil.log``, the API's ``api.log``, ``serve.log``).

The start refuses a symlink, FIFO or folder at the file's name (``core.regular_file.
refuse_unless_regular``), but the stdlib handler opens the file again by name at each rotation
(and at each line after a reopen failed): a symlink planted there by then had every later line
appended to whatever it named, and a FIFO held the daemon's event loop in the open for good. Every
open here is ``core.regular_file.open_appending``: never through a link, never blocking, a regular
file only.

A log file that cannot be written (refused, a full disk, its folder removed) must never stop the
daemon, nor bury its console: the stdlib printed a traceback to stderr at every line. It is said
once, on the console (the file's lines go there anyway), each later line tries the file again, and
the first line it takes again says so.
"""

from __future__ import annotations

import errno
import logging
import logging.handlers
import os
import sys
from io import TextIOWrapper
from pathlib import Path

from core.regular_file import open_appending

log = logging.getLogger(__name__)


class LogFileHandler(logging.handlers.RotatingFileHandler):
    """``RotatingFileHandler`` whose every open is ``open_appending``; a write or an open that
    fails is said once until the file takes a line again."""

    def __init__(self, path: Path, *, max_bytes: int, backups: int) -> None:
        self._failing = False  # said: the file takes no line now
        self._failed_now = False  # the line being emitted did not reach the file
        super().__init__(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")

    def _open(self) -> TextIOWrapper:
        fd = open_appending(self.baseFilename)
        try:
            return open(fd, "a", encoding=self.encoding, errors=self.errors)
        except BaseException:
            os.close(fd)
            raise

    def emit(self, record: logging.LogRecord) -> None:
        self._failed_now = False
        super().emit(record)
        if self._failing and not self._failed_now:
            self._failing = False
            log.warning("the log file %s takes lines again", self.baseFilename)

    def handleError(self, record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):  # a log call's own mistake (a bad format): the stdlib's
            super().handleError(record)
            return
        self._failed_now = True
        if self._failing:
            return
        self._failing = True  # first: the line below comes back here, and is not said again
        log.error(
            "the log file %s cannot be written (%s): its lines go to the console only until it "
            "can (each line tries again)",
            self.baseFilename,
            _why(error),
        )


def _why(error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return "a symlink is there; move it away"
    return error.strerror or str(error)


__all__ = ["LogFileHandler"]
