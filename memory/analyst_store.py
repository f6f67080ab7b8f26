"""The analysts' reports and day summaries in SQLite (``analysts.db`` in the state dir, WAL).

Indexed as the issue asks: (analyst, ticker, day, timescale) for an analyst's lookback and
(ticker, day, at_ms) for a day's reports of every analyst. Writes are idempotent on the report id
(a retried save changes nothing) and on (analyst, ticker, day, session) for summaries (the newest
write wins: a summary made again replaces the old one). Calls are synchronous and small (one row);
the store is used from the event loop between decisions.
"""

from __future__ import annotations

import itertools
import math
import sqlite3
from pathlib import Path
from typing import Any

import orjson

from memory.analyst_model import AnalystReport, DaySummary, Session
from memory.analyst_rows import report_of, summary_of
from memory.port import StoreUnavailableError
from memory.sqlite_rows import LeftOut

_SCHEMA = """
CREATE TABLE IF NOT EXISTS analyst_reports (
    report_id TEXT PRIMARY KEY,
    analyst TEXT NOT NULL,
    ticker TEXT NOT NULL,
    day TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    timescale TEXT NOT NULL,
    confidence REAL NOT NULL,
    content TEXT NOT NULL,
    figures TEXT NOT NULL,
    labels TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reports_by_analyst
    ON analyst_reports (analyst, ticker, day, timescale);
CREATE INDEX IF NOT EXISTS reports_by_day ON analyst_reports (ticker, day, at_ms);
CREATE TABLE IF NOT EXISTS analyst_summaries (
    analyst TEXT NOT NULL,
    ticker TEXT NOT NULL,
    day TEXT NOT NULL,
    session TEXT NOT NULL,
    body TEXT NOT NULL,
    made_at_ms INTEGER NOT NULL,
    PRIMARY KEY (analyst, ticker, day, session)
);
"""

_REPORT_COLUMNS = (
    "report_id, analyst, ticker, day, at_ms, timescale, confidence, content, figures, labels"
)


#: reports a non-durable store keeps in one open transaction at most (``AnalystStore``)
BATCH_REPORTS = 256
#: reports kept per analyst and ticker for ``reports`` to hand out again: between this many and
#: twice as many, the newest (the oldest half goes when twice as many are kept)
KNOWN_REPORTS = 512
_REPORTS_WHERE = (
    "WHERE analyst = ? AND ticker = ? AND day BETWEEN ? AND ? ORDER BY at_ms, report_id"
)


def _open(path: Path | str, durable: bool) -> sqlite3.Connection:
    """The database, created if new; ``StoreUnavailableError`` when the file is not one SQLite can
    use (damaged, or something else in its place): it used to stop the daemon's start with a
    traceback, over reports the analysts write again from the market."""
    db = sqlite3.connect(str(path), check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={'NORMAL' if durable else 'OFF'}")
        db.executescript(_SCHEMA)
    except sqlite3.DatabaseError as exc:
        db.close()
        raise StoreUnavailableError(f"{path}: {exc}") from exc
    return db


class AnalystStore:
    """``AnalystStore(path)`` opens (and creates) the database; ``":memory:"`` for tests.

    ``durable=False`` (replay: journals not fsynced either) commits reports and summaries in
    batches: at most ``batch_reports`` (default ``BATCH_REPORTS``) rows in one transaction,
    committed by ``flush`` (the desk's roll, once it has made the day's summaries) or by
    ``close``. This connection reads its own pending rows, so every answer is the same; a crash
    loses the batch, and another process sees it only once committed. It never fsyncs either
    (``synchronous=OFF``: NORMAL fsyncs at each WAL checkpoint, which made an insert into a
    year's reports 24 us instead of 9): a killed process loses nothing committed, a power loss
    may take the file, as it may a replay's journals.
    """

    def __init__(
        self, path: Path | str, *, durable: bool = True, batch_reports: int | None = None
    ) -> None:
        if isinstance(path, Path):
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = _open(path, durable)
        self._left_out = LeftOut(path)
        #: (analyst, ticker) -> the newest report, as ``latest_report`` read it (or None: none).
        #: Every decision asks for each analyst's newest report of each ticker, and this store
        #: is its database's one writer (the daemon's event loop); a save that makes the answer
        #: unclear (a tie on day and time) drops the entry and the next call asks SQLite.
        self._latest: dict[tuple[str, str], AnalystReport | None] = {}
        self._durable = durable
        self._batch_reports = batch_reports  # None: BATCH_REPORTS
        self._pending = 0  # rows written since the last commit (non-durable only)
        self._added = 0  # reports this connection added (a memo of a lookback keys on it)
        #: (analyst, ticker) -> report id -> the report as a read of its row gives it: saved or
        #: read by this connection, and valid while no other connection commits (data_version).
        #: A day summary reads a day of reports this connection saved one by one; ``reports``
        #: asks SQLite which ids, in which order, and builds only the rows it does not know.
        self._known: dict[tuple[str, str], dict[str, AnalystReport]] = {}
        self._known_version = self.data_version()

    def flush(self) -> None:
        """Commit the reports a non-durable store holds in its open transaction."""
        self._db.commit()
        self._pending = 0

    def close(self) -> None:
        self.flush()
        self._db.close()

    def save_report(self, report: AnalystReport) -> bool:
        """False when a report with this id was already there."""
        if self._durable:
            with self._db:
                cursor = self._insert(report)
        else:  # SQLite undoes a failed INSERT alone; the batch before it stays pending
            cursor = self._insert(report)
            self._pending += 1
            batch = BATCH_REPORTS if self._batch_reports is None else self._batch_reports
            if self._pending >= batch:
                self.flush()
        added = cursor.rowcount == 1
        if added:
            self._added += 1
            self._note_saved(report)
            if _reads_back_equal(report):
                self._know(report)
            else:  # an earlier report of this id, rolled back since, must not answer for it
                self._known.get((report.analyst, report.ticker), {}).pop(report.report_id, None)
        return added

    def reports_version(self) -> tuple[int, int]:
        """Changes whenever the reports may have: a report added here, or a commit by another
        connection (SQLite's data_version)."""
        return self._added, self.data_version()

    def data_version(self) -> int:
        """Changes whenever another connection commits (SQLite's data_version)."""
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def _know(self, report: AnalystReport) -> None:
        key = (report.analyst, report.ticker)
        known = self._known.get(key)
        if known is None:
            known = self._known[key] = {}
        elif len(known) >= 2 * KNOWN_REPORTS:  # the newest half kept, in one go: dropping the
            # oldest one at a time made each drop step over the slots of those dropped before
            newest = itertools.islice(known.items(), len(known) - KNOWN_REPORTS, None)
            known = self._known[key] = dict(newest)
        known[report.report_id] = report

    def _insert(self, report: AnalystReport) -> sqlite3.Cursor:
        return self._db.execute(
            f"INSERT OR IGNORE INTO analyst_reports ({_REPORT_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                report.report_id,
                report.analyst,
                report.ticker,
                report.day,
                report.at_ms,
                report.timescale,
                report.confidence,
                report.content,
                orjson.dumps(report.figures).decode(),
                orjson.dumps(report.labels).decode(),
            ),
        )

    def _note_saved(self, report: AnalystReport) -> None:
        key = (report.analyst, report.ticker)
        if key not in self._latest:
            return
        known = self._latest[key]
        if known is None or (report.day, report.at_ms) > (known.day, known.at_ms):
            self._latest[key] = report
        elif (report.day, report.at_ms) == (known.day, known.at_ms):
            del self._latest[key]  # SQLite's order between the two is not ours to guess

    def reports(
        self, analyst: str, ticker: str, first_day: str, last_day: str
    ) -> list[AnalystReport]:
        """An analyst's reports of ``ticker`` from ``first_day`` to ``last_day`` (inclusive),
        oldest first."""
        args = (analyst, ticker, first_day, last_day)
        ids = self._db.execute(f"SELECT report_id FROM analyst_reports {_REPORTS_WHERE}", args)
        wanted = [row[0] for row in ids.fetchall()]
        # checked after the ids: a commit in between is seen, and its rows read again below
        if self.data_version() != self._known_version:
            self._known.clear()
            self._known_version = self.data_version()
        known = self._known.get((analyst, ticker), {})
        if all(report_id in known for report_id in wanted):
            return [known[report_id] for report_id in wanted]
        rows = self._db.execute(
            f"SELECT {_REPORT_COLUMNS} FROM analyst_reports {_REPORTS_WHERE}", args
        )
        found = [
            r for r in (report_of(row, self._left_out) for row in rows.fetchall()) if r is not None
        ]
        for report in found:
            self._know(report)
        return found

    def day_reports(self, ticker: str, day: str) -> list[AnalystReport]:
        """Every analyst's reports of ``ticker`` on ``day``, by timestamp."""
        rows = self._db.execute(
            f"SELECT {_REPORT_COLUMNS} FROM analyst_reports "
            "WHERE ticker = ? AND day = ? ORDER BY at_ms, report_id",
            (ticker, day),
        ).fetchall()
        return [r for r in (report_of(row, self._left_out) for row in rows) if r is not None]

    def latest_report(self, analyst: str, ticker: str) -> AnalystReport | None:
        key = (analyst, ticker)
        if key in self._latest:
            return self._latest[key]
        latest = self._latest[key] = self._read_latest(analyst, ticker)
        return latest

    def _read_latest(self, analyst: str, ticker: str) -> AnalystReport | None:
        """The newest report that can be read (a row that cannot is passed over, warned)."""
        rows = self._db.execute(
            f"SELECT {_REPORT_COLUMNS} FROM analyst_reports WHERE analyst = ? AND ticker = ? "
            "ORDER BY day DESC, at_ms DESC",
            (analyst, ticker),
        )
        return next(
            (r for r in (report_of(row, self._left_out) for row in rows) if r is not None), None
        )

    def put_summary(self, summary: DaySummary) -> None:
        """A non-durable store holds it with the reports (``flush``: the desk's roll flushes
        once it has made the day's summaries, one commit instead of one each)."""
        row = (
            summary.analyst,
            summary.ticker,
            summary.day,
            summary.session,
            summary.model_dump_json(),
            summary.made_at_ms,
        )
        insert = (
            "INSERT OR REPLACE INTO analyst_summaries "
            "(analyst, ticker, day, session, body, made_at_ms) VALUES (?, ?, ?, ?, ?, ?)"
        )
        if self._durable:
            with self._db:
                self._db.execute(insert, row)
            self._pending = 0  # the commit above took the pending reports too
        else:
            self._db.execute(insert, row)
            self._pending += 1

    def summary(self, analyst: str, ticker: str, day: str, session: Session) -> DaySummary | None:
        """None also when the row cannot be read (warned once; ``has_summary`` is still true)."""
        key = (analyst, ticker, day, session)
        row = self._db.execute(
            "SELECT body FROM analyst_summaries "
            "WHERE analyst = ? AND ticker = ? AND day = ? AND session = ?",
            key,
        ).fetchone()
        return None if row is None else summary_of(row[0], key, self._left_out)

    def has_summary(self, analyst: str, ticker: str, day: str, session: Session) -> bool:
        """A row is there, readable or not: a roll does not make it again over one a person left
        unreadable (the row stays as it was left, as memory.db's do)."""
        row = self._db.execute(
            "SELECT 1 FROM analyst_summaries "
            "WHERE analyst = ? AND ticker = ? AND day = ? AND session = ?",
            (analyst, ticker, day, session),
        ).fetchone()
        return row is not None

    def summaries(self, day: str | None = None) -> list[DaySummary]:
        """Every summary (of ``day`` when given), by day, analyst, ticker, session."""
        query = "SELECT body, analyst, ticker, day, session FROM analyst_summaries"
        params: tuple[Any, ...] = ()
        if day is not None:
            query += " WHERE day = ?"
            params = (day,)
        rows = self._db.execute(query + " ORDER BY day, analyst, ticker, session", params)
        found = (summary_of(row[0], row[1:], self._left_out) for row in rows.fetchall())
        return [summary for summary in found if summary is not None]

    def counts(self) -> dict[str, int]:
        reports = self._db.execute("SELECT COUNT(*) FROM analyst_reports").fetchone()[0]
        summaries = self._db.execute("SELECT COUNT(*) FROM analyst_summaries").fetchone()[0]
        return {"reports": int(reports), "summaries": int(summaries)}


def _reads_back_equal(report: AnalystReport) -> bool:
    """False when a read of the saved row might give another report: a figure that is not
    finite is saved as null (JSON has no NaN) and read back as None. The figures' sum is not
    finite when one is not (and, harmlessly, when finite ones overflow)."""
    return math.isfinite(sum(filter(None, report.figures.values())))
