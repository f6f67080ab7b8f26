"""Helpers for the memory write-back tests: a writer over a fresh SQLite store and outbox, and an
entry + exit as the bus delivers them."""

from __future__ import annotations

from pathlib import Path

from core.clock import VirtualClock
from core.events import DecisionMade, OrderFilled, PositionExit, PositionOpened
from memory.config import MemoryConfig
from memory.embeddings import HashedNgramEmbedder
from memory.model import Situation
from memory.outbox import MemoryOutbox
from memory.sqlite_store import SqliteMemoryStore
from memory.writeback import MemoryWriter

T0 = 1_740_000_000_000
HOUR = 3_600_000


def make_writer(tmp_path: Path, config: MemoryConfig | None = None) -> MemoryWriter:
    return MemoryWriter(
        VirtualClock(T0),
        SqliteMemoryStore(tmp_path / "memory.db"),
        MemoryOutbox(tmp_path / "outbox" / "memory.jsonl"),
        config or MemoryConfig(),
        HashedNgramEmbedder(),
    )


def open_and_exit(
    writer: MemoryWriter, n: int, *, pnl: float = -4.2, ticker: str = "SOL/USDT"
) -> None:
    entry_ms = T0 + n * 24 * HOUR
    situation = Situation.from_features({"rsi_1h": 71.0 + n % 7}, "medium_volatility")
    writer.note_situation(ticker, situation, "unavailable")
    writer.on_decision(
        DecisionMade(
            at_ms=entry_ms,
            decision_id=f"d{n}",
            decided_by="fallback",
            decisions=({"ticker": ticker, "action": "BUY", "confidence": 0.7},),
        )
    )
    writer.on_fill(
        OrderFilled(
            at_ms=entry_ms,
            client_order_id=f"b{n}",
            ticker=ticker,
            side="buy",
            quantity=1,
            price=150,
            fee=0.03,
        )
    )
    writer.on_opened(
        PositionOpened(
            at_ms=entry_ms, ticker=ticker, quantity=1, entry_price=150.0, signals={"momentum": 0.6}
        )
    )
    exit_ms = entry_ms + 9 * HOUR + n * 60_000
    writer.on_fill(
        OrderFilled(
            at_ms=exit_ms,
            client_order_id=f"s{n}",
            ticker=ticker,
            side="sell",
            quantity=1,
            price=143.7,
            fee=0.07,
        )
    )
    writer.on_exit(
        PositionExit(
            at_ms=exit_ms,
            ticker=ticker,
            reason="stop_loss",
            pnl_pct=pnl,
            holding_secs=(exit_ms - entry_ms) / 1000,
            regime="medium_volatility",
            signals={"momentum": 0.6},
        )
    )
