"""Reading a run folder's files for the report: the journal (only the fields the report reads),
the fills of trades.csv, the paper ledger. A file that cannot be read is a ``RunFolderError``."""

from __future__ import annotations

import csv
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent.cost_accounting import line_problem
from broker.paper_store import InvalidPaperStateError, PaperBookDocument, read_document
from core.clock import RECORDING_YEARS, is_recording_time
from market.guard import is_price
from report.learning import projected_learning
from report.memory_section import projected_memory
from report.metrics import Fill
from state.records import (
    DecisionRecord,
    JournalLineError,
    JournalReader,
    ReviewRecord,
    TradesFileError,
    _Record,
    decision_attempts,
    read_trades,
)
from state.segments import segments


class RunFolderError(ValueError):
    """The run folder lacks a required file or holds one that cannot be read; nothing to report."""


def read_journal(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The report's fields of each record of a journal (``projected_fields``), and the byte
    length of a torn last line it skipped (a report reads a possibly live or crashed run: it says
    so instead of failing; the daemon repairs the tail when it opens the journal)."""
    for segment in segments(path):
        _check_regular(segment)
    reader = JournalReader(path)
    try:
        # the records' fields, not their models (validation would change nothing for most)
        records = [projected_fields(model, fields) for model, fields in reader.fields()]
    except JournalLineError as exc:
        raise RunFolderError(str(exc)) from None
    except OSError as exc:  # a damaged or cut-off gzipped segment (UnreadableSegmentError)
        raise RunFolderError(f"{path}: a segment cannot be read: {exc}") from None
    for record in records:
        what = f"a {record['type'] or 'journal'} line"
        if "at_ms" in record:
            _check_time(path, record["at_ms"], what)
        problem = line_problem(record)
        if problem is not None:
            where = f" at_ms {record['at_ms']}" if "at_ms" in record else ""
            raise RunFolderError(f"{path}: {what}{where}: {problem}")
    return records, reader.torn_bytes


def _check_time(path: Path, at_ms: int, what: str) -> None:
    """A time outside ``RECORDING_YEARS`` is a corrupt or hand-edited value: the report would
    date it (the year 11476 has no date) and span the run over it, so it is refused, named."""
    if not is_recording_time(at_ms):
        raise RunFolderError(
            f"{path}: {what} has at_ms {at_ms}, not a time within {RECORDING_YEARS} "
            "(milliseconds since the epoch)"
        )


@contextmanager
def cycles_not_collected() -> Iterator[None]:
    """The cyclic garbage collector paused (if it ran) while a report is built: a decoded journal
    line is a tree of a few hundred dicts and lists, freed by reference counting, which makes no
    cycle; yet their allocations set off ~2,800 collections over a year's journal, which walked
    the growing projected records (~1 M objects) again and again: a quarter of the report's time.
    Paused until the records are freed, no collection walks them. Other threads' cycles wait for
    the collector until then (nothing is lost, only delayed); a collector paused by someone else
    stays paused."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def projected_fields(model: type[_Record], fields: dict[str, Any]) -> dict[str, Any]:
    """Only what the report reads of a record of type ``model`` whose fields (a field left out
    reads as the model's default) are ``fields``: a real decision line is ~16 kB of JSON (the
    whole snapshot and agent answer), and a year holds ~66k of them, too many to keep whole."""
    kept: dict[str, Any] = {"type": fields.get("type", "")}
    at_ms = fields.get("at_ms")
    if at_ms is not None:
        kept["at_ms"] = at_ms
    if model is ReviewRecord:
        kept["usage"] = fields.get("usage")
        kept["attempts"] = fields.get("attempts", [])
        return kept
    if model is not DecisionRecord:
        return kept
    snapshot = fields.get("snapshot")
    raw_decision = fields.get("raw_decision")
    kept["decided_by"] = fields.get("decided_by")
    kept["decider_reason"] = fields.get("decider_reason")
    kept["trigger"] = fields["trigger"]
    kept["usage"] = fields.get("usage")
    kept["attempts"] = decision_attempts(raw_decision)
    kept["learning"] = projected_learning({"snapshot": snapshot, "raw_decision": raw_decision})
    kept["memory"] = projected_memory(
        {
            "snapshot": snapshot,
            "raw_decision": raw_decision,
            "decision_id": fields["decision_id"],
            "at_ms": at_ms,
        }
    )
    if snapshot is not None:
        tickers = snapshot.get("tickers")
        kept["snapshot"] = {
            "portfolio_value": snapshot.get("portfolio_value"),
            "open_positions": bool(snapshot.get("open_positions")),
            "tickers": {
                ticker: {"price": view.get("price")}
                for ticker, view in (tickers.items() if isinstance(tickers, dict) else ())
                if isinstance(view, dict)
            },
        }
    return kept


def _check_regular(path: Path) -> None:
    """Refuse a directory, FIFO or device where a journal file belongs: reading a FIFO waits for
    a writer for ever, and a directory ended the report in an IsADirectoryError traceback."""
    if path.exists() and not path.is_file():
        raise RunFolderError(f"{path}: not a regular file")


def read_fills(path: Path) -> list[Fill]:
    _check_regular(path)
    try:
        rows = read_trades(path)
    except TradesFileError as exc:
        raise RunFolderError(str(exc)) from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise RunFolderError(f"{path}: cannot be read as UTF-8 CSV: {exc}") from None
    fills = [
        Fill(
            at_ms=row.at_ms,
            ticker=row.ticker,
            side=row.side,
            quantity=row.quantity,
            price=row.price,
            fee_usd=row.fee_usd or 0.0,  # a fee not known yet counts as none
        )
        for row in rows
    ]
    for fill in fills:
        _check_time(path, fill.at_ms, f"the fill of {fill.ticker}")
    return sorted(fills, key=lambda f: f.at_ms)


def read_ledger(path: Path) -> PaperBookDocument | None:
    """The paper ledger, None when the run has none. Read as the broker reads it: a sparse or
    padded file of gigabytes was read whole, and a FIFO or directory passed as "no ledger"."""
    try:
        return read_document(path)
    except InvalidPaperStateError as exc:
        raise RunFolderError(f"{path}: {exc}") from None
    except OSError as exc:  # not a regular file, over PAPER_STATE_MAX_BYTES, unreadable
        said = str(exc)  # the reader's own errors name the file already
        raise RunFolderError(said if str(path) in said else f"{path}: {said}") from None


def ledger_value(doc: PaperBookDocument) -> float | None:
    """Cash + reserved + each position at its last mark; None if a position has no mark, or one
    that is not a price (NaN, <= 0, past the market guard's bound: a damaged file)."""
    ledger = doc.ledger
    value = float(ledger.cash_usd + ledger.reserved_usd)
    for ticker, position in ledger.positions.items():
        mark = doc.marks.get(ticker)
        if mark is None or not is_price(mark.price):
            return None
        value += float(position.quantity) * mark.price
    return value


def ledger_figures(doc: PaperBookDocument | None) -> dict[str, str] | None:
    if doc is None:
        return None
    ledger = doc.ledger
    return {
        "starting_cash_usd": str(ledger.starting_cash_usd),
        "cash_usd": str(ledger.cash_usd),
        "fees_paid_usd": str(ledger.fees_paid_usd),
        "realised_pnl_usd": str(ledger.realised_pnl_usd),
        "open_positions": str(len(ledger.positions)),
    }


__all__ = [
    "RunFolderError",
    "cycles_not_collected",
    "ledger_figures",
    "ledger_value",
    "projected_fields",
    "read_fills",
    "read_journal",
    "read_ledger",
]
