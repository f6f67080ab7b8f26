"""Append-only journals people tail while the daemon runs: ``decisions.jsonl`` and ``trades.csv``.

Every record is one complete line written with a single ``os.write`` on an ``O_APPEND`` descriptor
(then fsync'd if configured), so a reader never sees two records interleaved. A crash can still
leave a torn last line (power loss mid-write); opening a journal repairs that: the fragment is
moved to ``<name>.torn-<timestamp>`` and the file truncated to its last complete line.

Writes are synchronous: a decision or a fill is journaled before the daemon moves on, and with
fsync on that costs a few milliseconds per record, which the (rare) decision path can afford.
"""

from __future__ import annotations

import asyncio
import csv
import io
import logging
import math
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

import aiofiles.os
import orjson
from pydantic import BaseModel

from core.clock import Clock, WallClock
from core.errors import RefuseToStartError
from state.atomic import atomic_write_bytes, fsync_dir
from state.journal_health import JournalHealth, degraded_record
from state.naming import unused_sibling

log = logging.getLogger(__name__)

_TAIL_CHUNK_BYTES: Final = 1 << 16
_ORJSON_OPTIONS: Final = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE


class JournalRecordError(ValueError):
    """A record that cannot be journaled as given (fix the caller; nothing was written)."""


class JournalHeaderMismatchError(RefuseToStartError):
    """An existing CSV journal has other columns than this code writes."""


class JournalClosedError(RuntimeError):
    """``append`` after ``close``."""


# --- JSON lines ------------------------------------------------------------------------------


class _Journal:
    """What both journals share: one append-only file, flushed, closed, usable with ``with``."""

    _file: _AppendOnlyFile

    @property
    def path(self) -> Path:
        return self._file.path

    @property
    def torn_fragment_path(self) -> Path | None:
        """Where opening moved a torn last line, if there was one."""
        return self._file.torn_fragment_path

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class JsonlJournal(_Journal):
    """One JSON object per line, keys sorted (so equal records give equal bytes).

    A record JSON cannot hold as given is written degraded with the reason (``journal_health``),
    never dropped; a failed write is noted in ``health`` (and its fault file) and raised.
    """

    def __init__(
        self,
        path: Path | str,
        fsync: bool,
        *,
        clock: Clock | None = None,
        health: JournalHealth | None = None,
    ) -> None:
        self.health = health or JournalHealth()
        self._file = _AppendOnlyFile(Path(path), fsync, clock or WallClock(), self.health)

    def append(self, record: Mapping[str, Any]) -> None:
        """Write ``record`` as one line (degraded, with the reason, if it must be)."""
        self._file.append_bytes(self._line(record))

    async def append_async(self, record: Mapping[str, Any]) -> None:
        """``append`` without blocking the event loop on the write and its fsync (a decision's
        ~6 kB line + fsync costs milliseconds; ``python -m bench journal_io``)."""
        await self._file.append_bytes_async(self._line(record))

    def _line(self, record: Mapping[str, Any]) -> bytes:
        try:
            return encode_jsonl_record(record)
        except JournalRecordError as exc:
            self.health.note_degraded(self.path, str(exc))
            return orjson.dumps(degraded_record(record, str(exc)), option=_ORJSON_OPTIONS)


def encode_jsonl_record(record: Mapping[str, Any]) -> bytes:
    """The exact bytes ``JsonlJournal.append`` writes: sorted keys, no spaces, final newline.

    Nested mappings and pydantic models are written as objects. Non-finite floats, non-string
    keys and values orjson cannot encode raise ``JournalRecordError`` naming where they are
    (orjson would otherwise write NaN as ``null`` without a word).
    """
    if not isinstance(record, Mapping):
        raise JournalRecordError(f"a journal record must be a mapping, got {type(record).__name__}")
    plain = _to_plain(record, "record")
    try:
        return orjson.dumps(plain, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError as exc:
        raise JournalRecordError(f"cannot encode journal record as JSON: {exc}") from None


def _to_plain(value: Any, where: str) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise JournalRecordError(f"{where} is {value!r}: journals store only finite numbers")
        return value
    if isinstance(value, BaseModel):
        return _to_plain(value.model_dump(), where)
    if isinstance(value, Mapping):
        plain: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise JournalRecordError(f"{where} has a non-string key {key!r}")
            plain[key] = _to_plain(item, f"{where}.{key}")
        return plain
    if isinstance(value, (list, tuple)):
        return [_to_plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
    return value


def read_all(path: Path | str) -> list[dict[str, Any]]:
    """Every record of a JSON-lines journal (for tests and reports).

    Raises ``ValueError`` naming the line for a line that is not a JSON object or is incomplete.
    """
    data = Path(path).read_bytes()
    if data and not data.endswith(b"\n"):
        raise ValueError(f"{path}: the last line is incomplete (open the journal to repair it)")
    records: list[dict[str, Any]] = []
    for number, line in enumerate(data.splitlines(), start=1):
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"{path} line {number} is not JSON: {exc}") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path} line {number} is not a JSON object")
        records.append(record)
    return records


# --- CSV -------------------------------------------------------------------------------------


class CsvJournal(_Journal):
    """A CSV file with a fixed header (written once, when the file is new) and one row per call."""

    def __init__(
        self,
        path: Path | str,
        columns: Sequence[str],
        fsync: bool,
        *,
        clock: Clock | None = None,
        health: JournalHealth | None = None,
    ) -> None:
        self._columns = _checked_columns(columns)
        self._column_set = frozenset(self._columns)
        self.health = health or JournalHealth()
        self._file = _AppendOnlyFile(Path(path), fsync, clock or WallClock(), self.health)
        try:
            self._ensure_header()
        except BaseException:
            self._file.close()
            raise

    @property
    def columns(self) -> tuple[str, ...]:
        return self._columns

    def append(self, row: Mapping[str, Any]) -> None:
        """Write one row. Its keys must be exactly the columns; ``None`` is written empty."""
        missing = [c for c in self._columns if c not in row]
        extra = sorted(str(k) for k in row if k not in self._column_set)
        if missing or extra:
            raise JournalRecordError(
                f"row for {self.path.name} does not match its columns: "
                f"missing {missing or 'none'}, unexpected {extra or 'none'}"
            )
        cells = [_csv_cell(row[column], column) for column in self._columns]
        self._file.append_bytes(_csv_line(cells))

    def _ensure_header(self) -> None:
        header = _csv_line(list(self._columns))
        found = self._file.first_line()
        if found is None:
            self._file.append_bytes(header)
        elif found != header:
            raise JournalHeaderMismatchError(
                f"{self.path} has the header {found.decode(errors='replace').strip()!r}, but this "
                f"vigil writes {','.join(self._columns)!r}. Move the old file aside (it is kept "
                "as it is) and start again."
            )


def read_csv_rows(path: Path | str) -> list[dict[str, str]]:
    """Every row of a CSV journal as column -> text (for tests and reports)."""
    with Path(path).open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _checked_columns(columns: Sequence[str]) -> tuple[str, ...]:
    checked = tuple(columns)
    if not checked:
        raise ValueError("a CSV journal needs at least one column")
    if len(set(checked)) != len(checked):
        raise ValueError(f"duplicate CSV column names in {checked}")
    for column in checked:
        if not isinstance(column, str) or not column or any(c in column for c in ',"\r\n'):
            raise ValueError(f"CSV column name {column!r} must be non-empty plain text")
    return checked


def _csv_cell(value: Any, column: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if not math.isfinite(value):
            raise JournalRecordError(f"column {column!r} is {value!r}: only finite numbers")
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        # one row per line keeps the torn-line repair exact and the file greppable
        if "\n" in value or "\r" in value:
            raise JournalRecordError(f"column {column!r} contains a line break: {value[:60]!r}")
        return value
    raise JournalRecordError(
        f"column {column!r} holds a {type(value).__name__}; use str, int, float, bool or None"
    )


def _csv_line(cells: list[str]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(cells)
    return buffer.getvalue().encode("utf-8")


# --- the shared append-only file ---------------------------------------------------------------


class _AppendOnlyFile:
    def __init__(self, path: Path, fsync: bool, clock: Clock, health: JournalHealth) -> None:
        self.path = path
        self._fsync = fsync
        self._clock = clock
        self._health = health
        self._writer: ThreadPoolExecutor | None = None  # made by the first append_bytes_async
        path.parent.mkdir(parents=True, exist_ok=True)
        self.torn_fragment_path = repair_torn_tail(path, clock.now_ms())
        created = not path.exists()
        self._fd: int | None = os.open(
            path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666
        )
        if created:
            fsync_dir(path.parent)  # the new file's name must survive a crash too

    def append_bytes(self, data: bytes) -> None:
        fd = self._open_fd()
        try:
            self._write(fd, data)
        except OSError as exc:
            self._health.note_write_failed(self.path, exc, self._clock.now_ms())
            raise
        self._health.note_write_ok(self._clock.now_ms())

    async def append_bytes_async(self, data: bytes) -> None:
        """The write and fsync on this file's own writer thread, through aiofiles: one thread, so
        lines keep their order, and ``close`` waits for it. Without fsync a write is microseconds
        and stays on the loop, where its place among other events is deterministic (replay)."""
        if not self._fsync:
            self.append_bytes(data)
            return
        fd = self._open_fd()
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix=f"journal-{self.path.name}")
        try:
            # shielded: a cancelled decision still has its line written whole
            await asyncio.shield(_write_off_loop(self._write, fd, data, executor=self._writer))
        except OSError as exc:
            self._health.note_write_failed(self.path, exc, self._clock.now_ms())
            raise
        self._health.note_write_ok(self._clock.now_ms())

    def _write(self, fd: int, data: bytes) -> None:
        written = os.write(fd, data)
        if written != len(data):
            # only on a full disk or similar: take the partial line back so no reader sees it
            os.ftruncate(fd, os.fstat(fd).st_size - written)
            raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
        if self._fsync:
            os.fsync(fd)

    def first_line(self) -> bytes | None:
        """The first line including its newline, or None for an empty file."""
        fd = self._open_fd()
        chunks: list[bytes] = []
        offset = 0
        while chunk := os.pread(fd, _TAIL_CHUNK_BYTES, offset):
            newline = chunk.find(b"\n")
            if newline >= 0:
                chunks.append(chunk[: newline + 1])
                break
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks) or None

    def flush(self) -> None:
        os.fsync(self._open_fd())

    def close(self) -> None:
        if self._fd is None:
            return
        if self._writer is not None:  # let a line in flight finish before the fd goes
            self._writer.shutdown(wait=True)
            self._writer = None
        fd, self._fd = self._fd, None
        try:
            os.fsync(fd)
        except OSError as exc:  # what was written may not be on disk: as loud as a failed write
            self._health.note_write_failed(self.path, exc, self._clock.now_ms())
            raise
        finally:
            os.close(fd)

    def _open_fd(self) -> int:
        if self._fd is None:
            raise JournalClosedError(f"journal {self.path} is closed")
        return self._fd


_write_off_loop = aiofiles.os.wrap(lambda write, fd, data: write(fd, data))


def repair_torn_tail(path: Path, now_ms: int) -> Path | None:
    """Move an incomplete last line of ``path`` to ``<name>.torn-<timestamp>``; its path or None.

    The fragment is made durable before the journal is truncated, so a crash during the repair
    loses nothing (at worst the fragment exists twice).
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        keep = _end_of_last_complete_line(fd, size)
        if keep == size:
            return None
        fragment = os.pread(fd, size - keep, keep)
        fragment_path = unused_sibling(path, "torn", now_ms)
        atomic_write_bytes(fragment_path, fragment)
        os.ftruncate(fd, keep)
        os.fsync(fd)
    finally:
        os.close(fd)
    log.warning(
        "%s ended with an incomplete line (%d bytes, left by an interrupted write); "
        "moved it to %s and truncated the journal to its last complete line",
        path,
        size - keep,
        fragment_path,
    )
    return fragment_path


def _end_of_last_complete_line(fd: int, size: int) -> int:
    """Offset just past the last newline (0 if there is none), reading backwards in chunks."""
    end = size
    while end > 0:
        start = max(0, end - _TAIL_CHUNK_BYTES)
        chunk = os.pread(fd, end - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0
