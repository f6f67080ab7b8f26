"""Typed journal records: the writer's lines read back as the same models, torn tails, bad lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from state.journal import CsvJournal, JsonlJournal
from state.records import (
    TRADE_COLUMNS,
    AgentFailureRecord,
    DecisionRecord,
    JournalLineError,
    JournalReader,
    OtherRecord,
    ReviewRecord,
    TradeRow,
    TradesFileError,
    read_journal,
    read_trades,
)


def _decision(**extra: object) -> DecisionRecord:
    return DecisionRecord.model_validate(
        {"decision_id": "d1-1", "at_ms": 1, "trigger": ["candle_close:BTC/USDT:15m"], **extra}
    )


def test_written_lines_read_back_as_their_models(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    with JsonlJournal(path, fsync=False) as journal:
        journal.append(_decision(decided_by="fallback", snapshot={"at_ms": 1}).as_line())
        journal.append(ReviewRecord(at_ms=2, tickers=["ETH/USDT"], decided_by="claude").as_line())
        journal.append(AgentFailureRecord(at_ms=3, kind="timeout", detail="").as_line())
        journal.append({"type": "trading_state", "at_ms": 4, "state": "HALTED"})
    decision, review, failure, other = read_journal(path)
    assert isinstance(decision, DecisionRecord) and decision.decided_by == "fallback"
    assert decision.snapshot == {"at_ms": 1}
    assert isinstance(review, ReviewRecord) and review.tickers == ["ETH/USDT"]
    assert isinstance(failure, AgentFailureRecord) and failure.kind == "timeout"
    assert isinstance(other, OtherRecord) and other.type == "trading_state"
    assert other.model_extra == {"state": "HALTED"}  # a newer vigil's fields are kept


def test_a_line_carries_only_what_the_writer_set_plus_its_type() -> None:
    assert _decision().as_line() == {
        "type": "decision",
        "decision_id": "d1-1",
        "at_ms": 1,
        "trigger": ["candle_close:BTC/USDT:15m"],
    }


def test_a_torn_last_line_is_skipped_and_measured(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    path.write_bytes(b'{"type":"decision","decision_id":"d","at_ms":1,"trigger":[]}\n{"type":"dec')
    reader = JournalReader(path)
    assert len(list(reader)) == 1 and reader.torn_bytes == len(b'{"type":"dec')


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"not json\n", "not JSON"),
        (b"[1, 2]\n", "not a JSON object"),
        (b'{"type":"decision","at_ms":1}\n', "not a journal record"),
    ],
)
def test_a_bad_line_names_its_file_and_number(tmp_path: Path, line: bytes, why: str) -> None:
    path = tmp_path / "decisions.jsonl"
    path.write_bytes(b"\n" + line)
    with pytest.raises(JournalLineError, match=rf"decisions\.jsonl line 2: {why}"):
        read_journal(path)


def test_trades_rows_round_trip_and_an_unknown_fee_stays_unknown(tmp_path: Path) -> None:
    path = tmp_path / "trades.csv"
    rows = [
        TradeRow(
            at_ms=5, client_order_id="vgb-1", ticker="ETH/USDT", side="buy", quantity=0.5,
            price=2000.0, fee_usd=0.5,
        ),
        TradeRow(
            at_ms=6, client_order_id="vgs-1", ticker="ETH/USDT", side="sell", quantity=0.5,
            price=2100.0,
        ),
    ]  # fmt: skip
    with CsvJournal(path, TRADE_COLUMNS, fsync=False) as journal:
        for row in rows:
            journal.append(row.as_row())
    assert path.read_text().splitlines()[0] == ",".join(TRADE_COLUMNS)
    assert read_trades(path) == rows


def test_a_trades_row_that_is_not_a_fill_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "trades.csv"
    path.write_text(",".join(TRADE_COLUMNS) + "\n5,vgb-1,ETH/USDT,hold,1,2,\n")
    with pytest.raises(TradesFileError, match=r"trades\.csv line 2"):
        read_trades(path)
