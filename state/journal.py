"""Append-only journals people tail while the daemon runs: ``decisions.jsonl`` and ``trades.csv``.

Every record is one complete line written with a single ``os.write`` on an ``O_APPEND`` descriptor
(then fsync'd if configured), so a reader never sees two records interleaved. A crash can still
leave a torn last line (power loss mid-write); opening a journal repairs that: the fragment is
moved to ``<name>.torn-<timestamp>`` and the file truncated to its last complete line
(``state.append_file``). ``decisions.jsonl`` is rotated by day and size (``state.rotation``).

Writes are synchronous: a decision or a fill is journaled before the daemon moves on, and with
fsync on that costs a few milliseconds per record, which the (rare) decision path can afford.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

import orjson
from pydantic import BaseModel

from core.clock import Clock, WallClock
from core.errors import RefuseToStartError
from core.regular_file import open_regular_file
from state.append_file import AppendOnlyFile, JournalClosedError, repair_torn_tail
from state.journal_health import JournalHealth, degraded_record
from state.line_text import terminal_safe_json_bytes
from state.rotation import JournalRotationConfig

_ORJSON_OPTIONS: Final = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE


class JournalRecordError(ValueError):
    """A record that cannot be journaled as given (fix the caller; nothing was written)."""


class JournalHeaderMismatchError(RefuseToStartError):
    """An existing CSV journal has other columns than this code writes."""


# --- JSON lines ------------------------------------------------------------------------------


class _Journal:
    """What both journals share: one append-only file, flushed, closed, usable with ``with``."""

    _file: AppendOnlyFile

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
    ``rotation``: segments by day / size, gzipped, pruned (None: one file forever);
    ``failpoint``: the crash points of a rotation (``core.failpoints``).
    """

    def __init__(
        self,
        path: Path | str,
        fsync: bool,
        *,
        clock: Clock | None = None,
        health: JournalHealth | None = None,
        rotation: JournalRotationConfig | None = None,
        failpoint: Callable[[str], None] | None = None,
    ) -> None:
        self.health = health or JournalHealth()
        self._file = AppendOnlyFile(
            Path(path),
            fsync,
            clock or WallClock(),
            self.health,
            rotation=rotation,
            first_line_ms=_line_at_ms,
            **({} if failpoint is None else {"failpoint": failpoint}),
        )

    def wait_packed(self) -> None:
        """Block until rotated segments are gzipped and pruned (tests; ``close`` waits too)."""
        self._file.wait_packed()

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
            line = orjson.dumps(degraded_record(record, str(exc)), option=_ORJSON_OPTIONS)
            return terminal_safe_json_bytes(line)


def _line_at_ms(line: bytes) -> int | None:
    """The ``at_ms`` of a journal line, None when it has none (the rotation's day rule)."""
    try:
        at_ms = orjson.loads(line).get("at_ms")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return at_ms if isinstance(at_ms, int) else None


def encode_jsonl_record(record: Mapping[str, Any]) -> bytes:
    """The exact bytes ``JsonlJournal.append`` writes: sorted keys, no spaces, final newline.

    Nested mappings and pydantic models are written as objects. Non-finite floats, non-string
    keys and values orjson cannot encode raise ``JournalRecordError`` naming where they are
    (orjson would otherwise write NaN as ``null`` without a word).
    """
    if not isinstance(record, Mapping):
        raise JournalRecordError(f"a journal record must be a mapping, got {type(record).__name__}")
    # the common line is plain already: checked without copying it or naming every path (the
    # copy with paths was a tenth of a replayed decision); the copy only when something needs it
    plain = _with_encoded(record) if _is_plain(record) else _to_plain(record, "record")
    try:
        line = orjson.dumps(plain, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError as exc:
        raise JournalRecordError(f"cannot encode journal record as JSON: {exc}") from None
    return terminal_safe_json_bytes(line)  # people tail it: orjson writes U+009B (CSI) raw


class PlainJson(dict[str, Any]):
    """A JSON object its maker vouches is plain (what ``_is_plain`` accepts: string keys, finite
    floats, dicts, lists and scalars only) and will not change: a journal writes it without
    walking it again (orjson writes it as the dict it is). For a value already checked on its
    way in, such as the snapshot as sent (``MarketSnapshot.as_sent``).

    ``encoded``: its JSON as ``orjson.dumps(it, option=orjson.OPT_SORT_KEYS)`` writes it, when
    the maker has it already (the snapshot's, dumped for its digest): a line holding it at its
    top level takes those bytes instead of dumping it again."""

    __slots__ = ("encoded",)

    def __init__(self, value: Mapping[str, Any], encoded: bytes | None = None) -> None:
        super().__init__(value)
        self.encoded = encoded


def plain_or_as_is(value: Any) -> Any:
    """``value`` as a ``PlainJson`` when it is a dict of exact JSON types (``_is_json_dict``),
    else as it is: for a fresh JSON-mode model dump a record holds, so the record's model neither
    validates nor dumps it again and the journal does not walk it a second time. The caller
    hands it over: unchanged from then on."""
    if type(value) is dict and _is_json_dict(value):
        return PlainJson(value)
    return value


def _is_json_dict(value: dict[Any, Any]) -> bool:
    """Exact JSON types only (no subclass, tuple or other object): what a model's JSON-mode dump
    gives back unchanged, so handing it over writes what the dump would have."""
    for key in value:
        if type(key) is not str:
            return False
    return _leaves_pass(value.values(), _is_json_nested)


def is_exact_json(value: Any) -> bool:
    """``value`` holds exact JSON types only (``_is_json_dict``'s rule, at any level): what a
    JSON-mode model dump gives back as it is."""
    return _leaves_pass((value,), _is_json_nested)


def _is_json_nested(item: Any) -> bool:
    kind = type(item)
    if kind is dict:
        return _is_json_dict(item)
    return kind is list and _leaves_pass(item, _is_json_nested)


def _with_encoded(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """``record`` with each top-level ``PlainJson`` that carries its JSON given as that JSON."""
    out: dict[str, Any] | None = None
    for key, value in record.items():
        if type(value) is PlainJson and value.encoded is not None:
            if out is None:
                out = dict(record)
            out[key] = orjson.Fragment(value.encoded)
    return record if out is None else out


def _is_plain(value: Any) -> bool:
    """True when orjson writes ``value`` exactly as it would write ``_to_plain(value)``: plain
    dicts with string keys, lists, tuples, finite floats and scalars, no model or other mapping."""
    kind = type(value)
    if kind is dict:
        return _is_plain_dict(value)
    if kind is PlainJson:
        return True
    if kind is list or kind is tuple:
        return _leaves_pass(value, _is_plain)
    if kind in _PLAIN_SCALARS:
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return not isinstance(value, BaseModel | Mapping)


#: exact types written as they are (a subclass takes ``_is_plain``'s longer way)
_PLAIN_SCALARS: Final = frozenset({str, int, bool, type(None)})


def _is_plain_dict(value: dict[Any, Any]) -> bool:
    for key in value:
        if type(key) is not str:
            return False
    return _leaves_pass(value.values(), _is_plain)


def _leaves_pass(items: Iterable[Any], nested: Callable[[Any], bool]) -> bool:
    """Finite floats and ``_PLAIN_SCALARS`` pass; anything else is asked of ``nested``. The
    leaves are checked here instead of by a call each: most of a line is leaves, and a call (and
    the generator ``all`` needed) per leaf was most of the walk's time."""
    for item in items:
        kind = type(item)
        if kind is float:
            if not math.isfinite(item):
                return False
        elif kind not in _PLAIN_SCALARS and not nested(item):
            return False
    return True


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
        self._file = AppendOnlyFile(Path(path), fsync, clock or WallClock(), self.health)
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
    """Every row of a CSV journal as column -> text (for tests and reports). Only a regular file
    is opened (``IsADirectoryError`` otherwise: a FIFO blocked the open until someone wrote to
    it), and a line over ``CSV_LINE_MAX_CHARS`` is ``csv.Error`` as it is read: the zeros a crash
    can leave after the last row were read as one line, whole, before csv refused them."""
    with open_regular_file(path) as raw, io.TextIOWrapper(raw, "utf-8", newline="") as fh:
        return list(csv.DictReader(_bounded_lines(fh, path)))


#: far past any row vigil writes (about 100 characters)
CSV_LINE_MAX_CHARS: Final = 1 << 20


def _bounded_lines(fh: io.TextIOWrapper, path: Path | str) -> Iterator[str]:
    while line := fh.readline(CSV_LINE_MAX_CHARS):
        if len(line) == CSV_LINE_MAX_CHARS and not line.endswith("\n"):
            raise csv.Error(f"{path}: a line over {CSV_LINE_MAX_CHARS:,} characters")
        yield line


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


__all__ = [
    "CsvJournal",
    "JournalClosedError",
    "JournalHeaderMismatchError",
    "JournalRecordError",
    "JsonlJournal",
    "PlainJson",
    "encode_jsonl_record",
    "is_exact_json",
    "plain_or_as_is",
    "read_csv_rows",
    "repair_torn_tail",
]
