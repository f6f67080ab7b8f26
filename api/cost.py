"""What Claude costs, for ``/api/status``: today, each of the last days and each model, from the
decisions journal through the one cost accounting (``agent.cost_accounting``, the report's too).

The reader follows the journal: each status call folds only the bytes appended to the live file
since the last call (a torn last line waits for its newline). When the live file was rotated (a
new inode, or it shrank) the book is rebuilt from the segments, skipping rotated segments closed
before the days shown (their stamp is the instant they were closed). Works with and without a
running daemon (``vigil serve`` reads the same files).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict

from agent.cost_accounting import MS_PER_DAY, CostBook, CostRow, day_name
from state.segments import open_live, open_segment, rotated_pattern, segments, whole_lines

STAMP_FORMAT = "%Y%m%dT%H%M%SZ"

log = logging.getLogger(__name__)


class CostDayBody(BaseModel):
    """One UTC day: every line's totals, then per model (each billed try) and per gate layer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    day: str
    total: CostRow
    by_model: tuple[CostRow, ...]
    by_layer: tuple[CostRow, ...]


class CostBody(BaseModel):
    """``calls`` are lines that asked a model; per model, ``calls`` are billed tries."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    today: CostDayBody  # the UTC day of ``now_ms`` (the daemon's clock, else wall time)
    days: tuple[CostDayBody, ...]  # the last ``days_shown`` days with journal lines, oldest first
    days_shown: int
    prices_as_of: str | None  # the price table's date in the config; null: not known here
    source: str  # where the figures come from


@dataclass
class _Cursor:
    inode: int
    offset: int


class JournalCost:
    def __init__(self, journal: Path, days_shown: int, prices_as_of: str | None) -> None:
        self._journal = journal
        self._days_shown = days_shown
        self._prices_as_of = prices_as_of
        self._book = CostBook()
        self._cursor: _Cursor | None = None
        self._left_out: tuple[int, str] | None = None  # lines not summed: how many, the first
        self._lock = threading.Lock()  # status calls may fold from worker threads at once

    def body(self, now_ms: int) -> CostBody:
        with self._lock:
            self._refresh(now_ms)
            today = now_ms // MS_PER_DAY
            first = today - self._days_shown + 1
            shown = [d for d in self._book.day_numbers() if first <= d <= today]
            return CostBody(
                today=self._day(today),
                days=tuple(self._day(d) for d in shown),
                days_shown=self._days_shown,
                prices_as_of=self._prices_as_of,
                source=f"{self._journal.name} and its rotated segments (usage of each line)",
            )

    def left_out(self) -> str | None:
        """Which journal lines the figures leave out and why (the first of them), or None."""
        with self._lock:
            if self._left_out is None:
                return None
            count, first = self._left_out
            return first + (f" (and {count - 1} more such lines)" if count > 1 else "")

    def _day(self, day_number: int) -> CostDayBody:
        summary = self._book.day(day_number)
        return CostDayBody(
            day=day_name(day_number),
            total=summary.total,
            by_model=summary.by_model,
            by_layer=summary.by_layer,
        )

    def _refresh(self, now_ms: int) -> None:
        try:
            stat = self._journal.stat()
        except FileNotFoundError:
            stat = None
        cursor = self._cursor
        same_file = cursor is not None and stat is not None and stat.st_ino == cursor.inode
        if cursor is not None and stat is not None and same_file and stat.st_size >= cursor.offset:
            cursor.offset = self._fold_from(self._journal, cursor.offset)
            return
        self._rebuild(now_ms)  # first call, rotated (a new file) or truncated

    def _rebuild(self, now_ms: int) -> None:
        self._book = CostBook()
        self._cursor = None
        self._left_out = None
        oldest_ms = (now_ms // MS_PER_DAY - self._days_shown + 1) * MS_PER_DAY
        pattern = rotated_pattern(self._journal)
        for path in segments(self._journal):
            if path == self._journal:
                inode = path.stat().st_ino
                self._cursor = _Cursor(inode, self._fold_from(path, 0))
                continue
            match = pattern.match(path.name)
            closed_ms = None if match is None else _closed_ms(match.group(1))
            if closed_ms is not None and closed_ms < oldest_ms:
                continue  # closed before the first day shown: none of its lines is shown
            for line in open_segment(path):
                self._fold_line(path, line)

    def _fold_from(self, path: Path, offset: int) -> int:
        """Fold the whole lines after ``offset``; the offset after the last whole line. Read in
        blocks (``whole_lines``): what follows the last newline was read at once at every
        status, and a crash can leave gigabytes of zeros there."""
        handle = open_live(path)
        if handle is None:  # rotated away since its stat: the next call rebuilds
            return offset
        done = offset
        with handle:
            handle.seek(offset)
            for line, end in whole_lines(handle):
                self._fold_line(path, line)
                done = offset + end
        return done

    def _fold_line(self, path: Path, line: bytes) -> None:
        if not line.strip():
            return
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            return  # a line the journal could not finish is not a cost
        if not isinstance(record, dict):
            return
        # a garbled usage (a person's edit, a damaged copy) was a 500 or a figure of 1e300
        problem = self._book.add(record)
        if problem is not None:
            why = f"{path.name}: the line at_ms {record.get('at_ms')}: {problem}"
            log.warning("the cost figures leave out %s", why)
            count, first = self._left_out or (0, why)
            self._left_out = (count + 1, first)


def spent_usd(journal: Path, now_ms: int) -> tuple[float, float]:
    """What the journal says the models cost today and earlier this month (UTC days of
    ``now_ms``): a daily budget that outlives a restart starts from these, not from 0."""
    today = now_ms // MS_PER_DAY
    first_of_month = datetime.fromtimestamp(now_ms / 1000, tz=UTC).replace(
        day=1, hour=0, minute=0, second=0, microsecond=0
    )
    days = today - int(first_of_month.timestamp()) // 86_400 + 1
    body = JournalCost(journal, days, None).body(now_ms)
    before = sum(d.total.cost_usd for d in body.days if d.day != body.today.day)
    return body.today.total.cost_usd, before


def _closed_ms(stamp: str) -> int | None:
    """The instant a segment was closed; None when its name's digits are no instant (month 13,
    a hand-made name): it is read then, as the other readers read it (strptime's error was a
    500 on every status)."""
    try:
        moment = datetime.strptime(stamp.split("-", 1)[0], STAMP_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(moment.timestamp() * 1000)


__all__ = ["CostBody", "CostDayBody", "JournalCost", "spent_usd"]
