"""Reading a run folder's files for the report: the journal (only the fields the report reads),
the fills of trades.csv, the paper ledger. A file that cannot be read is a ``RunFolderError``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.paper_store import InvalidPaperStateError, PaperBookDocument, parse_document
from report.learning import projected_learning
from report.memory_section import projected_memory
from report.metrics import Fill
from state.records import (
    DecisionRecord,
    JournalLineError,
    JournalReader,
    JournalRecord,
    ReviewRecord,
    TradesFileError,
    read_trades,
)


class RunFolderError(ValueError):
    """The run folder lacks a required file or holds one that cannot be read; nothing to report."""


def read_journal(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The report's fields of each record of a journal (``projected``), and the byte length of a
    torn last line it skipped (a report reads a possibly live or crashed run: it says so instead
    of failing; the daemon repairs the tail when it opens the journal)."""
    reader = JournalReader(path)
    try:
        records = [projected(record) for record in reader]
    except JournalLineError as exc:
        raise RunFolderError(str(exc)) from None
    return records, reader.torn_bytes


def projected(record: JournalRecord) -> dict[str, Any]:
    """Only what the report reads: a real decision line is ~8 kB of JSON (the whole snapshot
    and agent answer), and a year holds ~100k of them, too many to keep whole in memory."""
    kept: dict[str, Any] = {"type": record.type}
    if record.at_ms is not None:
        kept["at_ms"] = record.at_ms
    if isinstance(record, ReviewRecord):
        kept.update(usage=record.usage, attempts=record.attempts)
    if not isinstance(record, DecisionRecord):
        return kept
    kept.update(
        decided_by=record.decided_by,
        decider_reason=record.decider_reason,
        trigger=record.trigger,
        usage=record.usage,
        attempts=record.attempts,
    )
    kept["learning"] = projected_learning(
        {"snapshot": record.snapshot, "raw_decision": record.raw_decision}
    )
    kept["memory"] = projected_memory(
        {
            "snapshot": record.snapshot,
            "raw_decision": record.raw_decision,
            "decision_id": record.decision_id,
            "at_ms": record.at_ms,
        }
    )
    snapshot = record.snapshot
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


def read_fills(path: Path) -> list[Fill]:
    try:
        rows = read_trades(path)
    except TradesFileError as exc:
        raise RunFolderError(str(exc)) from None
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
    return sorted(fills, key=lambda f: f.at_ms)


def read_ledger(path: Path) -> PaperBookDocument | None:
    if not path.is_file():
        return None
    try:
        return parse_document(path.read_bytes())
    except InvalidPaperStateError as exc:
        raise RunFolderError(f"{path}: {exc}") from None


def ledger_value(doc: PaperBookDocument) -> float | None:
    """Cash + reserved + each position at its last mark; None if a position has no mark."""
    ledger = doc.ledger
    value = float(ledger.cash_usd + ledger.reserved_usd)
    for ticker, position in ledger.positions.items():
        mark = doc.marks.get(ticker)
        if mark is None:
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
    "ledger_figures",
    "ledger_value",
    "projected",
    "read_fills",
    "read_journal",
    "read_ledger",
]
