"""A journal never stops silently: a record it cannot encode is written in a degraded form with the
reason, and a write that fails is a fault people can see (``JournalHealth``, the fault file).

Degraded form: every value JSON cannot hold as given (a non-finite float, an integer past 64 bits,
a non-string key, an object of no JSON type) is replaced by its ``repr`` (cut), and the line carries
``journal_degraded``: why. The rest of the record stays as it was, so one absurd number no longer
costs the whole decision line, nor every later one.

The fault file (``journal_fault.json`` in the state dir) is written at the first failed write and
updated at each later one and at the recovery; it stays after a recovery (someone should look at
why). A person can read it without talking to the daemon; ``vigil health`` reads the same fault
from the heartbeat (``journal_error``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import orjson
from pydantic import BaseModel

from core.regular_file import read_regular_file
from state.atomic import atomic_write_bytes

log = logging.getLogger(__name__)

FAULT_FILE_NAME: Final = "journal_fault.json"
_REPR_CHARS: Final = 200
#: the fault file is a few hundred bytes (its texts are cut at ``_REPR_CHARS``): 1 MiB is plenty
_FAULT_FILE_MAX_BYTES: Final = 1 << 20
#: orjson encodes integers in [-2**63, 2**64 - 1]
_INT_MIN: Final = -(2**63)
_INT_MAX: Final = 2**64 - 1


class JournalHealth:
    """How a process's journals are doing: lines degraded, writes failed, the last error.

    Shared by every journal of a daemon; ``fault_path`` (optional) is where a write failure is made
    visible outside the process.
    """

    def __init__(self, fault_path: Path | None = None) -> None:
        self.fault_path = fault_path
        self.degraded_lines = 0
        self.failed_writes = 0
        self.last_error: str | None = None
        self.last_error_at_ms: int | None = None
        self.recovered_at_ms: int | None = None
        self._failing = False

    @property
    def ok(self) -> bool:
        """False while the last write of some journal failed."""
        return not self._failing

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "degraded_lines": self.degraded_lines,
            "failed_writes": self.failed_writes,
            "last_error": self.last_error,
            "last_error_at_ms": self.last_error_at_ms,
            "recovered_at_ms": self.recovered_at_ms,
        }

    def note_degraded(self, path: Path, reason: str) -> None:
        self.degraded_lines += 1
        log.error("%s: a record could not be encoded as given; written degraded: %s", path, reason)

    def note_write_failed(self, path: Path, error: BaseException, at_ms: int) -> None:
        self.failed_writes += 1
        self.last_error = f"{path}: {type(error).__name__}: {error}"[:500]
        self.last_error_at_ms = at_ms
        self._failing = True
        log.critical("JOURNAL WRITE FAILED (%d so far): %s", self.failed_writes, self.last_error)
        self._write_fault_file()

    def note_write_ok(self, at_ms: int) -> None:
        if self._failing:
            self._failing = False
            self.recovered_at_ms = at_ms
            log.warning("journal writes work again after %d failures", self.failed_writes)
            self._write_fault_file()

    def _write_fault_file(self) -> None:
        if self.fault_path is None:
            return
        try:
            atomic_write_bytes(self.fault_path, orjson.dumps(self.as_dict()))
        except OSError as exc:  # the disk that failed the journal may fail this too: log says it
            log.critical("cannot write the journal fault file %s: %s", self.fault_path, exc)


def read_fault_file(state_dir: Path) -> dict[str, Any] | None:
    """What the last journal fault was (None: never one); a file that cannot be read says why.
    A regular file of at most ``_FAULT_FILE_MAX_BYTES`` only: read whole, a FIFO there waited for
    a writer and a crash's gigabyte of zeros was taken whole before it was found no JSON."""
    try:
        path = state_dir / FAULT_FILE_NAME
        found: object = orjson.loads(read_regular_file(path, max_bytes=_FAULT_FILE_MAX_BYTES)[1])
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError) as exc:  # a full disk is what made the fault
        return {"unreadable": f"{type(exc).__name__}: {exc}"[:_REPR_CHARS]}
    return found if isinstance(found, dict) else {"unreadable": repr(found)[:_REPR_CHARS]}


def degraded_record(record: object, reason: str) -> dict[str, Any]:
    """``record`` with what JSON cannot hold replaced by its repr, plus ``journal_degraded``."""
    plain: dict[str, Any]
    if isinstance(record, Mapping):
        plain = {str(key)[:_REPR_CHARS]: _sanitized(item) for key, item in record.items()}
    else:
        plain = {"unencodable_record": repr(record)[:_REPR_CHARS]}
    plain["journal_degraded"] = reason[:500]
    return plain


def _sanitized(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, int):
        return value if _INT_MIN <= value <= _INT_MAX else repr(value)[:_REPR_CHARS]
    if isinstance(value, BaseModel):
        return _sanitized(value.model_dump())
    if isinstance(value, Mapping):
        return {str(key)[:_REPR_CHARS]: _sanitized(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_sanitized(item) for item in value]
    return repr(value)[:_REPR_CHARS]


__all__ = ["FAULT_FILE_NAME", "JournalHealth", "degraded_record", "read_fault_file"]
